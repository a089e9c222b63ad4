/* Tokenizer unit tests (no oracle). `test-tokenizer CASE [LLAMA3.gguf
 * GEMMA3.gguf]` runs one case; the toy cases build small vocabularies from
 * plain arrays, the vocab_* cases use the real Llama 3 / Gemma 3
 * vocabularies of the generated fixtures. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf.h"
#include "npl_test.h"
#include "tokenizer.h"
#include "tokenizer_internal.h"
#include "unicode_utf8.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static npl_str S(const char *s)
{
    return (npl_str){s, strlen(s)};
}

/* ---------------------------------------------------------------- toy vocabularies */

typedef struct toy {
    npl_str tokens[600];
    int32_t types[600];
    float scores[600];
    char store[600][16];
    int32_t n;
    npl_str merges[64];
    size_t n_merges;
} toy;

static int32_t toy_add(toy *t, const char *text, int32_t type, float score)
{
    int32_t id = t->n++;
    size_t len = strlen(text);
    memcpy(t->store[id], text, len + 1);
    t->tokens[id] = (npl_str){t->store[id], len};
    t->types[id] = type;
    t->scores[id] = score;
    return id;
}

/* GPT-2 byte alphabet, as UTF-8, for byte b. */
static void gpt2_char(int b, char out[4])
{
    int extra = 0;
    for (int i = 0; i < b; i++) {
        bool printable = (i >= 0x21 && i <= 0x7E) || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE;
        extra += !printable;
    }
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    unsigned char buf[4];
    size_t n = npl_utf8_encode(printable ? (uint32_t)b : 256u + (uint32_t)extra, buf);
    memcpy(out, buf, n);
    out[n] = 0;
}

/* 256 byte tokens (id = byte) plus the given merge products. */
static void toy_bpe(toy *t, const char *const *merges)
{
    memset(t, 0, sizeof *t);
    for (int b = 0; b < 256; b++) {
        char c[4];
        gpt2_char(b, c);
        toy_add(t, c, NPL_TOKEN_NORMAL, 0);
    }
    for (; *merges; merges++) {
        t->merges[t->n_merges++] = S(*merges);
        char joined[16];
        size_t k = 0;
        for (const char *p = *merges; *p; p++)
            if (*p != ' ')
                joined[k++] = *p;
        joined[k] = 0;
        toy_add(t, joined, NPL_TOKEN_NORMAL, 0);
    }
}

static npl_tokenizer *toy_build_bpe_err(const toy *t, const char *pre, npl_error *err)
{
    npl_tokenizer_spec spec;
    npl_tokenizer_spec_init(&spec);
    spec.kind = NPL_TOKENIZER_BPE;
    spec.pre = pre;
    spec.n_tokens = t->n;
    spec.tokens = t->tokens;
    spec.types = t->types;
    spec.merges = t->merges;
    spec.n_merges = t->n_merges;
    return npl_tokenizer_build(&spec, err);
}

static npl_tokenizer *toy_build_bpe(const toy *t, const char *pre)
{
    npl_error err = {0};
    npl_tokenizer *tok = toy_build_bpe_err(t, pre, &err);
    if (!tok)
        fprintf(stderr, "build failed: %s\n", err.message);
    return tok;
}

/* Ids of text (flags) as a space separated string, for easy comparison. */
static const char *ids_of(const npl_tokenizer *tok, const char *text, size_t len, unsigned flags)
{
    static char out[4096];
    npl_tokens t = {0};
    npl_error err = {0};
    out[0] = 0;
    if (npl_tokenize(tok, text, len, flags, &t, &err) != NPL_OK) {
        snprintf(out, sizeof out, "ERROR %s", err.message);
        return out;
    }
    size_t w = 0;
    for (size_t i = 0; i < t.n && w + 16 < sizeof out; i++)
        w += (size_t)snprintf(out + w, sizeof out - w, i ? " %d" : "%d", t.ids[i]);
    npl_tokens_free(&t);
    return out;
}

static const char *ids(const npl_tokenizer *tok, const char *text, unsigned flags)
{
    return ids_of(tok, text, strlen(text), flags);
}

static const char *fmt(const char *f, ...)
{
    static char out[4096];
    va_list ap;
    va_start(ap, f);
    vsnprintf(out, sizeof out, f, ap);
    va_end(ap);
    return out;
}

#define CHECK_IDS(got, want)                                                                          \
    do {                                                                                              \
        char g_[4096];                                                                                \
        snprintf(g_, sizeof g_, "%s", (got));                                                         \
        const char *w_ = (want);                                                                      \
        CHECKF(strcmp(g_, w_) == 0, "  ids [%s], expected [%s]", g_, w_);                            \
    } while (0)

static int32_t find(const npl_tokenizer *tok, const char *text)
{
    return npl_tokenizer_find(tok, text);
}

static void case_bpe_merges(void)
{
    static const char *const merges[] = {"h e", "l l", "he ll", "hell o", "a a", "\xC4\xA0 w", "o r",
                                         "\xC4\xA0w or", "l d", "\xC4\xA0wor ld", "b c", "a b", NULL};
    toy t;
    toy_bpe(&t, merges);
    int32_t abc = toy_add(&t, "abc", NPL_TOKEN_NORMAL, 0); /* no merge produces it */
    npl_tokenizer *tok = toy_build_bpe(&t, "qwen2");
    CHECK(tok);
    if (!tok)
        return;
    CHECK(npl_tokenizer_kind_of(tok) == NPL_TOKENIZER_BPE);
    CHECK(!strcmp(npl_tokenizer_kind_name(tok), "bpe"));
    CHECK(!strcmp(npl_tokenizer_pre_name(tok), "qwen2"));
    CHECK_IDS(ids(tok, "hello", 0), fmt("%d", find(tok, "hello")));
    CHECK_IDS(ids(tok, "hel", 0), fmt("%d %d", find(tok, "he"), 'l'));
    /* equal ranks: leftmost first */
    CHECK_IDS(ids(tok, "aaa", 0), fmt("%d %d", find(tok, "aa"), 'a'));
    CHECK_IDS(ids(tok, "aaaa", 0), fmt("%d %d", find(tok, "aa"), find(tok, "aa")));
    CHECK_IDS(ids(tok, "hello world", 0), fmt("%d %d", find(tok, "hello"), find(tok, "\xC4\xA0world")));
    /* lower rank first: "b c" (rank 10) before "a b" (rank 11) */
    CHECK_IDS(ids(tok, "abc", 0), fmt("%d %d", 'a', find(tok, "bc")));
    /* digits one by one with the Qwen2 rules */
    CHECK_IDS(ids(tok, "123", 0), fmt("%d %d %d", '1', '2', '3'));
    npl_tokenizer_free(tok);

    /* Llama 3 rules: a pre-token that is a vocabulary entry is one token
     * even when no merge would produce it. */
    tok = toy_build_bpe(&t, "llama-bpe");
    CHECK(tok);
    if (!tok)
        return;
    CHECK_IDS(ids(tok, "abc", 0), fmt("%d", abc));
    CHECK_IDS(ids(tok, "123", 0), fmt("%d %d %d", '1', '2', '3'));
    npl_tokenizer_free(tok);

    /* An unknown pre-tokenizer is refused, with its name. */
    npl_error e;
    npl_error_clear(&e);
    CHECK(toy_build_bpe_err(&t, "some-future-model", &e) == NULL);
    CHECK(e.code == NPL_ERR_UNSUPPORTED);
    CHECK(strstr(e.message, "pre-tokenizer 'some-future-model' is not supported") != NULL);
}

