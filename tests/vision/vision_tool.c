/* vision-tool: the vision engine from the command line, for tests and the
 * gate against llama.cpp.
 *
 *   vision-tool decode IMAGE [PPM_OUT]          "WIDTH HEIGHT FORMAT"; PPM_OUT gets the pixels
 *   vision-tool info MMPROJ                     hyper-parameters as JSON
 *   vision-tool preprocess MMPROJ IMAGE OUT     the encoder's input, raw f32 planes
 *   vision-tool embed MMPROJ IMAGE OUT          the image embeddings, raw f32 rows
 *   vision-tool generate MODEL MMPROJ IMAGE BEFORE AFTER N [TOP]
 *       BEFORE / AFTER: comma-separated token ids around the image (BEFORE
 *       ends with <start_of_image>, AFTER starts with <end_of_image>);
 *       greedy generation of N tokens, one JSON line:
 *       {"steps": [{"token": ID, "top": [[ID, LOGPROB], ...]}, ...]}
 *   vision-tool chat MODEL MMPROJ IMAGE TEXT N  greedy reply to TEXT about the image
 *   vision-tool prompt MODEL TEXT [SYSTEM]      {"before": [ids], "after": [ids]} of the
 *                                               chat prompt with an image
 *   vision-tool probe IMAGE                     "WIDTH HEIGHT FORMAT DECODE_BYTES" from the header
 *   vision-tool scans-jpeg OUT WIDTH HEIGHT     a valid progressive JPEG of 192 scans (one per
 *                                               component and coefficient): a decoder's worst case
 *
 * NPULLM_VISION_EXACT=1 in the environment loads the projector with
 * npl_vision_params.exact (the exact path instead of the fast one),
 * NPULLM_VISION_BF16=1 with npl_vision_params.bf16_weights,
 * NPULLM_VISION_Q8=1 with npl_vision_params.q8_weights.
 * NPULLM_TEST_PREFILL_CHUNK=N: generate and chat load the model with that
 * prefill chunk (an image of more rows still goes in one step).
 *
 * Errors: message on stderr, exit status 2 for bad usage, 1 otherwise,
 * 3 when the image was refused (with the status name on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "npullm.h"
#include "vision.h"

static int fail(const char *what, const npl_error *err)
{
    fprintf(stderr, "vision-tool: %s: %s (%s)\n", what, err->message, npl_status_name(err->code));
    return 1;
}

static int usage(void)
{
    fprintf(stderr, "usage: vision-tool decode|info|preprocess|embed|generate|chat|prompt|probe|scans-jpeg ...\n");
    return 2;
}

static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            unsigned char *bigger = realloc(buf, cap * 2);
            if (!bigger)
                free(buf);
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    *size = n;
    return buf;
}

static int load_image(const char *path, npl_image *img)
{
    size_t size = 0;
    unsigned char *data = read_file(path, &size);
    if (!data) {
        fprintf(stderr, "vision-tool: cannot read %s\n", path);
        return 1;
    }
    npl_error err;
    npl_status st = npl_image_decode(data, size, NULL, img, &err);
    free(data);
    if (st) {
        fprintf(stderr, "vision-tool: %s: %s (%s)\n", path, err.message, npl_status_name(st));
        return 3;
    }
    return 0;
}

static int write_floats(const char *path, const float *x, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(x, sizeof *x, n, f) != n) {
        if (f)
            fclose(f);
        fprintf(stderr, "vision-tool: cannot write %s\n", path);
        return 1;
    }
    return fclose(f) == 0 ? 0 : 1;
}

static int cmd_decode(int argc, char **argv)
{
    if (argc < 1)
        return usage();
    npl_image img;
    int rc = load_image(argv[0], &img);
    if (rc)
        return rc;
    size_t size = 0;
    unsigned char *data = read_file(argv[0], &size);
    printf("%u %u %s\n", img.width, img.height, npl_image_format_name(npl_image_sniff(data, size)));
    free(data);
    if (argc > 1) {
        FILE *f = fopen(argv[1], "wb");
        if (!f)
            rc = 1;
        else {
            fprintf(f, "P6\n%u %u\n255\n", img.width, img.height);
            fwrite(img.rgb, 3, (size_t)img.width * img.height, f);
            fclose(f);
        }
    }
    npl_image_free(&img);
    return rc;
}

static npl_vision *load_vision(const char *path)
{
    npl_error err;
    npl_vision_params p;
    npl_vision_params_default(&p);
    const char *exact = getenv("NPULLM_VISION_EXACT");
    p.exact = exact && !strcmp(exact, "1");
    const char *bf16 = getenv("NPULLM_VISION_BF16");
    p.bf16_weights = bf16 && !strcmp(bf16, "1");
    const char *q8 = getenv("NPULLM_VISION_Q8");
    p.q8_weights = q8 && !strcmp(q8, "1");
    npl_vision *v = npl_vision_load(path, &p, &err);
    if (!v)
        fail("loading the projector", &err);
    return v;
}

/* The text model paired with v: its working rows hold v's largest image;
 * NPULLM_TEST_PREFILL_CHUNK=N prefills text in chunks of N (default 256). */
