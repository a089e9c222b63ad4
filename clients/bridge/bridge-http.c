/* JSON bodies, typed members and error replies in the two APIs' shapes. */
#include "bridge-http.h"

#include <math.h>

void bridge_reply_json(SoupServerMessage *msg, guint status, JsonNode *node)
{
    g_autoptr(JsonNode) owned = node;
    gsize len = 0;
    char *text = json_to_string(node, FALSE);
    len = strlen(text);
    soup_server_message_set_status(msg, status, NULL);
    soup_server_message_set_response(msg, "application/json; charset=utf-8", SOUP_MEMORY_TAKE, text, len);
}

char *bridge_error_json(BridgeApi api, const char *message)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "error");
    if (api == BRIDGE_API_OPENAI) {
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "message");
        json_builder_add_string_value(b, message);
        json_builder_set_member_name(b, "type");
        json_builder_add_string_value(b, "invalid_request_error");
        json_builder_set_member_name(b, "param");
        json_builder_add_null_value(b);
        json_builder_set_member_name(b, "code");
        json_builder_add_null_value(b);
        json_builder_end_object(b);
    } else {
        json_builder_add_string_value(b, message);
    }
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return json_to_string(root, FALSE);
}

void bridge_reply_error(SoupServerMessage *msg, BridgeApi api, guint status, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    g_autofree char *message = g_strdup_vprintf(format, ap);
    va_end(ap);
    char *text = bridge_error_json(api, message);
    soup_server_message_set_status(msg, status, NULL);
    soup_server_message_set_response(msg, "application/json; charset=utf-8", SOUP_MEMORY_TAKE, text,
                                     strlen(text));
}

static const struct {
    NpullmError code;
    const char *name;
    guint status;
} error_statuses[] = {
    {NPULLM_ERROR_INVALID_ARGUMENT, "org.npullm.Error.InvalidArgument", SOUP_STATUS_BAD_REQUEST},
    {NPULLM_ERROR_NOT_AUTHORIZED, "org.npullm.Error.NotAuthorized", SOUP_STATUS_FORBIDDEN},
    {NPULLM_ERROR_BUSY, "org.npullm.Error.Busy", 429},
    {NPULLM_ERROR_NO_SUCH_MODEL, "org.npullm.Error.NoSuchModel", SOUP_STATUS_NOT_FOUND},
    {NPULLM_ERROR_NOT_SUPPORTED, "org.npullm.Error.NotSupported", SOUP_STATUS_BAD_REQUEST},
    {NPULLM_ERROR_CONTEXT_OVERFLOW, "org.npullm.Error.ContextOverflow", SOUP_STATUS_BAD_REQUEST},
};

guint bridge_status_for_error(const GError *error)
{
    if (error->domain == NPULLM_ERROR)
        for (gsize i = 0; i < G_N_ELEMENTS(error_statuses); i++)
            if ((gint)error_statuses[i].code == error->code)
                return error_statuses[i].status;
    return SOUP_STATUS_INTERNAL_SERVER_ERROR;
}

guint bridge_status_for_error_name(const char *dbus_name)
{
    for (gsize i = 0; i < G_N_ELEMENTS(error_statuses); i++)
        if (g_strcmp0(error_statuses[i].name, dbus_name) == 0)
            return error_statuses[i].status;
    return SOUP_STATUS_INTERNAL_SERVER_ERROR;
}

/* json-glib's parser recurses once per nesting level: deep nesting is
 * refused before it could exhaust the stack. */
#define MAX_JSON_DEPTH 64

