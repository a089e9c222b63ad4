/* The kernel-directory manifest: a good one parses into the expected
 * contracts, every malformed one fails with a message naming the line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_manifest.h"
#include "npu_emu.h"
#include "npl_test.h"
#include "q4nx.h"

static const char good[] =
    "# kernels for Strix\r\n"
    "npullm-npu-manifest 1\r\n"
    "\n"
    "device = xdna2   # comment after a value\n"
    "[group rms_qkv_rope_mv]\n"
    "xclbin = bin/decode.xclbin\n"
    "# no instr: the host generates the instruction streams\n"
    "kernel = MLIR_AIE\n"
    "fixed  = n_embd=2048 n_head=32 n_head_kv=8 head_dim=64 n_tokens=1\n"
    "params = shape\n"
    "arg = x        io           f32  [n_embd]\n"
    "arg = wq       static       q4nx [n_head*head_dim, n_embd]\n"
    "arg = freqs    static       f32  [rope_dims / 2] optional\n"
    "arg = k_cache  intermediate bf16 [n_ctx, (n_head_kv) * head_dim]\n"
    "[group lm_head]\n"
    "xclbin = bin/decode.xclbin\n"
    "# from the 'dma' lines (here the defaults)\n"
    "kernel = MLIR_AIE\n"
    "arg = logits output f32 [n_vocab]\n"
    "arg = counts io i32 [4, 2 + 2]\n"
    "arg = raw io u8 [n_vocab - 1]\n";

static npl_npu_shape llama_shape(void)
{
    npl_npu_shape s;
    memset(&s, 0, sizeof s);
    s.n_embd = 2048;
    s.n_head = 32;
    s.n_head_kv = 8;
    s.head_dim = 64;
    s.n_ff = 8192;
    s.n_vocab = 128256;
    s.n_tokens = 1;
    s.n_ctx = 1024;
    s.rope_dims = 64;
    return s;
}

static void parses_good_manifest(void)
{
    npl_npu_manifest *m = NULL;
    npl_error err;
    CHECK_OK(npl_npu_manifest_parse(good, strlen(good), "good.txt", &m, &err), &err);
    if (!m)
        return;
    CHECK(m->target == NPL_NPU_TARGET_XDNA2);
    CHECK(m->n_groups == 2);
    const npl_npu_group_spec *g = npl_npu_manifest_find(m, "rms_qkv_rope_mv");
    CHECK(g && strcmp(g->xclbin, "bin/decode.xclbin") == 0 && strcmp(g->kernel, "MLIR_AIE") == 0);
    CHECK(g && g->params_shape);
    CHECK(g && g->n_fixed == 5 && g->n_args == 4);
    CHECK(npl_npu_group_arg_index(g, "wq") == 1 && npl_npu_group_arg_index(g, "nope") == -1);
    const npl_npu_arg_spec *wq = &g->args[1];
    CHECK(wq->cls == NPL_NPU_BUF_STATIC && wq->type == NPL_NPU_ELEM_Q4NX && wq->n_dims == 2);
    CHECK(g->args[2].optional && !g->args[0].optional);
    CHECK(g->args[3].cls == NPL_NPU_BUF_INTERMEDIATE && g->args[3].type == NPL_NPU_ELEM_BF16);
    npl_npu_shape s = llama_shape();
    size_t bytes = 0;
    CHECK_OK(npl_npu_arg_bytes(&g->args[0], &s, &bytes, &err), &err);
    CHECK(bytes == 2048 * 4);
    CHECK_OK(npl_npu_arg_bytes(wq, &s, &bytes, &err), &err);
    CHECK(bytes == (size_t)(2048 / 32) * (2048 / 256) * 5120);
    CHECK_OK(npl_npu_arg_bytes(&g->args[2], &s, &bytes, &err), &err);
    CHECK(bytes == 32 * 4);
    CHECK_OK(npl_npu_arg_bytes(&g->args[3], &s, &bytes, &err), &err);
    CHECK(bytes == (size_t)1024 * 512 * 2);
    CHECK_OK(npl_npu_group_check_fixed(g, &s, &err), &err);
    s.n_embd = 1152;
    CHECK_FAILS(npl_npu_group_check_fixed(g, &s, &err), NPL_ERR_INVALID_ARG, &err,
                "built for n_embd=2048, the call has 1152");
    const npl_npu_group_spec *h = npl_npu_manifest_find(m, "lm_head");
    CHECK(h && !h->params_shape && h->n_fixed == 0 && h->n_args == 3);
    s = llama_shape();
    CHECK_OK(npl_npu_arg_bytes(&h->args[1], &s, &bytes, &err), &err);
    CHECK(bytes == 4 * 4 * 4);
    CHECK_OK(npl_npu_arg_bytes(&h->args[2], &s, &bytes, &err), &err);
    CHECK(bytes == 128255);
    npl_npu_manifest_free(m);
}

static void rejects_bad_manifests(void)
{
    const char *head = "npullm-npu-manifest 1\ndevice = xdna2\n[group g]\n"
                       "xclbin = a.xclbin\n# one line\nkernel = K\n";
    const struct {
        const char *body;   /* appended to head unless it starts with '!' */
        const char *needle;
    } bad[] = {
        { "!", "empty manifest" },
        { "!npullm-npu-manifest 2\n", ":1: unsupported manifest version" },
        { "!something else\n", ":1: first line must be" },
        { "!npullm-npu-manifest 1\n[group g]\n", ":2: 'device = ...' must come before" },
        { "!npullm-npu-manifest 1\ndevice = xdna3\n", ":2: unknown device" },
        { "!npullm-npu-manifest 1\ndevice = emu\ndevice = emu\n", ":3: 'device' given twice" },
        { "!npullm-npu-manifest 1\ndevice = emu\n", "declares no groups" },
        { "!npullm-npu-manifest 1\ndevice = emu\nfoo = 1\n", ":3: unknown top-level key" },
        { "!npullm-npu-manifest 1\ndevice = emu\n[group g]\narg = x io f32 [1]\nxclbin = a\n",
          ":3: group 'g' names binaries, but emu groups run on the host" },
        { "!npullm-npu-manifest 1\ndevice = xdna1\n[group g]\narg = x io f32 [1]\n",
          ":3: group 'g' needs xclbin and kernel" },
        { "", ":3: group 'g' declares no arguments" },
        { "arg = x io f32 [1]\n[group g]\n", ":8: group 'g' declared twice" },
        { "arg = x io f32 [1]\n[group Bad]\n", ":8: group name must be" },
        { "arg = x io f32 [1]\n[grp h]\n", ":8: section header must be [group NAME]" },
        { "arg = x io f32 [1]\n[group h\n", ":8: section header needs a closing" },
        { "xclbin = b.xclbin\n", ":7: 'xclbin' given twice" },
        { "arg = x io f32 [1]\nkernel = K\n", ":8: 'kernel' given twice" },
        { "arg = x io f32 [1]\nwhat = 1\n", ":8: unknown key 'what'" },
        { "arg = x io f32 [1]\njust words\n", ":8: expected 'key = value'" },
        { "arg = x stat f32 [1]\n", ":7: unknown class for 'x'" },
        { "arg = x io f64 [1]\n", ":7: unknown element type for 'x'" },
        { "arg = x io f32\n", ":7: argument 'x' needs a shape" },
        { "arg = x io f32 [1\n", ":7: shape of 'x' is missing ']'" },
        { "arg = x io f32 [1,,2]\n", ":7: shape of 'x' has an empty dimension" },
        { "arg = x io f32 [1,2,3,4,5]\n", ":7: shape of 'x' has more than 4" },
        { "arg = x io q4nx [n_embd]\n", ":7: q4nx argument 'x' needs a [rows, cols]" },
        { "arg = x io f32 [n_emb]\n", ":7: bad shape: unknown shape symbol" },
        { "arg = x io f32 [n_embd *]\n", ":7: bad shape: expression ends early" },
        { "arg = x io f32 [(n_embd]\n", ":7: bad shape: missing ')'" },
        { "arg = x io f32 [n_embd n_ff]\n", ":7: bad shape: unexpected text after expression" },
        { "arg = x io f32 [n_embd % 2]\n", ":7: bad shape: unexpected text" },
        { "arg = x io f32 [99999999999]\n", ":7: bad shape: number too large" },
        { "arg = x io f32 [1] maybe\n", ":7: unexpected text after the shape of 'x'" },
        { "arg = x io f32 [1] optional extra\n", ":7: unexpected text after 'optional'" },
        { "arg = x io f32 [1]\narg = x io f32 [1]\n", ":8: argument 'x' declared twice" },
        { "arg = X io f32 [1]\n", ":7: argument needs a name" },
        { "arg = x io f32 [1]\nfixed = n_embd\n", ":8: 'fixed' entries are symbol=value" },
        { "arg = x io f32 [1]\nfixed = foo=1\n", ":8: unknown shape symbol in 'fixed'" },
        { "arg = x io f32 [1]\nfixed = n_embd=x\n", ":8: 'fixed' value is not a 32-bit number" },
        { "arg = x io f32 [1]\nfixed = n_embd=1 n_embd=2\n", ":8: symbol n_embd fixed twice" },
        { "arg = x io f32 [1]\nparams = yes\n", ":8: 'params' is 'shape' or 'none'" },
        { "!npullm-npu-manifest 1\ndevice = xdna2\n[group g]\nxclbin = /abs.xclbin\n",
          ":4: 'xclbin' must be a relative path" },
        { "!npullm-npu-manifest 1\ndevice = xdna2\n[group g]\nxclbin = ../up.xclbin\n",
          ":4: 'xclbin' must stay inside the kernel directory" },
        { "!npullm-npu-manifest 1\ndevice = xdna2\n[group g]\nxclbin = a/../../up.xclbin\n",
          ":4: 'xclbin' must stay inside" },
        { "!npullm-npu-manifest 1\ndevice = emu\n[group g]\narg = x io f32 [1]\ninstr = a.bin\n",
          ":3: group 'g' names binaries, but emu groups run on the host" },
        { "arg = x io f32 [1]\npatch = 3 pos\n", ":3: group 'g' patches words but names no 'instr'" },
        { "instr = a.bin\narg = x io f32 [1]\ndma = in x 0 *\n",
          ":3: group 'g' has both an 'instr' file and 'dma' lines" },
        { "instr = a.bin\npatch = x3 pos\n", ":8: 'patch' word index must be a number" },
        { "instr = a.bin\npatch = 3\n", ":8: 'patch' of word 3 needs a value" },
        { "instr = a.bin\npatch = 3 pos\npatch = 3 n_tokens\n", ":9: word 3 patched twice" },
        { "instr = a.bin\npatch = 3 pos * 2\n", ":8: unexpected text after the 'patch' of word 3" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[2048];
        if (bad[i].body[0] == '!')
            snprintf(text, sizeof text, "%s", bad[i].body + 1);
        else
            snprintf(text, sizeof text, "%s%s", head, bad[i].body);
        npl_npu_manifest *m = NULL;
        npl_error err;
        npl_error_clear(&err);
        npl_status st = npl_npu_manifest_parse(text, strlen(text), "bad.txt", &m, &err);
        if (st != NPL_ERR_FORMAT || m || !strstr(err.message, bad[i].needle)) {
            CHECK(!"manifest rejected with the expected message");
            nt_note("  case %zu: status %d message '%s', wanted '%s'", i, (int)st, err.message,
                     bad[i].needle);
        }
        npl_npu_manifest_free(m);
    }
    /* A NUL byte inside the text. */
    npl_npu_manifest *m = NULL;
    npl_error err;
    CHECK_FAILS(npl_npu_manifest_parse("npullm\0", 7, "nul.txt", &m, &err), NPL_ERR_FORMAT, &err,
                "NUL byte");
}

