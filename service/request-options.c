#include "request-options.h"

#include <stddef.h>
#include <string.h>

#include <json-glib/json-glib.h>

#include "dbus-errors.h"
#include "model-catalog.h"
#include "npullm-protocol.h"

static const char *call_name(NpdCallKind kind)
{
    switch (kind) {
    case NPD_CALL_GENERATE:
        return "Generate";
    case NPD_CALL_CHAT:
        return "Chat";
    case NPD_CALL_DESCRIBE_IMAGE:
        return "DescribeImage";
    case NPD_CALL_COMPLETE:
        return "Complete";
    case NPD_CALL_EMBED:
        return "Embed";
    case NPD_CALL_RERANK:
        return "Rerank";
    }
    return "?";
}

static gboolean handle_token_valid(const char *token)
{
    size_t n = strlen(token);
    if (n == 0 || n > NPD_MAX_HANDLE_TOKEN)
        return FALSE;
    for (size_t i = 0; i < n; i++)
        if (!(g_ascii_isalnum(token[i]) || token[i] == '_'))
            return FALSE;
    return TRUE;
}

/* ---- where each option goes: option -> setter -> field ------------------ */

typedef gboolean (*OptionSetter)(const NppOption *opt, GVariant *value, gsize offset, NpdCallKind kind,
                                 const NpdConfig *cfg, NpdRequestOptions *out, GError **error);

#define FIELD(out, offset, type) ((type *)(void *)((char *)(out) + (offset)))

static gboolean set_float(const NppOption *opt, GVariant *value, gsize offset, NpdCallKind kind,
                          const NpdConfig *cfg, NpdRequestOptions *out, GError **error)
{
    *FIELD(out, offset, float) = (float)g_variant_get_double(value);
    return TRUE;
}

static gboolean set_uint(const NppOption *opt, GVariant *value, gsize offset, NpdCallKind kind,
                         const NpdConfig *cfg, NpdRequestOptions *out, GError **error)
{
    *FIELD(out, offset, guint32) = g_variant_get_uint32(value);
    return TRUE;
}

static gboolean set_boolean(const NppOption *opt, GVariant *value, gsize offset, NpdCallKind kind,
                            const NpdConfig *cfg, NpdRequestOptions *out, GError **error)
{
    *FIELD(out, offset, gboolean) = g_variant_get_boolean(value);
    return TRUE;
}

static gboolean set_seed(const NppOption *opt, GVariant *value, gsize offset, NpdCallKind kind,
                         const NpdConfig *cfg, NpdRequestOptions *out, GError **error)
{
    out->sampling.seed = g_variant_get_uint64(value);
    out->seed_given = TRUE;
    return TRUE;
}

static void replace_string(NpdRequestOptions *out, gsize offset, const char *text)
{
    gchar **field = FIELD(out, offset, gchar *);
    g_free(*field);
    *field = g_strdup(text);
}

static gboolean replace_string_option(const NppOption *opt, GVariant *value, gsize offset, NpdCallKind kind,
                                      const NpdConfig *cfg, NpdRequestOptions *out, GError **error)
{
    (void)opt, (void)kind, (void)cfg, (void)error;
    replace_string(out, offset, g_variant_get_string(value, NULL));
    return TRUE;
}

static gboolean set_model(const NppOption *opt, GVariant *value, gsize offset, NpdCallKind kind,
                          const NpdConfig *cfg, NpdRequestOptions *out, GError **error)
{
    const char *name = g_variant_get_string(value, NULL);
    if (!npd_model_name_valid(name)) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "model: '%.*s' is not a valid model name",
                    npp_utf8_prefix_len(name, NPD_MAX_MODEL_NAME), name);
        return FALSE;
    }
    replace_string(out, offset, name);
    return TRUE;
}

static gboolean set_system(const NppOption *opt, GVariant *value, gsize offset, NpdCallKind kind,
                           const NpdConfig *cfg, NpdRequestOptions *out, GError **error)
{
    gsize len = 0;
    const char *text = g_variant_get_string(value, &len);
    if (len > cfg->max_prompt_bytes) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "system: %zu bytes exceeds the limit of %zu",
                    len, cfg->max_prompt_bytes);
        return FALSE;
    }
    replace_string(out, offset, text);
    return TRUE;
}

