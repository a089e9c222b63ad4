/* npl_tokenizer_from_gguf: reads the tokenizer.ggml.* metadata into a
 * spec and builds from it. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

static bool is_integer_type(npl_gguf_type t)
{
    return t == NPL_GGUF_UINT8 || t == NPL_GGUF_INT8 || t == NPL_GGUF_UINT16 || t == NPL_GGUF_INT16 ||
           t == NPL_GGUF_UINT32 || t == NPL_GGUF_INT32 || t == NPL_GGUF_UINT64 || t == NPL_GGUF_INT64;
}

/* Numeric array under key with at least n elements of an accepted type;
 * NULL when absent, error when present but unusable. */
static const npl_gguf_value *numeric_array(const npl_gguf *g, const char *key, uint64_t n, bool want_float,
                                           npl_status *st, npl_error *err)
{
    const npl_gguf_value *v = npl_gguf_find(g, key);
    if (!v)
        return NULL;
    bool ok = v->type == NPL_GGUF_ARRAY &&
              (want_float ? (v->arr.elem_type == NPL_GGUF_FLOAT32 || v->arr.elem_type == NPL_GGUF_FLOAT64)
                          : is_integer_type(v->arr.elem_type));
    if (!ok) {
        *st = npl_error_set(err, NPL_ERR_FORMAT, "%s: '%s' is not a %s array", npl_gguf_path(g), key,
                            want_float ? "float" : "integer");
        return NULL;
    }
    if (v->arr.count < n) {
        *st = npl_error_set(err, NPL_ERR_FORMAT, "%s: '%s' has %llu entries for %llu tokens", npl_gguf_path(g),
                            key, (unsigned long long)v->arr.count, (unsigned long long)n);
        return NULL;
    }
    return v;
}

static int32_t read_id(const npl_gguf *g, const char *key)
{
    uint32_t id;
    if (!npl_gguf_get_u32(g, key, &id) || id > INT32_MAX)
        return -1;
    return (int32_t)id; /* range against the vocabulary is checked at build */
}

static int read_flag(const npl_gguf *g, const char *key)
{
    bool b;
    return npl_gguf_get_bool(g, key, &b) ? (int)b : -1;
}

/* The special tokens' ids and the tokenizer's flags. */
static void read_specials(const npl_gguf *g, npl_tokenizer_spec *spec)
{
    spec->bos = read_id(g, "tokenizer.ggml.bos_token_id");
    spec->eos = read_id(g, "tokenizer.ggml.eos_token_id");
    spec->eot = read_id(g, "tokenizer.ggml.eot_token_id");
    spec->eom = read_id(g, "tokenizer.ggml.eom_token_id");
    spec->unk = read_id(g, "tokenizer.ggml.unknown_token_id");
    spec->fim_pre = read_id(g, "tokenizer.ggml.fim_pre_token_id");
    spec->fim_suf = read_id(g, "tokenizer.ggml.fim_suf_token_id");
    spec->fim_mid = read_id(g, "tokenizer.ggml.fim_mid_token_id");
    spec->fim_pad = read_id(g, "tokenizer.ggml.fim_pad_token_id");
    spec->fim_rep = read_id(g, "tokenizer.ggml.fim_rep_token_id");
    spec->fim_sep = read_id(g, "tokenizer.ggml.fim_sep_token_id");
    spec->add_bos = read_flag(g, "tokenizer.ggml.add_bos_token");
    spec->add_eos = read_flag(g, "tokenizer.ggml.add_eos_token");
    spec->add_space_prefix = read_flag(g, "tokenizer.ggml.add_space_prefix");
    spec->sep = read_id(g, "tokenizer.ggml.seperator_token_id"); /* sic: the converter's spelling */
    spec->add_sep = read_flag(g, "tokenizer.ggml.add_sep_token");
    spec->lowercase = read_flag(g, "tokenizer.ggml.normalizer.lowercase");
    spec->strip_accents = read_flag(g, "tokenizer.ggml.normalizer.strip_accents");
    spec->remove_extra_ws = read_flag(g, "tokenizer.ggml.remove_extra_whitespaces");
}

/* A unigram vocabulary's normalization rules: bytes, or absent. */
static npl_status read_charsmap(const npl_gguf *g, npl_tokenizer_spec *spec, npl_error *err)
{
    const char *key = "tokenizer.ggml.precompiled_charsmap";
    const npl_gguf_value *v = npl_gguf_find(g, key);
    if (!v)
        return NPL_OK;
    if (v->type != NPL_GGUF_ARRAY || (v->arr.elem_type != NPL_GGUF_UINT8 && v->arr.elem_type != NPL_GGUF_INT8))
        return npl_error_set(err, NPL_ERR_FORMAT, "%s: '%s' is not a byte array", npl_gguf_path(g), key);
    spec->charsmap = v->arr.data;
    spec->charsmap_len = (size_t)v->arr.count;
    return NPL_OK;
}

