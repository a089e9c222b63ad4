/* The Manager's methods that make a request: Generate, Complete (one
 * user turn, or a raw prompt), Chat (a conversation) and DescribeImage
 * (an image and a prompt). Each prepare checks the arguments and resolves
 * the model; once authorized, run reads the images (off the main thread)
 * and submits the request. */
#include "request-methods.h"

#include <string.h>

#include "call-fds.h"
#include "image-input.h"

/* DescribeImage: how long the image descriptor may take to reach its end
 * (a pipe whose writer stalls). */
#define IMAGE_READ_TIMEOUT_S 30
/* DescribeImage with an empty prompt. */
#define DEFAULT_IMAGE_PROMPT "Describe this image."

typedef NpdPendingCall PendingCall;

/* ---- request submission ------------------------------------------------ */

/* What the worker is to generate, taken from the call. */
static NpdJob *job_from_call(PendingCall *p)
{
    NpdJob *job = g_new0(NpdJob, 1);
    job->model_name = g_strdup(p->model_name);
    job->model_path = g_strdup(p->model_path);
    job->projector_path = g_strdup(p->projector_path);
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
    job->reasoning_effort = p->opts.reasoning_effort;
    job->grammar = g_steal_pointer(&p->opts.grammar);
    if (p->opts.tool_choice == NULL || strcmp(p->opts.tool_choice, "none") != 0) {
        /* none: the tools are not offered at all */
        job->tools = g_steal_pointer(&p->opts.tools);
        job->tool_choice = g_steal_pointer(&p->opts.tool_choice);
    }
    return job;
}

static void image_read_cb(GObject *source, GAsyncResult *res, gpointer data);

/* Once authorized: reads, decodes and preprocesses the images one after
 * another off the main loop and the engine thread (coming back here after
 * each: the call holds one image slot, whatever its number of images; the
 * reads stop when the caller leaves), then submits the request. */
gboolean npd_request_method_run(NpdPendingCall *p)
{
    NpdDaemon *d = p->daemon;
    guint n_read = p->images != NULL ? p->images->len : 0;
    if (p->image_src != NULL && n_read < p->image_src->len) {
        if (p->images == NULL)
            p->images = g_ptr_array_new_with_free_func((GDestroyNotify)npd_image_pixels_free);
        NpdImageSource *src = g_steal_pointer(&p->image_src->pdata[n_read]);
        npd_image_input_read_async(src, p->mmproj_path, d->image_budget, IMAGE_READ_TIMEOUT_S,
                                   p->client->cancellable, image_read_cb, p);
        return TRUE;
    }
    g_autoptr(GError) error = NULL;
    g_autofree gchar *node =
        p->opts.handle_token != NULL ? npp_request_node_for_token(p->client->name, p->opts.handle_token) : NULL;
    NpdRequest *r = npd_pending_call_submit(p, node, p->complete ? p->invocation : NULL, job_from_call(p), &error);
    if (r == NULL) {
        g_dbus_method_invocation_return_gerror(p->invocation, error);
        return FALSE;
    }
    if (!p->complete)
        g_dbus_method_invocation_return_value(p->invocation, g_variant_new("(o)", r->path));
    return FALSE;
}

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
    } else if (npd_request_method_run(p)) {
        return; /* kept */
    }
    npd_pending_call_free(p);
}

/* Resolves the model (option or default) and checks max_tokens against
 * its context length. */
static gboolean resolve_model(NpdDaemon *d, PendingCall *p, GError **error)
{
    const char *name =
        p->opts.model != NULL ? p->opts.model : npd_model_catalog_default_name(d->catalog, d->cfg->default_model);
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
    p->projector_path = g_strdup(e->projector);
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
    if (p->opts.raw) {
        p->prompt = g_strdup(prompt);
    } else {
        p->messages = g_ptr_array_new_with_free_func((GDestroyNotify)npd_chat_message_free);
        if (p->opts.system != NULL)
            g_ptr_array_add(p->messages, chat_message_new("system", p->opts.system));
        g_ptr_array_add(p->messages, chat_message_new("user", prompt));
    }
    return resolve_model(d, p, error);
}

gboolean npd_generate_prepare(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p, GVariant *params,
                              GError **error)
{
    return prepare_single_turn(d, p, params, NPD_CALL_GENERATE, error);
}

gboolean npd_complete_prepare(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p, GVariant *params,
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
    if (!npd_admission_take_image(d->admission, p->client, error))
        return FALSE;
    p->image_slot = TRUE;
    g_autofree int *fds = g_new(int, n);
    if (!npd_call_fds_take(inv, handles, n, fds, error))
        return FALSE;
    npd_pending_call_take_fds(p, fds, n, images_checked);
    return TRUE;
}

gboolean npd_chat_prepare(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p, GVariant *params,
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
gboolean npd_describe_image_prepare(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p,
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