static gboolean set_priority(const NppOption *opt, GVariant *value, gsize offset, NpdCallKind kind,
                             const NpdConfig *cfg, NpdRequestOptions *out, GError **error)
{
    /* the range check accepted one of the protocol's choices */
    gboolean background = strcmp(g_variant_get_string(value, NULL), "background") == 0;
    out->priority = background ? NPD_PRIORITY_BACKGROUND : NPD_PRIORITY_INTERACTIVE;
    return TRUE;
}

static gboolean set_handle_token(const NppOption *opt, GVariant *value, gsize offset, NpdCallKind kind,
                                 const NpdConfig *cfg, NpdRequestOptions *out, GError **error)
{
    const char *token = g_variant_get_string(value, NULL);
    if (!handle_token_valid(token)) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                    "handle_token: expected 1 to %d characters from [A-Za-z0-9_]", NPD_MAX_HANDLE_TOKEN);
        return FALSE;
    }
    replace_string(out, offset, token);
    return TRUE;
}

static gboolean set_stop(const NppOption *opt, GVariant *value, gsize offset, NpdCallKind kind,
                         const NpdConfig *cfg, NpdRequestOptions *out, GError **error)
{
    gsize n = 0;
    g_autofree const gchar **strv = g_variant_get_strv(value, &n);
    if (n > NPD_MAX_STOP_STRINGS) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "stop: %zu strings, at most %d allowed", n,
                    NPD_MAX_STOP_STRINGS);
        return FALSE;
    }
    for (gsize i = 0; i < n; i++) {
        size_t len = strlen(strv[i]);
        if (len == 0 || len > NPD_MAX_STOP_BYTES) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "stop: string %zu has %zu bytes, expected 1 to %d", i, len, NPD_MAX_STOP_BYTES);
            return FALSE;
        }
    }
    g_strfreev(out->stop);
    out->stop = g_variant_dup_strv(value, NULL);
    return TRUE;
}

static gboolean set_think(const NppOption *opt, GVariant *value, gsize offset, NpdCallKind kind,
                          const NpdConfig *cfg, NpdRequestOptions *out, GError **error)
{
    (void)opt, (void)offset, (void)kind, (void)cfg, (void)error;
    out->think = g_variant_get_boolean(value) ? 1 : 0;
    return TRUE;
}

static gboolean set_reasoning_effort(const NppOption *opt, GVariant *value, gsize offset, NpdCallKind kind,
                                     const NpdConfig *cfg, NpdRequestOptions *out, GError **error)
{
    (void)offset, (void)kind, (void)cfg, (void)error;
    /* the range check accepted one of the protocol's choices: keep that static string */
    const char *v = g_variant_get_string(value, NULL);
    for (const char *const *c = opt->choices; *c; c++)
        if (strcmp(*c, v) == 0)
            out->reasoning_effort = *c;
    return TRUE;
}

/* The option's text when it is at most cap bytes (NULL and an error
 * naming the option otherwise). */
static const char *text_within(const NppOption *opt, GVariant *value, gsize cap, gsize *len, GError **error)
{
    const char *text = g_variant_get_string(value, len);
    if (*len > cap) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s: %zu bytes exceeds the limit of %zu", opt->key,
                    *len, cap);
        return NULL;
    }
    return text;
}

/* "json", or a JSON Schema that schema-compile.c compiles off the main
 * loop (a schema the compiler refuses is an InvalidArgument naming its
 * path). The size cap bounds the work (the compiler has its own limits
 * on depth and rules). */
