#include "client-events.h"

#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>

#include <npullm.h>

int npc_exit_code_for_error_name(const char *name)
{
    if (name == NULL)
        return NPC_EXIT_ERROR;
    if (strcmp(name, "org.npullm.Error.NotAuthorized") == 0 ||
        strcmp(name, "org.freedesktop.DBus.Error.AccessDenied") == 0)
        return NPC_EXIT_NOT_AUTHORIZED;
    if (strcmp(name, "org.npullm.Error.Busy") == 0)
        return NPC_EXIT_BUSY;
    if (strcmp(name, "org.npullm.Error.NoSuchModel") == 0)
        return NPC_EXIT_NO_SUCH_MODEL;
    if (strcmp(name, "org.npullm.Error.InvalidArgument") == 0)
        return NPC_EXIT_USAGE;
    return NPC_EXIT_ERROR;
}

static gchar *error_name(const GError *error)
{
    if (error->domain == NPULLM_ERROR)
        return g_strdup(npullm_error_to_dbus_name((NpullmError)error->code));
    gchar *remote = g_dbus_error_get_remote_error(error);
    if (remote != NULL)
        return remote;
    if (error->domain == G_DBUS_ERROR && error->code == G_DBUS_ERROR_ACCESS_DENIED)
        return g_strdup("org.freedesktop.DBus.Error.AccessDenied");
    return NULL;
}

int npc_exit_code_for_error(const GError *error)
{
    g_autofree gchar *name = error_name(error);
    return npc_exit_code_for_error_name(name);
}