static npl_model *load_model_for(const char *path, const npl_vision *v)
{
    npl_model_params mp;
    npl_model_params_default(&mp);
    mp.block_rows = npl_vision_get_info(v)->max_tokens;
    const char *chunk = getenv("NPULLM_TEST_PREFILL_CHUNK");
    if (chunk)
        mp.prefill_chunk = (uint32_t)strtoul(chunk, NULL, 10);
    npl_error err;
    npl_model *m = npl_model_load(path, &mp, &err);
    if (!m)
        fail("loading the model", &err);
    return m;
}

static int cmd_info(int argc, char **argv)
{
    if (argc < 1)
        return usage();
    npl_vision *v = load_vision(argv[0]);
    if (!v)
        return 1;
    const npl_vision_info *in = npl_vision_get_info(v);
    printf("{\"projector\": \"%s\", \"image_size\": %u, \"patch_size\": %u, \"n_embd\": %u, \"n_ff\": %u, "
           "\"n_head\": %u, \"n_layer\": %u, \"pool\": %u, \"n_tokens\": %u, \"n_embd_out\": %u, "
           "\"ffn_swapped\": %s, \"mean\": [%g, %g, %g], \"std\": [%g, %g, %g]}\n",
           in->projector, in->image_size, in->patch_size, in->n_embd, in->n_ff, in->n_head, in->n_layer, in->pool,
           in->n_tokens, in->n_embd_out, in->ffn_swapped ? "true" : "false", (double)in->image_mean[0],
           (double)in->image_mean[1], (double)in->image_mean[2], (double)in->image_std[0], (double)in->image_std[1],
           (double)in->image_std[2]);
    npl_vision_free(v);
    return 0;
}

static int cmd_embed(int argc, char **argv, bool preprocess_only)
{
    if (argc < 3)
        return usage();
    npl_vision *v = load_vision(argv[0]);
    if (!v)
        return 1;
    npl_image img;
    int rc = load_image(argv[1], &img);
    if (rc) {
        npl_vision_free(v);
        return rc;
    }
    const npl_vision_info *in = npl_vision_get_info(v);
    npl_vision_pixel_params px;
    npl_vision_get_pixel_params(v, &px);
    size_t n = preprocess_only ? npl_vision_pixel_count_for(&px, img.width, img.height)
                               : (size_t)npl_vision_image_n_tokens(v, img.width, img.height) * in->n_embd_out;
    float *out = malloc((n + 1) * sizeof *out);
    npl_error err;
    npl_status st = !out ? NPL_ERR_NOMEM
                  : preprocess_only ? npl_vision_preprocess(v, &img, out, &err)
                                    : npl_vision_encode(v, &img, out, &err);
    if (st)
        rc = out ? fail("encoding", &err) : 1;
    else
        rc = write_floats(argv[2], out, n);
    free(out);
    npl_image_free(&img);
    npl_vision_free(v);
    return rc;
}

static int parse_ids(const char *s, npl_tokens *out)
{
    char *copy = strdup(s);
    if (!copy)
        return 1;
    for (char *t = strtok(copy, ", "); t; t = strtok(NULL, ", ")) {
        char *end;
        long v = strtol(t, &end, 10);
        if (*end || v < 0 || v > INT32_MAX || npl_tokens_push(out, (int32_t)v, NULL)) {
            free(copy);
            return 1;
        }
    }
    free(copy);
    return 0;
}

