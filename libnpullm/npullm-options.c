/* NpullmOptions: the a{sv} options of a request as GObject properties.
 * The properties are made from the protocol's options table (one per
 * option, '_' spelt '-'), so a new option appears here by itself; only
 * the options a caller set are sent. */
#include "npullm-options-private.h"

#include <string.h>

#include "npullm-error.h"
#include "npullm-protocol.h"

/**
 * NpullmOptions:
 *
 * The options of a request. Set them as properties; only those that were
 * set are sent, the service's defaults apply to the others.
 *
 * Since: 1.0
 */
struct _NpullmOptions {
    GObject parent;
    GVariant *values[NPP_N_OPTIONS]; /* NULL: not set */
    gboolean not_utf8[NPP_N_OPTIONS]; /* set to a string that is not UTF-8: refused when sent */
};

G_DEFINE_FINAL_TYPE(NpullmOptions, npullm_options, G_TYPE_OBJECT)

/* property id n + 1 is npp_options[n]; handle_token is the library's */
static GParamSpec *props[NPP_N_OPTIONS + 1];

static gboolean is_public(const NppOption *opt)
{
    return opt->id != NPP_OPT_HANDLE_TOKEN;
}

static GParamSpec *pspec_for(const NppOption *opt)
{
    g_autofree gchar *name = g_strdelimit(g_strdup(opt->key), "_", '-');
    /* the name is built here: GLib interns it (no G_PARAM_STATIC_NAME) */
    GParamFlags flags = G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_NICK | G_PARAM_STATIC_BLURB;
    const char *nick = opt->key;
    /* Numbers take any value of their type: the service checks the
     * protocol's range and names the option in its InvalidArgument error,
     * where a narrower GParamSpec would only warn and drop the value. */
    if (strcmp(opt->type, "u") == 0)
        return g_param_spec_uint(name, nick, opt->summary, 0, G_MAXUINT32, 0, flags);
    if (strcmp(opt->type, "d") == 0)
        return g_param_spec_double(name, nick, opt->summary, -G_MAXDOUBLE, G_MAXDOUBLE, 0, flags);
    if (strcmp(opt->type, "t") == 0)
        return g_param_spec_uint64(name, nick, opt->summary, 0, G_MAXUINT64, 0, flags);
    if (strcmp(opt->type, "b") == 0)
        return g_param_spec_boolean(name, nick, opt->summary, FALSE, flags);
    if (strcmp(opt->type, "as") == 0)
        return g_param_spec_boxed(name, nick, opt->summary, G_TYPE_STRV, flags);
    return g_param_spec_string(name, nick, opt->summary, NULL, flags);
}

/* D-Bus strings are UTF-8; GVariant would refuse others with a critical. */
static gboolean value_is_utf8(const NppOption *opt, const GValue *value)
{
    if (strcmp(opt->type, "as") == 0) {
        const gchar *const *strv = g_value_get_boxed(value);
        for (gsize i = 0; strv != NULL && strv[i] != NULL; i++)
            if (!g_utf8_validate(strv[i], -1, NULL))
                return FALSE;
        return TRUE;
    }
    if (strcmp(opt->type, "s") == 0 && g_value_get_string(value) != NULL)
        return g_utf8_validate(g_value_get_string(value), -1, NULL);
    return TRUE;
}

static GVariant *variant_from_value(const NppOption *opt, const GValue *value)
{
    if (strcmp(opt->type, "u") == 0)
        return g_variant_new_uint32(g_value_get_uint(value));
    if (strcmp(opt->type, "d") == 0)
        return g_variant_new_double(g_value_get_double(value));
    if (strcmp(opt->type, "t") == 0)
        return g_variant_new_uint64(g_value_get_uint64(value));
    if (strcmp(opt->type, "b") == 0)
        return g_variant_new_boolean(g_value_get_boolean(value));
    if (strcmp(opt->type, "as") == 0) {
        const gchar *const *strv = g_value_get_boxed(value);
        return strv != NULL ? g_variant_new_strv(strv, -1) : NULL;
    }
    const char *s = g_value_get_string(value);
    return s != NULL ? g_variant_new_string(s) : NULL;
}

