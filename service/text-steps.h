/* The step bookkeeping that the text job kinds share (Embed's texts,
 * Rerank's documents): which texts the next step takes (at most
 * NPP_EMBED_STEP_TEXTS, and about a pass of text, at least one), the
 * engine's counts summed over the steps, and a failed step's error
 * naming the texts it took. */
#ifndef NPD_TEXT_STEPS_H
#define NPD_TEXT_STEPS_H

#include <glib.h>

#include "job-kind.h"

typedef struct {
    guint n;     /* texts */
    gsize *lens; /* their bytes, each with the per-text extra */
    guint done;  /* texts finished */
    gsize n_tokens, n_truncated, n_passes;
} NpdTextSteps;

/* n texts; each step costs their bytes plus extra a text (Rerank's query,
 * which goes with every document). */
void npd_text_steps_init(NpdTextSteps *s, const char *const *texts, guint n, gsize extra);
void npd_text_steps_clear(NpdTextSteps *s);
/* The end of the next step's texts [s->done, end): at most max_bytes of
 * them, at least one. */
guint npd_text_steps_next(const NpdTextSteps *s, gsize max_bytes);
/* Counts the step [s->done, end) that the engine answered with st and
 * info; *done once every text is. On failure err names the texts
 * ("in WHAT[first..last]: ", the engine's "PREFIX: " dropped). */
npl_status npd_text_steps_finish(NpdTextSteps *s, guint end, npl_status st, const npl_embed_info *info,
                                 const char *what, const char *prefix, gboolean *done, npl_error *err);
/* The finished event's counts (prompt_tokens). */
void npd_text_steps_stats(const NpdTextSteps *s, NpdJobStats *stats);

#endif