/* tokenizer.ggml.model's name -> the kind of tokenizer. */
static npl_status kind_of_model(const npl_gguf *g, npl_str model, npl_tokenizer_kind *kind, npl_error *err)
{
    if (npl_str_eq(model, "gpt2")) {
        *kind = NPL_TOKENIZER_BPE;
    } else if (npl_str_eq(model, "llama")) {
        *kind = NPL_TOKENIZER_SPM;
    } else if (npl_str_eq(model, "bert")) {
        *kind = NPL_TOKENIZER_WPM;
    } else if (npl_str_eq(model, "t5")) {
        *kind = NPL_TOKENIZER_UGM;
    } else if (npl_str_eq(model, "gemma4")) {
        *kind = NPL_TOKENIZER_BPE; /* its own split whatever tokenizer.ggml.pre says, as the reference */
    } else {
        npl_error_set(err, NPL_ERR_UNSUPPORTED,
                      "%s: tokenizer model '%.*s' is not supported (only gpt2, llama, bert, t5, gemma4)",
                      npl_gguf_path(g), (int)(model.len > 64 ? 64 : model.len), model.ptr);
        return NPL_ERR_UNSUPPORTED;
    }
    return NPL_OK;
}

npl_tokenizer *npl_tokenizer_from_gguf(const npl_gguf *g, npl_error *err)
{
    npl_tokenizer_spec spec;
    npl_tokenizer_spec_init(&spec);
    npl_tokenizer *tok = NULL;
    npl_str *tokens = NULL, *merges = NULL;
    int32_t *types = NULL;
    float *scores = NULL;
    char *pre = NULL;
    npl_status st = NPL_OK;

    npl_str model;
    if (npl_gguf_require_str(g, "tokenizer.ggml.model", &model, err) != NPL_OK)
        return NULL;
    if (kind_of_model(g, model, &spec.kind, err) != NPL_OK)
        return NULL;

    const npl_gguf_value *tv = npl_gguf_require_array(g, "tokenizer.ggml.tokens", NPL_GGUF_STRING, err);
    if (!tv)
        return NULL;
    if (tv->arr.count == 0 || tv->arr.count > INT32_MAX) {
        npl_error_set(err, NPL_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries", npl_gguf_path(g),
                      (unsigned long long)tv->arr.count);
        return NULL;
    }
    size_t n = (size_t)tv->arr.count;
    spec.n_tokens = (int32_t)n;
    tokens = malloc(n * sizeof *tokens);
    if (!tokens)
        goto nomem;
    for (size_t i = 0; i < n; i++)
        tokens[i] = tv->arr.items[i].str;
    spec.tokens = tokens;

    const npl_gguf_value *types_v = numeric_array(g, "tokenizer.ggml.token_type", n, false, &st, err);
    if (st != NPL_OK)
        goto fail;
    if (types_v) {
        types = malloc(n * sizeof *types);
        if (!types)
            goto nomem;
        for (size_t i = 0; i < n; i++) {
            int64_t t = npl_gguf_array_i64(types_v, i);
            types[i] = t < 0 || t > 6 ? NPL_TOKEN_UNDEFINED : (int32_t)t;
        }
        spec.types = types;
    }

    const npl_gguf_value *scores_v = numeric_array(g, "tokenizer.ggml.scores", n, true, &st, err);
    if (st != NPL_OK)
        goto fail;
    if (scores_v) {
        scores = malloc(n * sizeof *scores);
        if (!scores)
            goto nomem;
        for (size_t i = 0; i < n; i++)
            scores[i] = (float)npl_gguf_array_f64(scores_v, i);
        spec.scores = scores;
    }

    if (spec.kind == NPL_TOKENIZER_BPE) {
        const npl_gguf_value *mv = npl_gguf_require_array(g, "tokenizer.ggml.merges", NPL_GGUF_STRING, err);
        if (!mv)
            goto fail;
        size_t nm = (size_t)mv->arr.count;
        merges = malloc((nm ? nm : 1) * sizeof *merges);
        if (!merges)
            goto nomem;
        for (size_t i = 0; i < nm; i++)
            merges[i] = mv->arr.items[i].str;
        spec.merges = merges;
        spec.n_merges = nm;
    }

    npl_str pre_s;
    if (npl_str_eq(model, "gemma4")) {
        pre_s = (npl_str){"gemma4", 6};
        pre = npl_str_dup(pre_s);
        if (!pre)
            goto nomem;
        spec.pre = pre;
    } else if (npl_gguf_get_str(g, "tokenizer.ggml.pre", &pre_s)) {
        pre = npl_str_dup(pre_s);
        if (!pre)
            goto nomem;
        spec.pre = pre;
    }

    read_specials(g, &spec);
    if (spec.kind == NPL_TOKENIZER_UGM && read_charsmap(g, &spec, err) != NPL_OK)
        goto fail;

    tok = npl_tokenizer_build(&spec, err);
    goto done;

nomem:
    npl_error_set(err, NPL_ERR_NOMEM, "%s: out of memory reading the tokenizer", npl_gguf_path(g));
fail:
    tok = NULL;
done:
    free(pre);
    free(scores);
    free(types);
    free(merges);
    free(tokens);
    return tok;
}
