/* The APIs' sampling members mapped onto npullm's options. */
#include "bridge-options.h"

#include "bridge-http.h"

#include <math.h>

gboolean bridge_options_apply(JsonObject *o, const BridgeOptionMap *map, gsize n_map, NpullmOptions *options,
                              GError **error)
{
    for (gsize i = 0; i < n_map; i++) {
        const BridgeOptionMap *m = &map[i];
        if (m->kind == BRIDGE_OPTION_STOP) {
            if (!bridge_option_stop(options, json_object_get_member(o, m->key), error))
                return FALSE;
            continue;
        }
        double v = 0;
        gboolean present = FALSE;
        if (!bridge_json_number(o, m->key, &v, &present, error))
            return FALSE;
        if (!present)
            continue;
        /* 1e999 parses as infinity: refused, never dropped in silence */
        if (!isfinite(v)) {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "\"%s\" must be a finite number", m->key);
            return FALSE;
        }
        switch (m->kind) {
        case BRIDGE_OPTION_DOUBLE:
            g_object_set(options, m->property, v, NULL);
            break;
        case BRIDGE_OPTION_LIMIT:
        case BRIDGE_OPTION_SEED:
            /* Ollama's own meanings: num_predict -1 (no limit) and -2 (fill
             * the context) leave the daemon's default, seed -1 is random;
             * other negative numbers are mistakes */
            if (v == -1 || (v == -2 && m->kind == BRIDGE_OPTION_LIMIT))
                break;
            if (v < 0) {
                g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                            "\"%s\" must be a whole number from 0, or %s", m->key,
                            m->kind == BRIDGE_OPTION_LIMIT ? "-1 (no limit) or -2 (fill the context)" : "-1 (random)");
                return FALSE;
            }
            G_GNUC_FALLTHROUGH;
        case BRIDGE_OPTION_UINT:
            if (!bridge_option_uint(options, m->property, v,
                                    m->kind == BRIDGE_OPTION_SEED ? (guint64)9007199254740991 : G_MAXUINT32, m->key,
                                    error))
                return FALSE;
            break;
        case BRIDGE_OPTION_STOP:
            break;
        }
    }
    return TRUE;
}

gboolean bridge_option_format(NpullmOptions *options, JsonNode *format, GError **error)
{
    if (format == NULL || JSON_NODE_HOLDS_NULL(format))
        return TRUE;
    if (JSON_NODE_HOLDS_OBJECT(format)) {
        g_autofree char *schema = json_to_string(format, FALSE);
        g_object_set(options, "format", schema, NULL);
        return TRUE;
    }
    const char *text = json_node_get_value_type(format) == G_TYPE_STRING ? json_node_get_string(format) : NULL;
    if (text == NULL || (*text != '\0' && strcmp(text, "json") != 0)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                    "\"format\" must be \"json\" or a JSON Schema object");
        return FALSE;
    }
    if (*text != '\0')
        g_object_set(options, "format", "json", NULL);
    return TRUE;
}

gboolean bridge_option_response_format(NpullmOptions *options, JsonNode *response_format, GError **error)
{
    if (response_format == NULL || JSON_NODE_HOLDS_NULL(response_format))
        return TRUE;
    JsonObject *rf = JSON_NODE_HOLDS_OBJECT(response_format) ? json_node_get_object(response_format) : NULL;
    const char *type = NULL;
    if (rf == NULL || !bridge_json_string(rf, "type", &type, error) || type == NULL) {
        if (error != NULL && *error == NULL)
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "\"response_format\" must be an object with a \"type\"");
        return FALSE;
    }
    if (strcmp(type, "text") == 0)
        return TRUE;
    if (strcmp(type, "json_object") == 0) {
        g_object_set(options, "format", "json", NULL);
        return TRUE;
    }
    JsonObject *js = NULL;
    gboolean strict = FALSE;
    if (strcmp(type, "json_schema") != 0) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                    "\"response_format.type\" must be text, json_object or json_schema");
        return FALSE;
    }
    if (!bridge_json_object(rf, "json_schema", &js, error) || (js != NULL && !bridge_json_bool(js, "strict", &strict, error)))
        return FALSE;
    JsonNode *schema = js != NULL ? json_object_get_member(js, "schema") : NULL;
    if (schema == NULL || !JSON_NODE_HOLDS_OBJECT(schema)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                    "\"response_format.json_schema.schema\" must be a JSON Schema object");
        return FALSE;
    }
    g_autofree char *text = json_to_string(schema, FALSE);
    g_object_set(options, "format", text, NULL);
    return TRUE;
}

gboolean bridge_option_tools(NpullmOptions *options, JsonObject *body, GError **error)
{
    JsonArray *tools = NULL;
    if (!bridge_json_array(body, "tools", &tools, error))
        return FALSE;
    if (tools != NULL && json_array_get_length(tools) > 0) {
        g_autofree char *json = json_to_string(json_object_get_member(body, "tools"), FALSE);
        g_object_set(options, "tools", json, NULL);
    }
    JsonNode *choice = json_object_get_member(body, "tool_choice");
    if (choice == NULL || JSON_NODE_HOLDS_NULL(choice))
        return TRUE;
    if (json_node_get_value_type(choice) == G_TYPE_STRING) {
        g_object_set(options, "tool-choice", json_node_get_string(choice), NULL);
        return TRUE;
    }
    JsonObject *fn = NULL;
    const char *name = NULL;
    if (JSON_NODE_HOLDS_OBJECT(choice) && bridge_json_object(json_node_get_object(choice), "function", &fn, NULL) &&
        fn != NULL && bridge_json_string(fn, "name", &name, NULL) && name != NULL) {
        g_object_set(options, "tool-choice", name, NULL);
        return TRUE;
    }
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                "\"tool_choice\" must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\"}}");
    return FALSE;
}

static gboolean is_base64(const char *s)
{
    for (; *s; s++)
        if (!g_ascii_isalnum(*s) && *s != '+' && *s != '/' && *s != '=' && *s != '\n' && *s != '\r')
            return FALSE;
    return TRUE;
}

GBytes *bridge_decode_image(const char *text, GError **error)
{
    if (g_str_has_prefix(text, "data:")) {
        const char *comma = strchr(text, ',');
        if (comma == NULL || !g_strstr_len(text, comma - text, ";base64")) {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "an image must be a base64 data: URL");
            return NULL;
        }
        text = comma + 1;
    }
    if (*text == '\0' || !is_base64(text)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "an image must be base64 data");
        return NULL;
    }
    gsize len = 0;
    guchar *data = g_base64_decode(text, &len);
    if (len == 0) {
        g_free(data);
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "the image is empty");
        return NULL;
    }
    return g_bytes_new_take(data, len);
}