static gboolean set_format(const NppOption *opt, GVariant *value, gsize offset, NpdCallKind kind,
                           const NpdConfig *cfg, NpdRequestOptions *out, GError **error)
{
    (void)offset, (void)kind, (void)cfg;
    gsize len = 0;
    const char *text = text_within(opt, value, NPP_MAX_FORMAT_BYTES, &len, error);
    if (text == NULL)
        return FALSE;
    npl_grammar_free(out->grammar);
    out->grammar = NULL;
    g_clear_pointer(&out->format_schema, g_free);
    if (strcmp(text, "json") != 0) {
        out->format_schema = g_strndup(text, len);
        return TRUE;
    }
    npl_error err;
    npl_error_clear(&err);
    out->grammar = npl_grammar_json_any(&err);
    if (out->grammar == NULL)
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "format: %s", err.message);
    return out->grammar != NULL;
}

static gboolean set_tools(const NppOption *opt, GVariant *value, gsize offset, NpdCallKind kind,
                          const NpdConfig *cfg, NpdRequestOptions *out, GError **error)
{
    (void)offset, (void)kind, (void)cfg;
    gsize len = 0;
    const char *text = text_within(opt, value, NPP_MAX_TOOLS_BYTES, &len, error);
    NpdTools *t = text != NULL ? npd_tools_parse(text, len, error) : NULL;
    if (t == NULL)
        return FALSE;
    npd_tools_free(out->tools);
    out->tools = t;
    return TRUE;
}

/* Indexed by NppOptionId; key, type, range and methods come from the
 * protocol table. */
static const struct {
    OptionSetter set;
    gsize offset;
} option_fields[NPP_N_OPTIONS] = {
    [NPP_OPT_MODEL] = {set_model, offsetof(NpdRequestOptions, model)},
    [NPP_OPT_MAX_TOKENS] = {set_uint, offsetof(NpdRequestOptions, max_tokens)},
    [NPP_OPT_TEMPERATURE] = {set_float, offsetof(NpdRequestOptions, sampling.temperature)},
    [NPP_OPT_TOP_P] = {set_float, offsetof(NpdRequestOptions, sampling.top_p)},
    [NPP_OPT_TOP_K] = {set_uint, offsetof(NpdRequestOptions, sampling.top_k)},
    [NPP_OPT_MIN_P] = {set_float, offsetof(NpdRequestOptions, sampling.min_p)},
    [NPP_OPT_REPEAT_PENALTY] = {set_float, offsetof(NpdRequestOptions, sampling.repeat_penalty)},
    [NPP_OPT_SEED] = {set_seed, 0},
    [NPP_OPT_STOP] = {set_stop, 0},
    [NPP_OPT_SYSTEM] = {set_system, offsetof(NpdRequestOptions, system)},
    [NPP_OPT_RAW] = {set_boolean, offsetof(NpdRequestOptions, raw)},
    [NPP_OPT_PRIORITY] = {set_priority, 0},
    [NPP_OPT_HANDLE_TOKEN] = {set_handle_token, offsetof(NpdRequestOptions, handle_token)},
    [NPP_OPT_THINK] = {set_think, 0},
    [NPP_OPT_FORMAT] = {set_format, 0},
    [NPP_OPT_TOOLS] = {set_tools, 0},
    [NPP_OPT_TOOL_CHOICE] = {replace_string_option, offsetof(NpdRequestOptions, tool_choice)},
    [NPP_OPT_DIMENSIONS] = {set_uint, offsetof(NpdRequestOptions, dimensions)},
    [NPP_OPT_TRUNCATE] = {set_boolean, offsetof(NpdRequestOptions, truncate)},
    [NPP_OPT_PARALLEL_TOOL_CALLS] = {set_boolean, offsetof(NpdRequestOptions, parallel_tool_calls)},
    [NPP_OPT_TOP_N] = {set_uint, offsetof(NpdRequestOptions, top_n)},
    [NPP_OPT_REASONING_EFFORT] = {set_reasoning_effort, 0},
};

G_STATIC_ASSERT((int)NPD_CALL_GENERATE == (int)NPP_CALL_GENERATE && (int)NPD_CALL_CHAT == (int)NPP_CALL_CHAT &&
                (int)NPD_CALL_DESCRIBE_IMAGE == (int)NPP_CALL_DESCRIBE_IMAGE &&
                (int)NPD_CALL_COMPLETE == (int)NPP_CALL_COMPLETE && (int)NPD_CALL_EMBED == (int)NPP_CALL_EMBED &&
                (int)NPD_CALL_RERANK == (int)NPP_CALL_RERANK);

