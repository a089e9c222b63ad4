#include "npu_instr.h"

#include <string.h>

static npl_status eval_u32(const npl_npu_group_spec *g, const char *what, uint32_t arg,
                           const npl_npu_expr *e, const npl_npu_shape *shape, uint32_t *out,
                           npl_error *err)
{
    uint64_t v = 0;
    npl_error sub;
    if (npl_npu_expr_eval(e, shape, &v, &sub) != NPL_OK)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: %s: transfer %s of '%s': %s",
                             g->name, what, g->args[arg].name, sub.message);
    if (v > UINT32_MAX)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npu: %s: transfer %s of '%s' is %llu, beyond a 32-bit descriptor word",
                             g->name, what, g->args[arg].name, (unsigned long long)v);
    *out = (uint32_t)v;
    return NPL_OK;
}

npl_status npl_npu_instr_build(const npl_npu_group_spec *g, const npl_npu_shape *shape,
                               const bool *present, uint32_t words[NPL_NPU_INSTR_MAX_WORDS],
                               uint32_t *n_words, uint32_t *n_patched, npl_error *err)
{
    uint32_t n = 2, ops = 0, patched = 0;
    if (g->params_shape) {
        words[n++] = (NPL_NPU_INSTR_OP_RTP << 24) | NPL_NPU_SHAPE_WORDS;
        npl_npu_shape_pack(shape, &words[n]);
        n += NPL_NPU_SHAPE_WORDS;
        ops++;
        patched += 3; /* n_tokens, pos, causal */
    }
    for (uint32_t i = 0; i < g->n_dma; i++) {
        const npl_npu_dma_spec *d = &g->dma[i];
        if (!present[d->arg])
            continue;
        uint32_t off = 0, len = 0;
        npl_status st = eval_u32(g, "offset", d->arg, &d->offset, shape, &off, err);
        if (st != NPL_OK)
            return st;
        if (d->whole) {
            size_t bytes = 0;
            npl_error sub;
            if (npl_npu_group_arg_bytes(g, d->arg, shape, &bytes, &sub) != NPL_OK)
                return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: %s: '%s': %s", g->name,
                                     g->args[d->arg].name, sub.message);
            if (bytes > UINT32_MAX)
                return npl_error_set(err, NPL_ERR_INVALID_ARG,
                                     "npu: %s: '%s' has %zu bytes, beyond a 32-bit descriptor word",
                                     g->name, g->args[d->arg].name, bytes);
            len = (uint32_t)bytes;
        } else if ((st = eval_u32(g, "length", d->arg, &d->length, shape, &len, err)) != NPL_OK) {
            return st;
        }
        words[n++] = (NPL_NPU_INSTR_OP_DMA << 24) | ((uint32_t)d->out << 16) | d->arg;
        words[n++] = off;
        words[n++] = len;
        ops++;
        patched += npl_npu_expr_is_runtime(&d->offset);
        patched += !d->whole && npl_npu_expr_is_runtime(&d->length);
    }
    words[0] = NPL_NPU_INSTR_MAGIC;
    words[1] = ops;
    *n_words = n;
    if (n_patched)
        *n_patched = patched;
    return NPL_OK;
}

npl_status npl_npu_instr_patch(const npl_npu_group_spec *g, const uint32_t *tmpl, uint32_t n,
                               const npl_npu_shape *shape, uint32_t *words, uint32_t *n_patched,
                               npl_error *err)
{
    memcpy(words, tmpl, (size_t)n * sizeof *words);
    uint32_t runtime = 0;
    for (uint32_t i = 0; i < g->n_patch; i++) {
        uint64_t v = 0;
        npl_error sub;
        if (g->patch[i].word >= n)
            return npl_error_set(err, NPL_ERR_INVALID_ARG,
                                 "npu: %s: patch of word %u, but %s has %u words", g->name,
                                 g->patch[i].word, g->instr ? g->instr : "the stream", n);
        if (npl_npu_expr_eval(&g->patch[i].value, shape, &v, &sub) != NPL_OK)
            return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: %s: patch of word %u: %s",
                                 g->name, g->patch[i].word, sub.message);
        if (v > UINT32_MAX)
            return npl_error_set(err, NPL_ERR_INVALID_ARG,
                                 "npu: %s: patch of word %u is %llu, beyond 32 bits", g->name,
                                 g->patch[i].word, (unsigned long long)v);
        words[g->patch[i].word] = (uint32_t)v;
        runtime += npl_npu_expr_is_runtime(&g->patch[i].value);
    }
    if (n_patched)
        *n_patched = runtime;
    return NPL_OK;
}

npl_status npl_npu_instr_parse(const uint32_t *words, uint32_t n_words, uint32_t n_args,
                               npl_npu_shape *shape, bool *has_shape,
                               npl_npu_instr_dma dma[NPL_NPU_MAX_DMA], uint32_t *n_dma,
                               npl_error *err)
{
    *has_shape = false;
    *n_dma = 0;
    if (n_words < 2 || words[0] != NPL_NPU_INSTR_MAGIC)
        return npl_error_set(err, NPL_ERR_FORMAT, "instruction stream: bad header");
    uint32_t at = 2;
    for (uint32_t op = 0; op < words[1]; op++) {
        if (at >= n_words)
            return npl_error_set(err, NPL_ERR_FORMAT,
                                 "instruction stream: operation %u of %u runs past %u words",
                                 op, words[1], n_words);
        uint32_t w = words[at], code = w >> 24;
        if (code == NPL_NPU_INSTR_OP_RTP) {
            if ((w & 0xffffffu) != NPL_NPU_SHAPE_WORDS || n_words - at - 1 < NPL_NPU_SHAPE_WORDS)
                return npl_error_set(err, NPL_ERR_FORMAT,
                                     "instruction stream: runtime parameter block of %u words "
                                     "(expected %u) at word %u", w & 0xffffffu,
                                     NPL_NPU_SHAPE_WORDS, at);
            npl_npu_shape_unpack(&words[at + 1], shape);
            *has_shape = true;
            at += 1 + NPL_NPU_SHAPE_WORDS;
        } else if (code == NPL_NPU_INSTR_OP_DMA) {
            if (n_words - at < 3)
                return npl_error_set(err, NPL_ERR_FORMAT,
                                     "instruction stream: transfer at word %u is cut short", at);
            uint32_t arg = w & 0xffffu, dir = (w >> 16) & 0xffu;
            if (arg >= n_args || dir > 1)
                return npl_error_set(err, NPL_ERR_FORMAT,
                                     "instruction stream: transfer at word %u names argument %u "
                                     "(direction %u) of a kernel with %u", at, arg, dir, n_args);
            if (*n_dma == NPL_NPU_MAX_DMA)
                return npl_error_set(err, NPL_ERR_FORMAT,
                                     "instruction stream: more than %d transfers", NPL_NPU_MAX_DMA);
            dma[*n_dma] = (npl_npu_instr_dma){arg, dir == 1, words[at + 1], words[at + 2]};
            (*n_dma)++;
            at += 3;
        } else {
            return npl_error_set(err, NPL_ERR_FORMAT,
                                 "instruction stream: unknown operation 0x%08x at word %u", w, at);
        }
    }
    if (at != n_words)
        return npl_error_set(err, NPL_ERR_FORMAT,
                             "instruction stream: %u words after the last operation",
                             n_words - at);
    return NPL_OK;
}
