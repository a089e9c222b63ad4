/* engine/chat/think_split.c: thinking and answer apart, whatever the pieces'
 * boundaries (every split of each output into two and into single bytes
 * gives the same result as the whole). */
#include <string.h>

#include "npl_test.h"
#include "think_split.h"


typedef struct split_case {
    const char *prompt;
    const char *output;
    const char *answer;
    const char *thinking;
} split_case;

static const split_case cases[] = {
    {NULL, "Hello there.", "Hello there.", ""},
    {NULL, "<think>\nLet me see.\n</think>\n\nParis.", "Paris.", "\nLet me see.\n"},
    {NULL, "  <think>a</think>b", "b", "a"},
    {NULL, "<think>never closed", "", "never closed"},
    {NULL, "<thin", "<thin", ""},                        /* a prefix that never became a tag */
    {NULL, "x <think>y</think>", "x <think>y</think>", ""}, /* only at the start */
    {NULL, "<think></think>\n\n", "", ""},
    {NULL, "<think>a</thinker></think>Z</think>", "Z</think>", "a</thinker>"},
    {NULL, "\n\n", "\n\n", ""},                          /* whitespace-only output stays answer */
    {"<|im_start|>assistant\n<think>\n", "plan</think>\n\nDone", "Done", "plan"},
    {"<|im_start|>assistant\n<think>\n\n</think>\n\n", "Done", "Done", ""},
    {NULL, "<think>€ and 東京</think>ünïcode", "ünïcode", "€ and 東京"},
    /* harmony (gpt-oss): <|end|> is a control token, absent from the text */
    {"<|start|>user<|message|>Hi<|end|><|start|>assistant",
     "<|channel|>analysis<|message|>Think.<|start|>assistant<|channel|>final<|message|>Paris.", "Paris.", "Think."},
    {"<|start|>assistant", "<|channel|>final<|message|>Only <|answer", "Only <|answer", ""},
    {"<|start|>assistant", "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\":1}",
     "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\":1}", ""},
    {"<|start|>assistant", "<|channel|>analysis<|message|>never finished", "", "never finished"},
    {"<|start|>assistant", "no header", "no header", ""},
};

static void run(const split_case *c, const size_t *cuts, size_t n_cuts, const char *label)
{
    npl_think_split s;
    npl_think_split_init(&s, c->prompt);
    npl_buf answer = {0}, thinking = {0};
    npl_error err;
    npl_error_clear(&err);
    size_t prev = 0, n = strlen(c->output);
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : n;
        CHECK(npl_think_split_push(&s, c->output + prev, end - prev, &answer, &thinking, &err) == NPL_OK);
        prev = end;
    }
    CHECK(npl_think_split_finish(&s, &answer, &thinking, &err) == NPL_OK);
    CHECKF(answer.len == strlen(c->answer) && (!answer.len || memcmp(answer.data, c->answer, answer.len) == 0),
           "%s: output '%s': answer '%.*s', expected '%s'", label, c->output, (int)answer.len,
           answer.data ? answer.data : "", c->answer);
    CHECKF(thinking.len == strlen(c->thinking) &&
               (!thinking.len || memcmp(thinking.data, c->thinking, thinking.len) == 0),
           "%s: output '%s': thinking '%.*s', expected '%s'", label, c->output, (int)thinking.len,
           thinking.data ? thinking.data : "", c->thinking);
    npl_buf_free(&answer);
    npl_buf_free(&thinking);
    npl_think_split_free(&s);
}

int main(void)
{
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const split_case *c = &cases[k];
        size_t n = strlen(c->output);
        run(c, NULL, 0, "whole");
        for (size_t cut = 0; cut <= n; cut++)
            run(c, &cut, 1, "two pieces");
        size_t bytes[256];
        for (size_t i = 0; i < n && i < 256; i++)
            bytes[i] = i + 1;
        run(c, bytes, n < 256 ? n : 256, "byte by byte");
    }
    return nt_report("think-split");
}