static gboolean parse_one(const char *key, GVariant *value, NpdCallKind kind, const NpdConfig *cfg,
                          NpdRequestOptions *out, GError **error)
{
    const NppOption *opt = npp_option_lookup(key);
    if (opt == NULL) {
        /* The key is client data: quote at most a bounded prefix, cut on
         * a character boundary (D-Bus error messages must be UTF-8). */
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%.*s: unknown option",
                    npp_utf8_prefix_len(key, 64), key);
        return FALSE;
    }
    if (!g_variant_is_of_type(value, G_VARIANT_TYPE(opt->type))) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s: expected type '%s', got '%s'", key,
                    opt->type, g_variant_get_type_string(value));
        return FALSE;
    }
    if ((opt->calls & (1u << kind)) == 0) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s: not accepted by %s%s", key,
                    call_name(kind),
                    opt->id == NPP_OPT_HANDLE_TOKEN ? " (it creates no request object)" : "");
        return FALSE;
    }
    if (!npp_option_in_range(opt, value) && opt->choices != NULL) {
        g_autofree gchar *choices = npp_option_range_text(opt);
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s: expected %s", key, choices);
        return FALSE;
    }
    if (!npp_option_in_range(opt, value)) {
        g_autofree gchar *range = npp_option_range_text(opt);
        g_autofree gchar *shown = g_variant_print(value, FALSE);
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s: %.*s is out of range %s", key,
                    npp_utf8_prefix_len(shown, 64), shown, range);
        return FALSE;
    }
    return option_fields[opt->id].set(opt, value, option_fields[opt->id].offset, kind, cfg, out, error);
}

/* tool_choice: auto, none, required or the name of one of the tools. */
static gboolean tool_choice_valid(NpdRequestOptions *out, GError **error)
{
    const char *c = out->tool_choice;
    if (c == NULL || strcmp(c, "auto") == 0 || strcmp(c, "none") == 0)
        return TRUE;
    if (out->tools == NULL) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "tool_choice: '%.*s' needs the tools option",
                    npp_utf8_prefix_len(c, 64), c);
        return FALSE;
    }
    if (strcmp(c, "required") == 0)
        return TRUE;
    for (guint i = 0; i < out->tools->names->len; i++)
        if (strcmp(out->tools->names->pdata[i], c) == 0)
            return TRUE;
    g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                "tool_choice: expected auto, none, required or a tool's name, got '%.*s'", npp_utf8_prefix_len(c, 64), c);
    return FALSE;
}

/* A call forced by tool_choice has its own grammar: format cannot hold
 * the same output to another. */
static gboolean format_alone(const NpdRequestOptions *out, GError **error)
{
    const char *c = out->tool_choice;
    if ((out->grammar == NULL && out->format_schema == NULL) || c == NULL || strcmp(c, "auto") == 0 || strcmp(c, "none") == 0)
        return TRUE;
    g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                "format: cannot be combined with tool_choice '%.*s' (the call has its own grammar)",
                npp_utf8_prefix_len(c, 64), c);
    return FALSE;
}

gboolean npd_request_options_parse(GVariant *options, NpdCallKind kind, const NpdConfig *cfg,
                                   NpdRequestOptions *out, GError **error)
{
    memset(out, 0, sizeof *out);
    npl_sampler_params_default(&out->sampling);
    out->priority = NPD_PRIORITY_INTERACTIVE;
    out->think = -1;
    out->truncate = TRUE;
    out->parallel_tool_calls = TRUE;

    GVariantIter iter;
    const char *key = NULL;
    GVariant *value = NULL;
    g_variant_iter_init(&iter, options);
    while (g_variant_iter_loop(&iter, "{&sv}", &key, &value)) {
        if (!parse_one(key, value, kind, cfg, out, error)) {
            g_variant_unref(value);
            npd_request_options_clear(out);
            return FALSE;
        }
    }
    if (out->raw && out->system != NULL) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                    "system: cannot be combined with raw (no chat template is applied)");
        npd_request_options_clear(out);
        return FALSE;
    }
    if (!tool_choice_valid(out, error) || !format_alone(out, error)) {
        npd_request_options_clear(out);
        return FALSE;
    }
    if (out->tools != NULL)
        out->tools->one_call = !out->parallel_tool_calls;
    if (out->raw && out->think >= 0) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                    "think: cannot be combined with raw (no chat template is applied)");
        npd_request_options_clear(out);
        return FALSE;
    }
    return TRUE;
}

