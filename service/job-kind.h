/* Jobs of the engine worker that are not generation (Embed; Rerank would
 * be one more): their own state and steps, scheduled like generation (the
 * same fair queue between users, the same running slots, interactive
 * before background), each step one bounded piece of work on the engine
 * thread so that generation streams keep going between steps.
 *
 * The worker knows them only through this table: it loads the model,
 * calls check_model once, then step until done; the finished event
 * carries the state (NpdEvent.result) to the main thread, where the
 * request's reply function (NpdRequest.reply) builds the call's answer. */
#ifndef NPD_JOB_KIND_H
#define NPD_JOB_KIND_H

#include <glib.h>

#include "npullm.h"

typedef struct NpdJobStats NpdJobStats;

typedef struct {
    const char *name; /* "embedding": errors read "embedding: ..." */
    /* The model is loaded: can it do this kind of job? */
    gboolean (*check_model)(gpointer state, npl_model *m, GError **error);
    /* One bounded piece of the work; *done once all of it is. */
    npl_status (*step)(gpointer state, npl_model *m, gboolean *done, npl_error *err);
    /* Its counts for the finished event (prompt_tokens). */
    void (*stats)(gconstpointer state, NpdJobStats *stats);
    void (*free)(gpointer state);
} NpdJobKind;

#endif
