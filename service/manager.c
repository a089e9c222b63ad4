/* org.npullm.Manager: validates each call, asks polkit (asynchronously),
 * applies the queue limits and hands the work to the engine worker. */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gunixfdlist.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "call-fds.h"
#include "embed-call.h"
#include "rerank-call.h"
#include "fd-filesystem.h"
#include "image-input.h"
#include "manager-call.h"
#include "model-install.h"

#ifndef NPD_VERSION
#define NPD_VERSION "unknown"
#endif

/* DescribeImage: how long the image descriptor may take to reach its end
 * (a pipe whose writer stalls). */
#define IMAGE_READ_TIMEOUT_S 30
/* DescribeImage with an empty prompt. */
#define DEFAULT_IMAGE_PROMPT "Describe this image."

typedef NpdPendingCall PendingCall;

static void pending_free_image(PendingCall *p)
{
    if (p->image_slot)
        npd_user_release_image(p->daemon, p->client);
    p->image_slot = FALSE;
    g_clear_pointer(&p->image_src, g_ptr_array_unref);
    g_clear_pointer(&p->mmproj_path, g_free);
    g_clear_pointer(&p->images, g_ptr_array_unref);
}

/* The caller is counted from the start: validation may already take an
 * image slot of its user. */
static PendingCall *pending_new(NpdDaemon *d, GDBusMethodInvocation *inv, const NpdManagerMethod *method)
{
    PendingCall *p = g_new0(PendingCall, 1);
    p->daemon = d;
    p->method = method;
    p->client = npd_client_ref(npd_client_get(d, g_dbus_method_invocation_get_sender(inv)));
    p->client->pending_calls++;
    return p;
}

/* Takes the call's descriptors for the check before fds_checked (owned by
 * p until it takes them). */
void npd_pending_call_take_fds(NpdPendingCall *p, const int *fds, guint n, NpdMethodFdsChecked fds_checked)
{
    p->unchecked_fds = g_array_sized_new(FALSE, FALSE, sizeof(int), n);
    g_array_append_vals(p->unchecked_fds, fds, n);
    p->fds_checked = fds_checked;
}

static void pending_free(PendingCall *p)
{
    for (guint i = 0; p->unchecked_fds != NULL && i < p->unchecked_fds->len; i++)
        if (g_array_index(p->unchecked_fds, int, i) >= 0)
            close(g_array_index(p->unchecked_fds, int, i));
    g_clear_pointer(&p->unchecked_fds, g_array_unref);
    pending_free_image(p);
    if (p->op != NULL)
        p->op_free(p->op);
    p->client->pending_calls--;
    npd_client_release_if_idle(p->daemon, p->client);
    npd_client_unref(p->client);
    npd_request_options_clear(&p->opts);
    if (p->messages != NULL)
        g_ptr_array_unref(p->messages);
    g_free(p->prompt);
    g_free(p->model_name);
    g_free(p->model_path);
    g_free(p);
}

void npd_pending_call_free(NpdPendingCall *p)
{
    pending_free(p);
}

static const char *default_model_name(NpdDaemon *d)
{
    if (d->cfg->default_model != NULL && d->cfg->default_model[0] != '\0')
        return d->cfg->default_model;
    const NpdModelEntry *e = npd_model_catalog_default(d->catalog, NULL);
    return e != NULL ? e->name : NULL;
}

static gboolean model_is_loaded(NpdDaemon *d, const char *name)
{
    return d->loaded_models != NULL && g_strv_contains((const gchar *const *)d->loaded_models, name);
}

/* ---- request submission ------------------------------------------------ */

gboolean npd_manager_check_capacity(NpdDaemon *d, NpdClient *c, GError **error)
{
    guint active = 0, queued = 0;
    npd_requests_count(d, &active, &queued);
    if (active + queued >= d->cfg->max_running + d->cfg->max_queued) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_BUSY, "the queue is full (%u running, %u waiting)", active,
                    queued);
        return FALSE;
    }
    if (c->outstanding >= d->cfg->max_per_client) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_BUSY, "too many unfinished requests from this client (limit %u)",
                    d->cfg->max_per_client);
        return FALSE;
    }
    return npd_user_admit_request(d, c, error);
}