static int hex4(const char *p, const char *end)
{
    if (end - p < 4)
        return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int d = g_ascii_xdigit_value(p[i]);
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* What json-glib would accept but must not see, before it parses: deeper
 * nesting than max (the depth count is only right if comments, which it
 * skips, are refused too: JSON has none), and \u escapes of a UTF-16
 * surrogate that is not half of a pair (it would decode them to text
 * that is not UTF-8). NULL when the body is fine, else why not. */
#define LONE_SURROGATE "the body is not valid JSON: a \\u escape is half of a UTF-16 surrogate pair"
static const char *json_prescan_problem(const char *data, gsize len, guint max)
{
    const char *end = data + len;
    guint depth = 0;
    gboolean in_string = FALSE;
    for (const char *p = data; p < end; p++) {
        char c = *p;
        if (in_string) {
            if (c == '"') {
                in_string = FALSE;
            } else if (c == '\\' && p + 1 < end && p[1] == 'u') {
                int u = hex4(p + 2, end);
                if (u >= 0xD800 && u <= 0xDBFF) {
                    int low = end - p >= 12 && p[6] == '\\' && p[7] == 'u' ? hex4(p + 8, end) : -1;
                    if (low < 0xDC00 || low > 0xDFFF)
                        return LONE_SURROGATE;
                    p += 11;
                } else if (u >= 0xDC00 && u <= 0xDFFF) {
                    return LONE_SURROGATE;
                } else {
                    p++;
                }
            } else if (c == '\\') {
                p++;
            }
        } else if (c == '"') {
            in_string = TRUE;
        } else if (c == '/') {
            return "the body is not valid JSON: comments are not JSON";
        } else if (c == '{' || c == '[') {
            if (++depth > max)
                return "the body nests deeper than " G_STRINGIFY(MAX_JSON_DEPTH) " levels";
        } else if ((c == '}' || c == ']') && depth > 0) {
            depth--;
        }
    }
    return NULL;
}

JsonObject *bridge_parse_body(SoupServerMessage *msg, BridgeApi api)
{
    SoupMessageBody *body = soup_server_message_get_request_body(msg);
    g_autoptr(GBytes) bytes = soup_message_body_flatten(body);
    gsize len = 0;
    const char *data = g_bytes_get_data(bytes, &len);
    if (len == 0) {
        bridge_reply_error(msg, api, SOUP_STATUS_BAD_REQUEST, "the request has no JSON body");
        return NULL;
    }
    const char *problem = json_prescan_problem(data, len, MAX_JSON_DEPTH);
    if (problem != NULL) {
        bridge_reply_error(msg, api, SOUP_STATUS_BAD_REQUEST, "%s", problem);
        return NULL;
    }
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(GError) error = NULL;
    if (!json_parser_load_from_data(parser, data, (gssize)len, &error)) {
        bridge_reply_error(msg, api, SOUP_STATUS_BAD_REQUEST, "the body is not valid JSON: %s", error->message);
        return NULL;
    }
    JsonNode *root = json_parser_get_root(parser);
    if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root)) {
        bridge_reply_error(msg, api, SOUP_STATUS_BAD_REQUEST, "the body must be a JSON object");
        return NULL;
    }
    return json_object_ref(json_node_get_object(root));
}

static JsonNode *member(JsonObject *o, const char *key)
{
    JsonNode *n = json_object_get_member(o, key);
    return n != NULL && !JSON_NODE_HOLDS_NULL(n) ? n : NULL;
}

static gboolean wrong_type(const char *key, const char *type, GError **error)
{
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "\"%s\" must be %s", key, type);
    return FALSE;
}

gboolean bridge_json_string(JsonObject *o, const char *key, const char **value, GError **error)
{
    JsonNode *n = member(o, key);
    if (n == NULL)
        return TRUE;
    if (json_node_get_value_type(n) != G_TYPE_STRING)
        return wrong_type(key, "a string", error);
    *value = json_node_get_string(n);
    return TRUE;
}

gboolean bridge_json_bool(JsonObject *o, const char *key, gboolean *value, GError **error)
{
    JsonNode *n = member(o, key);
    if (n == NULL)
        return TRUE;
    if (json_node_get_value_type(n) != G_TYPE_BOOLEAN)
        return wrong_type(key, "true or false", error);
    *value = json_node_get_boolean(n);
    return TRUE;
}

gboolean bridge_json_number(JsonObject *o, const char *key, double *value, gboolean *present, GError **error)
{
    JsonNode *n = member(o, key);
    if (n == NULL)
        return TRUE;
    GType t = json_node_get_value_type(n);
    if (t != G_TYPE_INT64 && t != G_TYPE_DOUBLE)
        return wrong_type(key, "a number", error);
    *value = json_node_get_double(n);
    if (present != NULL)
        *present = TRUE;
    return TRUE;
}

