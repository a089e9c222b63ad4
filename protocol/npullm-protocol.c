#include "npullm-protocol.h"

#include <string.h>

static const char *const error_names[NPP_ERROR_N_CODES] = {
    [NPP_ERROR_INVALID_ARGUMENT] = "org.npullm.Error.InvalidArgument",
    [NPP_ERROR_NOT_AUTHORIZED] = "org.npullm.Error.NotAuthorized",
    [NPP_ERROR_BUSY] = "org.npullm.Error.Busy",
    [NPP_ERROR_NO_SUCH_MODEL] = "org.npullm.Error.NoSuchModel",
    [NPP_ERROR_NOT_SUPPORTED] = "org.npullm.Error.NotSupported",
    [NPP_ERROR_MODEL_LOAD_FAILED] = "org.npullm.Error.ModelLoadFailed",
    [NPP_ERROR_CONTEXT_OVERFLOW] = "org.npullm.Error.ContextOverflow",
    [NPP_ERROR_CANCELLED] = "org.npullm.Error.Cancelled",
    [NPP_ERROR_INTERNAL] = "org.npullm.Error.Internal",
    [NPP_ERROR_NO_SPACE] = "org.npullm.Error.NoSpace",
};

const char *npp_error_name(guint code)
{
    return code < NPP_ERROR_N_CODES ? error_names[code] : error_names[NPP_ERROR_INTERNAL];
}

gchar *npp_request_node_for_token(const char *sender, const char *handle_token)
{
    GString *node = g_string_new("c");
    for (const char *p = sender; *p != '\0'; p++) {
        if (g_ascii_isalnum(*p))
            g_string_append_c(node, *p);
        else if (*p == '.')
            g_string_append_c(node, '_');
    }
    g_string_append_c(node, '_');
    g_string_append(node, handle_token);
    return g_string_free(node, FALSE);
}

gchar *npp_request_path_for_token(const char *sender, const char *handle_token)
{
    g_autofree gchar *node = npp_request_node_for_token(sender, handle_token);
    return g_strconcat(NPP_REQUEST_ROOT "/", node, NULL);
}

static const char *const priorities[] = {"interactive", "background", NULL};
static const char *const efforts[] = {"low", "medium", "high", NULL};

#define ALL NPP_CALLS_ALL
const NppOption npp_options[NPP_N_OPTIONS] = {
    {NPP_OPT_MODEL, "model", "s", 0, 0, FALSE, NULL, ALL | NPP_CALLS_EMBED | NPP_CALLS_RERANK,
     "model name (default: DefaultModel)"},
    {NPP_OPT_MAX_TOKENS, "max_tokens", "u", 1, 1u << 20, FALSE, NULL, ALL, "most tokens to generate"},
    {NPP_OPT_TEMPERATURE, "temperature", "d", 0, 10, FALSE, NULL, ALL, "sampling temperature (0: greedy)"},
    {NPP_OPT_TOP_P, "top_p", "d", 0, 1, TRUE, NULL, ALL, "nucleus sampling mass (1: off)"},
    {NPP_OPT_TOP_K, "top_k", "u", 0, 1000000, FALSE, NULL, ALL, "sample from the k likeliest (0: off)"},
    {NPP_OPT_MIN_P, "min_p", "d", 0, 1, FALSE, NULL, ALL, "drop tokens below this share of the top one"},
    {NPP_OPT_REPEAT_PENALTY, "repeat_penalty", "d", 0, 10, TRUE, NULL, ALL, "repetition penalty (1: off)"},
    {NPP_OPT_SEED, "seed", "t", 0, 0, FALSE, NULL, ALL, "sampler seed (default: random)"},
    {NPP_OPT_STOP, "stop", "as", 0, 0, FALSE, NULL, ALL, "stop strings"},
    {NPP_OPT_SYSTEM, "system", "s", 0, 0, FALSE, NULL, ALL, "system prompt"},
    {NPP_OPT_RAW, "raw", "b", 0, 0, FALSE, NULL, NPP_CALLS_TEXT, "prompt without the chat template"},
    {NPP_OPT_PRIORITY, "priority", "s", 0, 0, FALSE, priorities, ALL | NPP_CALLS_EMBED | NPP_CALLS_RERANK,
     "interactive or background"},
    {NPP_OPT_HANDLE_TOKEN, "handle_token", "s", 0, 0, FALSE, NULL, NPP_CALLS_WITH_OBJECT,
     "names the request object path in advance"},
    {NPP_OPT_THINK, "think", "b", 0, 0, FALSE, NULL, ALL & ~(1u << NPP_CALL_DESCRIBE_IMAGE),
     "reasoning models: think first (enable_thinking; default: the template's)"},
    {NPP_OPT_FORMAT, "format", "s", 0, 0, FALSE, NULL, ALL & ~(1u << NPP_CALL_DESCRIBE_IMAGE),
     "constrained output: \"json\" (any JSON value) or a JSON Schema"},
    {NPP_OPT_TOOLS, "tools", "s", 0, 0, FALSE, NULL, 1u << NPP_CALL_CHAT,
     "JSON array of OpenAI-style function definitions the model may call"},
    {NPP_OPT_TOOL_CHOICE, "tool_choice", "s", 0, 0, FALSE, NULL, 1u << NPP_CALL_CHAT,
     "auto (default), none, required, or a function's name"},
    {NPP_OPT_DIMENSIONS, "dimensions", "u", 1, NPP_MAX_EMBED_DIMENSIONS, FALSE, NULL, NPP_CALLS_EMBED,
     "Embed: keep the first N values of each vector, then normalize (default: all)"},
    {NPP_OPT_TRUNCATE, "truncate", "b", 0, 0, FALSE, NULL, NPP_CALLS_EMBED | NPP_CALLS_RERANK,
     "Embed: cut texts longer than the context (default true) or refuse them"},
    {NPP_OPT_PARALLEL_TOOL_CALLS, "parallel_tool_calls", "b", 0, 0, FALSE, NULL, 1u << NPP_CALL_CHAT,
     "tool_choice required or a name: one call or more (true, the default) where the family writes several"},
    {NPP_OPT_TOP_N, "top_n", "u", 1, NPP_MAX_EMBED_TEXTS, FALSE, NULL, NPP_CALLS_RERANK,
     "Rerank: return only the N best documents (default: all)"},
    {NPP_OPT_REASONING_EFFORT, "reasoning_effort", "s", 0, 0, FALSE, efforts, ALL & ~(1u << NPP_CALL_DESCRIBE_IMAGE),
     "gpt-oss: low, medium or high, passed to the chat template (default: the template's)"},
};
#undef ALL

