/* The model-level entry points of the chat area (chat_model.c) on a tiny
 * random-weight Llama model: npl_chat_tokenize uses the model's tokenizer
 * and detected format, npl_stream_create its tokenizer; and a short
 * generation loop (prefill, sample, stream, decode) ties them together
 * deterministically.
 *
 *   test_chat_model LLAMA_TINY.gguf */
#include <stdlib.h>
#include <string.h>

#include "chat_template.h"
#include "npl_test.h"
#include "npullm.h"


static void test_wrappers(npl_model *m)
{
    const npl_model_info *info = npl_model_get_info(m);
    CHECK(info->chat_format == NPL_CHAT_LLAMA3 && !info->chat_format_guessed);
    /* Llama 3.0's template shows no tool-call syntax, nor has its vocabulary call tokens */
    CHECK(npl_model_tool_family(m) == NPL_TOOLS_GENERIC);
    CHECK(npl_model_tool_family(NULL) == NPL_TOOLS_GENERIC);

    npl_chat_message msgs[] = {{"system", "Be brief."}, {"user", "Hi <|eot_id|> there"}};
    npl_tokens a = {0}, b = {0};
    npl_error err = {0};
    CHECKF(npl_chat_tokenize(m, msgs, 2, true, &a, &err) == NPL_OK, "%s", err.message);
    CHECK(npl_chat_build_tokens(npl_model_tokenizer(m), NPL_CHAT_LLAMA3, msgs, 2, true, &b, &err) ==
          NPL_OK);
    CHECK(a.n > 0 && a.n == b.n && memcmp(a.ids, b.ids, a.n * sizeof(int32_t)) == 0);
    npl_tokens_free(&a);
    npl_tokens_free(&b);

    CHECK(npl_chat_tokenize(NULL, msgs, 2, true, &a, &err) == NPL_ERR_INVALID_ARG);
    npl_chat_message bad[] = {{"robot", "x"}};
    CHECK(npl_chat_tokenize(m, bad, 1, true, &a, &err) == NPL_ERR_INVALID_ARG && a.n == 0);

    CHECK(npl_stream_create(NULL, NULL, 0, 0, &err) == NULL && err.code == NPL_ERR_INVALID_ARG);
    const char *stop = "###";
    npl_stream *st = npl_stream_create(m, &stop, 1, 4, &err);
    CHECKF(st != NULL, "%s", err.message);
    npl_buf out = {0};
    CHECK(npl_stream_push(st, 128009, &out, &err) == NPL_FINISH_STOP && out.len == 0);
    npl_stream_free(st);
    npl_buf_free(&out);
}

/* Generates up to max_tokens; returns the text and finish reason. */
static npl_finish_reason generate(npl_model *m, const npl_sampler_params *sp, uint32_t max_tokens,
                                  npl_buf *text, size_t *n_generated)
{
    npl_error err = {0};
    npl_tokens prompt = {0};
    npl_chat_message msgs[] = {{"user", "Write a short poem about the sea."}};
    npl_finish_reason reason = NPL_FINISH_NONE;
    *n_generated = 0;
    CHECKF(npl_chat_tokenize(m, msgs, 1, true, &prompt, &err) == NPL_OK, "%s", err.message);
    npl_seq *seq = npl_seq_create(m, 256, &err);
    npl_sampler *s = npl_sampler_create(sp, npl_model_get_info(m)->n_vocab, &err);
    npl_stream *st = npl_stream_create(m, NULL, 0, max_tokens, &err);
    CHECKF(seq && s && st, "%s", err.message);
    if (!seq || !s || !st)
        goto out;
    for (size_t i = 0; i < prompt.n; i++)
        npl_sampler_accept(s, prompt.ids[i]);
    size_t consumed = 0;
    CHECKF(npl_prefill(m, seq, prompt.ids, prompt.n, 0, &consumed, &err) == NPL_OK, "%s", err.message);
    while (reason == NPL_FINISH_NONE) {
        const float *logits = npl_seq_logits(seq);
        CHECK(logits != NULL);
        if (!logits)
            break;
        int32_t id = npl_sampler_sample(s, logits);
        (*n_generated)++;
        reason = npl_stream_push(st, id, text, &err);
        CHECKF(err.code == NPL_OK, "%s", err.message);
        if (reason != NPL_FINISH_NONE)
            break;
        if (npl_decode(m, &seq, &id, 1, &err) != NPL_OK) {
            CHECKF(false, "decode: %s", err.message);
            break;
        }
    }
    CHECK(npl_stream_finish(st, text, &err) == NPL_OK);
out:
    npl_stream_free(st);
    npl_sampler_free(s);
    npl_seq_free(seq);
    npl_tokens_free(&prompt);
    return reason;
}

static void test_generation(npl_model *m)
{
    npl_sampler_params sp;
    npl_sampler_params_default(&sp);
    sp.seed = 2024;
    npl_buf a = {0}, b = {0};
    size_t na, nb;
    npl_finish_reason ra = generate(m, &sp, 12, &a, &na);
    npl_finish_reason rb = generate(m, &sp, 12, &b, &nb);
    CHECK(ra != NPL_FINISH_NONE && ra == rb && na == nb && na <= 12);
    CHECK(ra != NPL_FINISH_LENGTH || na == 12);
    CHECK(a.len == b.len && (a.len == 0 || memcmp(a.data, b.data, a.len) == 0));
    npl_buf_free(&a);
    npl_buf_free(&b);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s LLAMA_TINY.gguf\n", argv[0]);
        return 2;
    }
    npl_error err = {0};
    npl_model_params mp;
    npl_model_params_default(&mp);
    mp.n_threads = 1;
    npl_model *m = npl_model_load(argv[1], &mp, &err);
    CHECKF(m != NULL, "%s", err.message);
    if (m) {
        test_wrappers(m);
        test_generation(m);
        npl_model_free(m);
    }
    return nt_report("test_chat_model");
}
