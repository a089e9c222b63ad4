/* The text job kinds' step bookkeeping (text-steps.h). */
#include "text-steps.h"

#include <string.h>

#include "engine-worker.h"
#include "npullm-protocol.h"

void npd_text_steps_init(NpdTextSteps *s, const char *const *texts, guint n, gsize extra)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    s->lens = g_new(gsize, n);
    for (guint i = 0; i < n; i++)
        s->lens[i] = strlen(texts[i]) + extra;
}

void npd_text_steps_clear(NpdTextSteps *s)
{
    g_clear_pointer(&s->lens, g_free);
}

guint npd_text_steps_next(const NpdTextSteps *s, gsize max_bytes)
{
    guint first = s->done, end = first;
    gsize bytes = 0;
    while (end < s->n && end - first < NPP_EMBED_STEP_TEXTS && (end == first || bytes + s->lens[end] <= max_bytes))
        bytes += s->lens[end++];
    return end;
}

npl_status npd_text_steps_finish(NpdTextSteps *s, guint end, npl_status st, const npl_embed_info *info,
                                 const char *what, const char *prefix, gboolean *done, npl_error *err)
{
    if (st != NPL_OK) {
        /* the engine's text numbers count from this step's first text */
        const char *msg = g_str_has_prefix(err->message, prefix) ? err->message + strlen(prefix) : err->message;
        g_autofree gchar *where = g_strdup_printf("in %s[%u..%u]: %s", what, s->done, end - 1, msg);
        npl_error_set(err, st, "%s", where);
        return st;
    }
    s->n_tokens += info->n_tokens;
    s->n_truncated += info->n_truncated;
    s->n_passes += info->n_passes;
    s->done = end;
    *done = s->done == s->n;
    return NPL_OK;
}

void npd_text_steps_stats(const NpdTextSteps *s, NpdJobStats *stats)
{
    stats->prompt_tokens = (guint32)MIN(s->n_tokens, G_MAXUINT32);
}