/* SentencePiece toy: <unk> <s> </s>, 256 byte tokens, a few pieces. */
static npl_tokenizer *toy_spm(toy *t, int add_space_prefix)
{
    memset(t, 0, sizeof *t);
    toy_add(t, "<unk>", NPL_TOKEN_UNKNOWN, 0);
    toy_add(t, "<s>", NPL_TOKEN_CONTROL, 0);
    toy_add(t, "</s>", NPL_TOKEN_CONTROL, 0);
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        toy_add(t, name, NPL_TOKEN_BYTE, 0);
    }
    toy_add(t, "\xE2\x96\x81", NPL_TOKEN_NORMAL, -5);
    toy_add(t, "a", NPL_TOKEN_NORMAL, -6);
    toy_add(t, "b", NPL_TOKEN_NORMAL, -7);
    toy_add(t, "c", NPL_TOKEN_NORMAL, -8);
    toy_add(t, "\xE2\x96\x81" "a", NPL_TOKEN_NORMAL, -1);
    toy_add(t, "ab", NPL_TOKEN_NORMAL, -2);
    toy_add(t, "\xE2\x96\x81" "ab", NPL_TOKEN_NORMAL, -3);
    toy_add(t, "bc", NPL_TOKEN_NORMAL, -1.5f);
    toy_add(t, "<u>", NPL_TOKEN_USER_DEFINED, 0);
    toy_add(t, "<end_of_turn>", NPL_TOKEN_USER_DEFINED, 0); /* made control: an EOG text */

    npl_tokenizer_spec spec;
    npl_tokenizer_spec_init(&spec);
    spec.kind = NPL_TOKENIZER_SPM;
    spec.n_tokens = t->n;
    spec.tokens = t->tokens;
    spec.types = t->types;
    spec.scores = t->scores;
    spec.add_space_prefix = add_space_prefix;
    npl_error err = {0};
    npl_tokenizer *tok = npl_tokenizer_build(&spec, &err);
    if (!tok)
        fprintf(stderr, "build failed: %s\n", err.message);
    return tok;
}

static void case_spm_merges(void)
{
    /* higher scores merge first; 0.0 and -0.0 tie (left first) */
    CHECK(npl_score_priority(1.0f) < npl_score_priority(0.0f));
    CHECK(npl_score_priority(0.0f) == npl_score_priority(-0.0f));
    CHECK(npl_score_priority(-0.0f) < npl_score_priority(-1.0f));
    CHECK(npl_score_priority(-1.0f) < npl_score_priority(-1.5f));
    CHECK(npl_score_priority(-1.5f) < npl_score_priority(-1.0e9f));
    CHECK(npl_score_priority(1.0e9f) < npl_score_priority(0.5f));
    CHECK(npl_merge_cand_left(npl_merge_cand_make(7, 12345, 12346, 2)) == 12345);
    CHECK(npl_merge_cand_make(1, 900, 901, 2).order < npl_merge_cand_make(2, 1, 2, 2).order);
    CHECK(npl_merge_cand_make(2, 1, 2, 2).order < npl_merge_cand_make(2, 3, 4, 2).order);

    toy t;
    npl_tokenizer *tok = toy_spm(&t, -1); /* SentencePiece default: add a space */
    CHECK(tok);
    if (!tok)
        return;
    int32_t sp = find(tok, "\xE2\x96\x81"), sp_ab = find(tok, "\xE2\x96\x81" "ab");
    CHECK(npl_tokenizer_bos(tok) == 1 && npl_tokenizer_eos(tok) == 2 && npl_tokenizer_adds_bos(tok));
    /* "▁a" (score -1) merges before "ab" (-2), then "▁a"+"b" */
    CHECK_IDS(ids(tok, "ab", 0), fmt("%d", sp_ab));
    /* "bc" (-1.5) beats "▁a"+"b"... no: "▁a" (-1) first, then bc (-1.5) */
    CHECK_IDS(ids(tok, "abc", 0), fmt("%d %d", find(tok, "\xE2\x96\x81" "a"), find(tok, "bc")));
    /* byte fallback for characters outside the vocabulary */
    CHECK_IDS(ids(tok, "\xC3\xBC", 0), fmt("%d %d %d", sp, 3 + 0xC3, 3 + 0xBC));
    /* BOS and the empty string */
    CHECK_IDS(ids(tok, "", 0), "");
    CHECK_IDS(ids(tok, "", NPL_TOKENIZE_ADD_BOS), "1");
    CHECK_IDS(ids(tok, "ab", NPL_TOKENIZE_ADD_BOS), fmt("1 %d", sp_ab));
    /* a raw span after a special token gets the leading space too */
    CHECK_IDS(ids(tok, "<s>ab", NPL_TOKENIZE_PARSE_SPECIAL), fmt("1 %d", sp_ab));
    CHECK_IDS(ids(tok, "ab<u>ab", 0), fmt("%d %d %d", sp_ab, find(tok, "<u>"), sp_ab));
    /* EOG marker texts are control whatever the GGUF type says */
    int32_t eot = find(tok, "<end_of_turn>");
    CHECK(npl_tokenizer_is_eog(tok, eot));
    CHECK(npl_tokenizer_is_eog(tok, 2));
    CHECK(!npl_tokenizer_is_eog(tok, 1));
    CHECK(npl_tokenizer_token_type(tok, eot) == NPL_TOKEN_CONTROL);
    CHECK(npl_tokenizer_token_type(tok, find(tok, "<u>")) == NPL_TOKEN_USER_DEFINED);
    CHECK(npl_tokenizer_token_type(tok, 3) == NPL_TOKEN_BYTE);
    CHECK(npl_tokenizer_token_type(tok, -1) == NPL_TOKEN_UNDEFINED);
    CHECK_IDS(ids(tok, "<end_of_turn>", NPL_TOKENIZE_PARSE_SPECIAL), fmt("%d", eot));
    CHECK(strstr(ids(tok, "<end_of_turn>", 0), fmt("%d", eot)) == NULL);
    npl_tokenizer_free(tok);

    tok = toy_spm(&t, 0);
    CHECK(tok);
    if (!tok)
        return;
    CHECK_IDS(ids(tok, "ab", 0), fmt("%d", find(tok, "ab")));
    CHECK_IDS(ids(tok, "a b", 0), fmt("%d %d %d", find(tok, "a"), sp, find(tok, "b")));
    npl_tokenizer_free(tok);
}

