/* npullm-bench --image FILE MMPROJ [MODEL]: how long an image takes to
 * become embeddings, as DescribeImage runs it: decoding and preprocessing
 * the file, then the encoder stage by stage (patch embedding, each block,
 * the projector), with the blocks split into their projections, the
 * attention and the MLP. With a Gemma 3 model it also prefills the chat
 * prompt around the image, so "first token" is the whole wait until the
 * first token's logits exist. The tower is loaded once (its load time is
 * reported apart: npullmd keeps a loaded tower); each repetition encodes
 * the image again. The model is warmed up first with the prompt's text
 * alone (its first forward pass repacks the integer weights, which a
 * loaded model in npullmd has done; reported apart as well). */
#include "bench_image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench_common.h"
#include "npullm.h"
#include "vision.h"

/* CPU seconds of the process (all threads): on a shared machine, less
 * disturbed by other load than the wall clock. */
static double cpu_s(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0.0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static int fail(const char *what, const char *detail)
{
    fprintf(stderr, "npullm-bench: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    return 1;
}

static void *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    void *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
            if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
                free(buf);
                buf = NULL;
            } else {
                *size = (size_t)n;
            }
        }
    }
    fclose(f);
    return buf;
}

typedef struct run_times {
    double decode, encoder, encoder_cpu, prefill, first_token;
    double block_min, block_max;
    npl_vision_timings parts;
} run_times;

static int one_run(const bench_image_opts *o, npl_vision *v, npl_model *m, const void *data, size_t size,
                   run_times *rt)
{
    npl_error err;
    memset(rt, 0, sizeof *rt);
    double t0 = bench_now_s();
    npl_image img;
    if (npl_image_decode(data, size, NULL, &img, &err) != NPL_OK)
        return fail("cannot decode the image", err.message);
    npl_vision_encoding *e = npl_vision_encoding_create(v, &img, &err);
    npl_image_free(&img);
    if (!e)
        return fail("cannot start the encoding", err.message);
    double t1 = bench_now_s();
    rt->decode = t1 - t0;
    uint32_t n_layer = npl_vision_get_info(v)->n_layer;
    rt->block_min = 1e30;
    double c1 = cpu_s();
    bool done = false;
    for (uint32_t stage = 0; !done; stage++) {
        double s0 = bench_now_s();
        if (npl_vision_encoding_step(e, &done, &err) != NPL_OK) {
            npl_vision_encoding_free(e);
            return fail("encoding failed", err.message);
        }
        double dt = bench_now_s() - s0;
        if (stage >= 1 && stage <= n_layer) {
            rt->block_min = dt < rt->block_min ? dt : rt->block_min;
            rt->block_max = dt > rt->block_max ? dt : rt->block_max;
        }
    }
    double t2 = bench_now_s();
    rt->encoder = t2 - t1;
    rt->encoder_cpu = cpu_s() - c1;
    npl_vision_encoding_get_timings(e, &rt->parts);
    if (m) {
        npl_image_prompt p;
        if (npl_vision_chat_prompt(m, NULL, "Describe this image.", &p, &err) != NPL_OK) {
            npl_vision_encoding_free(e);
            return fail("cannot lay out the prompt", err.message);
        }
        npl_seq *s = npl_seq_create(m, 0, &err);
        npl_status st = s ? npl_vision_prefill(m, s, &p, npl_vision_encoding_output(e),
                                                npl_vision_encoding_n_tokens(e), &err)
                          : err.code;
        npl_seq_free(s);
        npl_image_prompt_free(&p);
        if (st != NPL_OK) {
            npl_vision_encoding_free(e);
            return fail("prefill failed", err.message);
        }
        rt->prefill = bench_now_s() - t2;
    }
    rt->first_token = bench_now_s() - t0;
    npl_vision_encoding_free(e);
    (void)o;
    return 0;
}

/* The prompt's text without the image, prefilled once into a sequence
 * that is then dropped: every matrix of the model (the output one too)
 * runs once, so the timed runs see the weights as a loaded model has them. */
static npl_status warm_up(npl_model *m, double *seconds, npl_error *err)
{
    double t0 = bench_now_s();
    npl_image_prompt p;
    if (npl_vision_chat_prompt(m, NULL, "Describe this image.", &p, err) != NPL_OK)
        return err->code;
    npl_seq *s = npl_seq_create(m, (uint32_t)(p.before.n + p.after.n), err);
    npl_status st = s ? npl_prefill(m, s, p.before.ids, p.before.n, 0, NULL, err) : err->code;
    if (st == NPL_OK)
        st = npl_prefill(m, s, p.after.ids, p.after.n, 0, NULL, err);
    npl_seq_free(s);
    npl_image_prompt_free(&p);
    *seconds = bench_now_s() - t0;
    return st;
}

