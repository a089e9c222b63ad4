/* Tool-call formats per model family and their detection from the chat
 * template's text and the vocabulary, after the facts llama.cpp's chat
 * format detection relies on (docs/chat-and-sampling.md, "Tool calls"). */
#include <stddef.h>
#include <string.h>

#include "tool_format.h"

#define OBJ(idk, namek, argsk) .layout = NPL_TOOL_CALL_OBJECT, .id_key = idk, .name_key = namek, .args_key = argsk
#define NAMED(suffix) .layout = NPL_TOOL_CALL_NAME_ARGS, .name_suffix = suffix
#define DS_CALL "<｜tool▁call▁begin｜>"

static const npl_tool_spec SPECS[NPL_TOOLS_COUNT] = {
    [NPL_TOOLS_GENERIC] = {"generic",
                           {.section_prefix = "{\"tool_calls\": [", .section_suffix = "]}", .call_prefix = "",
                            .call_suffix = "", .separator = ", ", OBJ(NULL, "name", "arguments"), .parallel = true},
                           .json_at_start = true},
    [NPL_TOOLS_LLAMA3] = {"llama3",
                          {.section_prefix = "", .section_suffix = "", .call_prefix = "", .call_suffix = "",
                           .separator = "", OBJ(NULL, "name", "parameters")},
                          .triggers = {NULL, "<|python_tag|>"}, .python_tag = true, .json_at_start = true},
    [NPL_TOOLS_HERMES] = {"hermes",
                          {.section_prefix = "", .section_suffix = "", .call_prefix = "<tool_call>\n",
                           .call_suffix = "\n</tool_call>", .separator = "\n", OBJ(NULL, "name", "arguments"),
                           .parallel = true, .text_before = true},
                          .triggers = {"<tool_call>"}, .close = "</tool_call>"},
    [NPL_TOOLS_MISTRAL] = {"mistral",
                           {.section_prefix = "[TOOL_CALLS][", .section_suffix = "]", .call_prefix = "",
                            .call_suffix = "", .separator = ", ", OBJ(NULL, "name", "arguments"), .parallel = true,
                            .text_before = true},
                           .triggers = {"[TOOL_CALLS]"}, .array = true},
    [NPL_TOOLS_MISTRAL_ARGS] = {"mistral-args",
                                {.section_prefix = "", .section_suffix = "", .call_prefix = "[TOOL_CALLS]",
                                 .call_suffix = "", .separator = "", NAMED("[ARGS]"), .parallel = true,
                                 .text_before = true},
                                .triggers = {"[TOOL_CALLS]"}, .name_end = "[ARGS]"},
    [NPL_TOOLS_GRANITE] = {"granite",
                           {.section_prefix = "<|tool_call|>[", .section_suffix = "]", .call_prefix = "",
                            .call_suffix = "", .separator = ", ", OBJ(NULL, "name", "arguments"), .parallel = true,
                            .text_before = true},
                           .triggers = {"<|tool_call|>"}, .array = true},
    [NPL_TOOLS_PHI4_MINI] = {"phi4-mini",
                             {.section_prefix = "<|tool_call|>[", .section_suffix = "]<|/tool_call|>",
                              .call_prefix = "", .call_suffix = "", .separator = ", ",
                              OBJ(NULL, "name", "arguments"), .parallel = true, .text_before = true},
                             .triggers = {"<|tool_call|>"}, .array = true, .end = "<|/tool_call|>"},
    [NPL_TOOLS_COMMAND_R7B] = {"command-r7b",
                               {.section_prefix = "<|START_ACTION|>[\n    ", .section_suffix = "\n]<|END_ACTION|>",
                                .call_prefix = "", .call_suffix = "", .separator = ",\n    ",
                                OBJ("tool_call_id", "tool_name", "parameters"), .parallel = true,
                                .text_before = true},
                               .triggers = {"<|START_ACTION|>"}, .array = true, .end = "<|END_ACTION|>"},
    [NPL_TOOLS_FUNCTIONARY_V31] = {"functionary-v3.1",
                                   {.section_prefix = "", .section_suffix = "", .call_prefix = "<function=",
                                    .call_suffix = "</function>", .separator = "", NAMED(">"), .parallel = true,
                                    .text_before = true},
                                   .triggers = {"<function=", "<|python_tag|>"}, .python_tag = true,
                                   .name_end = ">", .close = "</function>"},
    [NPL_TOOLS_FUNCTIONARY_V32] = {"functionary-v3.2",
                                   {.section_prefix = "", .section_suffix = "", .call_prefix = "",
                                    .call_suffix = "", .separator = ">>>", NAMED("\n"), .parallel = true},
                                   .triggers = {">>>"}, .name_line_at_start = true, .name_end = "\n"},
    [NPL_TOOLS_FIREFUNCTION_V2] = {"firefunction-v2",
                                   {.section_prefix = " functools[", .section_suffix = "]", .call_prefix = "",
                                    .call_suffix = "", .separator = ", ", OBJ(NULL, "name", "arguments"),
                                    .parallel = true},
                                   .triggers = {"functools"}, .array = true},
    [NPL_TOOLS_DEEPSEEK_R1] = {"deepseek-r1",
                               {.section_prefix = "<｜tool▁calls▁begin｜>", .section_suffix = "<｜tool▁calls▁end｜>",
                                .call_prefix = DS_CALL "function<｜tool▁sep｜>",
                                .call_suffix = "\n```<｜tool▁call▁end｜>", .separator = "\n", NAMED("\n```json\n"),
                                .parallel = true, .text_before = true},
                               .triggers = {"<｜tool▁calls▁begin｜>"}, .open = DS_CALL,
                               .name_skip = "<｜tool▁sep｜>", .name_end = "\n", .fences = true,
                               .close = "<｜tool▁call▁end｜>", .end = "<｜tool▁calls▁end｜>"},
    [NPL_TOOLS_NEMOTRON] = {"nemotron",
                            {.section_prefix = "<TOOLCALL>[", .section_suffix = "]</TOOLCALL>", .call_prefix = "",
                             .call_suffix = "", .separator = ", ", OBJ(NULL, "name", "arguments"), .parallel = true,
                             .text_before = true},
                            .triggers = {"<TOOLCALL>"}, .array = true, .end = "</TOOLCALL>"},
};