static void submit_request(PendingCall *p)
{
    NpdDaemon *d = p->daemon;
    g_autoptr(GError) error = NULL;
    if (!npd_manager_check_capacity(d, p->client, &error)) {
        g_dbus_method_invocation_return_gerror(p->invocation, error);
        return;
    }
    g_autofree gchar *node = NULL;
    if (p->opts.handle_token != NULL) {
        node = npp_request_node_for_token(p->client->name, p->opts.handle_token);
        if (g_hash_table_contains(d->request_nodes, node)) {
            g_dbus_method_invocation_return_error_literal(p->invocation, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                                                          "handle_token: already in use by another request");
            return;
        }
    }
    gboolean complete = p->complete;
    NpdRequest *r = npd_request_new(d, p->client, node, p->model_name, complete ? p->invocation : NULL);

    NpdJob *job = g_new0(NpdJob, 1);
    job->id = r->id;
    job->model_name = g_strdup(p->model_name);
    job->model_path = g_strdup(p->model_path);
    job->raw = p->opts.raw;
    job->prompt = g_steal_pointer(&p->prompt);
    job->messages = g_steal_pointer(&p->messages);
    job->sampling = p->opts.sampling;
    if (!p->opts.seed_given)
        job->sampling.seed = ((guint64)g_random_int() << 32) | g_random_int();
    job->max_tokens = p->opts.max_tokens;
    job->stop = g_steal_pointer(&p->opts.stop);
    job->priority = p->opts.priority;
    job->images = g_steal_pointer(&p->images);
    job->uid = p->client->uid;
    job->think = p->opts.think;
    job->grammar = g_steal_pointer(&p->opts.grammar);
    if (p->opts.tool_choice == NULL || strcmp(p->opts.tool_choice, "none") != 0) {
        /* none: the tools are not offered at all */
        job->tools = g_steal_pointer(&p->opts.tools);
        job->tool_choice = g_steal_pointer(&p->opts.tool_choice);
    }
    g_debug("request %" G_GUINT64_FORMAT " from %s: model %s, %s", r->id, p->client->name, p->model_name,
            r->path ? r->path : "Complete");
    npd_worker_submit(d->worker, job);

    if (!complete)
        g_dbus_method_invocation_return_value(p->invocation, g_variant_new("(o)", r->path));
    npd_manager_announce(d);
    npd_daemon_activity_changed(d);
}

static void read_next_image(PendingCall *p);

static void image_read_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    PendingCall *p = data;
    GError *error = NULL;
    NpdImagePixels *px = npd_image_input_read_finish(res, &error);
    if (px != NULL)
        g_ptr_array_add(p->images, px);
    if (px == NULL) {
        if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
            g_dbus_method_invocation_return_error_literal(p->invocation, NPD_ERROR, NPD_ERROR_CANCELLED,
                                                          "caller disconnected");
        else
            g_dbus_method_invocation_return_gerror(p->invocation, error);
        g_error_free(error);
    } else if (p->client->gone) {
        g_dbus_method_invocation_return_error_literal(p->invocation, NPD_ERROR, NPD_ERROR_CANCELLED,
                                                      "caller disconnected");
    } else if (p->images->len < p->image_src->len) {
        read_next_image(p);
        return; /* kept */
    } else {
        submit_request(p);
    }
    pending_free(p);
}

/* The next image of the call (the pixels of those before are kept: the
 * call holds one image slot, whatever its number of images). */
static void read_next_image(PendingCall *p)
{
    NpdImageSource *src = g_steal_pointer(&p->image_src->pdata[p->images->len]);
    npd_image_input_read_async(src, p->mmproj_path, p->daemon->image_budget, IMAGE_READ_TIMEOUT_S,
                               p->client->cancellable, image_read_cb, p);
}

/* Once authorized: reads, decodes and preprocesses the images off the main
 * loop and the engine thread, then submits (answered from image_read_cb);
 * the reads stop when the caller leaves. Without images, submits now. */
static gboolean run_submit(PendingCall *p)
{
    if (p->image_src == NULL || p->image_src->len == 0) {
        submit_request(p);
        return FALSE;
    }
    p->images = g_ptr_array_new_with_free_func((GDestroyNotify)npd_image_pixels_free);
    read_next_image(p);
    return TRUE;
}

/* LoadModel, UnloadModel: answered from npd_manager_handle_command_done. */
static gboolean run_load(PendingCall *p)
{
    npd_worker_load(p->daemon->worker, p->model_name, p->model_path, p->invocation);
    return FALSE;
}