static npl_status eval_text(const char *expr, const npl_npu_shape *s, uint64_t *v, npl_error *err)
{
    char text[512];
    snprintf(text, sizeof text,
             "npullm-npu-manifest 1\ndevice = emu\n[group g]\narg = x io u8 [%s]\n", expr);
    npl_npu_manifest *m = NULL;
    npl_status st = npl_npu_manifest_parse(text, strlen(text), "expr", &m, err);
    if (st != NPL_OK)
        return st;
    st = npl_npu_expr_eval(&m->groups[0].args[0].dims[0], s, v, err);
    npl_npu_manifest_free(m);
    return st;
}

static void evaluates_expressions(void)
{
    npl_npu_shape s = llama_shape();
    npl_error err;
    uint64_t v = 0;
    CHECK_OK(eval_text("n_head*head_dim + 2*n_head_kv*head_dim", &s, &v, &err), &err);
    CHECK(v == 2048 + 1024);
    CHECK_OK(eval_text("(n_embd - 48) / 2 / 4", &s, &v, &err), &err);
    CHECK(v == 250);
    CHECK_OK(eval_text("10 - 2 - 3", &s, &v, &err), &err); /* left associative */
    CHECK(v == 5);
    CHECK_OK(eval_text("2 + 3 * 4", &s, &v, &err), &err);
    CHECK(v == 14);
    CHECK_FAILS(eval_text("n_embd / 3", &s, &v, &err), NPL_ERR_INVALID_ARG, &err, "inexact");
    CHECK_FAILS(eval_text("n_head - n_embd", &s, &v, &err), NPL_ERR_INVALID_ARG, &err, "negative");
    CHECK_FAILS(eval_text("n_embd / pos", &s, &v, &err), NPL_ERR_INVALID_ARG, &err, "out of range");
    CHECK_FAILS(eval_text("n_vocab * n_vocab * n_vocab * n_vocab", &s, &v, &err),
                NPL_ERR_INVALID_ARG, &err, "out of range");
    /* Too many tokens for one expression. */
    CHECK_FAILS(eval_text("1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1", &s, &v, &err), NPL_ERR_FORMAT,
                &err, "expression is too long");
}