/* SentencePiece unigram: the toy's ids are 0 <s>, 1 <pad>, 2 </s>, 3 <unk>,
 * 4 "▁", 5 "a", 6 "b", 7 "▁a", 8 "ab", 9 "▁ab", 10 "bc". */
static npl_tokenizer *toy_ugm(toy *t, int remove_extra_ws, const uint8_t *charsmap, size_t cm_len, npl_error *err)
{
    memset(t, 0, sizeof *t);
    toy_add(t, "<s>", NPL_TOKEN_CONTROL, 0);
    toy_add(t, "<pad>", NPL_TOKEN_CONTROL, 0);
    toy_add(t, "</s>", NPL_TOKEN_CONTROL, 0);
    toy_add(t, "<unk>", NPL_TOKEN_UNKNOWN, 0);
    toy_add(t, "\xE2\x96\x81", NPL_TOKEN_NORMAL, -5);
    toy_add(t, "a", NPL_TOKEN_NORMAL, -6);
    toy_add(t, "b", NPL_TOKEN_NORMAL, -7);
    toy_add(t, "\xE2\x96\x81" "a", NPL_TOKEN_NORMAL, -1);
    toy_add(t, "ab", NPL_TOKEN_NORMAL, -2);
    toy_add(t, "\xE2\x96\x81" "ab", NPL_TOKEN_NORMAL, -3.5f);
    toy_add(t, "bc", NPL_TOKEN_NORMAL, -1.5f);
    npl_tokenizer_spec spec;
    npl_tokenizer_spec_init(&spec);
    spec.kind = NPL_TOKENIZER_UGM;
    spec.n_tokens = t->n;
    spec.tokens = t->tokens;
    spec.types = t->types;
    spec.scores = t->scores;
    spec.bos = 0;
    spec.eos = 2;
    spec.unk = 3;
    spec.add_bos = 1;
    spec.add_space_prefix = 1;
    spec.remove_extra_ws = remove_extra_ws;
    spec.charsmap = charsmap;
    spec.charsmap_len = cm_len;
    return npl_tokenizer_build(&spec, err);
}

static void case_ugm(void)
{
    toy t;
    npl_error err = {0};
    npl_tokenizer *tok = toy_ugm(&t, 0, NULL, 0, &err);
    CHECKF(tok, "  build: %s", err.message);
    if (!tok)
        return;
    CHECK(!strcmp(npl_tokenizer_kind_name(tok), "ugm"));
    /* the best sum: "▁ab" (-3.5) over "▁a" "b" (-8) and "▁" "ab" (-7) */
    CHECK_IDS(ids(tok, "ab", 0), "9");
    CHECK_IDS(ids(tok, "ab", NPL_TOKENIZE_ADD_BOS), "0 9 2");
    /* "bc" (-1.5) beats "b" with an unknown; x and y: one <unk> */
    CHECK_IDS(ids(tok, "abc", 0), "7 10");
    CHECK_IDS(ids(tok, "axyb", 0), "7 3 6");
    /* spaces kept: "▁a▁▁b" */
    CHECK_IDS(ids(tok, "a  b", 0), "7 4 4 6");
    CHECK_IDS(ids(tok, "", NPL_TOKENIZE_ADD_BOS), "0 2");
    CHECK(npl_tokenizer_end(tok) == 2 && npl_tokenizer_pair_sep(tok) == -1 && npl_tokenizer_sep(tok) == -1);
    npl_tokenizer_free(tok);

    tok = toy_ugm(&t, 1, NULL, 0, &err);
    CHECK(tok);
    if (tok) /* runs of spaces dropped, each word with one "▁" */
        CHECK_IDS(ids(tok, "  a   b ", 0), "7 4 6");
    npl_tokenizer_free(tok);

    /* a damaged charsmap: its double array larger than the blob */
    static const uint8_t bad[] = {0xff, 0xff, 0x00, 0x00, 1, 2, 3, 4, 0};
    tok = toy_ugm(&t, 0, bad, sizeof bad, &err);
    CHECKF(!tok && err.code == NPL_ERR_FORMAT, "  damaged charsmap: %s", err.message);
    npl_tokenizer_free(tok);
    /* a root whose children lie past the array: an error, not a read outside */
    static const uint8_t far[] = {4, 0, 0, 0, 0x00, 0xfc, 0xff, 0x7f, 'x', 0};
    tok = toy_ugm(&t, 0, far, sizeof far, &err);
    CHECK(tok);
    if (tok)
        CHECK_IDS(ids(tok, "ab", 0), "9");
    npl_tokenizer_free(tok);
}

