/* Metadata readers and tensor binders for the architecture loaders: every
 * refusal names the file, the key or tensor, and what was expected. */
#include "model_bind.h"

#include <stdio.h>
#include <string.h>

#include "ggml_types.h"
#include "tokenizer.h"

#define KEY_MAX 128

static const char *full_key(const npl_binder *b, const char *key, char *buf)
{
    snprintf(buf, KEY_MAX, "%s.%s", b->arch, key);
    return buf;
}

npl_status npl_bind_u32(const npl_binder *b, const char *key, bool required, uint32_t def, uint32_t lo,
                        uint32_t hi, uint32_t *out)
{
    char k[KEY_MAX];
    full_key(b, key, k);
    bool found = npl_gguf_find(b->m->gguf, k) != NULL;
    if (!found) {
        if (required)
            return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: missing required key '%s'", b->path, k);
        *out = def;
    } else if (!npl_gguf_get_u32(b->m->gguf, k, out)) {
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: metadata '%s' is not an unsigned 32-bit integer",
                             b->path, k);
    }
    /* A default derived from other keys can be out of range too. */
    if (*out < lo || *out > hi)
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: metadata '%s' = %u%s is out of range [%u, %u]", b->path,
                             k, *out, found ? "" : " (absent: the default)", lo, hi);
    return NPL_OK;
}

npl_status npl_bind_f32(const npl_binder *b, const char *key, bool required, float def, float *out)
{
    char k[KEY_MAX];
    full_key(b, key, k);
    if (!npl_gguf_find(b->m->gguf, k)) {
        if (required)
            return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: missing required key '%s'", b->path, k);
        *out = def;
        return NPL_OK;
    }
    if (!npl_gguf_get_f32(b->m->gguf, k, out))
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: metadata '%s' is not a number", b->path, k);
    return NPL_OK;
}

npl_status npl_bind_str(const npl_binder *b, const char *key, npl_str *out, bool *found)
{
    char k[KEY_MAX];
    full_key(b, key, k);
    *found = npl_gguf_find(b->m->gguf, k) != NULL;
    if (*found && !npl_gguf_get_str(b->m->gguf, k, out))
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: metadata '%s' is not a string", b->path, k);
    return NPL_OK;
}

static const npl_gguf_tensor *find_tensor(const npl_binder *b, const char *name)
{
    const npl_gguf_tensor *t = npl_gguf_find_tensor(b->m->gguf, name);
    if (!t)
        npl_error_set(b->err, NPL_ERR_FORMAT, "%s: missing tensor '%s'", b->path, name);
    return t;
}

static bool shape_is(const npl_gguf_tensor *t, uint64_t ne0, uint64_t ne1)
{
    return t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == 1 && t->ne[3] == 1;
}

static npl_status shape_error(const npl_binder *b, const npl_gguf_tensor *t, const char *name, uint64_t ne0,
                              uint64_t ne1, const char *meaning)
{
    char got[96];
    int n = snprintf(got, sizeof got, "[");
    for (uint32_t d = 0; d < t->n_dims && n > 0 && (size_t)n < sizeof got; d++)
        n += snprintf(got + n, sizeof got - (size_t)n, d ? ", %llu" : "%llu", (unsigned long long)t->ne[d]);
    if (n > 0 && (size_t)n < sizeof got)
        snprintf(got + n, sizeof got - (size_t)n, "]");
    char want[64];
    if (ne1 == 1)
        snprintf(want, sizeof want, "[%llu]", (unsigned long long)ne0);
    else
        snprintf(want, sizeof want, "[%llu, %llu]", (unsigned long long)ne0, (unsigned long long)ne1);
    return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: tensor '%s' has shape %s, expected %s (%s)", b->path, name,
                         got, want, meaning);
}

static const char *type_name(uint32_t type)
{
    const npl_type_traits *tr = npl_type_traits_get(type);
    return tr ? tr->name : "unknown";
}