static const char *path_name(const bench_image_opts *o)
{
    if (o->exact)
        return "exact";
    if (o->q8)
        return o->bf16 ? "fast, F16 as Q8_0 or BF16" : "fast, F16 as Q8_0";
    return o->bf16 ? "fast, F16 as BF16" : "fast";
}

int bench_image(const bench_image_opts *o)
{
    size_t size = 0;
    void *data = read_file(o->image, &size);
    if (!data)
        return fail("cannot read the image", o->image);
    npl_vision_params vp;
    npl_vision_params_default(&vp);
    vp.n_threads = o->n_threads;
    vp.exact = o->exact;
    vp.bf16_weights = o->bf16;
    vp.q8_weights = o->q8;
    npl_error err;
    double t0 = bench_now_s();
    npl_vision *v = npl_vision_load(o->mmproj, &vp, &err);
    double load_s = bench_now_s() - t0;
    if (!v) {
        free(data);
        return fail("cannot load the projector", err.message);
    }
    npl_model *m = NULL;
    if (o->model) {
        /* the image's rows go through the model in one step */
        m = bench_load_model(o->model, o->n_threads, npl_vision_get_info(v)->max_tokens, &err);
        if (!m || npl_vision_check_model(v, m, &err) != NPL_OK) {
            npl_model_free(m);
            npl_vision_free(v);
            free(data);
            return fail("cannot use the model", err.message);
        }
    }
    double warm_s = 0.0;
    if (m && warm_up(m, &warm_s, &err) != NPL_OK) {
        npl_model_free(m);
        npl_vision_free(v);
        free(data);
        return fail("the model's warm-up prefill failed", err.message);
    }
    const npl_vision_info *in = npl_vision_get_info(v);
    if (!o->json)
        printf("projector %s: %u px, %u patches, %u blocks, width %u, %u tokens of %u; %s path, load %.2f s\n",
               o->mmproj, in->image_size, (in->image_size / in->patch_size) * (in->image_size / in->patch_size),
               in->n_layer, in->n_embd, in->n_tokens, in->n_embd_out, path_name(o), load_s);
    if (m && !o->json)
        printf("model warm-up (the prompt's text alone, first forward pass: repacks the weights) %.2f s\n", warm_s);
    int rc = 0;
    double best = 1e30, worst = 0;
    if (o->json)
        printf("{\"mmproj\": \"%s\", \"image\": \"%s\", \"path\": \"%s\", \"load_s\": %.3f, \"warm_up_s\": %.3f, "
               "\"runs\": [",
               o->mmproj, o->image, path_name(o), load_s, warm_s);
    for (long r = 0; r < o->reps && rc == 0; r++) {
        run_times t;
        rc = one_run(o, v, m, data, size, &t);
        if (rc)
            break;
        best = t.encoder < best ? t.encoder : best;
        worst = t.encoder > worst ? t.encoder : worst;
        const npl_vision_timings *p = &t.parts;
        if (o->json)
            printf("%s{\"decode_s\": %.3f, \"encoder_s\": %.3f, \"encoder_cpu_s\": %.3f, \"patch_embed_s\": %.3f, \"attn_proj_s\": %.3f, "
                   "\"attention_s\": %.3f, \"mlp_s\": %.3f, \"projector_s\": %.3f, \"block_min_s\": %.3f, "
                   "\"block_max_s\": %.3f, \"prefill_s\": %.3f, \"first_token_s\": %.3f}",
                   r ? ", " : "", t.decode, t.encoder, t.encoder_cpu, p->embed, p->attn_proj, p->attention, p->mlp, p->project,
                   t.block_min, t.block_max, t.prefill, t.first_token);
        else
            printf("run %ld: decode+preprocess %.2f s, encoder %.2f s (%.1f CPU s; patch embed %.2f, blocks: QKV/out "
                   "projections %.2f, attention %.2f, MLP %.2f; projector %.2f; one block %.2f-%.2f s)%s",
                   r + 1, t.decode, t.encoder, t.encoder_cpu, p->embed, p->attn_proj, p->attention, p->mlp, p->project,
                   t.block_min, t.block_max, m ? "" : "\n");
        if (m && !o->json)
            printf(", prompt prefill %.2f s, first token %.2f s\n", t.prefill, t.first_token);
        fflush(stdout);
    }
    if (o->json && rc == 0)
        printf("], \"encoder_best_s\": %.3f, \"encoder_worst_s\": %.3f}\n", best, worst);
    else if (rc == 0)
        printf("encoder: best %.2f s, worst %.2f s over %ld runs\n", best, worst, o->reps);
    npl_model_free(m);
    npl_vision_free(v);
    free(data);
    return rc;
}