const npl_tool_spec *npl_tool_spec_of(npl_tool_family f)
{
    return (unsigned)f < NPL_TOOLS_COUNT ? &SPECS[f] : NULL;
}

const npl_tool_call_shape *npl_tool_call_shape_of(npl_tool_family f)
{
    return (unsigned)f < NPL_TOOLS_COUNT ? &SPECS[f].shape : NULL;
}

const char *npl_tool_family_name(npl_tool_family f)
{
    return (unsigned)f < NPL_TOOLS_COUNT ? SPECS[f].name : "?";
}

size_t npl_tool_family_markers(npl_tool_family f, const char **out, size_t cap)
{
    const npl_tool_spec *sp = npl_tool_spec_of(f);
    if (!sp)
        return 0;
    const char *all[] = {sp->triggers[0], sp->triggers[1], sp->open, sp->name_skip, sp->close, sp->end,
                         sp->name_end && strlen(sp->name_end) > 1 ? sp->name_end : NULL};
    size_t n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (!all[i])
            continue;
        if (n < cap && out)
            out[n] = all[i];
        n++;
    }
    return n;
}

/* Template markers, most specific first: each names the family whose
 * template writes (or teaches the model) that call syntax. */
static const struct {
    const char *marker;
    npl_tool_family family;
} MARKERS[] = {
    {"<｜tool▁calls▁begin｜>", NPL_TOOLS_DEEPSEEK_R1},
    {"<|START_ACTION|>", NPL_TOOLS_COMMAND_R7B},
    {">>>all", NPL_TOOLS_FUNCTIONARY_V32},
    {" functools[", NPL_TOOLS_FIREFUNCTION_V2},
    {"<function=", NPL_TOOLS_FUNCTIONARY_V31},
    {"[ARGS]", NPL_TOOLS_MISTRAL_ARGS},
    {"[TOOL_CALLS]", NPL_TOOLS_MISTRAL},
    {"<TOOLCALL>", NPL_TOOLS_NEMOTRON},
    {"<tool_call>", NPL_TOOLS_HERMES},
    {"<|tool|>", NPL_TOOLS_PHI4_MINI},
    {"<|tool_call|>", NPL_TOOLS_GRANITE},
    {"<|start_header_id|>ipython<|end_header_id|>", NPL_TOOLS_LLAMA3},
};

npl_tool_family npl_tool_family_detect(const char *template_src, bool (*has_token)(const char *text, void *ctx),
                                       void *ctx)
{
    for (size_t i = 0; template_src && i < sizeof MARKERS / sizeof MARKERS[0]; i++)
        if (strstr(template_src, MARKERS[i].marker))
            return MARKERS[i].family;
    /* templates that do not show the syntax (Mistral Small 3 2501): the vocabulary's call tokens */
    if (has_token && has_token("[TOOL_CALLS]", ctx))
        return NPL_TOOLS_MISTRAL;
    if (has_token && has_token("<|tool_call|>", ctx) && has_token("<|/tool_call|>", ctx))
        return NPL_TOOLS_PHI4_MINI;
    return NPL_TOOLS_GENERIC;
}
