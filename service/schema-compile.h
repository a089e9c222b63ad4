/* The JSON Schemas of a call's format and tools options, compiled on a
 * worker thread: a large schema takes a few hundred milliseconds, which
 * the main loop (every other caller's D-Bus traffic) must not wait for. */
#ifndef NPD_SCHEMA_COMPILE_H
#define NPD_SCHEMA_COMPILE_H

#include <gio/gio.h>

#include "request-options.h"

/* The options hold a schema not compiled yet. */
gboolean npd_schemas_pending(const NpdRequestOptions *opts);
/* Compiles them on a thread; callback runs on the calling thread's main
 * context. opts is not touched until npd_schemas_compile_finish. */
void npd_schemas_compile_async(const NpdRequestOptions *opts, GAsyncReadyCallback callback, gpointer data);
/* Puts the results into opts; FALSE with the InvalidArgument naming the
 * option and the schema path (format: /properties/age/type: ...). */
gboolean npd_schemas_compile_finish(NpdRequestOptions *opts, GAsyncResult *res, GError **error);

#endif
