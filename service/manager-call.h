/* A call to org.npullm.Manager on its way (manager-call.c): validated by
 * its method's prepare, its descriptors' filesystems checked, admitted,
 * authorized by polkit, then run; and the row types of the Manager's
 * method table (manager.c), so that a method's handlers can live in a
 * file of their own: adding a method is one row in that table. */
#ifndef NPD_MANAGER_CALL_H
#define NPD_MANAGER_CALL_H

#include "daemon.h"
#include "image-input.h"

typedef struct NpdPendingCall NpdPendingCall;

/* Checks the arguments and fills p before polkit is asked; on FALSE the
 * call is answered with the error. */
typedef gboolean (*NpdMethodPrepare)(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p,
                                     GVariant *params, GError **error);
/* Completes prepare once the filesystems of p->unchecked_fds are known
 * not to stall (fd-filesystem.c): only then may they be fstat()ed. */
typedef gboolean (*NpdMethodFdsChecked)(NpdPendingCall *p, GError **error);
/* Runs once authorized and answers p->invocation (now or later). Returns
 * TRUE when it kept p (and frees it with npd_pending_call_free later). */
typedef gboolean (*NpdMethodRun)(NpdPendingCall *p);

typedef struct NpdManagerMethod {
    const char *name;
    /* polkit action; NULL: answered by reply, without authorization */
    const char *action;
    NpdMethodPrepare prepare;
    NpdMethodRun run;
    GVariant *(*reply)(NpdDaemon *d); /* action NULL only */
    gboolean makes_request;           /* counts against the per-user request limit */
} NpdManagerMethod;

struct NpdPendingCall {
    NpdDaemon *daemon;
    NpdClient *client; /* reference; NULL once handed to a request */
    GDBusMethodInvocation *invocation;
    const NpdManagerMethod *method;
    gboolean complete; /* Complete: answered at the end of the generation */
    NpdRequestOptions opts;
    GPtrArray *messages; /* NpdChatMessage*, chat operations */
    gchar *prompt;       /* raw prompt */
    gchar *model_name;
    gchar *model_path;
    gchar *projector_path; /* the model's vision projector, NULL: none (set with model_path) */
    guint idle_timeout;
    /* DescribeImage, Chat with images: read one after another */
    gboolean image_slot;  /* holds an image slot (npd_admission_take_image) */
    GPtrArray *image_src; /* NpdImageSource*: the caller's images until read */
    gchar *mmproj_path;   /* the projector they are prepared for */
    GPtrArray *images;    /* NpdImagePixels*: those read, preprocessed */
    /* descriptors prepare took, checked off the main thread before
     * fds_checked takes them (entries set to -1); those left are closed */
    GArray *unchecked_fds; /* int */
    NpdMethodFdsChecked fds_checked;
    gpointer op;            /* a method's own state (AddModel's job, RemoveModel's removal) */
    GDestroyNotify op_free; /* frees op with the call, unless run took it */
    guint idle_token;       /* held while the call is on its way (then by its request) */
};

/* Validates (prepare; manager.c refused more descriptors than the method
 * takes already), checks the filesystems of the descriptors it took off
 * the main thread, asks admission and polkit, then runs; or replies at
 * once for the methods that need no authorization. Answers inv on every
 * path. */
void npd_manager_call_dispatch(NpdDaemon *d, GDBusMethodInvocation *inv, const NpdManagerMethod *m,
                               GVariant *params);

void npd_pending_call_free(NpdPendingCall *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NpdPendingCall, npd_pending_call_free)

/* Once authorized (and its images read): admission of the request (the
 * queue, the client's and its user's requests), then the call becomes the
 * request of job (node: its own, or NULL; complete: Complete's call to
 * answer at the end) and hands it its client reference and idle token.
 * NULL with the error (Busy, or node in use), job freed. */
NpdRequest *npd_pending_call_submit(NpdPendingCall *p, const char *node, GDBusMethodInvocation *complete,
                                    NpdJob *job, GError **error);

/* prepare hands the n descriptors it took (p owns them from now on) to the
 * filesystem check; fds_checked then takes those it keeps. */
void npd_pending_call_take_fds(NpdPendingCall *p, const int *fds, guint n, NpdMethodFdsChecked fds_checked);

#endif
