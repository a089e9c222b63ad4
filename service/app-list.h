/* ListApplications (app-list.c): which applications of the caller's own
 * Unix user have requests running or queued. */
#ifndef NPD_APP_LIST_H
#define NPD_APP_LIST_H

#include "manager-call.h"

gboolean npd_list_applications_prepare(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p,
                                       GVariant *params, GError **error);
gboolean npd_list_applications_run(NpdPendingCall *p);

#endif
