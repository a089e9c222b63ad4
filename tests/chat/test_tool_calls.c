/* engine/chat/tool_calls.c and tool_format.c: each family's call syntax
 * parsed into text and calls, whole, split at every byte boundary and
 * byte by byte (the same events every time); a call handed on as soon as
 * its last byte arrives; malformed calls passed on as text; the family
 * detected from every template of ../shared/chat-templates.
 *
 * usage: test_tool_calls [SHARED_TEMPLATES_DIR] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npl_buf.h"
#include "npl_test.h"
#include "npullm.h"

/* Events as one string: text as it is, a call as [[id name args]]. */
static void on_text(const char *t, size_t n, void *ctx)
{
    npl_buf_append(ctx, t, n, NULL);
}

static void on_call(const npl_tool_call *c, void *ctx)
{
    npl_buf_appendf(ctx, NULL, "[[%s %s %s]]", c->id, c->name, c->arguments);
}

static char *parse(npl_tool_family f, const char *out, const size_t *cuts, size_t n_cuts)
{
    npl_buf ev = {0};
    npl_tool_parser *p = npl_tool_parser_new(f, NULL, on_text, on_call, &ev);
    CHECK(p != NULL);
    size_t prev = 0, n = strlen(out);
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : n;
        CHECK(npl_tool_parser_feed(p, out + prev, end - prev, NULL) == NPL_OK);
        prev = end;
    }
    CHECK(npl_tool_parser_finish(p, NULL) == NPL_OK);
    npl_tool_parser_free(p);
    npl_buf_append(&ev, "", 1, NULL);
    return ev.data;
}

typedef struct tcase {
    npl_tool_family f;
    const char *output, *events;
} tcase;

#define W "{\"city\": \"Paris\"}"
#define WJ "{\"name\": \"get_weather\", \"arguments\": " W "}"
#define CALL0 "[[call_0 get_weather " W "]]"
#define CALL1 "[[call_1 get_weather " W "]]"

