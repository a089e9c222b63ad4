#pragma once

#include "bridge.h"

/* Request bodies larger than this are refused before they are read. */
#define BRIDGE_MAX_BODY (32 * 1024 * 1024)

void bridge_reply_json(SoupServerMessage *msg, guint status, JsonNode *node);
void bridge_reply_error(SoupServerMessage *msg, BridgeApi api, guint status, const char *format, ...)
    G_GNUC_PRINTF(4, 5);
/* The error as one JSON text in the API's shape (for streams). */
char *bridge_error_json(BridgeApi api, const char *message);
guint bridge_status_for_error(const GError *error);
guint bridge_status_for_error_name(const char *dbus_name);

/* FALSE after a 405 reply when the method is another. */
gboolean bridge_require_method(SoupServerMessage *msg, BridgeApi api, const char *method);

/* The JSON object body of a POST, or NULL after a 405 or 400 reply. */
JsonObject *bridge_post_body(SoupServerMessage *msg, BridgeApi api);

/* The body as a JSON object, or NULL after a 400 reply. */
JsonObject *bridge_parse_body(SoupServerMessage *msg, BridgeApi api);

/* Typed optional members: absent or null leaves *value alone; another
 * type is an error naming the member. */
gboolean bridge_json_string(JsonObject *o, const char *key, const char **value, GError **error);
gboolean bridge_json_bool(JsonObject *o, const char *key, gboolean *value, GError **error);
gboolean bridge_json_number(JsonObject *o, const char *key, double *value, gboolean *present, GError **error);
gboolean bridge_json_array(JsonObject *o, const char *key, JsonArray **value, GError **error);
gboolean bridge_json_object(JsonObject *o, const char *key, JsonObject **value, GError **error);

/* Numbers checked for the option's range and set on @options. */
gboolean bridge_option_uint(NpullmOptions *options, const char *property, double value, guint64 max,
                            const char *key, GError **error);
/* A "stop" member that is a string or an array of strings. */
gboolean bridge_option_stop(NpullmOptions *options, JsonNode *stop, GError **error);

/* The model a client named: empty means the default. */
void bridge_option_model(NpullmOptions *options, const char *model);

/* Embed's and Rerank's replies: the model the client named, else the one
 * the info says answered (the default); OpenAI's "usage" member. */
const char *bridge_info_model(const char *asked, GVariant *info);
void bridge_json_usage(JsonBuilder *b, guint32 prompt_tokens);

/* RFC 3339 UTC time of now, as Ollama writes it. */
char *bridge_now_rfc3339(void);