static void case_special_tokens(void)
{
    static const char *const merges[] = {NULL};
    toy t;
    toy_bpe(&t, merges);
    int32_t ctl = toy_add(&t, "<|c|>", NPL_TOKEN_CONTROL, 0);
    int32_t u = toy_add(&t, "<u>", NPL_TOKEN_USER_DEFINED, 0);
    int32_t uu = toy_add(&t, "<uu>", NPL_TOKEN_USER_DEFINED, 0);
    int32_t ab = toy_add(&t, "ab", NPL_TOKEN_USER_DEFINED, 0);
    int32_t bcd = toy_add(&t, "bcd", NPL_TOKEN_USER_DEFINED, 0);
    npl_tokenizer *tok = toy_build_bpe(&t, "llama-bpe");
    CHECK(tok);
    if (!tok)
        return;
    /* control text is not recognised unless asked for */
    CHECK_IDS(ids(tok, "x<|c|>y", 0), "120 60 124 99 124 62 121");
    CHECK_IDS(ids(tok, "x<|c|>y", NPL_TOKENIZE_PARSE_SPECIAL), fmt("120 %d 121", ctl));
    /* user-defined text is recognised in both modes */
    CHECK_IDS(ids(tok, "x<u>y", 0), fmt("120 %d 121", u));
    CHECK_IDS(ids(tok, "x<u>y", NPL_TOKENIZE_PARSE_SPECIAL), fmt("120 %d 121", u));
    /* longest text first */
    CHECK_IDS(ids(tok, "<uu><u>", 0), fmt("%d %d", uu, u));
    /* ...taken over the whole text: "bcd" is claimed before "ab" */
    CHECK_IDS(ids(tok, "abcd", 0), fmt("97 %d", bcd));
    CHECK_IDS(ids(tok, "ab cd", 0), fmt("%d 32 99 100", ab));
    CHECK_IDS(ids(tok, "<|c|><|c|>", NPL_TOKENIZE_PARSE_SPECIAL), fmt("%d %d", ctl, ctl));
    /* nothing to flag for a model without BOS */
    CHECK_IDS(ids(tok, "ab", NPL_TOKENIZE_ADD_BOS), fmt("%d", ab));
    CHECK(!npl_tokenizer_adds_bos(tok));
    npl_tokenizer_free(tok);
}

static void case_empty(void)
{
    static const char *const merges[] = {NULL};
    toy t;
    toy_bpe(&t, merges);
    npl_tokenizer *tok = toy_build_bpe(&t, "llama-bpe");
    CHECK(tok);
    if (!tok)
        return;
    npl_tokens out = {0};
    npl_error err = {0};
    CHECK(npl_tokenize(tok, NULL, 0, 0, &out, &err) == NPL_OK && out.n == 0);
    CHECK(npl_tokenize(tok, "", 0, NPL_TOKENIZE_PARSE_SPECIAL, &out, &err) == NPL_OK && out.n == 0);
    CHECK(npl_tokenize(tok, NULL, 3, 0, &out, &err) == NPL_ERR_INVALID_ARG);
    CHECK(npl_tokenize(tok, "abc", 3, 0, NULL, &err) == NPL_ERR_INVALID_ARG);
    /* appends */
    CHECK(npl_tokenize(tok, "a", 1, 0, &out, &err) == NPL_OK && out.n == 1);
    CHECK(npl_tokenize(tok, "b", 1, 0, &out, &err) == NPL_OK && out.n == 2 && out.ids[1] == 'b');
    npl_tokens_free(&out);
    CHECK(out.ids == NULL && out.n == 0);
    CHECK(npl_token_to_bytes(tok, -1, true, NULL, 0) == 0);
    CHECK(npl_token_to_bytes(tok, 1 << 30, true, NULL, 0) == 0);
    npl_tokenizer_free(tok);
    npl_tokenizer_free(NULL);

    npl_tokenizer_spec spec;
    npl_tokenizer_spec_init(&spec);
    spec.kind = NPL_TOKENIZER_BPE;
    CHECK(npl_tokenizer_build(&spec, &err) == NULL && err.code == NPL_ERR_FORMAT);
}

static void case_utf8(void)
{
    uint32_t cp;
    size_t used;
    /* strict */
    CHECK(npl_utf8_decode_strict((const unsigned char *)"A", 1, &cp) == 1 && cp == 'A');
    CHECK(npl_utf8_decode_strict((const unsigned char *)"\xE2\x82\xAC", 3, &cp) == 3 && cp == 0x20AC);
    CHECK(npl_utf8_decode_strict((const unsigned char *)"\xE2\x82", 2, &cp) == 0);
    CHECK(npl_utf8_decode_strict((const unsigned char *)"\xF0\x9F\x98\x80", 4, &cp) == 4 && cp == 0x1F600);
    CHECK(npl_utf8_decode_strict((const unsigned char *)"\xC0\x80", 2, &cp) == -1);
    CHECK(npl_utf8_decode_strict((const unsigned char *)"\xE0\x80\x80", 3, &cp) == -1);
    CHECK(npl_utf8_decode_strict((const unsigned char *)"\xED\xA0\x80", 3, &cp) == -1);
    CHECK(npl_utf8_decode_strict((const unsigned char *)"\xF4\x90\x80\x80", 4, &cp) == -1);
    CHECK(npl_utf8_decode_strict((const unsigned char *)"\xE2\x82" "A", 3, &cp) == -2);
    CHECK(npl_utf8_decode_strict((const unsigned char *)"\x80", 1, &cp) == -1);
    CHECK(npl_utf8_decode_strict((const unsigned char *)"\xFF", 1, &cp) == -1);
    /* lenient, as the reference reads text */
    CHECK(npl_utf8_decode_lenient((const unsigned char *)"\xC0\x80", 2, &used) == 0 && used == 2);
    CHECK(npl_utf8_decode_lenient((const unsigned char *)"\xED\xA0\x80", 3, &used) == 0xD800 && used == 3);
    CHECK(npl_utf8_decode_lenient((const unsigned char *)"\xE2\x82", 2, &used) == 0xFFFD && used == 1);
    CHECK(npl_utf8_decode_lenient((const unsigned char *)"\xF5\x80\x80\x80", 4, &used) == 0xFFFD && used == 1);
    CHECK(npl_utf8_decode_lenient((const unsigned char *)"\xFF", 1, &used) == 0xFFFD && used == 1);
    CHECK(npl_utf8_lead_len(0x41) == 1 && npl_utf8_lead_len(0x80) == 1 && npl_utf8_lead_len(0xC3) == 2 &&
          npl_utf8_lead_len(0xE2) == 3 && npl_utf8_lead_len(0xFF) == 4);
}