static void loads_and_checks_files(void)
{
    char *dir = nt_tempdir();
    char path[1024];
    npl_npu_manifest *m = NULL;
    npl_error err;
    CHECK_FAILS(npl_npu_manifest_load(dir, &m, &err), NPL_ERR_IO, &err, "manifest.txt");
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    CHECK(nt_write_file(path, good) == 0);
    CHECK_OK(npl_npu_manifest_load(dir, &m, &err), &err);
    CHECK_FAILS(npl_npu_manifest_check_files(m, dir, &err), NPL_ERR_IO, &err,
                "bin/decode.xclbin of group rms_qkv_rope_mv is missing");
    snprintf(path, sizeof path, "%s/bin/decode.xclbin", dir);
    CHECK(nt_write_file(path, "xclbin") == 0);
    CHECK_OK(npl_npu_manifest_check_files(m, dir, &err), &err);
    npl_npu_manifest_free(m);
    nt_rmtree(dir);
    free(dir);
}

static void shape_symbols_and_packing(void)
{
    npl_npu_shape s = llama_shape();
    s.pos = 77;
    s.window = 512;
    s.chunk = 64;
    s.rope_style = NPL_NPU_ROPE_NEOX;
    s.act = NPL_NPU_ACT_GELU_TANH;
    s.causal = 1;
    s.rms_eps = 1e-6f;
    s.rope_theta = 1e6f;
    s.rope_freq_scale = 0.125f;
    s.attn_scale = 0.0625f;
    s.qk_norm = 1;
    s.post_norms = 1;
    s.qkv_bias = 1;
    uint32_t w[NPL_NPU_SHAPE_WORDS];
    npl_npu_shape_pack(&s, w);
    CHECK(w[0] == 2048 && w[7] == 77 && w[11] == 64 && w[12] == 1);
    float attn_scale;
    memcpy(&attn_scale, &w[NPL_NPU_SHAPE_WORDS - 1], sizeof attn_scale);
    CHECK(NPL_NPU_SHAPE_WORDS == 22 && attn_scale == 0.0625f); /* the floats last */
    npl_npu_shape back;
    npl_npu_shape_unpack(w, &back);
    CHECK(memcmp(&back, &s, sizeof s) == 0);
    uint32_t v = 0;
    /* Symbols 0-11 are words 0-11; the flags qk_norm, post_norms and
     * qkv_bias are words 15, 16 and 17 (after rope_style, act and causal). */
    for (size_t i = 0; npl_npu_shape_symbol_names[i]; i++)
        CHECK(npl_npu_shape_symbol(&s, npl_npu_shape_symbol_names[i], &v)
              && v == w[i < 12 ? i : i + 3]);
    CHECK(w[15] == 1 && w[16] == 1 && w[17] == 1);
    CHECK(!npl_npu_shape_symbol(&s, "rms_eps", &v));
}