void npd_request_options_clear(NpdRequestOptions *opts)
{
    g_free(opts->model);
    g_strfreev(opts->stop);
    g_free(opts->system);
    g_free(opts->handle_token);
    npl_grammar_free(opts->grammar);
    g_free(opts->format_schema);
    if (opts->tools != NULL) /* most calls offer none */
        npd_tools_free(opts->tools);
    g_free(opts->tool_choice);
    memset(opts, 0, sizeof *opts);
}

void npd_chat_message_free(NpdChatMessage *m)
{
    if (m == NULL)
        return;
    g_free(m->role);
    g_free(m->content);
    g_free(m->tool_calls);
    g_free(m->tool_call_id);
    g_free(m->name);
    g_free(m);
}

static gboolean role_valid(const char *role)
{
    return strcmp(role, "system") == 0 || strcmp(role, "user") == 0 || strcmp(role, "assistant") == 0 ||
           strcmp(role, "tool") == 0;
}

/* A message's "images": handles of the call's descriptors, appended to
 * handles. */
static gboolean parse_images(GVariant *images, const char *role, gsize i, GArray *handles, GError **error)
{
    if (!g_variant_is_of_type(images, G_VARIANT_TYPE("ah"))) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                    "messages[%zu].images: expected an array of file descriptors (ah)", i);
        return FALSE;
    }
    gsize n = g_variant_n_children(images);
    if (n > 0 && strcmp(role, "user") != 0) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "messages[%zu].images: only user messages carry images",
                    i);
        return FALSE;
    }
    if (handles->len + n > NPP_MAX_CHAT_IMAGES) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "messages: more than %u images", NPP_MAX_CHAT_IMAGES);
        return FALSE;
    }
    for (gsize k = 0; k < n; k++) {
        gint32 h = 0;
        g_variant_get_child(images, k, "h", &h);
        g_array_append_val(handles, h);
    }
    return TRUE;
}

static gboolean message_string(GVariant *v, const char *key, gsize i, GError **error)
{
    if (v != NULL && !g_variant_is_of_type(v, G_VARIANT_TYPE_STRING)) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "messages[%zu].%s: expected a string", i, key);
        return FALSE;
    }
    return TRUE;
}

/* tool_calls on assistant messages (a JSON array of calls), tool_call_id
 * and name on tool messages. */
static gboolean tool_fields_valid(const char *role, GVariant *tool_calls, GVariant *tool_call_id, GVariant *name,
                                  gsize i, GError **error)
{
    if (!message_string(tool_calls, "tool_calls", i, error) || !message_string(tool_call_id, "tool_call_id", i, error) ||
        !message_string(name, "name", i, error))
        return FALSE;
    if (tool_calls != NULL && strcmp(role, "assistant") != 0) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                    "messages[%zu].tool_calls: only assistant messages carry tool calls", i);
        return FALSE;
    }
    if ((tool_call_id != NULL || name != NULL) && strcmp(role, "tool") != 0) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                    "messages[%zu].%s: only tool messages carry it", i, tool_call_id != NULL ? "tool_call_id" : "name");
        return FALSE;
    }
    if (tool_calls != NULL) {
        g_autoptr(JsonParser) parser = json_parser_new();
        const char *text = g_variant_get_string(tool_calls, NULL);
        JsonNode *root = json_parser_load_from_data(parser, text, -1, NULL) ? json_parser_get_root(parser) : NULL;
        if (root == NULL || !JSON_NODE_HOLDS_ARRAY(root)) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "messages[%zu].tool_calls: expected a JSON array of calls", i);
            return FALSE;
        }
    }
    return TRUE;
}