/* Feeds ids to a fresh detokenizer; returns what came out after each. */
static void detok_steps(const npl_tokenizer *tok, bool render, const int32_t *v, size_t n, npl_buf *steps,
                        bool flush)
{
    npl_detok d;
    npl_detok_init(&d, tok, render);
    npl_error err = {0};
    for (size_t i = 0; i < n; i++) {
        npl_buf one = {0};
        CHECK(npl_detok_push(&d, v[i], &one, &err) == NPL_OK);
        CHECK(npl_buf_append(steps, "[", 1, &err) == NPL_OK);
        if (one.len)
            CHECK(npl_buf_append(steps, one.data, one.len, &err) == NPL_OK);
        CHECK(npl_buf_append(steps, "]", 1, &err) == NPL_OK);
        npl_buf_free(&one);
    }
    if (flush) {
        npl_buf one = {0};
        CHECK(npl_detok_flush(&d, &one, &err) == NPL_OK);
        CHECK(npl_buf_append(steps, "{", 1, &err) == NPL_OK);
        if (one.len)
            CHECK(npl_buf_append(steps, one.data, one.len, &err) == NPL_OK);
        CHECK(npl_buf_append(steps, "}", 1, &err) == NPL_OK);
        npl_buf_free(&one);
    }
}

#define CHECK_STEPS(tok, render, flush, want, ...)                                                     \
    do {                                                                                               \
        const int32_t v_[] = {__VA_ARGS__};                                                            \
        npl_buf b_ = {0};                                                                              \
        detok_steps(tok, render, v_, sizeof v_ / sizeof *v_, &b_, flush);                              \
        CHECKF(b_.data && strcmp(b_.data, want) == 0, "  detok gave %s, expected %s", b_.data, want);   \
        npl_buf_free(&b_);                                                                             \
    } while (0)

#define FFFD "\xEF\xBF\xBD"

static void case_detok_stream(void)
{
    toy t;
    npl_tokenizer *tok = toy_spm(&t, -1);
    CHECK(tok);
    if (!tok)
        return;
    const int32_t B = 3; /* <0x00> */
    int32_t sp_ab = find(tok, "\xE2\x96\x81" "ab"), sp_a = find(tok, "\xE2\x96\x81" "a");
    int32_t a = find(tok, "a");
    /* a character split over byte-fallback tokens comes out whole */
    CHECK_STEPS(tok, false, false, "[][][\xE2\x82\xAC]", B + 0xE2, B + 0x82, B + 0xAC);
    CHECK_STEPS(tok, false, false, "[][][][\xF0\x9F\x98\x80]", B + 0xF0, B + 0x9F, B + 0x98, B + 0x80);
    /* the SentencePiece leading space is dropped once, at the start */
    CHECK_STEPS(tok, false, false, "[ab][ a]", sp_ab, sp_a);
    /* ill-formed input */
    CHECK_STEPS(tok, false, false, "[" FFFD "]", B + 0xFF);
    CHECK_STEPS(tok, false, false, "[][" FFFD "a]", B + 0xE2, a);
    CHECK_STEPS(tok, false, true, "[][]{" FFFD "}", B + 0xF0, B + 0x9F);
    CHECK_STEPS(tok, false, true, "[" FFFD "][" FFFD "]{}", B + 0xC0, B + 0x80);
    CHECK_STEPS(tok, false, false, "[][" FFFD FFFD "][" FFFD "]", B + 0xED, B + 0xA0, B + 0x80);
    CHECK_STEPS(tok, false, false, "[][" FFFD "][]", B + 0xE2, B + 0xE2, B + 0x82);
    /* control tokens: hidden unless rendered; as in the reference, only
     * the very first piece loses its leading space */
    CHECK_STEPS(tok, false, false, "[][ ab]", 1, sp_ab);
    CHECK_STEPS(tok, true, false, "[<s>][ ab]", 1, sp_ab);
    /* a control token between the bytes of a character does not break it */
    CHECK_STEPS(tok, false, false, "[][][\xC3\xBC]", B + 0xC3, 1, B + 0xBC);
    char buf[8];
    CHECK(npl_token_to_bytes(tok, sp_ab, false, buf, sizeof buf) == 3 && !memcmp(buf, " ab", 3));
    CHECK(npl_token_to_bytes(tok, sp_ab, false, buf, 2) == 2 && !memcmp(buf, " a", 2));
    CHECK(npl_token_to_bytes(tok, sp_ab, false, NULL, 0) == 3);
    CHECK(npl_token_to_bytes(tok, 2, false, NULL, 0) == 0);
    CHECK(npl_token_to_bytes(tok, 2, true, buf, sizeof buf) == 4 && !memcmp(buf, "</s>", 4));
    CHECK(npl_token_to_bytes(tok, B + 0x41, false, buf, sizeof buf) == 1 && buf[0] == 'A');
    npl_tokenizer_free(tok);

    /* byte-level BPE: a character split over byte tokens */
    static const char *const merges[] = {NULL};
    toy_bpe(&t, merges);
    tok = toy_build_bpe(&t, "llama-bpe");
    CHECK(tok);
    if (!tok)
        return;
    CHECK_STEPS(tok, false, false, "[][][\xE2\x82\xAC][x]", 0xE2, 0x82, 0xAC, 'x');
    CHECK_STEPS(tok, false, false, "[ ][" FFFD "]", ' ', 0xBF);
    CHECK(npl_token_to_bytes(tok, ' ', false, buf, sizeof buf) == 1 && buf[0] == ' '); /* "Ġ" */
    npl_tokenizer_free(tok);
}

/* ---------------------------------------------------------------- real vocabularies */

typedef struct vocab {
    const char *name;
    npl_gguf *g;
    npl_tokenizer *tok;
    double build_ms;
} vocab;

static bool load_vocab(vocab *v, const char *path, const char *name)
{
    npl_error err = {0};
    v->name = name;
    v->g = npl_gguf_open(path, &err);
    if (!v->g) {
        fprintf(stderr, "%s: %s\n", path, err.message);
        return false;
    }
    double t0 = now_s();
    v->tok = npl_tokenizer_from_gguf(v->g, &err);
    v->build_ms = (now_s() - t0) * 1e3;
    if (!v->tok) {
        fprintf(stderr, "%s: %s\n", path, err.message);
        return false;
    }
    return true;
}

static void free_vocab(vocab *v)
{
    npl_tokenizer_free(v->tok);
    npl_gguf_close(v->g);
}