static const tcase cases[] = {
    /* Qwen 2.5 / 3, QwQ, Hermes */
    {NPL_TOOLS_HERMES, "Plain answer.", "Plain answer."},
    {NPL_TOOLS_HERMES, "Let me check.\n<tool_call>\n" WJ "\n</tool_call>", "Let me check.\n" CALL0},
    {NPL_TOOLS_HERMES, "<tool_call>\n" WJ "\n</tool_call>\n<tool_call>\n" WJ "\n</tool_call>\n", CALL0 CALL1},
    {NPL_TOOLS_HERMES, "<tool_call>" WJ, CALL0}, /* cut off before the close */
    {NPL_TOOLS_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": [1, 2]}\"}</tool_call>Done",
     "[[call_0 f {\"a\": [1, 2]}]]Done"}, /* arguments as a JSON string */
    {NPL_TOOLS_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"}{<tool_call>\\\"\"}}</tool_call>",
     "[[call_0 f {\"s\": \"}{<tool_call>\\\"\"}]]"},
    {NPL_TOOLS_HERMES, "<tool_call>not json</tool_call>", "<tool_call>not json</tool_call>"},
    {NPL_TOOLS_HERMES, "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>"},
    {NPL_TOOLS_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": ", "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": "},
    {NPL_TOOLS_HERMES, "a <tool_ca", "a <tool_ca"},
    {NPL_TOOLS_HERMES, "<tool_call>{\"name\": \"bad name\", \"arguments\": {}}",
     "<tool_call>{\"name\": \"bad name\", \"arguments\": {}}"},
    {NPL_TOOLS_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": [1]}", "<tool_call>{\"name\": \"f\", \"arguments\": [1]}"},
    /* Llama 3.1-3.3 */
    {NPL_TOOLS_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": " W "}", CALL0},
    {NPL_TOOLS_LLAMA3, " {\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": " W "}; "
                       "{\"name\": \"get_weather\", \"parameters\": " W "}",
     CALL0 CALL1},
    {NPL_TOOLS_LLAMA3, "{\"answer\": 42}", "{\"answer\": 42}"},
    {NPL_TOOLS_LLAMA3, "Hello {\"name\": \"x\"}", "Hello {\"name\": \"x\"}"},
    {NPL_TOOLS_LLAMA3, "<|python_tag|>brave_search.call(query=\"Paris \\\"weather\\\"\", n=3, safe=True)",
     "[[call_0 brave_search {\"query\": \"Paris \\\"weather\\\"\", \"n\": 3, \"safe\": true}]]"},
    {NPL_TOOLS_LLAMA3, "<|python_tag|>print(1 + 1)\n", "[[call_0 python {\"code\": \"print(1 + 1)\"}]]"},
    {NPL_TOOLS_LLAMA3, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": " W "}", CALL0},
    /* Mistral 7B v0.3, Nemo, Small 3 */
    {NPL_TOOLS_MISTRAL, "[TOOL_CALLS][" WJ ", {\"name\": \"get_weather\", \"arguments\": " W ", \"id\": \"abcDEF123\"}]",
     CALL0 "[[abcDEF123 get_weather " W "]]"},
    {NPL_TOOLS_MISTRAL, "Sure. [TOOL_CALLS] " WJ, "Sure. " CALL0},
    {NPL_TOOLS_MISTRAL, "[TOOL_CALLS][" WJ ", oops]", CALL0 ", oops]"}, /* what follows a call stays */
    {NPL_TOOLS_MISTRAL, "[TOOL_CALLS]nothing", "[TOOL_CALLS]nothing"},
    /* Mistral Small 3.2 */
    {NPL_TOOLS_MISTRAL_ARGS, "[TOOL_CALLS]get_weather[ARGS]" W "[TOOL_CALLS]get_weather[ARGS]" W, CALL0 CALL1},
    {NPL_TOOLS_MISTRAL_ARGS, "[TOOL_CALLS]get_weather[ARGS]{bad}", "[TOOL_CALLS]get_weather[ARGS]{bad}"},
    /* Granite 3.x */
    {NPL_TOOLS_GRANITE, "<|tool_call|>[" WJ "]", CALL0},
    {NPL_TOOLS_GRANITE, "<|tool_call|>[" WJ ",\n " WJ "]\nDone.", CALL0 CALL1 "Done."},
    /* Phi-4-mini */
    {NPL_TOOLS_PHI4_MINI, "<|tool_call|>[" WJ "]<|/tool_call|>", CALL0},
    {NPL_TOOLS_PHI4_MINI, "<|tool_call|>" WJ "<|/tool_call|>", CALL0},
    /* Command-R7B */
    {NPL_TOOLS_COMMAND_R7B,
     "<|START_THINKING|>I will look it up.<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", "
     "\"tool_name\": \"get_weather\", \"parameters\": " W "}\n]<|END_ACTION|>",
     "<|START_THINKING|>I will look it up.<|END_THINKING|>[[0 get_weather " W "]]"},
    /* functionary v3.1 */
    {NPL_TOOLS_FUNCTIONARY_V31, "Checking.<function=get_weather>" W "</function><function=get_weather>" W "</function>",
     "Checking." CALL0 CALL1},
    {NPL_TOOLS_FUNCTIONARY_V31, "<function=get_weather>{oops</function>", "<function=get_weather>{oops</function>"},
    {NPL_TOOLS_FUNCTIONARY_V31, "<|python_tag|>import math", "[[call_0 python {\"code\": \"import math\"}]]"},
    /* functionary v3.2 (the prompt ends with >>>) */
    {NPL_TOOLS_FUNCTIONARY_V32, "all\nHello there", "Hello there"},
    {NPL_TOOLS_FUNCTIONARY_V32, "get_weather\n" W ">>>get_weather\n" W, CALL0 CALL1},
    {NPL_TOOLS_FUNCTIONARY_V32, "all\nLet me see.>>>get_weather\n" W, "Let me see." CALL0},
    {NPL_TOOLS_FUNCTIONARY_V32, "no newline", "no newline"},
    /* firefunction v2 */
    {NPL_TOOLS_FIREFUNCTION_V2, " functools[" WJ ", " WJ "]", " " CALL0 CALL1},
    {NPL_TOOLS_FIREFUNCTION_V2, "I like functools a lot", "I like functools a lot"},
    /* DeepSeek-R1 distills */
    {NPL_TOOLS_DEEPSEEK_R1,
     "Let me call.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n" W
     "\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n" W
     "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
     "Let me call." CALL0 CALL1},
    /* Nemotron */
    {NPL_TOOLS_NEMOTRON, "<TOOLCALL>[" WJ "]</TOOLCALL>", CALL0},
    /* generic JSON */
    {NPL_TOOLS_GENERIC, "{\"tool_calls\": [" WJ ", " WJ "]}", CALL0 CALL1},
    {NPL_TOOLS_GENERIC, "{\"tool_call\": " WJ "}", CALL0},
    {NPL_TOOLS_GENERIC, "{\"response\": \"Hi \\u00e9\"}", "Hi é"},
    {NPL_TOOLS_GENERIC, "Just text {\"tool_call\": 1}", "Just text {\"tool_call\": 1}"},
    {NPL_TOOLS_GENERIC, "{\"tool_calls\": [" WJ ", {\"nope\": 1}]}", "{\"tool_calls\": [" WJ ", {\"nope\": 1}]}"},
    {NPL_TOOLS_GENERIC, "{\"tool_call\": {\"name\": \"f\", \"arguments\": {\"a\": ", "{\"tool_call\": {\"name\": \"f\", \"arguments\": {\"a\": "},
    {NPL_TOOLS_GENERIC, "", ""},
    {NPL_TOOLS_GENERIC, "  \n", "  \n"},
};

