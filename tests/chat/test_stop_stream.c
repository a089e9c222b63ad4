/* npl_stream on the real Llama 3 and Gemma 3 vocabularies: end-of-
 * generation tokens, stop strings across tokens, held-back text released
 * when it stops matching, multi-byte characters split over tokens, the
 * token budget, and misuse.
 *
 *   test_stop_stream LLAMA3.gguf GEMMA3.gguf */
#include <stdlib.h>
#include <string.h>

#include "npl_test.h"
#include "gguf.h"
#include "stop_stream.h"
#include "tokenizer.h"


static npl_tokens tokenize(const npl_tokenizer *tok, const char *text)
{
    npl_tokens t = {0};
    npl_error err = {0};
    CHECKF(npl_tokenize(tok, text, strlen(text), 0, &t, &err) == NPL_OK, "%s", err.message);
    return t;
}

static npl_stream *make(const npl_tokenizer *tok, const char *const *stops, size_t n_stop,
                        uint32_t max_tokens)
{
    npl_error err = {0};
    npl_stream *st = npl_stream_create_for_tokenizer(tok, stops, n_stop, max_tokens, &err);
    CHECKF(st != NULL, "%s", err.message);
    if (!st)
        exit(1);
    return st;
}

static bool valid_utf8(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (len == 0 || i + len > n)
            return false;
        for (size_t k = 1; k < len; k++)
            if (((unsigned char)s[i + k] & 0xc0) != 0x80)
                return false;
        i += len;
    }
    return true;
}

/* Longest tail of s[0..n) that is a proper prefix of one of the stops. */
static size_t undecided(const char *s, size_t n, const char *const *stops, size_t n_stop)
{
    size_t best = 0;
    for (size_t i = 0; i < n_stop; i++) {
        size_t len = strlen(stops[i]);
        for (size_t k = len > 0 ? len - 1 : 0; k > best; k--)
            if (k <= n && memcmp(s + n - k, stops[i], k) == 0) {
                best = k;
                break;
            }
    }
    return best;
}

typedef struct run_result {
    npl_buf out;
    npl_finish_reason reason;
    size_t pushed; /* tokens pushed until a reason other than NONE */
    bool prefix_ok; /* after each push the output was exactly the decided text */
    bool utf8_ok;   /* every push emitted complete UTF-8 */
} run_result;

/* Pushes ids until the stream finishes, then calls finish. When `stops`
 * is given and the text is ASCII, checks after every push that exactly
 * the text that can no longer start a stop string was emitted. */
static run_result run(npl_stream *st, const npl_tokenizer *tok, const int32_t *ids, size_t n,
                      const char *const *stops, size_t n_stop, bool check_holdback)
{
    run_result r = {.prefix_ok = true, .utf8_ok = true};
    npl_buf decoded = {0};
    npl_error err = {0};
    for (size_t i = 0; i < n; i++) {
        size_t before = r.out.len;
        r.reason = npl_stream_push(st, ids[i], &r.out, &err);
        CHECKF(err.code == NPL_OK, "push: %s", err.message);
        r.pushed = i + 1;
        if (!valid_utf8(r.out.data + before, r.out.len - before))
            r.utf8_ok = false;
        if (r.reason != NPL_FINISH_NONE)
            break;
        if (check_holdback) {
            char piece[256];
            size_t len = npl_token_to_bytes(tok, ids[i], false, piece, sizeof piece);
            npl_buf_append(&decoded, piece, len < sizeof piece ? len : sizeof piece, &err);
            size_t want = decoded.len - undecided(decoded.data, decoded.len, stops, n_stop);
            if (r.out.len != want || (want && memcmp(r.out.data, decoded.data, want) != 0))
                r.prefix_ok = false;
        }
    }
    size_t before = r.out.len;
    CHECK(npl_stream_finish(st, &r.out, &err) == NPL_OK);
    if (!valid_utf8(r.out.data + before, r.out.len - before))
        r.utf8_ok = false;
    npl_buf_free(&decoded);
    return r;
}

static bool out_is(const run_result *r, const char *want)
{
    size_t n = strlen(want);
    return r->out.len == n && (n == 0 || memcmp(r->out.data, want, n) == 0);
}

