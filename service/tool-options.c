#include "tool-options.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "dbus-errors.h"
#include "request-options.h"

void npd_tools_free(NpdTools *t)
{
    if (t == NULL)
        return;
    g_free(t->json);
    if (t->names != NULL)
        g_ptr_array_unref(t->names);
    if (t->schemas != NULL)
        g_ptr_array_unref(t->schemas);
    if (t->params != NULL)
        g_ptr_array_unref(t->params);
    g_free(t);
}

static gboolean name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > NPD_MAX_TOOL_NAME)
        return FALSE;
    for (size_t i = 0; i < n; i++)
        if (!g_ascii_isalnum(name[i]) && name[i] != '_' && name[i] != '-')
            return FALSE;
    return TRUE;
}

static gboolean tool_invalid(GError **error, guint i, const char *what)
{
    g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "tools[%u]%s", i, what);
    return FALSE;
}

/* One {"type": "function", "function": {...}}: its name and parameters
 * appended to t. */
static gboolean parse_tool(JsonNode *node, guint i, NpdTools *t, GError **error)
{
    JsonObject *tool = JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
    if (tool == NULL)
        return tool_invalid(error, i, ": expected an object");
    const char *type = json_object_has_member(tool, "type") ? json_object_get_string_member_with_default(tool, "type", "")
                                                            : "";
    if (strcmp(type, "function") != 0)
        return tool_invalid(error, i, ".type: expected \"function\"");
    JsonNode *fn_node = json_object_get_member(tool, "function");
    JsonObject *fn = fn_node != NULL && JSON_NODE_HOLDS_OBJECT(fn_node) ? json_node_get_object(fn_node) : NULL;
    if (fn == NULL)
        return tool_invalid(error, i, ".function: expected an object");
    JsonNode *name = json_object_get_member(fn, "name");
    if (name == NULL || json_node_get_value_type(name) != G_TYPE_STRING || !name_valid(json_node_get_string(name)))
        return tool_invalid(error, i, ".function.name: expected 1 to 64 characters from [A-Za-z0-9_-]");
    for (guint k = 0; k < t->names->len; k++)
        if (strcmp(t->names->pdata[k], json_node_get_string(name)) == 0)
            return tool_invalid(error, i, ".function.name: two tools have this name");
    JsonNode *desc = json_object_get_member(fn, "description");
    if (desc != NULL && json_node_get_value_type(desc) != G_TYPE_STRING)
        return tool_invalid(error, i, ".function.description: expected a string");
    JsonNode *params = json_object_get_member(fn, "parameters");
    if (params != NULL && !JSON_NODE_HOLDS_OBJECT(params))
        return tool_invalid(error, i, ".function.parameters: expected a JSON Schema object");
    g_ptr_array_add(t->schemas, params != NULL ? json_to_string(params, FALSE) : g_strdup("{\"type\": \"object\"}"));
    g_ptr_array_add(t->names, g_strdup(json_node_get_string(name)));
    return TRUE;
}

gboolean npd_tools_compile(NpdTools *t, GError **error)
{
    g_ptr_array_set_size(t->params, 0);
    for (guint i = 0; i < t->schemas->len; i++) {
        const char *schema = t->schemas->pdata[i];
        npl_error err;
        npl_error_clear(&err);
        char *text = npl_grammar_schema_to_text(schema, strlen(schema), &err);
        if (text == NULL) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "tools[%u].function.parameters: %s", i,
                        err.message);
            return FALSE;
        }
        g_ptr_array_add(t->params, g_strdup(text));
        free(text);
    }
    return TRUE;
}

NpdTools *npd_tools_parse(const char *json, gsize len, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) parse_error = NULL;
    if (!json_parser_load_from_data(parser, json, (gssize)len, &parse_error)) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "tools: not JSON: %s", parse_error->message);
        return NULL;
    }
    JsonNode *root = json_parser_get_root(parser);
    JsonArray *arr = root != NULL && JSON_NODE_HOLDS_ARRAY(root) ? json_node_get_array(root) : NULL;
    guint n = arr != NULL ? json_array_get_length(arr) : 0;
    if (n == 0 || n > NPD_MAX_TOOLS) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "tools: expected a JSON array of 1 to %d tools",
                    NPD_MAX_TOOLS);
        return NULL;
    }
    g_autoptr(NpdTools) t = g_new0(NpdTools, 1);
    t->names = g_ptr_array_new_with_free_func(g_free);
    t->schemas = g_ptr_array_new_with_free_func(g_free);
    t->params = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < n; i++)
        if (!parse_tool(json_array_get_element(arr, i), i, t, error))
            return NULL;
    t->json = json_to_string(root, FALSE);
    return g_steal_pointer(&t);
}

