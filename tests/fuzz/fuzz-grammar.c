/* Fuzz target for constrained output: the input's first byte picks the
 * kind ('g' grammar text, anything else a JSON Schema), the rest up to a
 * NUL byte is the grammar or schema, and what follows the NUL is a
 * partial output fed to a matcher in small pieces. Whatever the input:
 * compiling either succeeds or fails with a message; every mask agrees
 * with accepting its tokens one by one; accepted bytes never reach a
 * state the mask called impossible. Any violated invariant aborts. The
 * grammar limits (grammar.h) bound memory and time. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_target.h"
#include "grammar.h"

#define MAX_OUTPUT 256u

static void require(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz-grammar: invariant violated: %s\n", what);
        abort();
    }
}

/* A small vocabulary: JSON punctuation, letters, digits, UTF-8 pieces. */
static npl_vocab_index *vocab(void)
{
    static npl_vocab_index *vi;
    if (vi)
        return vi;
    static const char *const toks[] = {
        "{", "}", "[", "]", ",", ":", "\"", " ", "\\", "a", "b", "z", "A", "Z", "0", "1", "5", "9", "-", "+", ".",
        "e", "E", "T", "t", "f", "n", "u", "l", "r", "s", "x", "true", "false", "null", "{\"", "\":", "\",", "\"}",
        "é", "\xc3", "\xa9", "日", "\\n", "\\u00", "12", "2024-", "-01", "00:", "Z\"", "  ", "\n", "_", "</s>",
    };
    size_t n = sizeof toks / sizeof toks[0];
    size_t lens[sizeof toks / sizeof toks[0]];
    for (size_t i = 0; i < n; i++)
        lens[i] = strlen(toks[i]);
    int32_t eog = (int32_t)n - 1;
    vi = npl_vocab_index_from_texts(toks, lens, (uint32_t)n, &eog, 1, NULL);
    require(vi != NULL, "vocabulary built");
    return vi;
}

static void check_mask(npl_grammar_matcher *m, uint32_t *mask)
{
    npl_vocab_index *vi = vocab();
    uint32_t n = npl_vocab_index_n_vocab(vi);
    size_t allowed = npl_grammar_matcher_mask(m, mask), count = 0;
    for (uint32_t id = 0; id < n; id++) {
        npl_grammar_matcher *c = npl_grammar_matcher_clone(m, NULL);
        if (!c)
            return; /* out of memory is allowed, not wrong answers */
        bool ok = npl_grammar_matcher_accept_token(c, (int32_t)id);
        bool bit = (mask[id >> 5] >> (id & 31)) & 1;
        require(ok == bit, "mask agrees with accepting the token");
        count += bit;
        npl_grammar_matcher_free(c);
    }
    require(count == allowed, "mask count");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool is_text = data[0] == 'g';
    data++;
    size--;
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    const char *out = nul ? (const char *)nul + 1 : "";
    size_t olen = nul ? size - glen - 1 : 0;
    if (olen > MAX_OUTPUT)
        olen = MAX_OUTPUT;

    npl_error err = {0};
    npl_grammar *g = is_text ? npl_grammar_compile_text((const char *)data, glen, &err)
                             : npl_grammar_compile_schema((const char *)data, glen, &err);
    if (!g) {
        require(err.code != NPL_OK && err.message[0], "refusal explained");
        return 0;
    }
    npl_grammar_matcher *m = npl_grammar_matcher_create(g, vocab(), &err);
    if (!m) {
        require(err.message[0], "matcher refusal explained");
        npl_grammar_free(g);
        return 0;
    }
    uint32_t mask[4];
    check_mask(m, mask);
    /* feed the output in pieces of 1..4 bytes; a refused piece ends it */
    for (size_t i = 0; i < olen;) {
        size_t k = 1 + (unsigned char)out[i] % 4;
        if (k > olen - i)
            k = olen - i;
        if (!npl_grammar_matcher_accept_bytes(m, out + i, k))
            break;
        i += k;
        check_mask(m, mask);
    }
    npl_grammar_matcher_reset(m);
    require(!npl_grammar_matcher_is_finished(m), "reset");
    npl_grammar_matcher_free(m);
    npl_grammar_free(g);
    return 0;
}
