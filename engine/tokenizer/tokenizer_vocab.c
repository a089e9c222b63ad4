/* Vocabulary: text <-> id, per-token attributes, special ids and the
 * end-of-generation set, and the build entry point shared by both
 * tokenizer kinds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

uint32_t npl_tok_hash(const void *s, size_t n)
{
    /* 64-bit multiply-mix over 8-byte words; only needs to spread the
     * short strings of a vocabulary well. */
    const unsigned char *p = s;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t tail = 0;
    for (size_t i = 0; i < n; i++)
        tail |= (uint64_t)p[i] << (8 * i);
    h = (h ^ tail) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 32;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 29;
    return (uint32_t)h;
}

int32_t npl_tok_lookup_hashed(const npl_tokenizer *tok, const void *s, size_t n, uint32_t h)
{
    const uint32_t mask = tok->map.mask;
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        uint64_t slot = tok->map.slots[i];
        if (slot == 0)
            return -1;
        if ((uint32_t)(slot >> 32) != h)
            continue;
        int32_t id = (int32_t)(uint32_t)slot - 1;
        if (tok->text[id].len == n && memcmp(tok->text[id].ptr, s, n) == 0)
            return id;
    }
}

int32_t npl_tok_lookup(const npl_tokenizer *tok, const void *s, size_t n)
{
    return npl_tok_lookup_hashed(tok, s, n, npl_tok_hash(s, n));
}

static uint32_t pow2_at_least(size_t n)
{
    uint32_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

static npl_status build_text_map(npl_tokenizer *tok, npl_error *err)
{
    uint32_t cap = pow2_at_least((size_t)tok->n_vocab * 2);
    tok->map.slots = calloc(cap, sizeof *tok->map.slots);
    if (!tok->map.slots)
        return npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for the vocabulary map");
    tok->map.mask = cap - 1;

    for (int32_t id = 0; id < tok->n_vocab; id++) {
        const npl_str t = tok->text[id];
        if (t.len == 0)
            continue; /* never matches anything */
        uint32_t h = npl_tok_hash(t.ptr, t.len);
        uint64_t mine = ((uint64_t)h << 32) | (uint32_t)(id + 1);
        for (uint32_t i = h & tok->map.mask;; i = (i + 1) & tok->map.mask) {
            uint64_t slot = tok->map.slots[i];
            if (slot == 0) {
                tok->map.slots[i] = mine;
                break;
            }
            if ((uint32_t)(slot >> 32) != h)
                continue;
            /* Duplicate text: the later id wins, as in the reference. */
            int32_t other = (int32_t)(uint32_t)slot - 1;
            if (tok->text[other].len == t.len && memcmp(tok->text[other].ptr, t.ptr, t.len) == 0) {
                tok->map.slots[i] = mine;
                break;
            }
        }
    }
    return NPL_OK;
}

static uint8_t attr_of_type(int32_t type)
{
    switch (type) {
    case NPL_TOKEN_NORMAL: return NPL_TATTR_NORMAL;
    case NPL_TOKEN_UNKNOWN: return NPL_TATTR_UNKNOWN;
    case NPL_TOKEN_CONTROL: return NPL_TATTR_CONTROL;
    case NPL_TOKEN_USER_DEFINED: return NPL_TATTR_USER_DEFINED;
    case NPL_TOKEN_UNUSED: return NPL_TATTR_UNUSED;
    case NPL_TOKEN_BYTE: return NPL_TATTR_BYTE;
    default: return 0; /* undefined: decodes to nothing */
    }
}

static bool text_is(const npl_tokenizer *tok, int32_t id, const char *s)
{
    size_t n = strlen(s);
    return tok->text[id].len == n && memcmp(tok->text[id].ptr, s, n) == 0;
}

static bool text_contains(const npl_tokenizer *tok, int32_t id, const char *needle)
{
    const npl_str t = tok->text[id];
    size_t n = strlen(needle);
    if (t.len < n)
        return false;
    return memmem(t.ptr, t.len, needle, n) != NULL;
}

/* Marker texts the reference recognises when the metadata does not name
 * the id; a token found this way is always treated as control. */
static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",
    "<end_of_utterance>", NULL};
