/* The engine worker's queue of waiting jobs, fair between users: pure
 * logic (no engine, no threads), so that it can be tested alone.
 *
 * Each item gets a tag one past its user's previous one, and never below
 * the tag last taken out of its class; the queue is kept sorted by
 * (class, tag), FIFO among equal tags. So whatever one user floods in,
 * another user's new item waits for at most one item of each other user:
 * round-robin between users, FIFO within each, every interactive item
 * before any background one. */
#ifndef NPD_FAIR_QUEUE_H
#define NPD_FAIR_QUEUE_H

#include <glib.h>

/* Classes, most urgent first. */
typedef enum {
    NPD_FAIR_INTERACTIVE,
    NPD_FAIR_BACKGROUND,
    NPD_FAIR_N_CLASSES,
} NpdFairClass;

typedef struct NpdFairQueue NpdFairQueue;

/* TRUE when item is the one key names. */
typedef gboolean (*NpdFairQueueMatch)(gconstpointer item, gconstpointer key);

NpdFairQueue *npd_fair_queue_new(void);
/* The items still queued are not freed (the caller pops them first). */
void npd_fair_queue_free(NpdFairQueue *q);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NpdFairQueue, npd_fair_queue_free)

void npd_fair_queue_push(NpdFairQueue *q, gpointer item, guint32 uid, NpdFairClass cls);
/* The next item (NULL when empty), left in the queue. */
gpointer npd_fair_queue_peek(const NpdFairQueue *q);
/* Takes the next item out: its class moves on to its tag. */
gpointer npd_fair_queue_pop(NpdFairQueue *q);
/* Takes item out from anywhere (cancelled): its user's next item is not
 * pushed back by it. FALSE when it is not queued. */
gboolean npd_fair_queue_remove(NpdFairQueue *q, gpointer item);
/* The first item in queue order that match accepts, or NULL. */
gpointer npd_fair_queue_find(const NpdFairQueue *q, NpdFairQueueMatch match, gconstpointer key);
/* Calls func(item, user_data) for each item in queue order. */
void npd_fair_queue_foreach(const NpdFairQueue *q, GFunc func, gpointer user_data);
gboolean npd_fair_queue_is_empty(const NpdFairQueue *q);

#endif