static void print_json(JsonBuilder *b)
{
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    json_generator_set_root(gen, root);
    g_autofree gchar *text = json_generator_to_data(gen, NULL);
    fputs(text, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

static JsonBuilder *event_begin(const char *event)
{
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "event");
    json_builder_add_string_value(b, event);
    return b;
}

static void event_end(JsonBuilder *b)
{
    json_builder_end_object(b);
    print_json(b);
    g_object_unref(b);
}

void npc_output_end_line(NpcOutput *out)
{
    if (!out->json && !out->at_line_start) {
        fputc('\n', stdout);
        fflush(stdout);
        out->at_line_start = TRUE;
    }
}

void npc_output_request(NpcOutput *out, const char *path)
{
    if (!out->json)
        return;
    JsonBuilder *b = event_begin("request");
    json_builder_set_member_name(b, "path");
    json_builder_add_string_value(b, path);
    event_end(b);
}

static void text_event(const char *event, const char *text)
{
    JsonBuilder *b = event_begin(event);
    json_builder_set_member_name(b, "text");
    json_builder_add_string_value(b, text);
    event_end(b);
}

void npc_output_token(NpcOutput *out, const char *text)
{
    if (out->json) {
        text_event("token", text);
        return;
    }
    size_t n = strlen(text);
    if (n == 0)
        return;
    fwrite(text, 1, n, stdout);
    fflush(stdout);
    out->at_line_start = text[n - 1] == '\n';
}

void npc_output_thinking(NpcOutput *out, const char *text)
{
    if (out->json) {
        text_event("thinking", text);
        return;
    }
    /* kept off stdout, which carries the answer alone */
    fputs(text, stderr);
    fflush(stderr);
}

void npc_output_tool_call(NpcOutput *out, const char *id, const char *name, const char *arguments)
{
    if (out->json) {
        JsonBuilder *b = event_begin("tool_call");
        const char *members[][2] = {{"id", id}, {"name", name}, {"arguments", arguments}};
        for (gsize i = 0; i < G_N_ELEMENTS(members); i++) {
            json_builder_set_member_name(b, members[i][0]);
            json_builder_add_string_value(b, members[i][1]);
        }
        event_end(b);
        return;
    }
    printf("[tool call %s] %s %s\n", id, name, arguments);
    fflush(stdout);
}

void npc_output_state(NpcOutput *out, const char *state, guint queue_position)
{
    if (out->json) {
        JsonBuilder *b = event_begin("state");
        json_builder_set_member_name(b, "state");
        json_builder_add_string_value(b, state);
        json_builder_set_member_name(b, "queue_position");
        json_builder_add_int_value(b, queue_position);
        event_end(b);
    } else if (out->stats) {
        if (queue_position > 0)
            g_printerr("[%s, position %u]\n", state, queue_position);
        else
            g_printerr("[%s]\n", state);
    }
}

static double stat_double(GVariant *stats, const char *key)
{
    double d = 0;
    g_variant_lookup(stats, key, "d", &d);
    return d;
}

static guint32 stat_uint(GVariant *stats, const char *key)
{
    guint32 u = 0;
    g_variant_lookup(stats, key, "u", &u);
    return u;
}

void npc_output_finished(NpcOutput *out, const char *reason, GVariant *stats)
{
    if (out->json) {
        JsonBuilder *b = event_begin("finished");
        json_builder_set_member_name(b, "reason");
        json_builder_add_string_value(b, reason);
        json_builder_set_member_name(b, "stats");
        json_builder_add_value(b, json_gvariant_serialize(stats));
        event_end(b);
        return;
    }
    npc_output_end_line(out);
    const char *message = NULL;
    if (g_variant_lookup(stats, "error", "&s", &message))
        g_printerr("npullm-client: %s\n", message);
    else if (strcmp(reason, "cancelled") == 0)
        g_printerr("[cancelled]\n");
    if (out->stats) {
        const char *model = "?", *device = "?";
        g_variant_lookup(stats, "model", "&s", &model);
        g_variant_lookup(stats, "device", "&s", &device);
        guint encoded = stat_uint(stats, "encoded_images");
        g_autofree gchar *images = encoded > 0 ? g_strdup_printf(", %u image(s) encoded", encoded) : g_strdup("");
        g_printerr("[%s: %u prompt tokens (%u cached)%s, %u generated, first token after %.0f ms, %.1f tokens/s, "
                   "model %s on %s]\n",
                   reason, stat_uint(stats, "prompt_tokens"), stat_uint(stats, "cached_tokens"), images,
                   stat_uint(stats, "generated_tokens"),
                   stat_double(stats, "time_to_first_token_ms"), stat_double(stats, "tokens_per_second"), model,
                   device);
    }
}

/* A message event (with an error's D-Bus name when error_name is not
 * NULL), or the message on stderr. */
static void output_message(NpcOutput *out, const char *event, const char *error_name, const char *message)
{
    if (out->json) {
        JsonBuilder *b = event_begin(event);
        if (error_name != NULL) {
            json_builder_set_member_name(b, "error");
            json_builder_add_string_value(b, error_name);
        }
        json_builder_set_member_name(b, "message");
        json_builder_add_string_value(b, message);
        event_end(b);
    } else {
        npc_output_end_line(out);
        g_printerr("npullm-client: %s\n", message);
    }
}

void npc_output_message(NpcOutput *out, const char *event, const char *message)
{
    output_message(out, event, NULL, message);
}

void npc_output_error(NpcOutput *out, const GError *error)
{
    g_autofree gchar *name = error_name(error);
    g_autoptr(GError) copy = g_error_copy(error);
    g_dbus_error_strip_remote_error(copy);
    output_message(out, "error", name != NULL ? name : "", copy->message);
}

/* One JSON event whose members are the entries of an a{sv} dictionary. */
static void event_of_dict(const char *kind, GVariant *dict)
{
    JsonBuilder *b = event_begin(kind);
    GVariantIter it;
    const char *key;
    GVariant *value;
    g_variant_iter_init(&it, dict);
    while (g_variant_iter_next(&it, "{&sv}", &key, &value)) {
        json_builder_set_member_name(b, key);
        json_builder_add_value(b, json_gvariant_serialize(value));
        g_variant_unref(value);
    }
    event_end(b);
}

void npc_output_models(NpcOutput *out, GVariant *models)
{
    GVariantIter it;
    GVariant *entry;
    if (!out->json)
        g_print("%-32s %-10s %12s %-8s %8s %-6s %s\n", "NAME", "ARCH", "PARAMETERS", "QUANT", "CONTEXT", "VISION",
                "LOADED");
    g_variant_iter_init(&it, models);
    while ((entry = g_variant_iter_next_value(&it)) != NULL) {
        if (out->json) {
            event_of_dict("model", entry);
        } else {
            const char *name = "?", *arch = "?", *quant = "?";
            guint64 params = 0;
            guint32 ctx = 0;
            gboolean vision = FALSE, loaded = FALSE;
            g_variant_lookup(entry, "name", "&s", &name);
            g_variant_lookup(entry, "architecture", "&s", &arch);
            g_variant_lookup(entry, "quantization", "&s", &quant);
            g_variant_lookup(entry, "parameters", "t", &params);
            g_variant_lookup(entry, "context_length", "u", &ctx);
            g_variant_lookup(entry, "vision", "b", &vision);
            g_variant_lookup(entry, "loaded", "b", &loaded);
            g_print("%-32s %-10s %12" G_GUINT64_FORMAT " %-8s %8u %-6s %s\n", name, arch, params, quant, ctx,
                    vision ? "yes" : "no", loaded ? "yes" : "no");
            gboolean supported = TRUE;
            const char *reason = "";
            g_variant_lookup(entry, "supported", "b", &supported);
            g_variant_lookup(entry, "reason", "&s", &reason);
            if (!supported)
                g_print("  (cannot be used: %s)\n", reason);
        }
        g_variant_unref(entry);
    }
}

void npc_output_status(NpcOutput *out, GVariant *properties)
{
    if (out->json) {
        event_of_dict("status", properties);
        return;
    }
    static const char *const order[] = {"Version", "Device", "DeviceStatus", "DefaultModel", "LoadedModels",
                                        "ActiveRequests", "QueuedRequests", "IdleTimeout"};
    for (size_t i = 0; i < G_N_ELEMENTS(order); i++) {
        g_autoptr(GVariant) value = g_variant_lookup_value(properties, order[i], NULL);
        if (value == NULL)
            continue;
        g_autofree gchar *text = NULL;
        if (g_variant_is_of_type(value, G_VARIANT_TYPE_STRING))
            text = g_variant_dup_string(value, NULL);
        else if (g_variant_is_of_type(value, G_VARIANT_TYPE_STRING_ARRAY)) {
            g_autofree const gchar **strv = g_variant_get_strv(value, NULL);
            text = strv[0] != NULL ? g_strjoinv(", ", (gchar **)strv) : g_strdup("none");
        } else {
            text = g_variant_print(value, FALSE);
        }
        g_print("%-16s %s\n", order[i], text);
    }
}