static void test_plain_and_eog(const npl_tokenizer *tok)
{
    const char *text = "Hello world, this is a test.";
    npl_tokens t = tokenize(tok, text);
    npl_stream *st = make(tok, NULL, 0, 0);
    run_result r = run(st, tok, t.ids, t.n, NULL, 0, true);
    CHECK(r.reason == NPL_FINISH_NONE && r.prefix_ok);
    CHECK(out_is(&r, text));
    npl_buf_free(&r.out);
    npl_stream_free(st);

    /* Every Llama 3 end-of-generation token ends the stream unseen:
     * <|end_of_text|>, <|eot_id|> and, in 3.1+ vocabularies, <|eom_id|>
     * (128008; a reserved token in the 3.0 vocabulary). */
    int32_t eogs[3] = {128001, 128009, -1};
    size_t n_eogs = 2;
    if (npl_tokenizer_find(tok, "<|eom_id|>") == 128008)
        eogs[n_eogs++] = 128008;
    else
        CHECK(!npl_tokenizer_is_eog(tok, 128008));
    for (size_t k = 0; k < n_eogs; k++) {
        CHECKF(npl_tokenizer_is_eog(tok, eogs[k]), "%d is not end-of-generation", (int)eogs[k]);
        npl_tokens_push(&t, eogs[k], NULL);
        const char *stop = "###";
        st = make(tok, &stop, 1, 0);
        r = run(st, tok, t.ids, t.n, NULL, 0, false);
        CHECK(r.reason == NPL_FINISH_STOP && r.pushed == t.n);
        CHECKF(out_is(&r, text), "eog %d: output '%s'", (int)eogs[k], r.out.data ? r.out.data : "");
        /* After the end: nothing more, same reason. */
        npl_error err = {0};
        size_t len = r.out.len;
        CHECK(npl_stream_push(st, t.ids[0], &r.out, &err) == NPL_FINISH_STOP && r.out.len == len);
        CHECK(npl_stream_finish(st, &r.out, &err) == NPL_OK && r.out.len == len);
        npl_buf_free(&r.out);
        npl_stream_free(st);
        t.n--;
    }

    /* Held-back text is released when an eog token arrives. */
    npl_tokens_free(&t);
    t = tokenize(tok, "Wait #");
    npl_tokens_push(&t, 128009, NULL);
    const char *stop = "##";
    st = make(tok, &stop, 1, 0);
    npl_buf out = {0};
    npl_error err = {0};
    for (size_t i = 0; i + 1 < t.n; i++)
        CHECK(npl_stream_push(st, t.ids[i], &out, &err) == NPL_FINISH_NONE);
    CHECKF(out.len == 5 && memcmp(out.data, "Wait ", 5) == 0, "held: '%s'", out.data);
    CHECK(npl_stream_push(st, t.ids[t.n - 1], &out, &err) == NPL_FINISH_STOP);
    CHECK(out.len == 6 && memcmp(out.data, "Wait #", 6) == 0);
    npl_buf_free(&out);
    npl_stream_free(st);

    /* Other control tokens produce no text. */
    st = make(tok, NULL, 0, 0);
    CHECK(npl_stream_push(st, 128006, &out, &err) == NPL_FINISH_NONE);
    CHECK(out.len == 0);
    npl_buf_free(&out);
    npl_stream_free(st);

    /* ... unless kept (as tool-call markers are): <|start_header_id|> is
     * 128006; <|end_header_id|> (128007) is not kept; a text that is no
     * control token is ignored */
    st = make(tok, NULL, 0, 0);
    const char *keep[] = {"<|start_header_id|>", "Hello", "<|no such token|>"};
    CHECK(npl_stream_keep_tokens(st, keep, 3, &err) == NPL_OK);
    CHECK(npl_stream_push(st, 128006, &out, &err) == NPL_FINISH_NONE);
    CHECK(npl_stream_push(st, 128007, &out, &err) == NPL_FINISH_NONE);
    CHECKF(out.len == 19 && memcmp(out.data, "<|start_header_id|>", 19) == 0, "kept: '%s'", out.data);
    npl_buf_free(&out);
    npl_stream_free(st);
    npl_tokens_free(&t);
}

