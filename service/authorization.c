#include "authorization.h"

#include <polkit/polkit.h>

#include "dbus-errors.h"

typedef struct Check Check;

struct NpdAuthorizer {
    gboolean use_polkit;
    guint timeout_seconds;
    PolkitAuthority *authority; /* NULL until obtained or when unavailable */
    gboolean authority_pending;
    gchar *authority_error;
    GQueue waiting;   /* Check* waiting for the authority */
    GList *in_flight; /* Check* sent to polkit */
    GCancellable *cancellable; /* cancelled on free */
};

struct Check {
    NpdAuthorizer *auth;
    gchar *sender;
    gchar *action_id;
    gchar *app_id; /* the detail app_id, NULL: none */
    gboolean interactive;
    NpdAuthorizedFunc func;
    gpointer user_data;
    GCancellable *cancellable;
    guint timeout_id;
    gboolean done;
};

static void check_complete(Check *c, GError *error)
{
    if (c->done) {
        g_clear_error(&error);
        return;
    }
    c->done = TRUE;
    if (c->timeout_id != 0) {
        g_source_remove(c->timeout_id);
        c->timeout_id = 0;
    }
    if (error != NULL)
        g_debug("%s denied for %s: %s", c->action_id, c->sender, error->message);
    c->func(error, c->user_data);
    g_clear_error(&error);
}

static void check_free(Check *c)
{
    if (c->timeout_id != 0)
        g_source_remove(c->timeout_id);
    g_clear_object(&c->cancellable);
    g_free(c->sender);
    g_free(c->action_id);
    g_free(c->app_id);
    g_free(c);
}

static GError *not_authorized(const char *fmt, const char *detail)
{
    return g_error_new(NPD_ERROR, NPD_ERROR_NOT_AUTHORIZED, fmt, detail);
}

static void check_done_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    Check *c = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(PolkitAuthorizationResult) result =
        polkit_authority_check_authorization_finish(POLKIT_AUTHORITY(source), res, &error);
    if (c->auth != NULL)
        c->auth->in_flight = g_list_remove(c->auth->in_flight, c);
    if (result == NULL) {
        check_complete(c, not_authorized("authorization check failed: %s", error->message));
    } else if (!polkit_authorization_result_get_is_authorized(result)) {
        check_complete(c, not_authorized("not authorized for %s", c->action_id));
    } else {
        check_complete(c, NULL);
    }
    check_free(c);
}

static gboolean check_timeout_cb(gpointer data)
{
    Check *c = data;
    c->timeout_id = 0;
    /* Answer now; the cancelled polkit call still completes later and
     * frees the check. */
    g_cancellable_cancel(c->cancellable);
    check_complete(c, not_authorized("authorization check timed out (%s)", c->action_id));
    return G_SOURCE_REMOVE;
}

static void check_send(NpdAuthorizer *a, Check *c)
{
    if (a->authority == NULL) {
        check_complete(c, not_authorized("polkit is not available: %s",
                                         a->authority_error ? a->authority_error : "unknown error"));
        check_free(c);
        return;
    }
    g_autoptr(PolkitSubject) subject = polkit_system_bus_name_new(c->sender);
    PolkitCheckAuthorizationFlags flags = c->interactive ? POLKIT_CHECK_AUTHORIZATION_FLAGS_ALLOW_USER_INTERACTION
                                                         : POLKIT_CHECK_AUTHORIZATION_FLAGS_NONE;
    g_autoptr(PolkitDetails) details = NULL;
    if (c->app_id != NULL) {
        details = polkit_details_new();
        polkit_details_insert(details, "app_id", c->app_id);
    }
    a->in_flight = g_list_prepend(a->in_flight, c);
    polkit_authority_check_authorization(a->authority, subject, c->action_id, details, flags, c->cancellable,
                                         check_done_cb, c);
}

static void authority_ready_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    NpdAuthorizer *a = data;
    g_autoptr(GError) error = NULL;
    PolkitAuthority *authority = polkit_authority_get_finish(res, &error);
    if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        return; /* a is being freed */
    a->authority_pending = FALSE;
    if (authority == NULL) {
        a->authority_error = g_strdup(error->message);
        g_warning("polkit authority unavailable, every call will be refused: %s", error->message);
    }
    a->authority = authority;
    Check *c;
    while ((c = g_queue_pop_head(&a->waiting)) != NULL) {
        if (c->done)
            check_free(c);
        else
            check_send(a, c);
    }
}

NpdAuthorizer *npd_authorizer_new(gboolean use_polkit, guint timeout_seconds)
{
    NpdAuthorizer *a = g_new0(NpdAuthorizer, 1);
    a->use_polkit = use_polkit;
    a->timeout_seconds = timeout_seconds > 0 ? timeout_seconds : 30;
    a->cancellable = g_cancellable_new();
    g_queue_init(&a->waiting);
    if (use_polkit) {
        a->authority_pending = TRUE;
        polkit_authority_get_async(a->cancellable, authority_ready_cb, a);
    }
    return a;
}

void npd_authorizer_free(NpdAuthorizer *a)
{
    if (a == NULL)
        return;
    g_cancellable_cancel(a->cancellable);
    Check *c;
    while ((c = g_queue_pop_head(&a->waiting)) != NULL)
        check_free(c);
    /* In-flight polkit calls complete later (cancelled); detach them. */
    for (GList *l = a->in_flight; l != NULL; l = l->next) {
        Check *ic = l->data;
        ic->auth = NULL;
        ic->done = TRUE;
        g_cancellable_cancel(ic->cancellable);
    }
    g_list_free(a->in_flight);
    g_clear_object(&a->authority);
    g_clear_object(&a->cancellable);
    g_free(a->authority_error);
    g_free(a);
}

void npd_authorizer_check(NpdAuthorizer *a, GDBusMethodInvocation *invocation, const char *action_id,
                          NpdAuthorizedFunc func, gpointer user_data)
{
    npd_authorizer_check_app(a, invocation, action_id, NULL, func, user_data);
}

void npd_authorizer_check_app(NpdAuthorizer *a, GDBusMethodInvocation *invocation, const char *action_id,
                              const char *app_id, NpdAuthorizedFunc func, gpointer user_data)
{
    if (!a->use_polkit) {
        func(NULL, user_data);
        return;
    }
    Check *c = g_new0(Check, 1);
    c->auth = a;
    c->sender = g_strdup(g_dbus_method_invocation_get_sender(invocation));
    c->action_id = g_strdup(action_id);
    c->app_id = app_id != NULL && app_id[0] != '\0' ? g_strdup(app_id) : NULL;
    GDBusMessage *msg = g_dbus_method_invocation_get_message(invocation);
    c->interactive = (g_dbus_message_get_flags(msg) & G_DBUS_MESSAGE_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION) != 0;
    c->func = func;
    c->user_data = user_data;
    c->cancellable = g_cancellable_new();
    c->timeout_id = g_timeout_add_seconds(a->timeout_seconds, check_timeout_cb, c);
    if (a->authority_pending)
        g_queue_push_tail(&a->waiting, c);
    else
        check_send(a, c);
}
