/* The Chat options tools and tool_choice: validation, and the grammar
 * that holds the output to a call when tool_choice asks for one. */
#ifndef NPD_TOOL_OPTIONS_H
#define NPD_TOOL_OPTIONS_H

#include <glib.h>

#include "npullm.h"

#define NPD_MAX_TOOLS 64
#define NPD_MAX_TOOL_NAME 64
/* calls a forced tool_choice may make in one turn (families that write several) */
#define NPD_MAX_PARALLEL_CALLS 8

typedef struct {
    gchar *json;        /* the tools array (compact JSON), as the template gets it */
    GPtrArray *names;   /* gchar*: each function's name */
    GPtrArray *schemas; /* gchar*: each function's parameters (a JSON Schema) */
    GPtrArray *params;  /* gchar*: each one's grammar text, once npd_tools_compile ran */
    gboolean one_call;  /* parallel_tool_calls false: a forced choice makes one call */
} NpdTools;

/* A JSON array of 1..NPD_MAX_TOOLS {"type": "function", "function":
 * {"name", "description"?, "parameters"?}}; names [A-Za-z0-9_-]{1,64},
 * unique; parameters a JSON Schema object (absent: any object). Errors
 * are InvalidArgument starting with "tools" and naming the place. */
NpdTools *npd_tools_parse(const char *json, gsize len, GError **error);
/* Compiles every function's parameters to grammar text (t->params), on
 * any thread: errors name the place and the schema path
 * (tools[1].function.parameters: /properties/x/type: ...). */
gboolean npd_tools_compile(NpdTools *t, GError **error);
void npd_tools_free(NpdTools *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NpdTools, npd_tools_free)

/* The grammar text of output that is calls, in the family's shape, to the
 * function named only (NULL: any of them) with arguments that validate
 * against its parameters: 1 to NPD_MAX_PARALLEL_CALLS calls where the
 * family writes several in a turn (unless t->one_call), else exactly one.
 * Each function's rules are renamed apart (prefix "fN-"), so their names
 * cannot collide. */
gchar *npd_tools_call_grammar(const NpdTools *t, const char *only, const npl_tool_call_shape *shape);

/* The conversation (NpdChatMessage*) as the JSON array the chat template
 * gets: role, content and the tool fields (tool_calls parsed). NULL when
 * no message has tool fields and with_tools is FALSE: the plain path does. */
gchar *npd_chat_messages_json(const GPtrArray *messages, gboolean with_tools);

#endif