const NppOption *npp_option_lookup(const char *key)
{
    for (guint i = 0; i < NPP_N_OPTIONS; i++)
        if (strcmp(npp_options[i].key, key) == 0)
            return &npp_options[i];
    return NULL;
}

static gboolean number_in_range(const NppOption *opt, double x)
{
    /* NaN fails both comparisons */
    gboolean above_min = opt->min_open ? x > opt->min : x >= opt->min;
    return above_min && x <= opt->max;
}

gboolean npp_option_in_range(const NppOption *opt, GVariant *value)
{
    if (strcmp(opt->type, "d") == 0) {
        /* The service keeps these as float: check the value it will use,
         * so 1e-50 for an open lower bound of 0 does not become 0. */
        float f = (float)g_variant_get_double(value);
        return number_in_range(opt, f);
    }
    if (strcmp(opt->type, "u") == 0)
        return number_in_range(opt, g_variant_get_uint32(value));
    if (opt->choices != NULL) {
        const char *s = g_variant_get_string(value, NULL);
        return g_strv_contains(opt->choices, s);
    }
    return TRUE;
}

gchar *npp_option_range_text(const NppOption *opt)
{
    if (opt->choices != NULL)
        return g_strjoinv(" or ", (gchar **)opt->choices);
    return g_strdup_printf("%s%g, %g]", opt->min_open ? "(" : "[", opt->min, opt->max);
}

int npp_utf8_prefix_len(const char *text, gsize max_bytes)
{
    gsize n = strnlen(text, max_bytes + 1);
    if (n <= max_bytes)
        return (int)n;
    /* text[max_bytes] starts the part we drop: back up while it is a
     * continuation byte, so the kept prefix ends on a whole character. */
    n = max_bytes;
    while (n > 0 && ((guchar)text[n] & 0xC0) == 0x80)
        n--;
    return (int)n;
}

/* ---- file descriptors ------------------------------------------------- */

/* The handles in Chat's messages' "images" (wrong types count nothing:
 * the argument check names them). */
static guint chat_image_handles(GVariant *params)
{
    if (params == NULL || !g_variant_is_of_type(params, G_VARIANT_TYPE("(aa{sv}a{sv})")))
        return 0;
    g_autoptr(GVariant) messages = g_variant_get_child_value(params, 0);
    guint n = 0;
    for (gsize i = 0, len = g_variant_n_children(messages); i < len; i++) {
        g_autoptr(GVariant) dict = g_variant_get_child_value(messages, i);
        g_autoptr(GVariant) images = g_variant_lookup_value(dict, "images", G_VARIANT_TYPE("ah"));
        if (images != NULL)
            n += (guint)MIN(g_variant_n_children(images), (gsize)NPP_MAX_CHAT_IMAGES + 1);
        if (n > NPP_MAX_CHAT_IMAGES)
            return NPP_MAX_CHAT_IMAGES;
    }
    return n;
}

guint npp_call_max_fds(const char *method, const char *signature, GVariant *params)
{
    guint n = 0;
    for (const char *c = signature; c != NULL && *c != '\0'; c++)
        n += *c == 'h';
    if (n > 0 && g_strcmp0(method, "AddModel") == 0)
        n++;
    if (g_strcmp0(method, "Chat") == 0)
        n += chat_image_handles(params);
    return n;
}