npl_status npl_bind_matrix(const npl_binder *b, const char *name, uint64_t ne0, uint64_t ne1,
                           const char *meaning, npl_matrix *out)
{
    const npl_gguf_tensor *t = find_tensor(b, name);
    if (!t)
        return NPL_ERR_FORMAT;
    if (!shape_is(t, ne0, ne1))
        return shape_error(b, t, name, ne0, ne1, meaning);
    if (!npl_matmul_type_supported(t->type))
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                             "%s: tensor '%s' has type %s, which the CPU kernels do not support", b->path, name,
                             type_name(t->type));
    if (!npl_matrix_init(out, t->type, t->data, (int64_t)ne0, (int64_t)ne1))
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: tensor '%s' cannot be read as a matrix (misaligned data or rows not a whole number of blocks)",
                             b->path, name);
    return NPL_OK;
}

npl_status npl_bind_vector(const npl_binder *b, const char *name, uint64_t n, const char *meaning,
                           const float **out)
{
    const npl_gguf_tensor *t = find_tensor(b, name);
    if (!t)
        return NPL_ERR_FORMAT;
    if (!shape_is(t, n, 1))
        return shape_error(b, t, name, n, 1, meaning);
    if (t->type != NPL_TYPE_F32)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, expected f32", b->path,
                             name, type_name(t->type));
    if ((uintptr_t)t->data % sizeof(float) != 0)
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: tensor '%s' data is not 4-byte aligned", b->path, name);
    *out = t->data;
    return NPL_OK;
}

npl_status npl_bind_token_embd(const npl_binder *b)
{
    npl_model *m = b->m;
    npl_hparams *hp = &m->hp;
    npl_status st;

    /* The vocabulary size is the embedding's row count; the tokenizer
     * must agree or sampled ids would have no text. */
    const npl_gguf_tensor *te = find_tensor(b, "token_embd.weight");
    if (!te)
        return NPL_ERR_FORMAT;
    if (te->ne[1] < 1 || te->ne[1] > NPL_MAX_VOCAB)
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: token_embd.weight has %llu rows, out of range", b->path,
                             (unsigned long long)te->ne[1]);
    hp->n_vocab = (uint32_t)te->ne[1];
    int32_t tok_vocab = npl_tokenizer_n_vocab(m->tok);
    if (tok_vocab < (int32_t)hp->n_vocab || (int64_t)tok_vocab > (int64_t)hp->n_vocab + b->extra_tokens)
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: the tokenizer has %d tokens but token_embd.weight has %u rows", b->path, tok_vocab,
                             hp->n_vocab);
    uint32_t meta_vocab;
    if ((st = npl_bind_u32(b, "vocab_size", false, hp->n_vocab, 0, UINT32_MAX, &meta_vocab)))
        return st;
    if (meta_vocab != hp->n_vocab)
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: %s.vocab_size = %u but token_embd.weight has %u rows",
                             b->path, b->arch, meta_vocab, hp->n_vocab);

    return npl_bind_matrix(b, "token_embd.weight", hp->n_embd, hp->n_vocab, "n_embd, n_vocab", &m->tok_embd);
}

npl_status npl_bind_embeddings_and_output(const npl_binder *b)
{
    npl_model *m = b->m;
    npl_hparams *hp = &m->hp;
    npl_status st;
    if ((st = npl_bind_token_embd(b)) ||
        (st = npl_bind_vector(b, b->output_norm_name ? b->output_norm_name : "output_norm.weight", hp->n_embd,
                              "n_embd", &m->output_norm)))
        return st;
    if (npl_gguf_find_tensor(m->gguf, "output.weight"))
        return npl_bind_matrix(b, "output.weight", hp->n_embd, hp->n_vocab, "n_embd, n_vocab", &m->output);
    m->output = m->tok_embd; /* tied embeddings */
    return NPL_OK;
}
