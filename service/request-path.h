/* Object paths of request objects, shared by npullmd and its clients so
 * that a client can compute (and subscribe to) the path of a request
 * before creating it with options["handle_token"]. */
#ifndef NPD_REQUEST_PATH_H
#define NPD_REQUEST_PATH_H

#include <glib.h>

#define NPD_REQUEST_ROOT "/org/npullm/Request"

/* Node under NPD_REQUEST_ROOT for a request that the connection with the
 * unique name sender creates with handle_token: "c" + sender without ':'
 * and with '.' turned into '_', then '_' + token. E.g. ":1.42", "t1" ->
 * "c1_42_t1". */
gchar *npd_request_node_for_token(const char *sender, const char *handle_token);

/* Full object path for the same. */
gchar *npd_request_path_for_token(const char *sender, const char *handle_token);

#endif