static const char *const eom_texts[] = {"<|eom_id|>", NULL};
static const char *const fim_pre_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const fim_suf_texts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const fim_mid_texts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
static const char *const fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
static const char *const fim_sep_texts[] = {"<|file_sep|>", NULL};

/* Texts that end generation whatever the metadata says. */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", "[e~[", NULL};

/* Tokens the reference always renders, whatever their GGUF type. */
static const char *const rendered_texts[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};

/* If *id is unset, takes the lowest id whose text is in the list and makes
 * it control. */
static void detect_by_text(npl_tokenizer *tok, int32_t *id, const char *const *texts)
{
    if (*id >= 0)
        return;
    int32_t best = -1;
    for (; *texts; texts++) {
        int32_t i = npl_tok_lookup(tok, *texts, strlen(*texts));
        if (i >= 0 && (best < 0 || i < best))
            best = i;
    }
    if (best >= 0) {
        *id = best;
        tok->attr[best] |= NPL_TATTR_CONTROL;
    }
}

static int32_t valid_id(const npl_tokenizer *tok, int32_t id)
{
    return id >= 0 && id < tok->n_vocab ? id : -1;
}

static void find_eog_set(npl_tokenizer *tok, const npl_tokenizer_spec *spec)
{
    int32_t fim_pre = valid_id(tok, spec->fim_pre), fim_suf = valid_id(tok, spec->fim_suf);
    int32_t fim_mid = valid_id(tok, spec->fim_mid), fim_pad = valid_id(tok, spec->fim_pad);
    int32_t fim_rep = valid_id(tok, spec->fim_rep), fim_sep = valid_id(tok, spec->fim_sep);

    detect_by_text(tok, &tok->eot, eot_texts);
    detect_by_text(tok, &tok->eom, eom_texts);
    detect_by_text(tok, &fim_pre, fim_pre_texts);
    detect_by_text(tok, &fim_suf, fim_suf_texts);
    detect_by_text(tok, &fim_mid, fim_mid_texts);
    detect_by_text(tok, &fim_pad, fim_pad_texts);
    detect_by_text(tok, &fim_rep, fim_rep_texts);
    detect_by_text(tok, &fim_sep, fim_sep_texts);

    for (int32_t i = 0; i < tok->n_vocab; i++) {
        if ((tok->attr[i] & NPL_TATTR_CONTROL) && text_contains(tok, i, "unused"))
            tok->attr[i] |= NPL_TATTR_UNUSED;
    }

    int32_t fim_eog[3] = {fim_pad, fim_rep, fim_sep};
    for (int k = 0; k < 3; k++)
        if (fim_eog[k] >= 0)
            tok->attr[fim_eog[k]] |= NPL_TATTR_EOG;

    for (const char *const *t = eog_texts; *t; t++) {
        int32_t i = npl_tok_lookup(tok, *t, strlen(*t));
        if (i >= 0)
            tok->attr[i] |= NPL_TATTR_EOG | NPL_TATTR_CONTROL;
    }
    for (const char *const *t = rendered_texts; *t; t++) {
        int32_t i = npl_tok_lookup(tok, *t, strlen(*t));
        if (i >= 0)
            tok->attr[i] = NPL_TATTR_USER_DEFINED | (tok->attr[i] & NPL_TATTR_EOG);
    }

    int32_t named[3] = {tok->eos, tok->eot, tok->eom};
    for (int k = 0; k < 3; k++)
        if (named[k] >= 0)
            tok->attr[named[k]] |= NPL_TATTR_EOG;

    /* Harmony-style vocabularies end turns with <|return|>/<|call|>
     * (or <|calls|>/<|flush|>): there <|end|> only separates messages. */
    int32_t end_id = -1;
    bool has_return = false, has_call = false, has_flush = false;
    int32_t s_id = -1;
    bool has_tool_response = false;
    for (int32_t i = 0; i < tok->n_vocab; i++) {
        if (!(tok->attr[i] & NPL_TATTR_EOG))
            continue;
        if (text_is(tok, i, "<|return|>"))
            has_return = true;
        else if (text_is(tok, i, "<|call|>") || text_is(tok, i, "<|calls|>"))
            has_call = true;
        else if (text_is(tok, i, "<|flush|>"))
            has_flush = true;
        else if (text_is(tok, i, "<|end|>"))
            end_id = i;
        else if (text_is(tok, i, "<|tool_response>"))
            has_tool_response = true;
        else if (text_is(tok, i, "</s>"))
            s_id = i;
    }
    if (end_id >= 0 && ((has_return && has_call) || (has_call && has_flush)))
        tok->attr[end_id] = NPL_TATTR_USER_DEFINED;
    if (has_tool_response && s_id >= 0)
        tok->attr[s_id] = NPL_TATTR_NORMAL;
}

void npl_tokenizer_spec_init(npl_tokenizer_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    spec->bos = spec->eos = spec->eot = spec->eom = spec->unk = -1;
    spec->fim_pre = spec->fim_suf = spec->fim_mid = -1;
    spec->fim_pad = spec->fim_rep = spec->fim_sep = -1;
    spec->sep = -1;
    spec->add_bos = spec->add_eos = spec->add_space_prefix = spec->add_sep = -1;
    spec->lowercase = spec->strip_accents = spec->remove_extra_ws = -1;
}

/* Pre-tokenizer names (tokenizer.ggml.pre) the engine knows, as the
 * reference maps them: the split rules, whether a pre-token that is a
 * vocabulary entry is taken whole, and whether BOS is added by default.
 * Names whose rules differ from these only in detokenization cleanup
 * (which streaming, token by token, never applies) share their entry. */
typedef struct pre_name {
    const char *name;
    npl_pretok_kind kind;
    bool ignore_merges, add_bos;
} pre_name;

static const pre_name pre_names[] = {
    {"llama-bpe", NPL_PRETOK_LLAMA3, true, true},
    {"llama3", NPL_PRETOK_LLAMA3, true, true},
    {"llama-v3", NPL_PRETOK_LLAMA3, true, true},
    {"falcon3", NPL_PRETOK_LLAMA3, true, true},
    {"falcon-h1", NPL_PRETOK_LLAMA3, true, true},
    {"pixtral", NPL_PRETOK_LLAMA3, true, true},
    {"midm-2.0", NPL_PRETOK_LLAMA3, true, true},
    {"lfm2", NPL_PRETOK_LLAMA3, true, true},
    {"jina-v5-nano", NPL_PRETOK_LLAMA3, true, true},
    /* Llama 3's split without its merge and BOS rules (Phi-4's cl100k) */
    {"dbrx", NPL_PRETOK_LLAMA3, false, false},
    {"smaug-bpe", NPL_PRETOK_LLAMA3, false, false},
    {"qwen2", NPL_PRETOK_QWEN2, false, false},
    {"qwen35", NPL_PRETOK_QWEN35, false, false},
    {"deepseek-r1-qwen", NPL_PRETOK_QWEN2, false, false},
    {"kormo", NPL_PRETOK_QWEN2, false, false},
    {"f2llmv2", NPL_PRETOK_QWEN2, false, false},
    {"megrez", NPL_PRETOK_QWEN2, false, false},
    {"stablelm2", NPL_PRETOK_QWEN2, false, false},
    {"hunyuan", NPL_PRETOK_QWEN2, false, false},
    {"solar-open", NPL_PRETOK_QWEN2, false, false},
    /* StarCoder's rules: SmolLM2, Granite 3.x ("refact") */
    {"smollm", NPL_PRETOK_SMOLLM, false, false},
    {"refact", NPL_PRETOK_SMOLLM, false, false},
    {"starcoder", NPL_PRETOK_SMOLLM, false, false},
    {"command-r", NPL_PRETOK_SMOLLM, false, false},
    {"codeshell", NPL_PRETOK_SMOLLM, false, false},
    {"exaone", NPL_PRETOK_SMOLLM, false, false},
    {"minerva-7b", NPL_PRETOK_SMOLLM, false, false},
    /* Mistral Nemo, Small 3.x, Ministral */
    {"tekken", NPL_PRETOK_TEKKEN, true, true},
    /* o200k: Phi-4-mini, Llama 4 */
    {"gpt-4o", NPL_PRETOK_GPT4O, false, false},
    {"llama4", NPL_PRETOK_GPT4O, false, false},
    {"minimax-m2", NPL_PRETOK_GPT4O, false, false},
    /* set by the model "gemma4", which always adds BOS */
    {"gemma4", NPL_PRETOK_GEMMA4, false, true},
};

static const pre_name *find_pre_name(const char *name)
{
    for (size_t i = 0; i < sizeof pre_names / sizeof *pre_names; i++)
        if (!strcmp(name, pre_names[i].name))
            return &pre_names[i];
    return NULL;
}

static int32_t id_or_default(const npl_tokenizer *tok, int32_t given, int32_t fallback)
{
    if (given >= 0 && given < tok->n_vocab)
        return given;
    return valid_id(tok, fallback);
}

/* Each kind's special ids, pre-tokenizer and whether BOS is added when
 * the file does not say (the reference's defaults per kind). */
static npl_status set_kind_defaults(npl_tokenizer *tok, const npl_tokenizer_spec *spec, bool *default_add_bos,
                                    npl_error *err)
{
    *default_add_bos = spec->kind == NPL_TOKENIZER_SPM;
    if (spec->kind == NPL_TOKENIZER_WPM) {
        /* The reference's defaults for "bert": [CLS] 101 first, [SEP] 102
         * last, [UNK] 100 (bert-base numbering). */
        tok->bos = id_or_default(tok, spec->bos, 101);
        tok->unk = id_or_default(tok, spec->unk, 100);
        tok->sep = id_or_default(tok, spec->sep, 102);
        tok->add_sep = spec->add_sep >= 0 ? spec->add_sep != 0 : true;
        /* Uncased BERT: lower-case, and strip accents unless told apart. */
        tok->lowercase = spec->lowercase != 0;
        tok->strip_accents = spec->strip_accents >= 0 ? spec->strip_accents != 0 : tok->lowercase;
        *default_add_bos = true;
        snprintf(tok->pre_name, sizeof tok->pre_name, "%s", "bert");
        npl_wpm_build(tok);
    } else if (spec->kind == NPL_TOKENIZER_UGM) {
        /* The reference's defaults for "t5": </s> 1, <unk> 2, no BOS; EOS
         * added, no leading space unless the file says so. XLM-RoBERTa's
         * files name their own (<s> 0, </s> 2, <unk> 3) and add both. */
        tok->bos = valid_id(tok, spec->bos);
        tok->eos = id_or_default(tok, spec->eos, 1);
        tok->unk = id_or_default(tok, spec->unk, 2);
        tok->sep = valid_id(tok, spec->sep);
        tok->add_sep = spec->add_sep > 0;
        snprintf(tok->pre_name, sizeof tok->pre_name, "%s", "t5");
    } else if (spec->kind == NPL_TOKENIZER_BPE) {
        /* A file without the key is split as Llama 3 (the oldest BPE
         * conversions carry none); a name we do not know is refused: a
         * different split gives different tokens, silently. */
        const char *pre = spec->pre ? spec->pre : "llama-bpe";
        snprintf(tok->pre_name, sizeof tok->pre_name, "%s", pre);
        const pre_name *p = find_pre_name(pre);
        if (!p) {
            npl_error_set(err, NPL_ERR_UNSUPPORTED,
                          "tokenizer: pre-tokenizer '%.60s' is not supported (known: llama-bpe, dbrx, qwen2, "
                          "smollm, refact, tekken, gpt-4o and their aliases)", pre);
            return NPL_ERR_UNSUPPORTED;
        }
        tok->pretok = p->kind;
        tok->ignore_merges = p->ignore_merges;
        *default_add_bos = p->add_bos;
    } else {
        snprintf(tok->pre_name, sizeof tok->pre_name, "%s", spec->pre ? spec->pre : "default");
    }
    return NPL_OK;
}

npl_tokenizer *npl_tokenizer_build(const npl_tokenizer_spec *spec, npl_error *err)
{
    if (spec->kind != NPL_TOKENIZER_BPE && spec->kind != NPL_TOKENIZER_SPM && spec->kind != NPL_TOKENIZER_WPM &&
        spec->kind != NPL_TOKENIZER_UGM) {
        npl_error_set(err, NPL_ERR_UNSUPPORTED, "tokenizer: unsupported kind %d", (int)spec->kind);
        return NULL;
    }
    if (spec->n_tokens <= 0 || !spec->tokens) {
        npl_error_set(err, NPL_ERR_FORMAT, "tokenizer: empty vocabulary");
        return NULL;
    }
    if (spec->n_tokens > NPL_TOKENIZER_MAX_ENTRIES) {
        npl_error_set(err, NPL_ERR_FORMAT, "tokenizer: %d tokens is too many", spec->n_tokens);
        return NULL;
    }

    npl_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) {
        npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory");
        return NULL;
    }
    tok->kind = spec->kind;
    tok->n_vocab = spec->n_tokens;
    size_t n = (size_t)spec->n_tokens;
    tok->text = malloc(n * sizeof *tok->text);
    tok->attr = malloc(n * sizeof *tok->attr);
    if (!tok->text || !tok->attr)
        goto nomem;
    memcpy(tok->text, spec->tokens, n * sizeof *tok->text);
    for (size_t i = 0; i < n; i++)
        tok->attr[i] = spec->types ? attr_of_type(spec->types[i]) : NPL_TATTR_NORMAL;
    if (spec->kind == NPL_TOKENIZER_SPM || spec->kind == NPL_TOKENIZER_UGM) {
        tok->scores = malloc(n * sizeof *tok->scores);
        if (!tok->scores)
            goto nomem;
        for (size_t i = 0; i < n; i++)
            tok->scores[i] = spec->scores ? spec->scores[i] : 0.0f;
    }

    if (build_text_map(tok, err) != NPL_OK)
        goto fail;

    /* Defaults follow the reference: SentencePiece vocabularies number
     * <unk>, <s>, </s> as 0, 1, 2 and add BOS and a leading space. */
    bool spm = spec->kind == NPL_TOKENIZER_SPM;
    tok->bos = id_or_default(tok, spec->bos, spm ? 1 : -1);
    tok->eos = id_or_default(tok, spec->eos, spm ? 2 : -1);
    tok->unk = id_or_default(tok, spec->unk, spm ? 0 : -1);
    tok->eot = valid_id(tok, spec->eot);
    tok->eom = valid_id(tok, spec->eom);
    tok->sep = -1;

    bool default_add_bos;
    if (set_kind_defaults(tok, spec, &default_add_bos, err) != NPL_OK)
        goto fail;
    tok->add_bos = spec->add_bos >= 0 ? spec->add_bos != 0 : default_add_bos;
    if (tok->pretok == NPL_PRETOK_GEMMA4) /* the reference overrides a false add_bos_token */
        tok->add_bos = true;
    tok->add_eos = spec->add_eos >= 0 ? spec->add_eos != 0 : spec->kind == NPL_TOKENIZER_UGM;
    tok->add_space_prefix = spec->add_space_prefix >= 0 ? spec->add_space_prefix != 0 : spm;

    find_eog_set(tok, spec);

    if (spm) {
        if (npl_spm_build(tok, err) != NPL_OK)
            goto fail;
    } else if (spec->kind == NPL_TOKENIZER_BPE) {
        if (npl_bpe_build(tok, spec, err) != NPL_OK)
            goto fail;
    } else if (spec->kind == NPL_TOKENIZER_UGM) {
        if (npl_ugm_build(tok, spec, err) != NPL_OK)
            goto fail;
    }
    if (npl_special_trie_build(tok, err) != NPL_OK)
        goto fail;
    return tok;

nomem:
    npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for %d tokens", spec->n_tokens);
fail:
    npl_tokenizer_free(tok);
    return NULL;
}

void npl_tokenizer_free(npl_tokenizer *tok)
{
    if (!tok)
        return;
    npl_bpe_free(tok);
    npl_ugm_free(tok);
    npl_special_trie_free(&tok->special);
    free(tok->map.slots);
    free(tok->scores);
    free(tok->attr);
    free(tok->text);
    free(tok);
}