gchar *npd_chat_messages_json(const GPtrArray *messages, gboolean with_tools)
{
    gboolean tool_fields = FALSE;
    for (guint i = 0; i < messages->len; i++) {
        const NpdChatMessage *m = messages->pdata[i];
        tool_fields = tool_fields || m->tool_calls != NULL || m->tool_call_id != NULL || m->name != NULL ||
                      strcmp(m->role, "tool") == 0;
    }
    if (!tool_fields && !with_tools)
        return NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_array(b);
    for (guint i = 0; i < messages->len; i++) {
        const NpdChatMessage *m = messages->pdata[i];
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "role");
        json_builder_add_string_value(b, m->role);
        json_builder_set_member_name(b, "content");
        json_builder_add_string_value(b, m->content);
        if (m->tool_calls != NULL) {
            /* checked to be a JSON array when the call came in */
            JsonNode *calls = json_from_string(m->tool_calls, NULL);
            if (calls != NULL) {
                json_builder_set_member_name(b, "tool_calls");
                json_builder_add_value(b, calls);
            }
        }
        if (m->tool_call_id != NULL) {
            json_builder_set_member_name(b, "tool_call_id");
            json_builder_add_string_value(b, m->tool_call_id);
        }
        if (m->name != NULL) {
            json_builder_set_member_name(b, "name");
            json_builder_add_string_value(b, m->name);
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return json_to_string(root, FALSE);
}

/* ---- the call grammar ---- */

/* s as a grammar literal. */
static void append_literal(GString *g, const char *s)
{
    g_string_append_c(g, '"');
    for (const char *p = s; *p != '\0'; p++) {
        guchar c = (guchar)*p;
        if (c == '"' || c == '\\')
            g_string_append_printf(g, "\\%c", c);
        else if (c == '\n')
            g_string_append(g, "\\n");
        else if (c == '\r')
            g_string_append(g, "\\r");
        else if (c == '\t')
            g_string_append(g, "\\t");
        else if (c < 0x20)
            g_string_append_printf(g, "\\x%02X", c);
        else
            g_string_append_c(g, (char)c);
    }
    g_string_append(g, "\" ");
}

/* a JSON string's text "key" as a literal */
static void append_json_key(GString *g, const char *key)
{
    g_autofree gchar *quoted = g_strdup_printf("\"%s\":", key);
    append_literal(g, quoted);
}

/* The schema's grammar text with every rule name prefixed: names are
 * words starting with a letter outside literals, classes and {m,n}. */
static void append_renamed(GString *g, const char *text, const char *prefix)
{
    for (const char *p = text; *p != '\0';) {
        if (*p == '"' || *p == '[') {
            char end = *p == '"' ? '"' : ']';
            g_string_append_c(g, *p++);
            while (*p != '\0' && *p != end) {
                if (*p == '\\' && p[1] != '\0')
                    g_string_append_c(g, *p++);
                g_string_append_c(g, *p++);
            }
            if (*p != '\0')
                g_string_append_c(g, *p++);
        } else if (*p == '{') {
            while (*p != '\0' && *p != '}')
                g_string_append_c(g, *p++);
        } else if (*p == '#') {
            while (*p != '\0' && *p != '\n')
                p++;
        } else if (g_ascii_isalpha(*p)) {
            g_string_append(g, prefix);
            while (g_ascii_isalnum(*p) || *p == '-' || *p == '_')
                g_string_append_c(g, *p++);
        } else {
            g_string_append_c(g, *p++);
        }
    }
    g_string_append_c(g, '\n');
}

/* literal s when it is not empty */
static void append_part(GString *g, const char *s)
{
    if (s != NULL && *s != '\0')
        append_literal(g, s);
}

gchar *npd_tools_call_grammar(const NpdTools *t, const char *only, const npl_tool_call_shape *shape)
{
    GString *g = g_string_new("root ::= ");
    append_part(g, shape->section_prefix);
    g_string_append(g, "call ");
    if (shape->parallel && !t->one_call) {
        g_string_append(g, "( ");
        append_part(g, shape->separator);
        g_string_append_printf(g, "call ){0,%d} ", NPD_MAX_PARALLEL_CALLS - 1);
    }
    append_part(g, shape->section_suffix);
    g_string_append(g, "\ncall ::= ");
    append_part(g, shape->call_prefix);
    if (shape->layout == NPL_TOOL_CALL_OBJECT) {
        g_string_append(g, "\"{\" ");
        if (shape->id_key != NULL) {
            /* nine letters and digits: what Mistral's templates insist on */
            append_json_key(g, shape->id_key);
            g_string_append(g, "\"\\\"\" [a-zA-Z0-9]{9} \"\\\"\" \",\" ");
        }
        append_json_key(g, shape->name_key);
    }
    g_string_append(g, "( ");
    gboolean first = TRUE;
    for (guint i = 0; i < t->names->len; i++) {
        const char *name = t->names->pdata[i];
        if (only != NULL && strcmp(only, name) != 0)
            continue;
        if (!first)
            g_string_append(g, "| ");
        first = FALSE;
        if (shape->layout == NPL_TOOL_CALL_OBJECT) {
            g_autofree gchar *quoted = g_strdup_printf("\"%s\",", name);
            append_literal(g, quoted);
            append_json_key(g, shape->args_key);
        } else {
            append_literal(g, name);
            append_part(g, shape->name_suffix);
        }
        g_string_append_printf(g, "f%u-root ", i);
    }
    g_string_append(g, ") ");
    if (shape->layout == NPL_TOOL_CALL_OBJECT)
        g_string_append(g, "\"}\" ");
    append_part(g, shape->call_suffix);
    g_string_append_c(g, '\n');
    for (guint i = 0; i < t->names->len; i++) {
        if (only != NULL && strcmp(only, t->names->pdata[i]) != 0)
            continue;
        g_autofree gchar *prefix = g_strdup_printf("f%u-", i);
        append_renamed(g, t->params->pdata[i], prefix);
    }
    return g_string_free(g, FALSE);
}