static void check_case(const tcase *c)
{
    size_t n = strlen(c->output);
    char *whole = parse(c->f, c->output, NULL, 0);
    CHECKF(strcmp(whole, c->events) == 0, "%s: '%s'\n  got      '%s'\n  expected '%s'", npl_tool_family_name(c->f),
           c->output, whole, c->events);
    for (size_t cut = 0; cut <= n; cut++) {
        char *two = parse(c->f, c->output, &cut, 1);
        CHECKF(strcmp(two, whole) == 0, "%s: '%s' cut at %zu: '%s'", npl_tool_family_name(c->f), c->output, cut, two);
        free(two);
    }
    size_t *bytes = malloc((n + 1) * sizeof *bytes);
    for (size_t i = 0; i < n; i++)
        bytes[i] = i + 1;
    char *each = parse(c->f, c->output, bytes, n);
    CHECKF(strcmp(each, whole) == 0, "%s: '%s' byte by byte: '%s'", npl_tool_family_name(c->f), c->output, each);
    free(each);
    free(bytes);
    free(whole);
}

/* A call is handed on when its JSON ends, before the closing marker. */
static void check_early_calls(void)
{
    static const struct {
        npl_tool_family f;
        const char *head, *tail;
    } early[] = {
        {NPL_TOOLS_HERMES, "<tool_call>\n" WJ, "\n</tool_call>"},
        {NPL_TOOLS_MISTRAL, "[TOOL_CALLS][" WJ, ", " WJ "]"},
        {NPL_TOOLS_FUNCTIONARY_V31, "<function=f>{}", "</function>"},
        {NPL_TOOLS_DEEPSEEK_R1, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}", "\n```"},
    };
    for (size_t i = 0; i < sizeof early / sizeof early[0]; i++) {
        npl_buf ev = {0};
        npl_tool_parser *p = npl_tool_parser_new(early[i].f, "t", on_text, on_call, &ev);
        CHECK(npl_tool_parser_feed(p, early[i].head, strlen(early[i].head), NULL) == NPL_OK);
        CHECKF(npl_tool_parser_calls(p) == 1, "%s: the call waits for '%s'", npl_tool_family_name(early[i].f),
               early[i].tail);
        CHECK(npl_tool_parser_feed(p, early[i].tail, strlen(early[i].tail), NULL) == NPL_OK);
        CHECK(npl_tool_parser_finish(p, NULL) == NPL_OK);
        npl_buf_append(&ev, "", 1, NULL);
        CHECKF(strncmp(ev.data, "[[t0 ", 5) == 0, "%s: id prefix: %s", npl_tool_family_name(early[i].f), ev.data);
        npl_tool_parser_free(p);
        npl_buf_free(&ev);
    }
}

static void check_shapes(void)
{
    for (int f = 0; f < NPL_TOOLS_COUNT; f++) {
        const npl_tool_call_shape *s = npl_tool_call_shape_of(f);
        CHECK(s && s->section_prefix && s->section_suffix && s->call_prefix && s->call_suffix && s->separator);
        CHECK(s->layout == NPL_TOOL_CALL_OBJECT ? s->name_key && s->args_key : s->name_suffix != NULL);
        CHECK(strcmp(npl_tool_family_name(f), "?") != 0);
    }
    CHECK(npl_tool_call_shape_of(NPL_TOOLS_COUNT) == NULL);
    const char *m[8];
    CHECK(npl_tool_family_markers(NPL_TOOLS_MISTRAL, m, 8) == 1 && strcmp(m[0], "[TOOL_CALLS]") == 0);
    CHECK(npl_tool_family_markers(NPL_TOOLS_LLAMA3, m, 8) == 1 && strcmp(m[0], "<|python_tag|>") == 0);
    CHECK(npl_tool_family_markers(NPL_TOOLS_MISTRAL_ARGS, m, 8) == 2 && strcmp(m[1], "[ARGS]") == 0);
    CHECK(npl_tool_family_markers(NPL_TOOLS_DEEPSEEK_R1, m, 8) == 5);
    CHECK(npl_tool_family_markers(NPL_TOOLS_HERMES, NULL, 0) == 2);
    CHECK(npl_tool_family_markers(NPL_TOOLS_COUNT, m, 8) == 0);
    CHECK(npl_tool_parser_new(NPL_TOOLS_COUNT, NULL, on_text, on_call, NULL) == NULL);
    CHECK(npl_tool_parser_feed(NULL, "x", 1, NULL) == NPL_ERR_INVALID_ARG);
}

/* ---- detection over the shared templates ----------------------------------------------------- */

static bool has_mistral_tokens(const char *text, void *ctx)
{
    (void)ctx;
    return strcmp(text, "[TOOL_CALLS]") == 0;
}

static void check_detection(const char *dir)
{
    static const struct {
        const char *file;
        npl_tool_family f;
    } want[] = {
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", NPL_TOOLS_LLAMA3},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", NPL_TOOLS_LLAMA3},
        {"meta-llama-Llama-3.3-70B-Instruct.jinja", NPL_TOOLS_LLAMA3},
        {"nvidia-Llama-3.1-Nemotron-70B-Instruct.jinja", NPL_TOOLS_LLAMA3},
        {"Qwen-Qwen2.5-7B-Instruct.jinja", NPL_TOOLS_HERMES},
        {"Qwen-Qwen3-0.6B.jinja", NPL_TOOLS_HERMES},
        {"Qwen-QwQ-32B.jinja", NPL_TOOLS_HERMES},
        {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", NPL_TOOLS_HERMES},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", NPL_TOOLS_HERMES},
        {"ibm-granite-granite-4.0.jinja", NPL_TOOLS_HERMES},
        {"mistralai-Mistral-7B-Instruct-v0.3.jinja", NPL_TOOLS_MISTRAL},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", NPL_TOOLS_MISTRAL},
        {"mistralai-Mistral-Small-3.2-24B-Instruct-2506.jinja", NPL_TOOLS_MISTRAL_ARGS},
        {"ibm-granite-granite-3.0-2b-instruct.jinja", NPL_TOOLS_GRANITE},
        {"ibm-granite-granite-3.1-1b-a400m-instruct.jinja", NPL_TOOLS_GRANITE},
        {"ibm-granite-granite-3.2-8b-instruct.jinja", NPL_TOOLS_GRANITE},
        {"ibm-granite-granite-3.3-2b-instruct.jinja", NPL_TOOLS_GRANITE},
        {"microsoft-Phi-4-mini-instruct.jinja", NPL_TOOLS_PHI4_MINI},
        {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", NPL_TOOLS_COMMAND_R7B},
        {"CohereForAI-c4ai-command-r7b-12-2024-default.jinja", NPL_TOOLS_COMMAND_R7B},
        {"meetkai-functionary-medium-v3.1.jinja", NPL_TOOLS_FUNCTIONARY_V31},
        {"meetkai-functionary-medium-v3.2.jinja", NPL_TOOLS_FUNCTIONARY_V32},
        {"fireworks-ai-llama-3-firefunction-v2.jinja", NPL_TOOLS_FIREFUNCTION_V2},
        {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", NPL_TOOLS_DEEPSEEK_R1},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", NPL_TOOLS_DEEPSEEK_R1},
        {"nvidia-NVIDIA-Nemotron-Nano-9B-v2.jinja", NPL_TOOLS_NEMOTRON},
        {"google-gemma-3-270m-it.jinja", NPL_TOOLS_GENERIC},
        {"microsoft-phi-4.jinja", NPL_TOOLS_GENERIC},
        {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", NPL_TOOLS_GENERIC},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, want[i].file);
        FILE *fp = fopen(path, "rb");
        CHECKF(fp != NULL, "cannot read %s", path);
        if (!fp)
            continue;
        static char src[1 << 20];
        size_t n = fread(src, 1, sizeof src - 1, fp);
        src[n] = 0;
        fclose(fp);
        npl_tool_family got = npl_tool_family_detect(src, NULL, NULL);
        CHECKF(got == want[i].f, "%s: detected %s, expected %s", want[i].file, npl_tool_family_name(got),
               npl_tool_family_name(want[i].f));
    }
    /* Mistral Small 3 (2501) shows no call syntax in its template: its vocabulary has [TOOL_CALLS] */
    CHECK(npl_tool_family_detect("{{ messages }}", has_mistral_tokens, NULL) == NPL_TOOLS_MISTRAL);
    CHECK(npl_tool_family_detect(NULL, NULL, NULL) == NPL_TOOLS_GENERIC);
}

int main(int argc, char **argv)
{
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        check_case(&cases[k]);
    check_early_calls();
    check_shapes();
    if (argc > 1)
        check_detection(argv[1]);
    return nt_report("tool-calls");
}