static void value_from_variant(const NppOption *opt, GVariant *v, GValue *value)
{
    if (v == NULL) {
        g_param_value_set_default(props[opt->id + 1], value);
        return;
    }
    if (strcmp(opt->type, "u") == 0)
        g_value_set_uint(value, g_variant_get_uint32(v));
    else if (strcmp(opt->type, "d") == 0)
        g_value_set_double(value, g_variant_get_double(v));
    else if (strcmp(opt->type, "t") == 0)
        g_value_set_uint64(value, g_variant_get_uint64(v));
    else if (strcmp(opt->type, "b") == 0)
        g_value_set_boolean(value, g_variant_get_boolean(v));
    else if (strcmp(opt->type, "as") == 0)
        g_value_take_boxed(value, g_variant_dup_strv(v, NULL));
    else
        g_value_set_string(value, g_variant_get_string(v, NULL));
}

static void npullm_options_set_property(GObject *object, guint id, const GValue *value, GParamSpec *pspec)
{
    NpullmOptions *self = NPULLM_OPTIONS(object);
    const NppOption *opt = &npp_options[id - 1];
    g_clear_pointer(&self->values[opt->id], g_variant_unref);
    self->not_utf8[opt->id] = !value_is_utf8(opt, value);
    GVariant *v = self->not_utf8[opt->id] ? NULL : variant_from_value(opt, value);
    if (v != NULL)
        self->values[opt->id] = g_variant_ref_sink(v);
    g_object_notify_by_pspec(object, pspec);
}

static void npullm_options_get_property(GObject *object, guint id, GValue *value, GParamSpec *pspec)
{
    NpullmOptions *self = NPULLM_OPTIONS(object);
    const NppOption *opt = &npp_options[id - 1];
    value_from_variant(opt, self->values[opt->id], value);
}

static void npullm_options_finalize(GObject *object)
{
    NpullmOptions *self = NPULLM_OPTIONS(object);
    for (guint i = 0; i < NPP_N_OPTIONS; i++)
        g_clear_pointer(&self->values[i], g_variant_unref);
    G_OBJECT_CLASS(npullm_options_parent_class)->finalize(object);
}

/* The properties are installed from the protocol table; their docs: */
/**
 * NpullmOptions:model:
 *
 * The model to use (default: #NpullmClient:default-model).
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:max-tokens:
 *
 * The most tokens to generate (1 .. context length - 1).
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:temperature:
 *
 * Sampling temperature, 0 .. 10; 0 is greedy.
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:top-p:
 *
 * Nucleus sampling mass, (0, 1]; 1 is off.
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:top-k:
 *
 * Sample among the k likeliest tokens, 0 .. 1000000; 0 is off.
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:min-p:
 *
 * Drop tokens below this share of the likeliest one, 0 .. 1.
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:repeat-penalty:
 *
 * Repetition penalty, (0, 10]; 1 is off.
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:seed:
 *
 * Sampler seed; random when not set (the finished stats say which).
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:stop:
 *
 * Stop strings (at most 16 of 1 .. 256 bytes), never part of the output.
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:system:
 *
 * A system prompt (not with #NpullmOptions:raw).
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:raw:
 *
 * Generate only: use the prompt as it is, without the chat template.
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:priority:
 *
 * "interactive" (the default) or "background".
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:think:
 *
 * Reasoning models (Qwen 3): think before answering or not, passed to the
 * chat template as enable_thinking; unset, the template's default. The
 * thinking arrives on #NpullmRequest::thinking. Not with
 * #NpullmOptions:raw, not for DescribeImage.
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:format:
 *
 * Constrained output: "json" (any JSON value) or a JSON Schema as text;
 * every generated token is one the grammar allows and the request ends
 * when the value is complete. A schema the service cannot compile fails
 * the call with %NPULLM_ERROR_INVALID_ARGUMENT naming the schema path.
 * Not for DescribeImage.
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:tools:
 *
 * Chat only: a JSON array of OpenAI-style function definitions the model
 * may call; calls arrive on #NpullmRequest::tool-call.
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:tool-choice:
 *
 * Chat only: "auto" (the default), "none" (the tools are not offered),
 * "required" (one call or more, see #NpullmOptions:parallel-tool-calls)
 * or a function's name (calls to it).
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:parallel-tool-calls:
 *
 * Chat only: with #NpullmOptions:tool-choice "required" or a name, whether
 * the answer may hold several calls (TRUE, the default, where the model's
 * family writes several in a turn: up to 8) or exactly one (FALSE).
 *
 * Since: 1.0
 */

/**
 * NpullmOptions:dimensions:
 *
 * Embed only: keep the first N values of each vector (Matryoshka
 * models), then normalize; unset, all of them.
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:truncate:
 *
 * Embed and Rerank: cut texts longer than the model's context (TRUE, the
 * default) or refuse them with %NPULLM_ERROR_INVALID_ARGUMENT (FALSE).
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:top-n:
 *
 * Rerank only: return only the N best documents; unset, all of them.
 *
 * Since: 1.0
 */