/* Greedy generation after the prompt, printing each step's top list. */
static int generate(npl_model *m, npl_vision *v, const npl_image *img, const npl_image_prompt *p, long n_steps,
                    size_t top, bool print_text)
{
    npl_error err;
    const npl_vision_info *in = npl_vision_get_info(v);
    if (npl_vision_check_model(v, m, &err))
        return fail("checking the model", &err);
    uint32_t n_image = npl_vision_image_n_tokens(v, img->width, img->height);
    float *embd = malloc(((size_t)n_image * in->n_embd_out + 1) * sizeof *embd);
    if (!embd)
        return 1;
    if (npl_vision_encode(v, img, embd, &err)) {
        free(embd);
        return fail("encoding the image", &err);
    }
    size_t n_ctx = p->before.n + n_image + p->after.n + (size_t)n_steps + 1;
    npl_seq *s = npl_seq_create(m, (uint32_t)n_ctx, &err);
    if (!s || npl_vision_prefill(m, s, p, embd, n_image, &err)) {
        free(embd);
        npl_seq_free(s);
        return fail("prefill", &err);
    }
    free(embd);
    uint32_t n_vocab = npl_model_get_info(m)->n_vocab;
    int32_t *ids = calloc(top, sizeof *ids);
    float *lps = calloc(top, sizeof *lps);
    const npl_tokenizer *tok = npl_model_tokenizer(m);
    int rc = 0;
    if (!print_text)
        printf("{\"n_image\": %u, \"steps\": [", n_image);
    for (long i = 0; i < n_steps && ids && lps; i++) {
        size_t k = npl_top_logprobs(npl_seq_logits(s), n_vocab, top, ids, lps);
        if (print_text) {
            char piece[256];
            size_t len = npl_token_to_bytes(tok, ids[0], false, piece, sizeof piece);
            fwrite(piece, 1, len < sizeof piece ? len : sizeof piece, stdout);
        } else {
            printf("%s{\"token\": %d, \"top\": [", i ? ", " : "", ids[0]);
            for (size_t j = 0; j < k; j++)
                printf("%s[%d, %.6f]", j ? ", " : "", ids[j], (double)lps[j]);
            printf("]}");
        }
        if (i + 1 < n_steps && npl_decode(m, &s, &ids[0], 1, &err)) {
            rc = fail("decode", &err);
            break;
        }
    }
    printf(print_text ? "\n" : "]}\n");
    free(ids);
    free(lps);
    npl_seq_free(s);
    return rc;
}

static int cmd_generate(int argc, char **argv, bool chat)
{
    if (argc < (chat ? 5 : 6))
        return usage();
    npl_image_prompt p = {0};
    if (!chat && (parse_ids(argv[3], &p.before) || parse_ids(argv[4], &p.after))) {
        npl_image_prompt_free(&p);
        return usage();
    }
    long n_steps = strtol(argv[chat ? 4 : 5], NULL, 10);
    long top = argc > 6 && !chat ? strtol(argv[6], NULL, 10) : 5;
    if (n_steps < 1 || n_steps > 4096 || top < 1 || top > 100) {
        npl_image_prompt_free(&p);
        return usage();
    }
    npl_vision *v = load_vision(argv[1]);
    npl_model *m = v ? load_model_for(argv[0], v) : NULL;
    if (!m) {
        npl_vision_free(v);
        npl_image_prompt_free(&p);
        return 1;
    }
    npl_error err;
    npl_image img = {0};
    int rc = load_image(argv[2], &img);
    if (!rc && chat && npl_vision_chat_prompt(m, NULL, argv[3], &p, &err))
        rc = fail("building the prompt", &err);
    if (!rc)
        rc = generate(m, v, &img, &p, n_steps, (size_t)top, chat);
    npl_image_free(&img);
    npl_image_prompt_free(&p);
    npl_vision_free(v);
    npl_model_free(m);
    return rc;
}

