#include "request-options.h"

#include <string.h>

#include "dbus-errors.h"

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
    }
    return "?";
}

gboolean npd_model_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > NPD_MAX_MODEL_NAME || name[0] == '.')
        return FALSE;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!(g_ascii_isalnum(c) || c == '.' || c == '_' || c == '-' || c == '+' || (c == ':' && i > 0)))
            return FALSE;
    }
    return TRUE;
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

static gboolean expect_type(const char *key, GVariant *value, const GVariantType *type, GError **error)
{
    if (g_variant_is_of_type(value, type))
        return TRUE;
    g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s: expected type '%s', got '%s'", key,
                g_variant_type_peek_string(type), g_variant_get_type_string(value));
    return FALSE;
}

static gboolean get_double_in(const char *key, GVariant *value, double lo, double hi, gboolean lo_open,
                              double *out, GError **error)
{
    if (!expect_type(key, value, G_VARIANT_TYPE_DOUBLE, error))
        return FALSE;
    double d = g_variant_get_double(value);
    gboolean ok = lo_open ? (d > lo && d <= hi) : (d >= lo && d <= hi);
    if (!ok) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s: %g is out of range %s%g, %g]", key, d,
                    lo_open ? "(" : "[", lo, hi);
        return FALSE;
    }
    *out = d;
    return TRUE;
}

static gboolean get_uint_in(const char *key, GVariant *value, guint32 lo, guint32 hi, guint32 *out,
                            GError **error)
{
    if (!expect_type(key, value, G_VARIANT_TYPE_UINT32, error))
        return FALSE;
    guint32 u = g_variant_get_uint32(value);
    if (u < lo || u > hi) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s: %u is out of range [%u, %u]", key, u,
                    lo, hi);
        return FALSE;
    }
    *out = u;
    return TRUE;
}

static gboolean parse_stop(GVariant *value, NpdRequestOptions *out, GError **error)
{
    if (!expect_type("stop", value, G_VARIANT_TYPE_STRING_ARRAY, error))
        return FALSE;
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

static gboolean parse_one(const char *key, GVariant *value, NpdCallKind kind, const NpdConfig *cfg,
                          NpdRequestOptions *out, GError **error)
{
    double d = 0;
    guint32 u = 0;
    if (strcmp(key, "model") == 0) {
        if (!expect_type(key, value, G_VARIANT_TYPE_STRING, error))
            return FALSE;
        const char *name = g_variant_get_string(value, NULL);
        if (!npd_model_name_valid(name)) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "model: '%.*s' is not a valid model name", NPD_MAX_MODEL_NAME, name);
            return FALSE;
        }
        g_free(out->model);
        out->model = g_strdup(name);
    } else if (strcmp(key, "max_tokens") == 0) {
        if (!get_uint_in(key, value, 1, 1u << 20, &out->max_tokens, error))
            return FALSE;
    } else if (strcmp(key, "temperature") == 0) {
        if (!get_double_in(key, value, 0.0, 10.0, FALSE, &d, error))
            return FALSE;
        out->sampling.temperature = (float)d;
    } else if (strcmp(key, "top_p") == 0) {
        if (!get_double_in(key, value, 0.0, 1.0, TRUE, &d, error))
            return FALSE;
        out->sampling.top_p = (float)d;
    } else if (strcmp(key, "top_k") == 0) {
        if (!get_uint_in(key, value, 0, 1000000, &u, error))
            return FALSE;
        out->sampling.top_k = u;
    } else if (strcmp(key, "min_p") == 0) {
        if (!get_double_in(key, value, 0.0, 1.0, FALSE, &d, error))
            return FALSE;
        out->sampling.min_p = (float)d;
    } else if (strcmp(key, "repeat_penalty") == 0) {
        if (!get_double_in(key, value, 0.0, 10.0, TRUE, &d, error))
            return FALSE;
        out->sampling.repeat_penalty = (float)d;
    } else if (strcmp(key, "seed") == 0) {
        if (!expect_type(key, value, G_VARIANT_TYPE_UINT64, error))
            return FALSE;
        out->sampling.seed = g_variant_get_uint64(value);
        out->seed_given = TRUE;
    } else if (strcmp(key, "stop") == 0) {
        return parse_stop(value, out, error);
    } else if (strcmp(key, "system") == 0) {
        if (!expect_type(key, value, G_VARIANT_TYPE_STRING, error))
            return FALSE;
        gsize len = 0;
        const char *text = g_variant_get_string(value, &len);
        if (len > cfg->max_prompt_bytes) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "system: %zu bytes exceeds the limit of %zu", len, cfg->max_prompt_bytes);
            return FALSE;
        }
        g_free(out->system);
        out->system = g_strdup(text);
    } else if (strcmp(key, "raw") == 0) {
        if (!expect_type(key, value, G_VARIANT_TYPE_BOOLEAN, error))
            return FALSE;
        if (kind != NPD_CALL_GENERATE && kind != NPD_CALL_COMPLETE) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "raw: not accepted by %s",
                        call_name(kind));
            return FALSE;
        }
        out->raw = g_variant_get_boolean(value);
    } else if (strcmp(key, "priority") == 0) {
        if (!expect_type(key, value, G_VARIANT_TYPE_STRING, error))
            return FALSE;
        const char *p = g_variant_get_string(value, NULL);
        if (strcmp(p, "interactive") == 0) {
            out->priority = NPD_PRIORITY_INTERACTIVE;
        } else if (strcmp(p, "background") == 0) {
            out->priority = NPD_PRIORITY_BACKGROUND;
        } else {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "priority: expected 'interactive' or 'background'");
            return FALSE;
        }
    } else if (strcmp(key, "handle_token") == 0) {
        if (!expect_type(key, value, G_VARIANT_TYPE_STRING, error))
            return FALSE;
        if (kind == NPD_CALL_COMPLETE) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "handle_token: not accepted by Complete (it creates no request object)");
            return FALSE;
        }
        const char *token = g_variant_get_string(value, NULL);
        if (!handle_token_valid(token)) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "handle_token: expected 1 to %d characters from [A-Za-z0-9_]", NPD_MAX_HANDLE_TOKEN);
            return FALSE;
        }
        g_free(out->handle_token);
        out->handle_token = g_strdup(token);
    } else {
        /* The key is client data: quote at most a bounded prefix. */
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%.64s: unknown option", key);
        return FALSE;
    }
    return TRUE;
}