static gboolean run_unload(PendingCall *p)
{
    npd_worker_unload(p->daemon->worker, p->model_name, p->invocation);
    return FALSE;
}

/* ForgetCache: answered from npd_manager_handle_command_done. Only the
 * caller's own uid: nobody drops (or learns about) another user's. */
static gboolean run_forget_cache(PendingCall *p)
{
    if (p->client->uid == NPD_UID_UNKNOWN) {
        g_dbus_method_invocation_return_value(p->invocation, NULL); /* such callers are never cached */
        return FALSE;
    }
    npd_worker_forget_cache(p->daemon->worker, p->client->uid, p->invocation);
    return FALSE;
}

static gboolean run_set_idle_timeout(PendingCall *p)
{
    NpdDaemon *d = p->daemon;
    d->idle_timeout = p->idle_timeout;
    npd_worker_set_idle_timeout(d->worker, p->idle_timeout);
    g_message("IdleTimeout set to %u s by %s", p->idle_timeout, p->client->name);
    g_dbus_method_invocation_return_value(p->invocation, NULL);
    npd_manager_announce(d);
    return FALSE;
}

static void authorized_cb(GError *error, gpointer data)
{
    PendingCall *p = data;
    if (error != NULL) {
        g_dbus_method_invocation_return_gerror(p->invocation, error);
    } else if (p->client->gone) {
        /* The caller left while polkit was thinking: nothing to run. */
        g_dbus_method_invocation_return_error_literal(p->invocation, NPD_ERROR, NPD_ERROR_CANCELLED,
                                                      "caller disconnected");
    } else if (p->method->run(p)) {
        return; /* kept */
    }
    pending_free(p);
}

/* Takes ownership of the invocation and of p on every path. */
static void authorize_then(NpdDaemon *d, GDBusMethodInvocation *inv, PendingCall *p)
{
    p->invocation = inv;
    /* p counts itself: the limits compare what was there before it */
    p->client->pending_calls--;
    g_autoptr(GError) error = NULL;
    if (p->client->pending_calls >= d->cfg->max_per_client)
        g_set_error_literal(&error, NPD_ERROR, NPD_ERROR_BUSY,
                            "too many calls from this client waiting for authorization");
    else if (npd_user_admit_call(d, p->client, &error) && p->method->makes_request)
        /* checked again when the request is made; failing early spares
         * polkit and the image read */
        npd_user_admit_request(d, p->client, &error);
    p->client->pending_calls++;
    if (error != NULL) {
        g_dbus_method_invocation_return_gerror(inv, error);
        pending_free(p);
        return;
    }
    npd_authorizer_check(d->authorizer, inv, p->method->action, authorized_cb, p);
}

/* Resolves the model (option or default) and checks max_tokens against
 * its context length. */
static gboolean resolve_model(NpdDaemon *d, PendingCall *p, GError **error)
{
    const char *name = p->opts.model != NULL ? p->opts.model : default_model_name(d);
    if (name == NULL) {
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_NO_SUCH_MODEL, "no usable models are installed");
        return FALSE;
    }
    const NpdModelEntry *e = npd_model_catalog_lookup(d->catalog, name, error);
    if (e == NULL || !npd_model_check_generates(e, error))
        return FALSE;
    guint32 ctx = e->context_length != 0 ? MIN(e->context_length, d->cfg->max_context) : d->cfg->max_context;
    if (p->opts.max_tokens >= ctx) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                    "max_tokens: %u does not fit the context of %u tokens of model '%s'", p->opts.max_tokens, ctx,
                    e->name);
        return FALSE;
    }
    p->model_name = g_strdup(e->name);
    p->model_path = g_strdup(e->path);
    return TRUE;
}

/* The system option becomes a message of the same prompt: it counts. */
static gboolean check_prompt(NpdDaemon *d, gsize len, const NpdRequestOptions *opts, GError **error)
{
    gsize total = len + (opts->system != NULL ? strlen(opts->system) : 0);
    if (total > d->cfg->max_prompt_bytes) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                    "prompt: %zu bytes (with the system option) exceeds the limit of %zu", total,
                    d->cfg->max_prompt_bytes);
        return FALSE;
    }
    return TRUE;
}

static NpdChatMessage *chat_message_new(const char *role, const char *content)
{
    NpdChatMessage *m = g_new0(NpdChatMessage, 1);
    m->role = g_strdup(role);
    m->content = g_strdup(content);
    return m;
}

