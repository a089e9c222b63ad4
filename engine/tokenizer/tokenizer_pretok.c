/* BPE pre-tokenizer: splits text into words with the model's published
 * split regex, run by PCRE2 (UTF + UCP, JIT when available).
 *
 * The reference reads text with a lenient UTF-8 decoder and classifies
 * code points with Unicode 15.1 tables, while Debian's PCRE2 knows Unicode
 * 14. So the subject PCRE2 sees is the canonical re-encoding of what the
 * reference decoded, with the few code points the two disagree on replaced
 * by a stand-in of the reference's class and of the same encoded length;
 * word boundaries found in the subject then apply byte for byte to the
 * canonical text. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"
#include "unicode_utf8.h"

/* Split patterns from the models' tokenizer.json. The case-insensitive
 * contraction group "(?i:'s|'t|'re|'ve|'m|'ll|'d)" is spelled out letter by
 * letter because Unicode case folding would also accept U+017F (long s)
 * and U+212A (Kelvin sign) for s and k, which the reference does not. */
static const char llama3_pattern[] =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
    "|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)"
    "|\\s+";

/* Qwen2: as Llama 3 but digits split one by one. */
static const char qwen2_pattern[] =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
    "|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)"
    "|\\s+";

/* Qwen 3.5 / 3.6: Qwen2's, with combining marks (\p{M}) inside words and
 * never in a run of punctuation. */
static const char qwen35_pattern[] =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+"
    "|\\p{N}"
    "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)"
    "|\\s+";

/* SmolLM (as llama.cpp's starcoder family): every digit is a word, then
 * GPT-2's pattern (case-sensitive contractions, no digits left) within the
 * text between digits. One pass here: a whitespace run may end at a digit
 * as it would end at the end of its piece, so its lookahead accepts a
 * digit where GPT-2's accepts only the end or more whitespace. */
static const char smollm_pattern[] =
    "\\p{N}"
    "|'s|'t|'re|'ve|'m|'ll|'d"
    "| ?\\p{L}+"
    "| ?[^\\s\\p{L}\\p{N}]+"
    "|\\s+(?![^\\s\\p{N}])";

/* Tekken (Mistral Nemo, Small 3.x) as the reference runs it: the
 * published pattern's upper/lower letter classes become "a letter that is
 * not a-z" and "a letter that is not A-Z", so every letter outside ASCII
 * counts as both (an accented capital does not start a new word). */
#define CASED_WORDS                                                                                \
    "[^\\r\\n\\p{L}\\p{N}]?(?:(?=\\p{L})[^a-z])*(?:(?=\\p{L})[^A-Z])+" CONTRACTION                 \
    "|[^\\r\\n\\p{L}\\p{N}]?(?:(?=\\p{L})[^a-z])+(?:(?=\\p{L})[^A-Z])*" CONTRACTION
#define CONTRACTION ""
static const char tekken_pattern[] =
    CASED_WORDS
    "|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*"
    "|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)"
    "|\\s+";
#undef CONTRACTION

/* GPT-4o's o200k (Phi-4-mini, Llama 4): Tekken's words, each with an
 * optional contraction, and digits in threes. */
#define CONTRACTION "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
static const char gpt4o_pattern[] =
    CASED_WORDS
    "|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*"
    "|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)"
    "|\\s+";
#undef CONTRACTION
#undef CASED_WORDS

/* Letters (L) and numbers (N) assigned in Unicode 15.0 and 15.1, which
 * PCRE2 10.42 does not know yet. */
typedef struct cp_range {
    uint32_t first, last;
} cp_range;

static const cp_range unicode15_letters[] = {
    {0x1123F, 0x11240}, {0x11F02, 0x11F02}, {0x11F04, 0x11F10}, {0x11F12, 0x11F33},
    {0x1342F, 0x1342F}, {0x13441, 0x13446}, {0x1B132, 0x1B132}, {0x1B155, 0x1B155},
    {0x1DF25, 0x1DF2A}, {0x1E030, 0x1E06D}, {0x1E4D0, 0x1E4EB}, {0x2B739, 0x2B739},
    {0x2EBF0, 0x2EE5D}, {0x31350, 0x323AF},
};
static const cp_range unicode15_numbers[] = {
    {0x11F50, 0x11F59}, {0x1D2C0, 0x1D2D3}, {0x1E4F0, 0x1E4F9},
};

static bool in_ranges(uint32_t cp, const cp_range *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (cp >= r[i].first && cp <= r[i].last)
            return true;
    return false;
}

/* Stand-in for cp in the PCRE2 subject (same UTF-8 length as cp). */
static uint32_t pcre2_stand_in(uint32_t cp)
{
    if (cp < 0x1800)
        return cp;
    /* Surrogates (from lenient decoding) are "other"; so is U+180E, no
     * longer White_Space since Unicode 6.3 but still \s to PCRE2. */
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0x180E)
        return 0xE000; /* private use: neither \s, \p{L} nor \p{N} */
    if (cp >= 0x11000) {
        if (in_ranges(cp, unicode15_letters, sizeof unicode15_letters / sizeof *unicode15_letters))
            return 0x20000; /* a CJK ideograph: \p{L} */
        if (in_ranges(cp, unicode15_numbers, sizeof unicode15_numbers / sizeof *unicode15_numbers))
            return 0x1D7CE; /* MATHEMATICAL BOLD DIGIT ZERO: \p{N} */
    }
    return cp;
}