static void test_stop_strings(const npl_tokenizer *tok)
{
    /* A stop string spanning several tokens. */
    const char *text = "The answer is 42.\nUser: and now?";
    const char *stops1[] = {"\nUser:"};
    npl_tokens s = tokenize(tok, stops1[0]);
    CHECKF(s.n >= 2, "stop string is %zu token(s)", s.n);
    npl_tokens_free(&s);
    npl_tokens t = tokenize(tok, text);
    npl_stream *st = make(tok, stops1, 1, 0);
    run_result r = run(st, tok, t.ids, t.n, stops1, 1, true);
    CHECK(r.reason == NPL_FINISH_STOP && r.prefix_ok && r.pushed < t.n);
    CHECKF(out_is(&r, "The answer is 42."), "got '%s'", r.out.data);
    npl_buf_free(&r.out);
    npl_stream_free(st);
    npl_tokens_free(&t);

    /* Near misses are held back, then released once they stop matching:
     * "User" ... "\nUs" ... "\nUser" then "s" breaks it. */
    text = "Hi\nUs and\nUser is\nUsers: ok";
    t = tokenize(tok, text);
    st = make(tok, stops1, 1, 0);
    r = run(st, tok, t.ids, t.n, stops1, 1, true);
    CHECK(r.reason == NPL_FINISH_NONE && r.prefix_ok);
    CHECKF(out_is(&r, text), "got '%s'", r.out.data);
    npl_buf_free(&r.out);
    npl_stream_free(st);
    npl_tokens_free(&t);

    /* Several stop strings: the earliest match wins, even when another
     * completes first inside the same token run. */
    const char *stops2[] = {"world", "lo w", "zzz"};
    t = tokenize(tok, "hello world");
    st = make(tok, stops2, 3, 0);
    r = run(st, tok, t.ids, t.n, stops2, 3, true);
    CHECK(r.reason == NPL_FINISH_STOP && r.prefix_ok);
    CHECKF(out_is(&r, "hel"), "got '%s'", r.out.data);
    npl_buf_free(&r.out);
    npl_stream_free(st);
    npl_tokens_free(&t);

    /* Stop string at the very start; stop string inside a single token. */
    const char *stops3[] = {"Hello"};
    t = tokenize(tok, "Hello there");
    st = make(tok, stops3, 1, 0);
    r = run(st, tok, t.ids, t.n, stops3, 1, true);
    CHECK(r.reason == NPL_FINISH_STOP && r.pushed == 1 && out_is(&r, ""));
    npl_buf_free(&r.out);
    npl_stream_free(st);
    npl_tokens_free(&t);
    const char *stops4[] = {"ell"};
    t = tokenize(tok, " Hello there");
    st = make(tok, stops4, 1, 0);
    r = run(st, tok, t.ids, t.n, stops4, 1, true);
    CHECK(r.reason == NPL_FINISH_STOP && r.pushed == 1 && out_is(&r, " H"));
    npl_buf_free(&r.out);
    npl_stream_free(st);
    npl_tokens_free(&t);

    /* A partial match still pending at the end is plain text. */
    const char *stops5[] = {"</answer>"};
    t = tokenize(tok, "42 </ans");
    st = make(tok, stops5, 1, 0);
    r = run(st, tok, t.ids, t.n, stops5, 1, true);
    CHECK(r.reason == NPL_FINISH_NONE && r.prefix_ok && out_is(&r, "42 </ans"));
    npl_buf_free(&r.out);
    npl_stream_free(st);
    npl_tokens_free(&t);

    /* Empty stop strings are ignored; a NULL one is an error. */
    const char *stops6[] = {"", "!"};
    t = tokenize(tok, "Yes! No");
    st = make(tok, stops6, 2, 0);
    r = run(st, tok, t.ids, t.n, stops6, 2, false);
    CHECK(r.reason == NPL_FINISH_STOP && out_is(&r, "Yes"));
    npl_buf_free(&r.out);
    npl_stream_free(st);
    npl_tokens_free(&t);
    npl_error err = {0};
    const char *stops7[] = {"a", NULL};
    CHECK(npl_stream_create_for_tokenizer(tok, stops7, 2, 0, &err) == NULL &&
          err.code == NPL_ERR_INVALID_ARG);
    CHECK(npl_stream_create_for_tokenizer(tok, NULL, 1, 0, &err) == NULL &&
          err.code == NPL_ERR_INVALID_ARG);
    CHECK(npl_stream_create_for_tokenizer(NULL, NULL, 0, 0, &err) == NULL &&
          err.code == NPL_ERR_INVALID_ARG);
    const char *stops8[] = {"ok", "\x9e or"}; /* starts mid-character */
    CHECK(npl_stream_create_for_tokenizer(tok, stops8, 2, 0, &err) == NULL &&
          err.code == NPL_ERR_INVALID_ARG && strstr(err.message, "stop string 1"));
}