/* Generate and Complete: one user turn (or a raw prompt). */
static gboolean prepare_single_turn(NpdDaemon *d, PendingCall *p, GVariant *params, NpdCallKind kind,
                                    GError **error)
{
    const char *prompt = NULL;
    gsize len = 0;
    g_autoptr(GVariant) options = NULL;
    g_autoptr(GVariant) prompt_v = g_variant_get_child_value(params, 0);
    prompt = g_variant_get_string(prompt_v, &len);
    options = g_variant_get_child_value(params, 1);
    if (!npd_request_options_parse(options, kind, d->cfg, &p->opts, error) || !check_prompt(d, len, &p->opts, error))
        return FALSE;
    if (!resolve_model(d, p, error))
        return FALSE;
    if (p->opts.raw) {
        p->prompt = g_strdup(prompt);
        return TRUE;
    }
    p->messages = g_ptr_array_new_with_free_func((GDestroyNotify)npd_chat_message_free);
    if (p->opts.system != NULL)
        g_ptr_array_add(p->messages, chat_message_new("system", p->opts.system));
    g_ptr_array_add(p->messages, chat_message_new("user", prompt));
    return TRUE;
}

static gboolean prepare_generate(NpdDaemon *d, GDBusMethodInvocation *inv, PendingCall *p, GVariant *params,
                                 GError **error)
{
    return prepare_single_turn(d, p, params, NPD_CALL_GENERATE, error);
}

static gboolean prepare_complete(NpdDaemon *d, GDBusMethodInvocation *inv, PendingCall *p, GVariant *params,
                                 GError **error)
{
    p->complete = TRUE;
    return prepare_single_turn(d, p, params, NPD_CALL_COMPLETE, error);
}

/* The model must have a vision projector beside it (NAME.mmproj.gguf). */
static gboolean check_vision(NpdDaemon *d, PendingCall *p, GError **error)
{
    const NpdModelEntry *e = npd_model_catalog_lookup(d->catalog, p->model_name, error);
    if (e == NULL)
        return FALSE;
    if (!e->vision) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_NOT_SUPPORTED,
                    "model '%s' has no vision projector (none of its folder matches it)", e->name);
        return FALSE;
    }
    p->mmproj_path = g_strdup(e->projector);
    return TRUE;
}

/* Once their filesystems are known not to stall: the images'
 * descriptors checked and made the daemon's own (image-input.c), then the
 * model's projector. */
static gboolean images_checked(PendingCall *p, GError **error)
{
    p->image_src = g_ptr_array_new_with_free_func((GDestroyNotify)npd_image_source_free);
    gboolean ok = TRUE;
    for (guint i = 0; i < p->unchecked_fds->len; i++) {
        /* each takes its descriptor, also after a failure */
        int fd = g_array_index(p->unchecked_fds, int, i);
        g_array_index(p->unchecked_fds, int, i) = -1;
        NpdImageSource *src = npd_image_source_new(fd, p->daemon->cfg->max_image_bytes, ok ? error : NULL);
        ok = ok && src != NULL;
        g_ptr_array_add(p->image_src, src);
    }
    /* after the descriptors, as before they were checked off the main thread */
    return ok && check_vision(p->daemon, p, error);
}

/* The images: a slot of the image budget first (Busy when the user or
 * everyone has too many images in flight), then the descriptors the
 * handles name, checked once their filesystems are (images_checked). */
static gboolean take_images(NpdDaemon *d, GDBusMethodInvocation *inv, PendingCall *p, const gint32 *handles, guint n,
                            GError **error)
{
    if (!npd_user_admit_image(d, p->client, error))
        return FALSE;
    p->image_slot = TRUE;
    g_autofree int *fds = g_new(int, n);
    if (!npd_call_fds_take(inv, handles, n, fds, error))
        return FALSE;
    npd_pending_call_take_fds(p, fds, n, images_checked);
    return TRUE;
}

