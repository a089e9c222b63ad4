/* Fuzz target for the SentencePiece unigram tokenizer (tokenizer_ugm.c):
 * a toy vocabulary with an arbitrary precompiled charsmap (the double
 * array a file carries, so possibly damaged) tokenizes an arbitrary text.
 * Input: byte 0 flags (1 add_space_prefix, 2 remove_extra_whitespaces,
 * 4 BOS/EOS and special parsing), bytes 1-2 the charsmap's length (little
 * endian), the charsmap, then the text. A build may fail (a damaged
 * charsmap), a tokenize call may fail with an error; every id produced
 * must be in the vocabulary. */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_target.h"
#include "tokenizer_internal.h"

static void require(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz-ugm: invariant violated: %s\n", what);
        abort();
    }
}

static const struct {
    const char *text;
    int32_t type;
    float score;
} pieces[] = {
    {"<s>", NPL_TOKEN_CONTROL, 0.0f},  {"<pad>", NPL_TOKEN_CONTROL, 0.0f}, {"</s>", NPL_TOKEN_CONTROL, 0.0f},
    {"<unk>", NPL_TOKEN_UNKNOWN, 0.0f}, {"\xe2\x96\x81", NPL_TOKEN_NORMAL, -2.0f},
    {"\xe2\x96\x81the", NPL_TOKEN_NORMAL, -3.0f}, {"\xe2\x96\x81" "a", NPL_TOKEN_NORMAL, -3.5f},
    {"a", NPL_TOKEN_NORMAL, -4.0f},      {"b", NPL_TOKEN_NORMAL, -4.5f},    {"ab", NPL_TOKEN_NORMAL, -5.0f},
    {"fi", NPL_TOKEN_NORMAL, -6.0f},     {"\xc3\xa9", NPL_TOKEN_NORMAL, -7.0f},
    {"\xe4\xbd\xa0", NPL_TOKEN_NORMAL, -8.0f}, {"<ud>", NPL_TOKEN_USER_DEFINED, 0.0f},
    {"\xef\xac\x81x", NPL_TOKEN_USER_DEFINED, 0.0f}, {"zz", NPL_TOKEN_UNUSED, -1.0f},
    {"<0x41>", NPL_TOKEN_BYTE, 0.0f},   {"<mask>", NPL_TOKEN_CONTROL, 0.0f},
};
#define N_PIECES ((int32_t)(sizeof pieces / sizeof *pieces))

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    unsigned flags = data[0];
    size_t cm_len = (size_t)data[1] | ((size_t)data[2] << 8);
    if (cm_len > size - 3)
        cm_len = size - 3;
    const uint8_t *cm = data + 3;
    const char *text = (const char *)(cm + cm_len);
    size_t text_len = size - 3 - cm_len;

    npl_str tokens[N_PIECES];
    int32_t types[N_PIECES];
    float scores[N_PIECES];
    for (int32_t i = 0; i < N_PIECES; i++) {
        tokens[i] = (npl_str){pieces[i].text, strlen(pieces[i].text)};
        types[i] = pieces[i].type;
        scores[i] = pieces[i].score;
    }
    npl_tokenizer_spec spec;
    npl_tokenizer_spec_init(&spec);
    spec.kind = NPL_TOKENIZER_UGM;
    spec.n_tokens = N_PIECES;
    spec.tokens = tokens;
    spec.types = types;
    spec.scores = scores;
    spec.bos = 0;
    spec.eos = 2;
    spec.unk = 3;
    spec.add_bos = 1;
    spec.add_space_prefix = flags & 1;
    spec.remove_extra_ws = (flags & 2) != 0;
    spec.charsmap = cm_len ? cm : NULL;
    spec.charsmap_len = cm_len;

    npl_error err = {0};
    npl_tokenizer *tok = npl_tokenizer_build(&spec, &err);
    if (!tok)
        return 0;
    npl_tokens out = {0};
    unsigned tf = (flags & 4) ? NPL_TOKENIZE_ADD_BOS | NPL_TOKENIZE_PARSE_SPECIAL : 0;
    if (npl_tokenize(tok, text, text_len, tf, &out, &err) == NPL_OK)
        for (size_t i = 0; i < out.n; i++)
            require(out.ids[i] >= 0 && out.ids[i] < N_PIECES, "ids inside the vocabulary");
    npl_tokens_free(&out);
    npl_tokenizer_free(tok);
    return 0;
}