/**
 * NpullmOptions:reasoning-effort:
 *
 * How long gpt-oss reasons: "low", "medium" or "high", passed to the chat
 * template as reasoning_effort; %NULL (unset), the template's default
 * (medium for gpt-oss). Templates that do not read it ignore it. Any other
 * text fails the call with %NPULLM_ERROR_INVALID_ARGUMENT ("reasoning_effort:
 * expected low or medium or high"). Ignored with #NpullmOptions:raw (no
 * template is applied); not for DescribeImage.
 *
 * Since: 1.0
 */

static void npullm_options_class_init(NpullmOptionsClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    object_class->set_property = npullm_options_set_property;
    object_class->get_property = npullm_options_get_property;
    object_class->finalize = npullm_options_finalize;
    for (guint i = 0; i < NPP_N_OPTIONS; i++) {
        if (!is_public(&npp_options[i]))
            continue;
        props[i + 1] = pspec_for(&npp_options[i]);
        g_object_class_install_property(object_class, i + 1, props[i + 1]);
    }
}

static void npullm_options_init(NpullmOptions *self)
{
}

/**
 * npullm_options_new:
 *
 * Options for a request, all unset (the service's defaults). Set them as
 * properties: #NpullmOptions:model, #NpullmOptions:max-tokens,
 * #NpullmOptions:temperature, #NpullmOptions:top-p, #NpullmOptions:top-k,
 * #NpullmOptions:min-p, #NpullmOptions:repeat-penalty,
 * #NpullmOptions:seed, #NpullmOptions:stop, #NpullmOptions:system,
 * #NpullmOptions:raw, #NpullmOptions:priority, #NpullmOptions:think and
 * #NpullmOptions:reasoning-effort (among others). A property that was set
 * is sent, one that was not is not.
 *
 * Returns: (transfer full): new options
 *
 * Since: 1.0
 */
NpullmOptions *npullm_options_new(void)
{
    return g_object_new(NPULLM_TYPE_OPTIONS, NULL);
}

static const NppOption *public_option(const char *name)
{
    g_autofree gchar *key = g_strdelimit(g_strdup(name), "-", '_');
    const NppOption *opt = npp_option_lookup(key);
    return opt != NULL && is_public(opt) ? opt : NULL;
}

/**
 * npullm_options_is_set:
 * @self: options
 * @name: a property name, e.g. "max-tokens"
 *
 * Whether the option was set (and so is sent with a request).
 *
 * Returns: %TRUE when set
 *
 * Since: 1.0
 */
gboolean npullm_options_is_set(NpullmOptions *self, const char *name)
{
    g_return_val_if_fail(NPULLM_IS_OPTIONS(self), FALSE);
    const NppOption *opt = public_option(name);
    return opt != NULL && self->values[opt->id] != NULL;
}

/**
 * npullm_options_unset:
 * @self: options
 * @name: a property name, e.g. "temperature"
 *
 * Goes back to the service's default for this option.
 *
 * Since: 1.0
 */
void npullm_options_unset(NpullmOptions *self, const char *name)
{
    g_return_if_fail(NPULLM_IS_OPTIONS(self));
    const NppOption *opt = public_option(name);
    g_return_if_fail(opt != NULL);
    self->not_utf8[opt->id] = FALSE;
    if (self->values[opt->id] == NULL)
        return;
    g_clear_pointer(&self->values[opt->id], g_variant_unref);
    g_object_notify_by_pspec(G_OBJECT(self), props[opt->id + 1]);
}

gboolean _npullm_options_check(NpullmOptions *self, GError **error)
{
    for (guint i = 0; self != NULL && i < NPP_N_OPTIONS; i++)
        if (self->not_utf8[i]) {
            g_set_error(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT, "the option %s is not valid UTF-8",
                        npp_options[i].key);
            return FALSE;
        }
    return TRUE;
}

GVariant *_npullm_options_to_variant(NpullmOptions *self, const char *handle_token)
{
    GVariantBuilder b;
    g_variant_builder_init(&b, G_VARIANT_TYPE_VARDICT);
    for (guint i = 0; self != NULL && i < NPP_N_OPTIONS; i++)
        if (self->values[i] != NULL)
            g_variant_builder_add(&b, "{sv}", npp_options[i].key, self->values[i]);
    if (handle_token != NULL)
        g_variant_builder_add(&b, "{sv}", npp_options[NPP_OPT_HANDLE_TOKEN].key, g_variant_new_string(handle_token));
    return g_variant_builder_end(&b);
}