static gboolean prepare_chat(NpdDaemon *d, GDBusMethodInvocation *inv, PendingCall *p, GVariant *params,
                             GError **error)
{
    g_autoptr(GVariant) messages = g_variant_get_child_value(params, 0);
    g_autoptr(GVariant) options = g_variant_get_child_value(params, 1);
    if (!npd_request_options_parse(options, NPD_CALL_CHAT, d->cfg, &p->opts, error))
        return FALSE;
    gsize system_bytes = p->opts.system != NULL ? strlen(p->opts.system) : 0;
    g_autoptr(GArray) handles = g_array_new(FALSE, FALSE, sizeof(gint32));
    p->messages = npd_chat_messages_parse(messages, system_bytes, d->cfg, handles, error);
    if (p->messages == NULL)
        return FALSE;
    if (handles->len > 0 && !take_images(d, inv, p, (const gint32 *)(gpointer)handles->data, handles->len, error))
        return FALSE;
    if (p->opts.system != NULL) {
        const NpdChatMessage *first = p->messages->pdata[0];
        if (strcmp(first->role, "system") == 0) {
            g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                                "system: the conversation already starts with a system message");
            return FALSE;
        }
        g_ptr_array_insert(p->messages, 0, chat_message_new("system", p->opts.system));
    }
    return resolve_model(d, p, error); /* with images: check_vision in images_checked */
}

/* One user turn: the image, then the prompt (a default one when empty). */
static gboolean prepare_describe_image(NpdDaemon *d, GDBusMethodInvocation *inv, PendingCall *p,
                                       GVariant *params, GError **error)
{
    gsize len = 0;
    g_autoptr(GVariant) prompt_v = g_variant_get_child_value(params, 1);
    g_autoptr(GVariant) options = g_variant_get_child_value(params, 2);
    const char *prompt = g_variant_get_string(prompt_v, &len);
    gint32 handle = -1;
    g_variant_get_child(params, 0, "h", &handle);
    if (!take_images(d, inv, p, &handle, 1, error) ||
        !npd_request_options_parse(options, NPD_CALL_DESCRIBE_IMAGE, d->cfg, &p->opts, error) ||
        !check_prompt(d, len, &p->opts, error) ||
        !resolve_model(d, p, error)) /* check_vision in images_checked */
        return FALSE;
    p->messages = g_ptr_array_new_with_free_func((GDestroyNotify)npd_chat_message_free);
    if (p->opts.system != NULL)
        g_ptr_array_add(p->messages, chat_message_new("system", p->opts.system));
    NpdChatMessage *m = chat_message_new("user", len > 0 ? prompt : DEFAULT_IMAGE_PROMPT);
    m->n_images = 1;
    g_ptr_array_add(p->messages, m);
    return TRUE;
}

/* ---- other methods ------------------------------------------------------ */

static GVariant *list_models(NpdDaemon *d)
{
    g_autoptr(GPtrArray) models = npd_model_catalog_list(d->catalog);
    const char *configured = d->cfg->default_model != NULL && d->cfg->default_model[0] ? d->cfg->default_model : NULL;
    const char *because = "configured ([Models] Default)";
    const NpdModelEntry *def = configured == NULL ? npd_model_catalog_pick_default(models, &because) : NULL;
    GVariantBuilder b;
    g_variant_builder_init(&b, G_VARIANT_TYPE("aa{sv}"));
    for (guint i = 0; i < models->len; i++) {
        const NpdModelEntry *e = models->pdata[i];
        g_variant_builder_open(&b, G_VARIANT_TYPE_VARDICT);
        g_variant_builder_add(&b, "{sv}", "name", g_variant_new_string(e->name));
        g_autofree gchar *arch = g_utf8_make_valid(e->architecture, -1);
        g_autofree gchar *quant = g_utf8_make_valid(e->quantization, -1);
        g_variant_builder_add(&b, "{sv}", "architecture", g_variant_new_string(arch));
        g_variant_builder_add(&b, "{sv}", "parameters", g_variant_new_uint64(e->parameters));
        g_variant_builder_add(&b, "{sv}", "quantization", g_variant_new_string(quant));
        g_variant_builder_add(&b, "{sv}", "context_length", g_variant_new_uint32(e->context_length));
        g_variant_builder_add(&b, "{sv}", "vision", g_variant_new_boolean(e->vision));
        g_variant_builder_add(&b, "{sv}", "loaded", g_variant_new_boolean(model_is_loaded(d, e->name)));
        g_variant_builder_add(&b, "{sv}", "file_size", g_variant_new_uint64(e->file_size));
        g_variant_builder_add(&b, "{sv}", "supported", g_variant_new_boolean(e->supported));
        g_variant_builder_add(&b, "{sv}", "reason", g_variant_new_string(e->reason));
        g_variant_builder_add(&b, "{sv}", "capabilities", npd_model_capabilities(e));
        g_variant_builder_add(&b, "{sv}", "administrator", g_variant_new_boolean(e->administrators));
        if (e == def || (configured != NULL && strcmp(e->name, configured) == 0))
            g_variant_builder_add(&b, "{sv}", "default_because", g_variant_new_string(because));
        g_variant_builder_close(&b);
    }
    return g_variant_new("(aa{sv})", &b);
}

