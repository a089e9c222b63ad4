/* Asynchronous polkit checks that fail closed: no authority, an error, a
 * timeout or a "challenge" all mean not authorized. */
#ifndef NPD_AUTHORIZATION_H
#define NPD_AUTHORIZATION_H

#include <gio/gio.h>

#define NPD_ACTION_GENERATE "org.npullm.generate"
#define NPD_ACTION_DESCRIBE_IMAGE "org.npullm.describe-image"
#define NPD_ACTION_MANAGE "org.npullm.manage"
#define NPD_ACTION_EMBED "org.npullm.embed"

typedef struct NpdAuthorizer NpdAuthorizer;

/* Called on the main context; error is NULL when authorized, otherwise an
 * NPD_ERROR_NOT_AUTHORIZED explaining why. */
typedef void (*NpdAuthorizedFunc)(GError *error, gpointer user_data);

/* use_polkit FALSE (session bus): every caller is the bus owner's own
 * user, so every check succeeds without asking polkit. */
NpdAuthorizer *npd_authorizer_new(gboolean use_polkit, guint timeout_seconds);
void npd_authorizer_free(NpdAuthorizer *a);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NpdAuthorizer, npd_authorizer_free)

/* Checks action for the sender of invocation; interactive authentication
 * is allowed when the caller set ALLOW_INTERACTIVE_AUTHORIZATION. */
void npd_authorizer_check(NpdAuthorizer *a, GDBusMethodInvocation *invocation, const char *action_id,
                          NpdAuthorizedFunc func, gpointer user_data);
/* The same, telling polkit the caller's application (app-identity.h) as
 * the detail "app_id" (rules read it with action.lookup("app_id")); NULL
 * or "": no detail. */
void npd_authorizer_check_app(NpdAuthorizer *a, GDBusMethodInvocation *invocation, const char *action_id,
                              const char *app_id, NpdAuthorizedFunc func, gpointer user_data);

#endif