static void case_vocab_bos_eog(vocab *l3, vocab *g3)
{
    const npl_tokenizer *L = l3->tok, *G = g3->tok;
    CHECK(npl_tokenizer_kind_of(L) == NPL_TOKENIZER_BPE && !strcmp(npl_tokenizer_pre_name(L), "llama-bpe"));
    CHECK(npl_tokenizer_kind_of(G) == NPL_TOKENIZER_SPM && !strcmp(npl_tokenizer_kind_name(G), "spm"));
    CHECK(npl_tokenizer_n_vocab(L) == 128256 && npl_tokenizer_n_vocab(G) == 262144);
    CHECK(npl_tokenizer_bos(L) == 128000 && npl_tokenizer_adds_bos(L));
    CHECK(npl_tokenizer_bos(G) == 2 && npl_tokenizer_adds_bos(G));
    /* end of text and end of turn; end of message where the vocabulary has
     * it (Llama 3.1+: id 128008; the 3.0 fixture has a reserved token there) */
    CHECK(npl_tokenizer_is_eog(L, 128001) && npl_tokenizer_is_eog(L, 128009));
    CHECK(npl_tokenizer_is_eog(L, 128008) == (npl_tokenizer_find(L, "<|eom_id|>") == 128008));
    CHECK(!npl_tokenizer_is_eog(L, 128000) && !npl_tokenizer_is_eog(L, 0) && !npl_tokenizer_is_eog(L, -1));
    int32_t eot = npl_tokenizer_find(G, "<end_of_turn>");
    CHECK(eot == 106 && npl_tokenizer_is_eog(G, eot) && npl_tokenizer_is_eog(G, npl_tokenizer_eos(G)));
    CHECK(!npl_tokenizer_is_eog(G, npl_tokenizer_find(G, "<start_of_turn>")));
    CHECK(npl_tokenizer_token_type(G, 105) == NPL_TOKEN_CONTROL);
    CHECK(npl_tokenizer_token_type(G, npl_tokenizer_find(G, "<h1>")) == NPL_TOKEN_USER_DEFINED);
    CHECK(npl_tokenizer_token_type(L, 128009) == NPL_TOKEN_CONTROL);
    CHECK(npl_tokenizer_find(L, "<|eot_id|>") == 128009 && npl_tokenizer_find(L, "no such token!") == -1);

    CHECK_IDS(ids(L, "Hello", NPL_TOKENIZE_ADD_BOS), "128000 9906");
    CHECK_IDS(ids(L, "Hello", 0), "9906");
    CHECK_IDS(ids(L, "", NPL_TOKENIZE_ADD_BOS), "128000");
    CHECK_IDS(ids(L, "", 0), "");
    CHECK_IDS(ids(G, "", NPL_TOKENIZE_ADD_BOS), "2");
    const char *g = ids(G, "Hello", NPL_TOKENIZE_ADD_BOS);
    CHECK(!strncmp(g, "2 ", 2));
}

static void case_vocab_special(vocab *l3, vocab *g3)
{
    const npl_tokenizer *L = l3->tok, *G = g3->tok;
    CHECK_IDS(ids(L, "<|eot_id|>", NPL_TOKENIZE_PARSE_SPECIAL), "128009");
    CHECK(strcmp(ids(L, "<|eot_id|>", 0), "128009") && !strstr(ids(L, "<|eot_id|>", 0), "128009"));
    CHECK_IDS(ids(L, "<|start_header_id|>user<|end_header_id|>", NPL_TOKENIZE_PARSE_SPECIAL), "128006 882 128007");
    CHECK(!strncmp(ids(G, "<start_of_turn>user\n", NPL_TOKENIZE_PARSE_SPECIAL), "105 ", 4));
    CHECK(!strstr(ids(G, "<start_of_turn>user\n", 0), "105"));
    /* Gemma's user-defined tokens are recognised without PARSE_SPECIAL */
    int32_t h1 = npl_tokenizer_find(G, "<h1>");
    CHECK_IDS(ids(G, "<h1>", 0), fmt("%d", h1));
    /* "</s>" is user-defined in Gemma 3 but an end-of-turn text: control */
    int32_t s_end = npl_tokenizer_find(G, "</s>");
    CHECK(npl_tokenizer_is_eog(G, s_end) && npl_tokenizer_token_type(G, s_end) == NPL_TOKEN_CONTROL);
    CHECK_IDS(ids(G, "</s>", NPL_TOKENIZE_PARSE_SPECIAL), fmt("%d", s_end));
    CHECK(strcmp(ids(G, "</s>", 0), fmt("%d", s_end)) != 0);
    /* newline runs are user-defined tokens: longest first */
    int32_t nl31 = npl_tokenizer_find(G, "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n");
    int32_t nl2 = npl_tokenizer_find(G, "\n\n");
    char nl33[34];
    memset(nl33, '\n', 33);
    nl33[33] = 0;
    CHECK_IDS(ids(G, nl33, 0), fmt("%d %d", nl31, nl2));
}

static bool valid_utf8(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int r = npl_utf8_decode_strict((const unsigned char *)s + i, n - i, &cp);
        if (r <= 0)
            return false;
        i += (size_t)r;
    }
    return true;
}

/* Tokenizes text, streams the ids back; checks every step is complete
 * UTF-8 and the whole equals text. Returns how many steps held bytes back. */
static int roundtrip(const npl_tokenizer *tok, const char *text, size_t len)
{
    npl_tokens t = {0};
    npl_error err = {0};
    int held = 0;
    CHECK(npl_tokenize(tok, text, len, 0, &t, &err) == NPL_OK);
    npl_detok d;
    npl_detok_init(&d, tok, false);
    npl_buf all = {0};
    for (size_t i = 0; i < t.n; i++) {
        npl_buf one = {0};
        CHECK(npl_detok_push(&d, t.ids[i], &one, &err) == NPL_OK);
        CHECKF(valid_utf8(one.data, one.len), "  detok step %zu is not complete UTF-8", i);
        if (npl_token_to_bytes(tok, t.ids[i], false, NULL, 0) > one.len)
            held++;
        if (one.len)
            CHECK(npl_buf_append(&all, one.data, one.len, &err) == NPL_OK);
        npl_buf_free(&one);
    }
    CHECK(npl_detok_flush(&d, &all, &err) == NPL_OK);
    CHECKF(all.len == len && (!len || memcmp(all.data, text, len) == 0),
           "  round trip differs for \"%.60s\" (%zu -> %zu bytes)", text, len, all.len);
    npl_buf_free(&all);
    npl_tokens_free(&t);
    return held;
}