static gboolean prepare_model_op(NpdDaemon *d, PendingCall *p, GVariant *params, gboolean unload,
                                 GError **error)
{
    const char *name = NULL;
    g_variant_get(params, "(&s)", &name);
    if (!npd_model_name_valid(name)) {
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "name: not a valid model name");
        return FALSE;
    }
    const NpdModelEntry *e = npd_model_catalog_lookup(d->catalog, name, error);
    if (e == NULL && !(unload && model_is_loaded(d, name)))
        return FALSE;
    g_clear_error(error);
    p->model_name = g_strdup(name);
    p->model_path = e != NULL ? g_strdup(e->path) : NULL;
    return TRUE;
}

static gboolean prepare_load(NpdDaemon *d, GDBusMethodInvocation *inv, PendingCall *p, GVariant *params,
                             GError **error)
{
    return prepare_model_op(d, p, params, FALSE, error);
}

static gboolean prepare_unload(NpdDaemon *d, GDBusMethodInvocation *inv, PendingCall *p, GVariant *params,
                               GError **error)
{
    return prepare_model_op(d, p, params, TRUE, error);
}

static gboolean prepare_forget_cache(NpdDaemon *d, GDBusMethodInvocation *inv, PendingCall *p, GVariant *params,
                                     GError **error)
{
    return TRUE; /* no arguments */
}

/* ---- the method table: method -> polkit action -> handlers -------------- */

static const NpdManagerMethod manager_methods[] = {
    {"Generate", NPD_ACTION_GENERATE, prepare_generate, run_submit, NULL, TRUE},
    {"Chat", NPD_ACTION_GENERATE, prepare_chat, run_submit, NULL, TRUE},
    {"Complete", NPD_ACTION_GENERATE, prepare_complete, run_submit, NULL, TRUE},
    {"DescribeImage", NPD_ACTION_DESCRIBE_IMAGE, prepare_describe_image, run_submit, NULL, TRUE},
    {"ListModels", NULL, NULL, NULL, list_models, FALSE},
    {"LoadModel", NPD_ACTION_MANAGE, prepare_load, run_load, NULL, FALSE},
    {"UnloadModel", NPD_ACTION_MANAGE, prepare_unload, run_unload, NULL, FALSE},
    {"ForgetCache", NPD_ACTION_GENERATE, prepare_forget_cache, run_forget_cache, NULL, FALSE},
    {"AddModel", NPD_ACTION_MANAGE, npd_model_add_prepare, npd_model_add_run, NULL, FALSE},
    {"RemoveModel", NPD_ACTION_MANAGE, npd_model_remove_prepare, npd_model_remove_run, NULL, FALSE},
    {"Embed", NPD_ACTION_EMBED, npd_embed_prepare, npd_embed_run, NULL, TRUE},
    {"Rerank", NPD_ACTION_EMBED, npd_rerank_prepare, npd_rerank_run, NULL, TRUE},
};

/* ---- the property table: property -> getter -> emits-changed ------------ */

static GVariant *get_version(NpdDaemon *d)
{
    return g_variant_new_string(NPD_VERSION);
}

static GVariant *get_device(NpdDaemon *d)
{
    return g_variant_new_string(d->device);
}

static GVariant *get_device_status(NpdDaemon *d)
{
    return g_variant_new_string(d->device_status);
}

static GVariant *get_default_model(NpdDaemon *d)
{
    const char *name = default_model_name(d);
    return g_variant_new_string(name != NULL ? name : "");
}

static GVariant *get_loaded_models(NpdDaemon *d)
{
    const gchar *const empty[] = {NULL};
    return g_variant_new_strv(d->loaded_models ? (const gchar *const *)d->loaded_models : empty, -1);
}

static GVariant *get_active_requests(NpdDaemon *d)
{
    guint active = 0, queued = 0;
    npd_requests_count(d, &active, &queued);
    return g_variant_new_uint32(active);
}

