/* Managed installs: AddModel copies a GGUF passed as a descriptor into the
 * first model directory (/var/lib/npullm/models) after the loader's checks,
 * a free-space check, through a hidden temporary file renamed into place;
 * RemoveModel deletes a model from that directory. Both need polkit
 * org.npullm.manage (interactive authentication allowed). An AddModel
 * returns a job object (org.npullm.ModelJob) that sends its caller
 * Progress and Finished signals. */
#ifndef NPD_MODEL_INSTALL_H
#define NPD_MODEL_INSTALL_H

#include "daemon.h"
#include "manager-call.h"

#define NPD_MODEL_JOB_IFACE "org.npullm.ModelJob"
#define NPD_MODEL_JOB_PATH_PREFIX "/org/npullm/ModelJob/"
/* Room left free beyond the file itself, for the filesystem's own needs. */
#define NPD_INSTALL_SPARE_BYTES (16u << 20)

/* Rows of the Manager's method table (manager.c): AddModel's job runs on
 * after the call is answered and keeps the call (its client's pending
 * count) until the copy ends. */
gboolean npd_model_add_prepare(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p, GVariant *params,
                               GError **error);
gboolean npd_model_add_run(NpdPendingCall *p);
gboolean npd_model_remove_prepare(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p, GVariant *params,
                                  GError **error);
gboolean npd_model_remove_run(NpdPendingCall *p);

/* Removes the temporary files of installs cut short (the daemon stopped
 * mid-copy) from the install directory; at start, before any job. */
void npd_model_install_sweep(NpdDaemon *d);

#endif