gboolean npd_request_options_parse(GVariant *options, NpdCallKind kind, const NpdConfig *cfg,
                                   NpdRequestOptions *out, GError **error)
{
    memset(out, 0, sizeof *out);
    npl_sampler_params_default(&out->sampling);
    out->priority = NPD_PRIORITY_INTERACTIVE;

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
    return TRUE;
}

void npd_request_options_clear(NpdRequestOptions *opts)
{
    g_free(opts->model);
    g_strfreev(opts->stop);
    g_free(opts->system);
    g_free(opts->handle_token);
    memset(opts, 0, sizeof *opts);
}

void npd_chat_message_free(NpdChatMessage *m)
{
    if (m == NULL)
        return;
    g_free(m->role);
    g_free(m->content);
    g_free(m);
}

static gboolean role_valid(const char *role)
{
    return strcmp(role, "system") == 0 || strcmp(role, "user") == 0 || strcmp(role, "assistant") == 0;
}

GPtrArray *npd_chat_messages_parse(GVariant *messages, const NpdConfig *cfg, GError **error)
{
    gsize n = g_variant_n_children(messages);
    if (n == 0 || n > cfg->max_messages) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "messages: %zu given, expected 1 to %u", n,
                    cfg->max_messages);
        return NULL;
    }
    g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func((GDestroyNotify)npd_chat_message_free);
    gsize total = 0;
    for (gsize i = 0; i < n; i++) {
        g_autoptr(GVariant) dict = g_variant_get_child_value(messages, i);
        g_autoptr(GVariant) role = g_variant_lookup_value(dict, "role", NULL);
        g_autoptr(GVariant) content = g_variant_lookup_value(dict, "content", NULL);
        if (g_variant_n_children(dict) != (gsize)(role != NULL) + (gsize)(content != NULL)) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "messages[%zu]: only the keys 'role' and 'content' are allowed (each once)", i);
            return NULL;
        }
        if (role == NULL || !g_variant_is_of_type(role, G_VARIANT_TYPE_STRING) ||
            !role_valid(g_variant_get_string(role, NULL))) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "messages[%zu].role: expected a string: system, user or assistant", i);
            return NULL;
        }
        if (content == NULL || !g_variant_is_of_type(content, G_VARIANT_TYPE_STRING)) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "messages[%zu].content: expected a string", i);
            return NULL;
        }
        gsize len = 0;
        const char *text = g_variant_get_string(content, &len);
        total += len;
        if (total > cfg->max_prompt_bytes) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "messages: content exceeds the limit of %zu bytes", cfg->max_prompt_bytes);
            return NULL;
        }
        NpdChatMessage *m = g_new0(NpdChatMessage, 1);
        m->role = g_variant_dup_string(role, NULL);
        m->content = g_strdup(text);
        g_ptr_array_add(out, m);
    }
    return g_steal_pointer(&out);
}