static GVariant *get_queued_requests(NpdDaemon *d)
{
    guint active = 0, queued = 0;
    npd_requests_count(d, &active, &queued);
    return g_variant_new_uint32(queued);
}

static GVariant *get_idle_timeout(NpdDaemon *d)
{
    return g_variant_new_uint32(d->idle_timeout);
}

static gboolean prepare_set_idle_timeout(NpdDaemon *d, GDBusMethodInvocation *inv, PendingCall *p,
                                         GVariant *value, GError **error)
{
    if (!g_variant_is_of_type(value, G_VARIANT_TYPE_UINT32) || g_variant_get_uint32(value) > G_MAXINT32) {
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                            "IdleTimeout: expected a uint32 number of seconds");
        return FALSE;
    }
    p->idle_timeout = g_variant_get_uint32(value);
    return TRUE;
}

typedef struct {
    const char *name;
    GVariant *(*get)(NpdDaemon *d);
    gboolean emits_changed; /* announced through PropertiesChanged */
    /* writable: setting is a method call (Properties.Set) of its own */
    NpdManagerMethod set;
} ManagerProperty;

static const ManagerProperty manager_properties[] = {
    {"Version", get_version, FALSE, {NULL}},
    {"Device", get_device, FALSE, {NULL}},
    {"DeviceStatus", get_device_status, FALSE, {NULL}},
    {"DefaultModel", get_default_model, TRUE, {NULL}},
    {"LoadedModels", get_loaded_models, TRUE, {NULL}},
    {"ActiveRequests", get_active_requests, TRUE, {NULL}},
    {"QueuedRequests", get_queued_requests, TRUE, {NULL}},
    {"IdleTimeout", get_idle_timeout, TRUE,
     {"IdleTimeout", NPD_ACTION_MANAGE, prepare_set_idle_timeout, run_set_idle_timeout, NULL, FALSE}},
};

G_STATIC_ASSERT(G_N_ELEMENTS(manager_properties) <= NPD_MANAGER_MAX_PROPERTIES);

static const ManagerProperty *find_property(const char *name)
{
    for (guint i = 0; i < G_N_ELEMENTS(manager_properties); i++)
        if (g_strcmp0(manager_properties[i].name, name) == 0)
            return &manager_properties[i];
    return NULL;
}

static const NpdManagerMethod *find_method(const char *name)
{
    for (guint i = 0; i < G_N_ELEMENTS(manager_methods); i++)
        if (g_strcmp0(manager_methods[i].name, name) == 0)
            return &manager_methods[i];
    return NULL;
}

static void fds_checked_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    PendingCall *p = data;
    g_autoptr(GError) error = NULL;
    g_autofree int *fds = npd_fd_filesystem_check_finish(res, &error);
    if (fds != NULL)
        memcpy(p->unchecked_fds->data, fds, p->unchecked_fds->len * sizeof(int));
    if (fds == NULL || !p->fds_checked(p, &error)) {
        g_dbus_method_invocation_return_gerror(p->invocation, error);
        pending_free(p);
        return;
    }
    authorize_then(p->daemon, p->invocation, p);
}

/* Validates (prepare), checks the filesystems of the descriptors it took
 * off the main thread, then polkit, then run; or reply for the methods
 * that need no authorization. */
static void dispatch(NpdDaemon *d, GDBusMethodInvocation *inv, const NpdManagerMethod *m, GVariant *params)
{
    if (m->action == NULL) {
        g_dbus_method_invocation_return_value(inv, m->reply(d));
        return;
    }
    g_autoptr(GError) error = NULL;
    PendingCall *p = pending_new(d, inv, m);
    if (!m->prepare(d, inv, p, params, &error)) {
        g_dbus_method_invocation_return_gerror(inv, error);
        pending_free(p);
        return;
    }
    if (p->unchecked_fds != NULL) {
        p->invocation = inv;
        npd_fd_filesystem_check_async((int *)(gpointer)p->unchecked_fds->data, p->unchecked_fds->len,
                                      p->client->uid, fds_checked_cb, p);
        return;
    }
    authorize_then(d, inv, p);
}

static void handle_set_property(NpdDaemon *d, GDBusMethodInvocation *inv, GVariant *params)
{
    const char *iface = NULL, *name = NULL;
    g_autoptr(GVariant) value = NULL;
    g_variant_get(params, "(&s&sv)", &iface, &name, &value);
    const ManagerProperty *prop = find_property(name);
    if (prop == NULL || prop->set.name == NULL) {
        g_dbus_method_invocation_return_error(inv, G_DBUS_ERROR, G_DBUS_ERROR_PROPERTY_READ_ONLY,
                                              "property %s is read-only", name);
        return;
    }
    /* the value is the parameter the setter's prepare sees */
    dispatch(d, inv, &prop->set, value);
}