gboolean bridge_json_array(JsonObject *o, const char *key, JsonArray **value, GError **error)
{
    JsonNode *n = member(o, key);
    if (n == NULL)
        return TRUE;
    if (!JSON_NODE_HOLDS_ARRAY(n))
        return wrong_type(key, "an array", error);
    *value = json_node_get_array(n);
    return TRUE;
}

gboolean bridge_json_object(JsonObject *o, const char *key, JsonObject **value, GError **error)
{
    JsonNode *n = member(o, key);
    if (n == NULL)
        return TRUE;
    if (!JSON_NODE_HOLDS_OBJECT(n))
        return wrong_type(key, "an object", error);
    *value = json_node_get_object(n);
    return TRUE;
}

gboolean bridge_option_uint(NpullmOptions *options, const char *property, double value, guint64 max,
                            const char *key, GError **error)
{
    if (!(value >= 0) || value > (double)max || floor(value) != value) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "\"%s\" must be a whole number from 0 to %" G_GUINT64_FORMAT,
                    key, max);
        return FALSE;
    }
    GParamSpec *spec = g_object_class_find_property(G_OBJECT_GET_CLASS(options), property);
    if (G_PARAM_SPEC_VALUE_TYPE(spec) == G_TYPE_UINT64)
        g_object_set(options, property, (guint64)value, NULL);
    else
        g_object_set(options, property, (guint)value, NULL);
    return TRUE;
}

gboolean bridge_option_stop(NpullmOptions *options, JsonNode *stop, GError **error)
{
    if (stop == NULL || JSON_NODE_HOLDS_NULL(stop))
        return TRUE;
    g_autoptr(GPtrArray) strings = g_ptr_array_new();
    if (json_node_get_value_type(stop) == G_TYPE_STRING) {
        g_ptr_array_add(strings, (gpointer)json_node_get_string(stop));
    } else if (JSON_NODE_HOLDS_ARRAY(stop)) {
        JsonArray *a = json_node_get_array(stop);
        for (guint i = 0; i < json_array_get_length(a); i++) {
            JsonNode *e = json_array_get_element(a, i);
            if (json_node_get_value_type(e) != G_TYPE_STRING)
                return wrong_type("stop", "a string or an array of strings", error);
            g_ptr_array_add(strings, (gpointer)json_node_get_string(e));
        }
    } else {
        return wrong_type("stop", "a string or an array of strings", error);
    }
    if (strings->len == 0)
        return TRUE;
    g_ptr_array_add(strings, NULL);
    g_object_set(options, "stop", (const char *const *)strings->pdata, NULL);
    return TRUE;
}

void bridge_option_model(NpullmOptions *options, const char *model)
{
    if (model != NULL && *model != '\0')
        g_object_set(options, "model", model, NULL);
}

char *bridge_now_rfc3339(void)
{
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    return g_date_time_format(now, "%Y-%m-%dT%H:%M:%S.%fZ");
}

gboolean bridge_require_method(SoupServerMessage *msg, BridgeApi api, const char *method)
{
    if (g_strcmp0(soup_server_message_get_method(msg), method) == 0)
        return TRUE;
    bridge_reply_error(msg, api, SOUP_STATUS_METHOD_NOT_ALLOWED, "%s needs %s",
                       g_uri_get_path(soup_server_message_get_uri(msg)), method);
    return FALSE;
}

JsonObject *bridge_post_body(SoupServerMessage *msg, BridgeApi api)
{
    if (!bridge_require_method(msg, api, "POST"))
        return NULL;
    return bridge_parse_body(msg, api);
}

const char *bridge_info_model(const char *asked, GVariant *info)
{
    const char *model = asked;
    if (*model == '\0')
        g_variant_lookup(info, "model", "&s", &model);
    return model;
}

void bridge_json_usage(JsonBuilder *b, guint32 prompt_tokens)
{
    json_builder_set_member_name(b, "usage");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "prompt_tokens");
    json_builder_add_int_value(b, prompt_tokens);
    json_builder_set_member_name(b, "total_tokens");
    json_builder_add_int_value(b, prompt_tokens);
    json_builder_end_object(b);
}