/* The packed weight arguments of the built-in contracts, laid out for
 * Llama-3.2-1B and for a Gemma-3-1B-like shape: parts in order at 64-byte
 * aligned offsets, empty parts taking no bytes, the argument's size their
 * end; q/k/v back to back are one Q4NX matrix of all their rows. */
static void packed_layout(void)
{
    npl_npu_manifest *m = NULL;
    npl_error err;
    const char *text = npl_npu_emu_builtin_manifest();
    CHECK_OK(npl_npu_manifest_parse(text, strlen(text), "builtin", &m, &err), &err);
    if (!m)
        return;
    CHECK(m->max_args == NPL_NPU_DEFAULT_MAX_ARGS);
    for (size_t i = 0; i < m->n_groups; i++)
        CHECK(m->groups[i].n_args <= 5);
    const npl_npu_group_spec *g = npl_npu_manifest_find(m, "rms_qkv_rope_mv");
    npl_npu_shape s = llama_shape();
    size_t off = 0, n = 0, total = 0;
    const char *names[] = { "attn_norm", "wq", "wk", "wv", "q_norm", "k_norm", "rope_freqs",
                            "q_bias", "k_bias", "v_bias" };
    /* Llama: wq 2048x2048 = 64x8 blocks, wk/wv 512 rows = 16x8 blocks;
     * no Q/K norms, no biases: those parts are empty. */
    const size_t end_v = 4096 + 2621440 + 2 * 655360;
    const size_t want_off[] = { 0, 4096, 4096 + 2621440, 4096 + 2621440 + 655360,
                                end_v, end_v, end_v, end_v, end_v, end_v };
    const size_t want_n[] = { 4096, 2621440, 655360, 655360, 0, 0, 128, 0, 0, 0 };
    for (size_t i = 0; i < 10; i++) {
        int p = npl_npu_group_part_index(g, names[i]);
        CHECK(p >= 0);
        CHECK_OK(npl_npu_part_place(g, (uint32_t)p, &s, &off, &n, &err), &err);
        CHECK(off == want_off[i] && n == want_n[i]);
    }
    npl_q4nx_layout qkv;
    CHECK_OK(npl_q4nx_layout_init(&qkv, 2048 + 2 * 512, 2048, &err), &err);
    CHECK(want_off[3] + want_n[3] - want_off[1] == qkv.bytes);
    int a = npl_npu_group_arg_index(g, "w_attn");
    CHECK_OK(npl_npu_group_arg_bytes(g, (uint32_t)a, &s, &total, &err), &err);
    CHECK(total == want_off[6] + 128);
    /* Q/K norms take room only when the shape says the model has them. */
    s.qk_norm = 1;
    CHECK_OK(npl_npu_part_place(g, (uint32_t)npl_npu_group_part_index(g, "k_norm"), &s, &off, &n,
                                &err), &err);
    CHECK(off == want_off[4] + 128 && n == 128);
    /* Q/K/V biases (f32) follow wv, leaving the q/k/v matrix whole, and
     * move the norms and the rope factors behind them. */
    s.qk_norm = 0;
    s.qkv_bias = 1;
    const char *biased[] = { "wv", "q_bias", "k_bias", "v_bias", "q_norm", "rope_freqs" };
    const size_t biased_off[] = { want_off[3], end_v, end_v + 8192, end_v + 8192 + 2048,
                                  end_v + 8192 + 4096, end_v + 8192 + 4096 };
    const size_t biased_n[] = { 655360, 8192, 2048, 2048, 0, 128 };
    for (size_t i = 0; i < 6; i++) {
        CHECK_OK(npl_npu_part_place(g, (uint32_t)npl_npu_group_part_index(g, biased[i]), &s,
                                    &off, &n, &err), &err);
        CHECK(off == biased_off[i] && n == biased_n[i]);
    }
    CHECK_OK(npl_npu_group_arg_bytes(g, (uint32_t)a, &s, &total, &err), &err);
    CHECK(total == end_v + 8192 + 4096 + 128);
    /* A packed argument's size comes only from its group. */
    CHECK_FAILS(npl_npu_arg_bytes(&g->args[a], &s, &total, &err), NPL_ERR_INTERNAL, &err,
                "its size comes from its group's parts");
    npl_npu_manifest_free(m);
}

static const nt_case cases[] = {
    { "packed_layout", packed_layout },
    { "parses_good_manifest", parses_good_manifest },
    { "rejects_bad_manifests", rejects_bad_manifests },
    { "evaluates_expressions", evaluates_expressions },
    { "loads_and_checks_files", loads_and_checks_files },
    { "shape_symbols_and_packing", shape_symbols_and_packing },
};

int main(int argc, char **argv)
{
    return nt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