static void test_multibyte(const npl_tokenizer *tok)
{
    /* U+1D11E and U+2F8A6 are rare enough to be split into byte tokens. */
    const char *text = "clef \xf0\x9d\x84\x9e and \xf0\xaf\xa2\xa6 done \xc3\xa9t\xc3\xa9";
    npl_tokens t = tokenize(tok, text);
    size_t partial = 0; /* tokens that are not whole UTF-8 on their own */
    for (size_t i = 0; i < t.n; i++) {
        char piece[64];
        size_t len = npl_token_to_bytes(tok, t.ids[i], false, piece, sizeof piece);
        partial += !valid_utf8(piece, len < sizeof piece ? len : sizeof piece);
    }
    CHECKF(partial >= 2, "only %zu split characters: the test needs rarer ones", partial);

    npl_stream *st = make(tok, NULL, 0, 0);
    run_result r = run(st, tok, t.ids, t.n, NULL, 0, false);
    CHECK(r.utf8_ok && out_is(&r, text));
    npl_buf_free(&r.out);
    npl_stream_free(st);

    /* A stop string made of a split character, and one starting with it. */
    const char *stops[] = {"\xf0\xaf\xa2\xa6"};
    st = make(tok, stops, 1, 0);
    r = run(st, tok, t.ids, t.n, NULL, 0, false);
    CHECK(r.utf8_ok && r.reason == NPL_FINISH_STOP);
    CHECKF(out_is(&r, "clef \xf0\x9d\x84\x9e and "), "got '%s'", r.out.data);
    npl_buf_free(&r.out);
    npl_stream_free(st);
    const char *stops2[] = {"\xf0\x9d\x84\x9e or"};
    st = make(tok, stops2, 1, 0);
    r = run(st, tok, t.ids, t.n, NULL, 0, false);
    CHECK(r.utf8_ok && r.reason == NPL_FINISH_NONE && out_is(&r, text));
    npl_buf_free(&r.out);
    npl_stream_free(st);

    /* Ending in the middle of a character: finish emits U+FFFD. */
    npl_tokens lone = tokenize(tok, "\xf0\xaf\xa2\xa6");
    CHECK(lone.n >= 2);
    st = make(tok, NULL, 0, 0);
    npl_buf out = {0};
    npl_error err = {0};
    CHECK(npl_stream_push(st, lone.ids[0], &out, &err) == NPL_FINISH_NONE && out.len == 0);
    CHECK(npl_stream_finish(st, &out, &err) == NPL_OK);
    CHECK(out.len == 3 && memcmp(out.data, "\xef\xbf\xbd", 3) == 0);
    npl_buf_free(&out);
    npl_stream_free(st);
    npl_tokens_free(&lone);
    npl_tokens_free(&t);
}

static void test_max_tokens(const npl_tokenizer *tok)
{
    npl_tokens t = tokenize(tok, "one two three four five");
    CHECK(t.n == 5);
    npl_stream *st = make(tok, NULL, 0, 3);
    run_result r = run(st, tok, t.ids, t.n, NULL, 0, false);
    CHECK(r.reason == NPL_FINISH_LENGTH && r.pushed == 3 && out_is(&r, "one two three"));
    npl_buf_free(&r.out);
    npl_stream_free(st);

    /* At the limit, held-back text is released: it can no longer become
     * a stop string. */
    const char *stops[] = {" three four"};
    st = make(tok, stops, 1, 3);
    r = run(st, tok, t.ids, t.n, NULL, 0, false);
    CHECK(r.reason == NPL_FINISH_LENGTH && out_is(&r, "one two three"));
    npl_buf_free(&r.out);
    npl_stream_free(st);

    /* A stop string completing on the last allowed token is a stop. */
    const char *stops2[] = {"two"};
    st = make(tok, stops2, 1, 2);
    r = run(st, tok, t.ids, t.n, NULL, 0, false);
    CHECK(r.reason == NPL_FINISH_STOP && out_is(&r, "one "));
    npl_buf_free(&r.out);
    npl_stream_free(st);

    /* An eog token as the last allowed token is a stop. */
    int32_t ids[2] = {t.ids[0], 128009};
    st = make(tok, NULL, 0, 2);
    r = run(st, tok, ids, 2, NULL, 0, false);
    CHECK(r.reason == NPL_FINISH_STOP && out_is(&r, "one"));
    npl_buf_free(&r.out);
    npl_stream_free(st);

    /* Limit 1. */
    st = make(tok, NULL, 0, 1);
    r = run(st, tok, t.ids, t.n, NULL, 0, false);
    CHECK(r.reason == NPL_FINISH_LENGTH && r.pushed == 1 && out_is(&r, "one"));
    npl_buf_free(&r.out);
    npl_stream_free(st);
    npl_tokens_free(&t);
}

