/* The tool-call format of each model family (npullm.h, npl_tool_family):
 * the public shape a grammar enforces, and what the streaming parser
 * (tool_calls.c) looks for, which is more lenient (whitespace, a lone
 * object where an array is expected, a missing closing marker). */
#ifndef NPL_TOOL_FORMAT_H
#define NPL_TOOL_FORMAT_H

#include <stdbool.h>

#include "npullm.h"

typedef struct npl_tool_spec {
    const char *name;
    npl_tool_call_shape shape;
    const char *triggers[2]; /* literals that open calls in text (NULL = unused) */
    bool python_tag;         /* triggers[1] is <|python_tag|>: the rest of the output is one call */
    bool json_at_start;      /* output starting with '{' is one JSON value of calls (Llama 3, generic) */
    bool name_line_at_start; /* functionary v3.2: the output starts with "name\n" ("all": text) */
    bool array;              /* after the trigger: a JSON array of call objects */
    const char *open;        /* before each call inside a section (DeepSeek) */
    const char *name_skip;   /* the name starts after this literal (DeepSeek's "function<｜tool▁sep｜>") */
    const char *name_end;    /* NULL: calls are JSON objects; else the name ends here, arguments follow */
    bool fences;             /* arguments inside ```json ... ``` (DeepSeek) */
    const char *close;       /* after each call (optional in the output) */
    const char *end;         /* after the section (optional in the output) */
} npl_tool_spec;

const npl_tool_spec *npl_tool_spec_of(npl_tool_family f); /* NULL when out of range */

#endif
