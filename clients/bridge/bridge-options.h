#pragma once

#include "bridge.h"

typedef enum {
    BRIDGE_OPTION_UINT,    /* a whole number */
    BRIDGE_OPTION_DOUBLE,
    BRIDGE_OPTION_LIMIT,   /* a token count where -1 and -2 mean "no limit" */
    BRIDGE_OPTION_SEED,    /* a seed where -1 means "random" */
    BRIDGE_OPTION_STOP,    /* a string or an array of strings */
} BridgeOptionKind;

/* One request member (JSON) and the NpullmOptions property it sets. */
typedef struct {
    const char *key;
    const char *property;
    BridgeOptionKind kind;
} BridgeOptionMap;

/* Sets @options from the members of @o named in @map (n_map rows); a
 * wrong type or range is an error naming the member. */
gboolean bridge_options_apply(JsonObject *o, const BridgeOptionMap *map, gsize n_map, NpullmOptions *options,
                              GError **error);

/* Ollama's "format": "json", a JSON Schema object, or ""/null (free
 * text), as the format option (the service compiles the schema). */
gboolean bridge_option_format(NpullmOptions *options, JsonNode *format, GError **error);

/* OpenAI's "response_format": {type: text | json_object | json_schema,
 * json_schema: {name, schema, strict}}, as the format option. The output
 * is always held to the schema, strict or not. */
gboolean bridge_option_response_format(NpullmOptions *options, JsonNode *response_format, GError **error);

/* "tools" (an array, passed on as JSON) and "tool_choice" ("auto",
 * "none", "required", or {"type": "function", "function": {"name"}}). */
gboolean bridge_option_tools(NpullmOptions *options, JsonObject *body, GError **error);

/* The bytes of base64 text (a data: URL's payload too); an error when it
 * is not base64 or empty. */
GBytes *bridge_decode_image(const char *text, GError **error);