static void test_misuse(const npl_tokenizer *tok)
{
    npl_error err = {0};
    npl_buf out = {0};
    npl_stream *st = make(tok, NULL, 0, 0);
    CHECK(npl_stream_push(st, -1, &out, &err) == NPL_FINISH_STOP && err.code == NPL_ERR_INVALID_ARG);
    CHECK(npl_stream_push(st, 5, &out, &err) == NPL_FINISH_STOP && out.len == 0);
    npl_stream_free(st);
    st = make(tok, NULL, 0, 0);
    CHECK(npl_stream_push(st, npl_tokenizer_n_vocab(tok), &out, &err) == NPL_FINISH_STOP &&
          err.code == NPL_ERR_INVALID_ARG);
    npl_stream_free(st);
    CHECK(npl_stream_push(NULL, 5, &out, &err) == NPL_FINISH_STOP && err.code == NPL_ERR_INVALID_ARG);
    CHECK(npl_stream_finish(NULL, &out, &err) == NPL_ERR_INVALID_ARG);
    /* Finishing early, then pushing again: nothing more comes out. */
    st = make(tok, NULL, 0, 0);
    npl_tokens t = tokenize(tok, "ab");
    CHECK(npl_stream_push(st, t.ids[0], &out, &err) == NPL_FINISH_NONE);
    CHECK(npl_stream_finish(st, &out, &err) == NPL_OK);
    size_t len = out.len;
    CHECK(npl_stream_push(st, t.ids[0], &out, &err) == NPL_FINISH_STOP && out.len == len);
    CHECK(npl_stream_finish(st, &out, &err) == NPL_OK && out.len == len);
    npl_stream_free(st);
    npl_stream_free(NULL);
    npl_tokens_free(&t);
    npl_buf_free(&out);
}

static void test_gemma(const npl_tokenizer *tok)
{
    int32_t eot = npl_tokenizer_find(tok, "<end_of_turn>");
    CHECK(eot >= 0 && npl_tokenizer_is_eog(tok, eot));
    const char *text = "Sure! Here is a list:\n- one\n- two";
    npl_tokens t = tokenize(tok, text);
    npl_tokens_push(&t, eot, NULL);
    npl_stream *st = make(tok, NULL, 0, 0);
    run_result r = run(st, tok, t.ids, t.n, NULL, 0, false);
    CHECK(r.reason == NPL_FINISH_STOP && r.pushed == t.n);
    CHECKF(out_is(&r, text), "got '%s'", r.out.data);
    npl_buf_free(&r.out);
    npl_stream_free(st);

    const char *stops[] = {"\n- two"};
    st = make(tok, stops, 1, 0);
    r = run(st, tok, t.ids, t.n, stops, 1, true);
    CHECK(r.reason == NPL_FINISH_STOP && r.prefix_ok);
    CHECKF(out_is(&r, "Sure! Here is a list:\n- one"), "got '%s'", r.out.data);
    npl_buf_free(&r.out);
    npl_stream_free(st);
    npl_tokens_free(&t);

    /* Byte-fallback pieces (<0xNN>) split a character across tokens. */
    const char *rare = "x \xf0\x9d\x84\x9e y";
    t = tokenize(tok, rare);
    st = make(tok, NULL, 0, 0);
    r = run(st, tok, t.ids, t.n, NULL, 0, false);
    CHECK(r.utf8_ok && out_is(&r, rare));
    npl_buf_free(&r.out);
    npl_stream_free(st);
    npl_tokens_free(&t);
}