static void print_ids(const char *key, const npl_tokens *t)
{
    printf("\"%s\": [", key);
    for (size_t i = 0; i < t->n; i++)
        printf("%s%d", i ? ", " : "", t->ids[i]);
    printf("]");
}

static int cmd_prompt(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    npl_error err;
    npl_model *m = npl_model_load(argv[0], NULL, &err);
    if (!m)
        return fail("loading the model", &err);
    npl_image_prompt p;
    int rc = 0;
    if (npl_vision_chat_prompt(m, argc > 2 ? argv[2] : NULL, argv[1], &p, &err)) {
        rc = fail("building the prompt", &err);
    } else {
        printf("{");
        print_ids("before", &p.before);
        printf(", ");
        print_ids("after", &p.after);
        printf("}\n");
        npl_image_prompt_free(&p);
    }
    npl_model_free(m);
    return rc;
}

static int cmd_probe(int argc, char **argv)
{
    if (argc < 1)
        return usage();
    size_t size = 0;
    unsigned char *data = read_file(argv[0], &size);
    if (!data)
        return 1;
    npl_image_info info;
    npl_error err;
    npl_image_limits lim;
    npl_image_limits_default(&lim);
    npl_status st = npl_image_probe(data, size, &lim, &info, &err);
    free(data);
    if (st) {
        fprintf(stderr, "vision-tool: %s (%s)\n", err.message, npl_status_name(st));
        return 3;
    }
    printf("%u %u %s %llu\n", info.width, info.height, npl_image_format_name(info.format),
           (unsigned long long)info.decode_bytes);
    return 0;
}

/* One scan for each DC coefficient, then one per component and AC
 * coefficient: the most scans a valid progressive file can have without
 * successive approximation. */
static int cmd_scans_jpeg(int argc, char **argv)
{
    if (argc < 3)
        return usage();
    int w = atoi(argv[1]), h = atoi(argv[2]);
    if (w < 1 || h < 1 || w > 8192 || h > 8192)
        return usage();
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    FILE *f = fopen(argv[0], "wb");
    if (!f) {
        perror(argv[0]);
        return 1;
    }
    jpeg_stdio_dest(&ci, f);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = 3;
    ci.in_color_space = JCS_RGB;
    jpeg_set_defaults(&ci);
    static jpeg_scan_info scans[3 + 3 * 63];
    int n = 0;
    for (int c = 0; c < 3; c++)
        scans[n++] = (jpeg_scan_info){.comps_in_scan = 1, .component_index = {c}, .Ss = 0, .Se = 0};
    for (int c = 0; c < 3; c++)
        for (int k = 1; k < 64; k++)
            scans[n++] = (jpeg_scan_info){.comps_in_scan = 1, .component_index = {c}, .Ss = k, .Se = k};
    ci.scan_info = scans;
    ci.num_scans = n;
    jpeg_start_compress(&ci, TRUE);
    unsigned char *row = malloc((size_t)w * 3);
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            row[3 * x] = (unsigned char)(x * 7 + y);
            row[3 * x + 1] = (unsigned char)(y * 5);
            row[3 * x + 2] = (unsigned char)(x ^ y);
        }
        JSAMPROW r = row;
        jpeg_write_scanlines(&ci, &r, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(row);
    return fclose(f) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    const char *cmd = argv[1];
    argc -= 2;
    argv += 2;
    if (!strcmp(cmd, "decode"))
        return cmd_decode(argc, argv);
    if (!strcmp(cmd, "info"))
        return cmd_info(argc, argv);
    if (!strcmp(cmd, "preprocess"))
        return cmd_embed(argc, argv, true);
    if (!strcmp(cmd, "embed"))
        return cmd_embed(argc, argv, false);
    if (!strcmp(cmd, "generate"))
        return cmd_generate(argc, argv, false);
    if (!strcmp(cmd, "chat"))
        return cmd_generate(argc, argv, true);
    if (!strcmp(cmd, "prompt"))
        return cmd_prompt(argc, argv);
    if (!strcmp(cmd, "probe"))
        return cmd_probe(argc, argv);
    if (!strcmp(cmd, "scans-jpeg"))
        return cmd_scans_jpeg(argc, argv);
    return usage();
}