npl_status npl_pretok_compile(npl_tokenizer *tok, npl_error *err)
{
    const char *pattern = tok->pretok == NPL_PRETOK_QWEN2    ? qwen2_pattern
                          : tok->pretok == NPL_PRETOK_QWEN35 ? qwen35_pattern
                          : tok->pretok == NPL_PRETOK_SMOLLM ? smollm_pattern
                          : tok->pretok == NPL_PRETOK_TEKKEN ? tekken_pattern
                          : tok->pretok == NPL_PRETOK_GPT4O  ? gpt4o_pattern
                                                             : llama3_pattern;
    int code;
    PCRE2_SIZE offset;
    tok->pretok_re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                                   &code, &offset, NULL);
    if (!tok->pretok_re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        return npl_error_set(err, NPL_ERR_INTERNAL, "tokenizer: split pattern does not compile at %zu: %s",
                             (size_t)offset, (const char *)msg);
    }
    /* Without JIT (not built in, or no executable memory) the interpreter
     * gives the same matches, only slower. */
    (void)pcre2_jit_compile(tok->pretok_re, PCRE2_JIT_COMPLETE);
    return NPL_OK;
}

typedef struct split_state {
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit_stack;
} split_state;

static int match_at(const npl_tokenizer *tok, split_state *st, const unsigned char *subject,
                    size_t n, size_t pos)
{
    int rc = pcre2_match(tok->pretok_re, subject, n, pos, PCRE2_NO_UTF_CHECK, st->md, st->mctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !st->jit_stack) {
        /* The default 32 KiB JIT stack can be too small for huge runs;
         * retry once with a private, larger one. */
        st->mctx = pcre2_match_context_create(NULL);
        st->jit_stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, NULL);
        if (!st->mctx || !st->jit_stack)
            return PCRE2_ERROR_NOMEMORY;
        pcre2_jit_stack_assign(st->mctx, NULL, st->jit_stack);
        rc = pcre2_match(tok->pretok_re, subject, n, pos, PCRE2_NO_UTF_CHECK, st->md, st->mctx);
    }
    return rc;
}

size_t npl_pretok_canonical(const char *text, size_t len, bool escape_spaces, unsigned char *out)
{
    const unsigned char *in = (const unsigned char *)text;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t used;
        uint32_t cp = npl_utf8_decode_lenient(in + i, len - i, &used);
        i += used;
        n += npl_utf8_encode(escape_spaces && cp == ' ' ? 0x2581 : cp, out + n);
    }
    return n;
}

npl_status npl_pretok_split(const npl_tokenizer *tok, const char *text, size_t len,
                            npl_pretok_word_fn fn, void *ctx, npl_error *err)
{
    if (len == 0)
        return NPL_OK;
    if (len > (SIZE_MAX - 1) / 3)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "tokenizer: text too long (%zu bytes)", len);

    /* An invalid byte becomes U+FFFD (3 bytes): at most 3x the input. */
    unsigned char *canon = malloc(3 * len + 1);
    unsigned char *subject = malloc(3 * len + 1);
    split_state st = {0};
    npl_status status = NPL_OK;
    if (!canon || !subject) {
        status = npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for %zu bytes", 3 * len);
        goto out;
    }

    size_t n = npl_pretok_canonical(text, len, false, canon);
    for (size_t i = 0; i < n;) { /* canon is valid UTF-8: each code point as it was encoded */
        size_t k;
        uint32_t cp = npl_utf8_decode_lenient(canon + i, n - i, &k);
        uint32_t stand_in = pcre2_stand_in(cp);
        if (stand_in == cp)
            memcpy(subject + i, canon + i, k);
        else
            (void)npl_utf8_encode(stand_in, subject + i);
        i += k;
    }

    st.md = pcre2_match_data_create_from_pattern(tok->pretok_re, NULL);
    if (!st.md) {
        status = npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for match data");
        goto out;
    }

    size_t pos = 0;
    while (pos < n) {
        int rc = match_at(tok, &st, subject, n, pos);
        if (rc == PCRE2_ERROR_NOMATCH) {
            status = fn(ctx, canon + pos, n - pos, err); /* unmatched tail is a word */
            break;
        }
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            status = npl_error_set(err, rc == PCRE2_ERROR_NOMEMORY ? NPL_ERR_NOMEM : NPL_ERR_INTERNAL,
                                   "tokenizer: split failed at byte %zu: %s", pos, (const char *)msg);
            break;
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(st.md);
        size_t s = ov[0], e = ov[1];
        if (s > pos && (status = fn(ctx, canon + pos, s - pos, err)) != NPL_OK)
            break;
        if (e <= s) {
            /* The patterns never match empty; step one character anyway so
             * a changed pattern cannot loop forever. */
            e = s + npl_utf8_lead_len(subject[s]);
            if (e > n)
                e = n;
        }
        if ((status = fn(ctx, canon + s, e - s, err)) != NPL_OK)
            break;
        pos = e;
    }

out:
    if (st.md)
        pcre2_match_data_free(st.md);
    if (st.mctx)
        pcre2_match_context_free(st.mctx);
    if (st.jit_stack)
        pcre2_jit_stack_free(st.jit_stack);
    free(subject);
    free(canon);
    return status;
}