static const char *const samples[] = {
    "Hello, world! It's 2024.",
    "日本語のテキストです。",
    "Emoji: 👨‍👩‍👧‍👦 🇺🇸 👍🏽 🫠",
    "Cuneiform 𒀀𒀁𒀂 and Linear B 𐀀𐀁 and Gothic 𐌰𐌱",
    "Rare CJK 𠀀𠀁𪜀 and math 𝔸𝔹ℂ",
    "Private use \U0010FFFD\U000F0000 and variation selector A\U000E0100",
    "Double  spaces   and    more     (user-defined runs in Gemma 3)",
    "def f(x):\n\treturn x ** 2\n\n\n",
    "Ünïcödé çåfé naïve \u0301\u0302",
    "  spaces   and\ttabs\r\nCRLF",
    "<|eot_id|> <start_of_turn> <h1>x</h1> \n\n\n\n",
    "مرحبا שלום Привет Γειά สวัสดี नमस्ते",
};

/* One-shot replacement of ill-formed parts of s, for comparison with the
 * streaming detokenizer. */
static void sanitize(const char *s, size_t n, npl_buf *out)
{
    npl_error err = {0};
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int r = npl_utf8_decode_strict((const unsigned char *)s + i, n - i, &cp);
        if (r > 0) {
            CHECK(npl_buf_append(out, s + i, (size_t)r, &err) == NPL_OK);
            i += (size_t)r;
        } else {
            CHECK(npl_buf_append(out, FFFD, 3, &err) == NPL_OK);
            i += r < 0 ? (size_t)-r : n - i;
        }
    }
}

/* Random id sequences (control and byte tokens included): every step is
 * complete UTF-8 and the whole equals the one-shot decoding. */
static void detok_random(const npl_tokenizer *tok, uint32_t seed)
{
    int32_t n_vocab = npl_tokenizer_n_vocab(tok);
    for (int round = 0; round < 300; round++) {
        npl_detok d;
        npl_detok_init(&d, tok, round % 2 == 1);
        npl_buf streamed = {0}, raw = {0}, want = {0};
        npl_error err = {0};
        int len = 1 + (int)(seed % 40);
        for (int i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            /* mostly low ids: byte tokens, control tokens, short pieces */
            int32_t id = (int32_t)((seed >> 8) % (seed & 0x10000 ? 600u : (uint32_t)n_vocab));
            size_t before = streamed.len;
            CHECK(npl_detok_push(&d, id, &streamed, &err) == NPL_OK);
            CHECKF(streamed.len == before || valid_utf8(streamed.data + before, streamed.len - before),
                   "  random detok step is not complete UTF-8");
            char piece[512];
            size_t k = npl_token_to_bytes(tok, id, round % 2 == 1, piece, sizeof piece);
            if (k)
                CHECK(npl_buf_append(&raw, piece, k, &err) == NPL_OK);
        }
        CHECK(npl_detok_flush(&d, &streamed, &err) == NPL_OK);
        sanitize(raw.data, raw.len, &want);
        CHECKF(streamed.len == want.len && (!want.len || memcmp(streamed.data, want.data, want.len) == 0),
               "  streamed detok differs from one-shot decoding (round %d)", round);
        npl_buf_free(&streamed);
        npl_buf_free(&raw);
        npl_buf_free(&want);
    }
}

static void case_vocab_detok(vocab *l3, vocab *g3)
{
    detok_random(l3->tok, 1);
    detok_random(g3->tok, 2);
    vocab *vs[2] = {l3, g3};
    for (int k = 0; k < 2; k++) {
        int held = 0;
        for (size_t i = 0; i < sizeof samples / sizeof *samples; i++)
            held += roundtrip(vs[k]->tok, samples[i], strlen(samples[i]));
        /* rare characters are split over several tokens somewhere */
        CHECKF(held > 0, "  %s: no character was split over tokens", vs[k]->name);
        printf("%s: %d detok steps held bytes back for a later token\n", vs[k]->name, held);
    }
    /* Gemma: a character outside the vocabulary becomes byte tokens */
    npl_tokens t = {0};
    npl_error err = {0};
    CHECK(npl_tokenize(g3->tok, "\xF4\x8F\xBF\xBD", 4, 0, &t, &err) == NPL_OK); /* U+10FFFD */
    CHECK(t.n == 4 && npl_tokenizer_token_type(g3->tok, t.ids[0]) == NPL_TOKEN_BYTE);
    npl_tokens_free(&t);
}

/* Deterministic mixed text of about n bytes. */
static char *make_text(size_t n, size_t *len)
{
    static const char *const parts[] = {
        "The quick brown fox jumps over the lazy dog. ",
        "It's 12345 o'clock; we'll see 3.14159 and 1,000,000. ",
        "def f(x):\n    return x * 2  # double\n",
        "日本語のテキストと中文。",
        "👍🏽 emoji 🇺🇸 flags 👨‍👩‍👧 ",
        "Привет мир, Γειά σου. ",
        "\n\n\t\t  ",
        "<p>html</p> {\"json\": [1, 2]} ",
    };
    char *s = malloc(n + 64);
    if (!s)
        return NULL;
    size_t w = 0;
    uint32_t r = 12345;
    while (w < n) {
        r = r * 1103515245u + 12345u;
        const char *p = parts[(r >> 16) % (sizeof parts / sizeof *parts)];
        size_t k = strlen(p);
        memcpy(s + w, p, k);
        w += k;
    }
    s[w] = 0;
    *len = w;
    return s;
}

static double time_tokenize(const npl_tokenizer *tok, const char *s, size_t n, size_t *n_ids)
{
    npl_tokens t = {0};
    npl_error err = {0};
    double t0 = now_s();
    npl_status st = npl_tokenize(tok, s, n, 0, &t, &err);
    double dt = now_s() - t0;
    CHECK(st == NPL_OK);
    if (n_ids)
        *n_ids = t.n;
    npl_tokens_free(&t);
    return dt;
}

