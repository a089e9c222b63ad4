/* The Manager's methods that make a request (request-methods.c): the
 * prepare and run handlers of their rows in manager.c's method table. */
#ifndef NPD_REQUEST_METHODS_H
#define NPD_REQUEST_METHODS_H

#include "manager-call.h"

gboolean npd_generate_prepare(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p, GVariant *params,
                              GError **error);
gboolean npd_complete_prepare(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p, GVariant *params,
                              GError **error);
gboolean npd_chat_prepare(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p, GVariant *params,
                          GError **error);
gboolean npd_describe_image_prepare(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p,
                                    GVariant *params, GError **error);
/* Once authorized: reads the images, then submits the request. */
gboolean npd_request_method_run(NpdPendingCall *p);

#endif