static void manager_method_call(GDBusConnection *bus, const char *sender, const char *path, const char *iface,
                                const char *method, GVariant *params, GDBusMethodInvocation *inv, gpointer data)
{
    NpdDaemon *d = data;
    g_autoptr(GError) error = NULL;
    if (!npd_call_fds_check(inv, params, &error)) {
        g_dbus_method_invocation_return_gerror(inv, error);
        return;
    }
    if (g_strcmp0(iface, "org.freedesktop.DBus.Properties") == 0) {
        if (g_strcmp0(method, "Set") == 0)
            handle_set_property(d, inv, params);
        else
            g_dbus_method_invocation_return_error(inv, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD, "no method %s",
                                                  method);
        return;
    }
    const NpdManagerMethod *m = find_method(method);
    if (m == NULL) {
        g_dbus_method_invocation_return_error(inv, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD, "no method %s",
                                              method);
        return;
    }
    dispatch(d, inv, m, params);
}

static GVariant *manager_get_property(GDBusConnection *bus, const char *sender, const char *path,
                                      const char *iface, const char *name, GError **error, gpointer data)
{
    const ManagerProperty *prop = find_property(name);
    if (prop == NULL) {
        g_set_error(error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_PROPERTY, "no property %s", name);
        return NULL;
    }
    return prop->get(data);
}

/* set_property is NULL so that Properties.Set reaches method_call, where
 * the polkit check can run asynchronously. */
static const GDBusInterfaceVTable manager_vtable = {
    .method_call = manager_method_call,
    .get_property = manager_get_property,
    .set_property = NULL,
};

void npd_manager_handle_command_done(NpdDaemon *d, const NpdEvent *ev)
{
    GDBusMethodInvocation *inv = ev->tag;
    if (ev->error != NULL)
        g_dbus_method_invocation_return_gerror(inv, ev->error);
    else
        g_dbus_method_invocation_return_value(inv, NULL);
}

void npd_manager_announce(NpdDaemon *d)
{
    GVariantBuilder changed;
    g_variant_builder_init(&changed, G_VARIANT_TYPE_VARDICT);
    gboolean any = FALSE;
    for (guint i = 0; i < G_N_ELEMENTS(manager_properties); i++) {
        const ManagerProperty *prop = &manager_properties[i];
        if (!prop->emits_changed)
            continue;
        g_autoptr(GVariant) value = g_variant_ref_sink(prop->get(d));
        GVariant **last = &d->announced[i];
        if (*last != NULL && g_variant_equal(*last, value))
            continue;
        g_clear_pointer(last, g_variant_unref);
        *last = g_variant_ref(value);
        g_variant_builder_add(&changed, "{sv}", prop->name, value);
        any = TRUE;
    }
    if (!any) {
        g_variant_builder_clear(&changed);
        return;
    }
    g_dbus_connection_emit_signal(d->bus, NULL, NPD_MANAGER_PATH, "org.freedesktop.DBus.Properties",
                                  "PropertiesChanged",
                                  g_variant_new("(sa{sv}as)", NPD_MANAGER_IFACE, &changed, NULL), NULL);
}

gboolean npd_manager_register(NpdDaemon *d, GError **error)
{
    /* Start from the values clients read: only changes are announced. */
    for (guint i = 0; i < G_N_ELEMENTS(manager_properties); i++)
        if (manager_properties[i].emits_changed)
            d->announced[i] = g_variant_ref_sink(manager_properties[i].get(d));
    d->manager_reg_id = g_dbus_connection_register_object(d->bus, NPD_MANAGER_PATH, d->manager_info,
                                                          &manager_vtable, d, NULL, error);
    return d->manager_reg_id != 0;
}

void npd_manager_unregister(NpdDaemon *d)
{
    if (d->manager_reg_id != 0)
        g_dbus_connection_unregister_object(d->bus, d->manager_reg_id);
    d->manager_reg_id = 0;
    for (guint i = 0; i < G_N_ELEMENTS(d->announced); i++)
        g_clear_pointer(&d->announced[i], g_variant_unref);
}