static void case_vocab_long(vocab *l3, vocab *g3)
{
    const size_t MB = 1u << 20;
    size_t len;
    char *text = make_text(MB, &len);
    CHECK(text);
    if (!text)
        return;
    vocab *vs[2] = {l3, g3};
    for (int k = 0; k < 2; k++) {
        const npl_tokenizer *tok = vs[k]->tok;
        size_t n_ids = 0, n_quarter = 0;
        double t_full = 1e9, t_quarter = 1e9;
        for (int r = 0; r < 3; r++) { /* best of 3: the machine is shared */
            double a = time_tokenize(tok, text, len, &n_ids);
            double b = time_tokenize(tok, text, len / 4, &n_quarter);
            t_full = a < t_full ? a : t_full;
            t_quarter = b < t_quarter ? b : t_quarter;
        }
        printf("%s: 1 MiB mixed text -> %zu tokens in %.0f ms (%.2f MB/s); 256 KiB in %.0f ms; ratio %.1f\n",
               vs[k]->name, n_ids, t_full * 1e3, len / t_full / 1e6, t_quarter * 1e3, t_full / t_quarter);
        /* linear: 4x the text should take about 4x the time */
        CHECK(t_full / t_quarter < 10.0);
        roundtrip(tok, text, len);

        /* degenerate inputs: one huge pre-token / run of special texts */
        static const char fills[] = {' ', 'a', '\n', '<', '1', '\t'};
        for (size_t f = 0; f < sizeof fills; f++) {
            char *s = malloc(MB);
            CHECK(s);
            if (!s)
                break;
            memset(s, fills[f], MB);
            size_t n = 0;
            double dt = time_tokenize(tok, s, MB, &n);
            printf("%s: 1 MiB of 0x%02x -> %zu tokens in %.0f ms\n", vs[k]->name, fills[f], n, dt * 1e3);
            CHECK(n > 0);
            free(s);
        }
    }
    free(text);
}

typedef struct thread_job {
    const npl_tokenizer *tok;
    const char *text;
    size_t len;
    const npl_tokens *expect;
    int rounds;
    int bad;
} thread_job;

static void *thread_main(void *arg)
{
    thread_job *j = arg;
    for (int r = 0; r < j->rounds; r++) {
        npl_tokens t = {0};
        npl_error err = {0};
        if (npl_tokenize(j->tok, j->text, j->len, NPL_TOKENIZE_PARSE_SPECIAL, &t, &err) != NPL_OK ||
            t.n != j->expect->n || memcmp(t.ids, j->expect->ids, t.n * sizeof *t.ids) != 0)
            j->bad++;
        npl_tokens_free(&t);
    }
    return NULL;
}

static void case_vocab_threads(vocab *l3, vocab *g3)
{
    vocab *vs[2] = {l3, g3};
    for (int k = 0; k < 2; k++) {
        size_t la, lb;
        char *a = make_text(20000, &la);
        char *b = make_text(30000, &lb);
        CHECK(a && b);
        if (!a || !b)
            return;
        for (size_t i = 0; i < lb; i += 97)
            b[i] = (char)('a' + i % 26); /* a different text */
        npl_tokens ea = {0}, eb = {0};
        npl_error err = {0};
        CHECK(npl_tokenize(vs[k]->tok, a, la, NPL_TOKENIZE_PARSE_SPECIAL, &ea, &err) == NPL_OK);
        CHECK(npl_tokenize(vs[k]->tok, b, lb, NPL_TOKENIZE_PARSE_SPECIAL, &eb, &err) == NPL_OK);
        thread_job ja = {vs[k]->tok, a, la, &ea, 20, 0}, jb = {vs[k]->tok, b, lb, &eb, 20, 0};
        pthread_t ta, tb;
        CHECK(pthread_create(&ta, NULL, thread_main, &ja) == 0);
        CHECK(pthread_create(&tb, NULL, thread_main, &jb) == 0);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        CHECK(ja.bad == 0 && jb.bad == 0);
        printf("%s: 2 threads x 20 rounds, %d + %d differing results\n", vs[k]->name, ja.bad, jb.bad);
        npl_tokens_free(&ea);
        npl_tokens_free(&eb);
        free(a);
        free(b);
    }
}

static void case_vocab_perf(vocab *l3, vocab *g3)
{
    vocab *vs[2] = {l3, g3};
    size_t len;
    char *text = make_text(4u << 20, &len);
    CHECK(text);
    if (!text)
        return;
    for (int k = 0; k < 2; k++) {
        double best = 1e9;
        for (int r = 0; r < 3; r++) {
            npl_error err = {0};
            double t0 = now_s();
            npl_tokenizer *tok = npl_tokenizer_from_gguf(vs[k]->g, &err);
            double dt = (now_s() - t0) * 1e3;
            CHECK(tok);
            npl_tokenizer_free(tok);
            if (dt < best)
                best = dt;
        }
        size_t n = 0;
        double dt = time_tokenize(vs[k]->tok, text, len, &n);
        printf("%s: build %.1f ms (best of 3); tokenize %.2f MB/s (%zu bytes -> %zu tokens, %.2f bytes/token)\n",
               vs[k]->name, best, len / dt / 1e6, len, n, (double)len / (double)n);
        CHECK(best < 1000); /* generous: sanitizer builds are slow */
    }
    free(text);
}

/* The vocab_* cases run on both real vocabularies: test-tokenizer CASE
 * LLAMA3.gguf GEMMA3.gguf. */
static void with_vocabs(void (*check)(vocab *l3, vocab *g3))
{
    vocab l3 = {0}, g3 = {0};
    if (load_vocab(&l3, nt_arg(0), "llama3") && load_vocab(&g3, nt_arg(1), "gemma3"))
        check(&l3, &g3);
    else
        nt_check_failed(__FILE__, __LINE__, "the Llama 3 and Gemma 3 vocabulary files load");
    free_vocab(&l3);
    free_vocab(&g3);
}

#define VOCAB_CASE(name)                        \
    static void vocab_##name(void)              \
    {                                           \
        with_vocabs(case_vocab_##name);         \
    }
VOCAB_CASE(bos_eog)
VOCAB_CASE(special)
VOCAB_CASE(detok)
VOCAB_CASE(long)
VOCAB_CASE(threads)
VOCAB_CASE(perf)

NT_MAIN({"bpe_merges", case_bpe_merges}, {"spm_merges", case_spm_merges}, {"special_tokens", case_special_tokens},
        {"ugm", case_ugm},
        {"empty", case_empty}, {"utf8", case_utf8}, {"detok_stream", case_detok_stream},
        {"vocab_bos_eog", vocab_bos_eog}, {"vocab_special", vocab_special}, {"vocab_detok", vocab_detok},
        {"vocab_long", vocab_long}, {"vocab_threads", vocab_threads}, {"vocab_perf", vocab_perf})
