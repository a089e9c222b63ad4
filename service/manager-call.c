/* A Manager call on its way (manager-call.h): the pending call's state,
 * from the method table's row to its answer. */
#include "manager-call.h"

#include <string.h>
#include <unistd.h>

#include "app-identity.h"
#include "fd-filesystem.h"
#include "schema-compile.h"

typedef NpdPendingCall PendingCall;

static void pending_free_image(PendingCall *p)
{
    if (p->image_slot)
        npd_admission_release_image(p->daemon->admission, p->client);
    p->image_slot = FALSE;
    g_clear_pointer(&p->image_src, g_ptr_array_unref);
    g_clear_pointer(&p->mmproj_path, g_free);
    g_clear_pointer(&p->images, g_ptr_array_unref);
}

/* The caller is counted from the start: validation may already take an
 * image slot of its user. A call on its way keeps the daemon from idling. */
static PendingCall *pending_new(NpdDaemon *d, GDBusMethodInvocation *inv, const NpdManagerMethod *method)
{
    PendingCall *p = g_new0(PendingCall, 1);
    p->daemon = d;
    p->invocation = inv;
    p->method = method;
    p->client = npd_clients_get(d->clients, g_dbus_method_invocation_get_sender(inv));
    p->client->pending_calls++;
    p->client->user->calls++;
    p->idle_token = npd_idle_inhibit(d->idle, method->name);
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

void npd_pending_call_free(NpdPendingCall *p)
{
    for (guint i = 0; p->unchecked_fds != NULL && i < p->unchecked_fds->len; i++)
        if (g_array_index(p->unchecked_fds, int, i) >= 0)
            close(g_array_index(p->unchecked_fds, int, i));
    g_clear_pointer(&p->unchecked_fds, g_array_unref);
    pending_free_image(p);
    if (p->op != NULL)
        p->op_free(p->op);
    if (p->client != NULL) { /* not handed to a request */
        p->client->pending_calls--;
        p->client->user->calls--;
        npd_client_release_if_idle(p->client);
        npd_client_unref(p->client);
    }
    npd_request_options_clear(&p->opts);
    if (p->messages != NULL)
        g_ptr_array_unref(p->messages);
    g_free(p->prompt);
    g_free(p->model_name);
    g_free(p->model_path);
    g_free(p->projector_path);
    if (p->idle_token != 0)
        npd_idle_uninhibit(p->daemon->idle, p->idle_token);
    g_free(p);
}

NpdRequest *npd_pending_call_submit(NpdPendingCall *p, const char *node, GDBusMethodInvocation *complete,
                                    NpdJob *job_in, GError **error)
{
    g_autoptr(NpdJob) job = job_in; /* freed unless it becomes the request's */
    NpdDaemon *d = p->daemon;
    if (!npd_admission_admit_request(d->admission, p->client, error))
        return NULL;
    if (node != NULL && npd_requests_lookup_node(d->requests, node) != NULL) {
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                            "handle_token: already in use by another request");
        return NULL;
    }
    /* its images are read: the slot goes back before the request counts */
    if (p->image_slot)
        pending_free_image(p);
    p->client->pending_calls--;
    p->client->user->calls--;
    guint idle_token = p->idle_token;
    p->idle_token = 0;
    NpdRequest *r =
        npd_requests_submit(d->requests, g_steal_pointer(&p->client), idle_token, node, complete, g_steal_pointer(&job));
    r->method = p->method->name;
    return r;
}

static void authorized_cb(GError *error, gpointer data)
{
    g_autoptr(NpdPendingCall) p = data;
    if (error != NULL) {
        g_dbus_method_invocation_return_gerror(p->invocation, error);
    } else if (p->client->gone) {
        /* The caller left while polkit was thinking: nothing to run. */
        g_dbus_method_invocation_return_error_literal(p->invocation, NPD_ERROR, NPD_ERROR_CANCELLED,
                                                      "caller disconnected");
    } else if (p->method->run(p)) {
        p = NULL; /* run kept it */
    }
}

static void fds_checked_cb(GObject *source, GAsyncResult *res, gpointer data);

/* The call's way after prepare (and its schemas): the filesystems of the
 * descriptors it took, checked off the main thread (coming back here once
 * fds_checked took them), then admission, then polkit. Takes p on every
 * path. */
static void call_continue(PendingCall *p_in)
{
    g_autoptr(NpdPendingCall) p = p_in;
    if (p->fds_checked != NULL) {
        PendingCall *checking = g_steal_pointer(&p);
        npd_fd_filesystem_check_async((int *)(gpointer)checking->unchecked_fds->data, checking->unchecked_fds->len,
                                      checking->client->uid, fds_checked_cb, checking);
        return;
    }
    g_autoptr(GError) error = NULL;
    if (!npd_admission_admit_call(p->daemon->admission, p->client, p->method->makes_request, &error)) {
        g_dbus_method_invocation_return_gerror(p->invocation, error);
        return;
    }
    PendingCall *asking = g_steal_pointer(&p);
    npd_authorizer_check_app(asking->daemon->authorizer, asking->invocation, asking->method->action,
                             asking->client->app->id, authorized_cb, asking);
}

static void fds_checked_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    g_autoptr(NpdPendingCall) p = data;
    g_autoptr(GError) error = NULL;
    g_autofree int *fds = npd_fd_filesystem_check_finish(res, &error);
    if (fds != NULL)
        memcpy(p->unchecked_fds->data, fds, p->unchecked_fds->len * sizeof(int));
    NpdMethodFdsChecked fds_checked = g_steal_pointer(&p->fds_checked);
    if (fds == NULL || !fds_checked(p, &error)) {
        g_dbus_method_invocation_return_gerror(p->invocation, error);
        return;
    }
    call_continue(g_steal_pointer(&p));
}

static void schemas_compiled_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    (void)source;
    g_autoptr(NpdPendingCall) p = data;
    g_autoptr(GError) error = NULL;
    if (!npd_schemas_compile_finish(&p->opts, res, &error)) {
        g_dbus_method_invocation_return_gerror(p->invocation, error);
        return;
    }
    call_continue(g_steal_pointer(&p));
}

/* Validates (prepare), compiles the options' schemas on a thread and
 * checks the filesystems of the descriptors it took off the main thread,
 * then polkit, then run; or reply for the methods that need no
 * authorization. */
void npd_manager_call_dispatch(NpdDaemon *d, GDBusMethodInvocation *inv, const NpdManagerMethod *m,
                               GVariant *params)
{
    g_autoptr(GError) error = NULL;
    if (m->action == NULL) {
        g_dbus_method_invocation_return_value(inv, m->reply(d));
        return;
    }
    g_autoptr(NpdPendingCall) p = pending_new(d, inv, m);
    if (!m->prepare(d, inv, p, params, &error)) {
        g_dbus_method_invocation_return_gerror(inv, error);
        return;
    }
    if (npd_schemas_pending(&p->opts)) {
        PendingCall *compiling = g_steal_pointer(&p);
        npd_schemas_compile_async(&compiling->opts, schemas_compiled_cb, compiling);
    } else {
        call_continue(g_steal_pointer(&p));
    }
}