/* Deterministic pseudo-random numbers for the property test. */
static uint64_t next_random(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Random token sequences and stop strings (mostly cut out of the text the
 * tokens decode to, so they do occur, across token boundaries). After
 * every push the emitted text must be exactly the decoded text minus what
 * may still start a stop string; the stream must stop at the first token
 * after which a stop string is complete, cutting at the earliest one
 * complete by then. */
static void test_random_sequences(const npl_tokenizer *tok, int32_t id_limit)
{
    enum { ROUNDS = 300, N = 24 };
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    unsigned mismatches = 0, stops_hit = 0;
    for (int round = 0; round < ROUNDS; round++) {
        int32_t ids[N];
        for (int i = 0; i < N; i++) {
            do
                ids[i] = (int32_t)(next_random(&rng) % (uint64_t)id_limit);
            while (npl_tokenizer_is_eog(tok, ids[i]));
        }
        /* Reference: decoded text after each token (complete UTF-8). */
        npl_detok d;
        npl_detok_init(&d, tok, false);
        npl_buf text = {0};
        size_t len_after[N];
        for (int i = 0; i < N; i++) {
            npl_detok_push(&d, ids[i], &text, NULL);
            len_after[i] = text.len;
        }
        npl_detok_flush(&d, &text, NULL);

        char stop_store[3][8];
        const char *stops[3];
        size_t n_stop = 1 + next_random(&rng) % 3;
        for (size_t k = 0; k < n_stop; k++) {
            size_t len = 1 + next_random(&rng) % 6;
            size_t at = 0;
            if (text.len >= len)
                at = next_random(&rng) % (text.len - len + 1);
            if (text.len >= len && next_random(&rng) % 4 != 0 &&
                valid_utf8(text.data + at, len)) {
                memcpy(stop_store[k], text.data + at, len);
            } else {
                for (size_t c = 0; c < len; c++)
                    stop_store[k][c] = (char)('a' + next_random(&rng) % 4);
            }
            stop_store[k][len] = '\0';
            stops[k] = stop_store[k];
        }

        /* Expected stop: first token after which some stop is contained. */
        int stop_token = -1;
        size_t stop_pos = 0;
        for (int i = 0; i < N && stop_token < 0; i++) {
            for (size_t k = 0; k < n_stop; k++) {
                const char *hit = memmem(text.data, len_after[i], stops[k], strlen(stops[k]));
                if (hit && (stop_token < 0 || (size_t)(hit - text.data) < stop_pos)) {
                    stop_token = i;
                    stop_pos = (size_t)(hit - text.data);
                }
            }
        }

        npl_stream *st = make(tok, stops, n_stop, 0);
        npl_buf out = {0};
        npl_error err = {0};
        bool ok = true;
        for (int i = 0; i < N; i++) {
            npl_finish_reason r = npl_stream_push(st, ids[i], &out, &err);
            if (i == stop_token) {
                ok = ok && r == NPL_FINISH_STOP && out.len == stop_pos &&
                     (stop_pos == 0 || memcmp(out.data, text.data, stop_pos) == 0);
                stops_hit++;
                break;
            }
            size_t want = len_after[i] - undecided(text.data, len_after[i], stops, n_stop);
            ok = ok && r == NPL_FINISH_NONE && out.len == want &&
                 (want == 0 || memcmp(out.data, text.data, want) == 0);
        }
        npl_stream_finish(st, &out, &err);
        if (stop_token < 0) {
            /* Nothing stopped it: all the text, unless the flush completed
             * a stop string (U+FFFD could be part of one). */
            size_t cut = text.len;
            for (size_t k = 0; k < n_stop; k++) {
                const char *hit = memmem(text.data, text.len, stops[k], strlen(stops[k]));
                if (hit && (size_t)(hit - text.data) < cut)
                    cut = (size_t)(hit - text.data);
            }
            ok = ok && out.len == cut && (cut == 0 || memcmp(out.data, text.data, cut) == 0);
        }
        mismatches += !ok;
        npl_stream_free(st);
        npl_buf_free(&out);
        npl_buf_free(&text);
    }
    CHECKF(mismatches == 0, "%u of %d random sequences misbehaved", mismatches, ROUNDS);
    CHECKF(stops_hit > ROUNDS / 4, "only %u sequences hit a stop string", stops_hit);
}

static bool open_tokenizer(const char *path, npl_gguf **g, npl_tokenizer **tok)
{
    npl_error err = {0};
    *g = npl_gguf_open(path, &err);
    *tok = *g ? npl_tokenizer_from_gguf(*g, &err) : NULL;
    CHECKF(*tok != NULL, "%s: %s", path, err.message);
    return *tok != NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s LLAMA3.gguf GEMMA3.gguf\n", argv[0]);
        return 2;
    }
    npl_gguf *g;
    npl_tokenizer *tok;
    if (open_tokenizer(argv[1], &g, &tok)) {
        test_plain_and_eog(tok);
        test_stop_strings(tok);
        test_multibyte(tok);
        test_max_tokens(tok);
        test_misuse(tok);
        test_random_sequences(tok, 128000);
        npl_tokenizer_free(tok);
    }
    npl_gguf_close(g);
    if (open_tokenizer(argv[2], &g, &tok)) {
        test_gemma(tok);
        test_random_sequences(tok, npl_tokenizer_n_vocab(tok));
        npl_tokenizer_free(tok);
    }
    npl_gguf_close(g);
    return nt_report("test_stop_stream");
}
