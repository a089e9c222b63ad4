#include "schema-compile.h"

#include <string.h>

#include "dbus-errors.h"

/* Copies of the schemas in, results out: the thread shares nothing. */
typedef struct {
    gchar *format;       /* the format option's schema, or NULL */
    NpdTools *tools;     /* names and schemas of the tools option, or NULL */
    npl_grammar *grammar;
} SchemaWork;

static void schema_work_free(gpointer data)
{
    SchemaWork *w = data;
    g_free(w->format);
    npd_tools_free(w->tools);
    npl_grammar_free(w->grammar);
    g_free(w);
}

gboolean npd_schemas_pending(const NpdRequestOptions *opts)
{
    return opts->format_schema != NULL || (opts->tools != NULL && opts->tools->params->len < opts->tools->schemas->len);
}

static void compile_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    (void)source, (void)cancellable;
    SchemaWork *w = data;
    GError *error = NULL;
    if (w->format != NULL) {
        npl_error err;
        npl_error_clear(&err);
        w->grammar = npl_grammar_compile_schema(w->format, strlen(w->format), &err);
        if (w->grammar == NULL) {
            g_task_return_new_error(task, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "format: %s", err.message);
            return;
        }
    }
    if (w->tools != NULL && !npd_tools_compile(w->tools, &error)) {
        g_task_return_error(task, error);
        return;
    }
    g_task_return_boolean(task, TRUE);
}

void npd_schemas_compile_async(const NpdRequestOptions *opts, GAsyncReadyCallback callback, gpointer data)
{
    SchemaWork *w = g_new0(SchemaWork, 1);
    w->format = g_strdup(opts->format_schema);
    if (opts->tools != NULL) {
        w->tools = g_new0(NpdTools, 1);
        w->tools->names = g_ptr_array_new_with_free_func(g_free);
        w->tools->schemas = g_ptr_array_new_with_free_func(g_free);
        w->tools->params = g_ptr_array_new_with_free_func(g_free);
        for (guint i = 0; i < opts->tools->schemas->len; i++)
            g_ptr_array_add(w->tools->schemas, g_strdup(opts->tools->schemas->pdata[i]));
    }
    g_autoptr(GTask) task = g_task_new(NULL, NULL, callback, data);
    g_task_set_source_tag(task, npd_schemas_compile_async);
    g_task_set_task_data(task, w, schema_work_free);
    g_task_run_in_thread(task, compile_thread);
}

gboolean npd_schemas_compile_finish(NpdRequestOptions *opts, GAsyncResult *res, GError **error)
{
    g_return_val_if_fail(g_task_is_valid(res, NULL), FALSE);
    if (!g_task_propagate_boolean(G_TASK(res), error))
        return FALSE;
    SchemaWork *w = g_task_get_task_data(G_TASK(res));
    if (w->format != NULL) {
        npl_grammar_free(opts->grammar);
        opts->grammar = g_steal_pointer(&w->grammar);
        g_clear_pointer(&opts->format_schema, g_free);
    }
    if (w->tools != NULL && opts->tools != NULL) {
        g_ptr_array_unref(opts->tools->params);
        opts->tools->params = g_steal_pointer(&w->tools->params);
    }
    return TRUE;
}