GPtrArray *npd_chat_messages_parse(GVariant *messages, gsize system_bytes, const NpdConfig *cfg, GArray *handles,
                                   GError **error)
{
    gsize n = g_variant_n_children(messages);
    if (n == 0 || n > cfg->max_messages) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "messages: %zu given, expected 1 to %u", n,
                    cfg->max_messages);
        return NULL;
    }
    g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func((GDestroyNotify)npd_chat_message_free);
    /* the system option becomes a message too: it counts */
    gsize total = system_bytes;
    for (gsize i = 0; i < n; i++) {
        g_autoptr(GVariant) dict = g_variant_get_child_value(messages, i);
        g_autoptr(GVariant) role = g_variant_lookup_value(dict, "role", NULL);
        g_autoptr(GVariant) content = g_variant_lookup_value(dict, "content", NULL);
        g_autoptr(GVariant) images = g_variant_lookup_value(dict, "images", NULL);
        g_autoptr(GVariant) tool_calls = g_variant_lookup_value(dict, "tool_calls", NULL);
        g_autoptr(GVariant) tool_call_id = g_variant_lookup_value(dict, "tool_call_id", NULL);
        g_autoptr(GVariant) name = g_variant_lookup_value(dict, "name", NULL);
        if (g_variant_n_children(dict) != (gsize)(role != NULL) + (gsize)(content != NULL) + (gsize)(images != NULL) +
                                              (gsize)(tool_calls != NULL) + (gsize)(tool_call_id != NULL) +
                                              (gsize)(name != NULL)) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "messages[%zu]: only the keys 'role', 'content', 'images', 'tool_calls', 'tool_call_id' and "
                        "'name' are allowed (each once)",
                        i);
            return NULL;
        }
        if (role == NULL || !g_variant_is_of_type(role, G_VARIANT_TYPE_STRING) ||
            !role_valid(g_variant_get_string(role, NULL))) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "messages[%zu].role: expected a string: system, user, assistant or tool", i);
            return NULL;
        }
        if (!tool_fields_valid(g_variant_get_string(role, NULL), tool_calls, tool_call_id, name, i, error))
            return NULL;
        if (content == NULL || !g_variant_is_of_type(content, G_VARIANT_TYPE_STRING)) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "messages[%zu].content: expected a string", i);
            return NULL;
        }
        guint first_image = handles->len;
        if (images != NULL && !parse_images(images, g_variant_get_string(role, NULL), i, handles, error))
            return NULL;
        gsize len = 0;
        const char *text = g_variant_get_string(content, &len);
        total += len;
        if (total > cfg->max_prompt_bytes) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "messages: content (with the system option) exceeds the limit of %zu bytes",
                        cfg->max_prompt_bytes);
            return NULL;
        }
        NpdChatMessage *m = g_new0(NpdChatMessage, 1);
        m->role = g_variant_dup_string(role, NULL);
        m->content = g_strdup(text);
        m->n_images = handles->len - first_image;
        m->tool_calls = tool_calls != NULL ? g_variant_dup_string(tool_calls, NULL) : NULL;
        m->tool_call_id = tool_call_id != NULL ? g_variant_dup_string(tool_call_id, NULL) : NULL;
        m->name = name != NULL ? g_variant_dup_string(name, NULL) : NULL;
        total += (tool_calls != NULL ? strlen(m->tool_calls) : 0) + (tool_call_id != NULL ? strlen(m->tool_call_id) : 0) +
                 (name != NULL ? strlen(m->name) : 0);
        if (total > cfg->max_prompt_bytes) {
            npd_chat_message_free(m);
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "messages: content (with the system option) exceeds the limit of %zu bytes",
                        cfg->max_prompt_bytes);
            return NULL;
        }
        g_ptr_array_add(out, m);
    }
    return g_steal_pointer(&out);
}
