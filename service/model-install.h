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

#define NPD_MODEL_JOB_IFACE "org.npullm.ModelJob"
#define NPD_MODEL_JOB_PATH_PREFIX "/org/npullm/ModelJob/"
/* Room left free beyond the file itself, for the filesystem's own needs. */
#define NPD_INSTALL_SPARE_BYTES (16u << 20)

/* Handles method when it is AddModel or RemoveModel (returns TRUE, the
 * invocation answered or owned); FALSE for any other method. */
gboolean npd_model_install_handle(NpdDaemon *d, const char *method, GDBusMethodInvocation *inv, GVariant *params);

/* Removes the temporary files of installs cut short (the daemon stopped
 * mid-copy) from the install directory; at start, before any job. */
void npd_model_install_sweep(NpdDaemon *d);

#endif
