/* Fair queueing between users (fair-queue.h). */
#include "fair-queue.h"

typedef struct {
    gpointer item;
    guint32 uid;
    NpdFairClass cls;
    guint64 tag;
} Entry;

struct NpdFairQueue {
    GQueue entries; /* Entry*, sorted by (class, tag) */
    /* per class: uid -> guint64* last tag given */
    GHashTable *user_tags[NPD_FAIR_N_CLASSES];
    guint64 taken_tag[NPD_FAIR_N_CLASSES]; /* the tag last taken out */
};

NpdFairQueue *npd_fair_queue_new(void)
{
    NpdFairQueue *q = g_new0(NpdFairQueue, 1);
    g_queue_init(&q->entries);
    for (guint c = 0; c < NPD_FAIR_N_CLASSES; c++)
        q->user_tags[c] = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    return q;
}

void npd_fair_queue_free(NpdFairQueue *q)
{
    if (q == NULL)
        return;
    g_queue_clear_full(&q->entries, g_free);
    for (guint c = 0; c < NPD_FAIR_N_CLASSES; c++)
        g_hash_table_destroy(q->user_tags[c]);
    g_free(q);
}

static void set_user_tag(NpdFairQueue *q, NpdFairClass cls, guint32 uid, guint64 tag)
{
    guint64 *stored = g_new(guint64, 1);
    *stored = tag;
    g_hash_table_replace(q->user_tags[cls], GUINT_TO_POINTER(uid), stored);
}

void npd_fair_queue_push(NpdFairQueue *q, gpointer item, guint32 uid, NpdFairClass cls)
{
    Entry *e = g_new0(Entry, 1);
    e->item = item;
    e->uid = uid;
    e->cls = cls;
    const guint64 *last = g_hash_table_lookup(q->user_tags[cls], GUINT_TO_POINTER(uid));
    e->tag = MAX(last != NULL ? *last : 0, q->taken_tag[cls]) + 1;
    set_user_tag(q, cls, uid, e->tag);
    GList *l = q->entries.head;
    while (l != NULL) {
        const Entry *o = l->data;
        if (o->cls > cls || (o->cls == cls && o->tag > e->tag))
            break;
        l = l->next;
    }
    if (l == NULL)
        g_queue_push_tail(&q->entries, e);
    else
        g_queue_insert_before(&q->entries, l, e);
}

gpointer npd_fair_queue_peek(const NpdFairQueue *q)
{
    const Entry *e = g_queue_peek_head((GQueue *)&q->entries);
    return e != NULL ? e->item : NULL;
}

/* The head is leaving: its class moves on to its tag, and users whose
 * last tag is behind that are forgotten (the MAX in push would ignore
 * them anyway). */
gpointer npd_fair_queue_pop(NpdFairQueue *q)
{
    Entry *e = g_queue_pop_head(&q->entries);
    if (e == NULL)
        return NULL;
    q->taken_tag[e->cls] = MAX(q->taken_tag[e->cls], e->tag);
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, q->user_tags[e->cls]);
    while (g_hash_table_iter_next(&it, NULL, &value))
        if (*(guint64 *)value <= q->taken_tag[e->cls])
            g_hash_table_iter_remove(&it);
    gpointer item = e->item;
    g_free(e);
    return item;
}

/* The user's last tag becomes that of its last item still queued, so that
 * cancelling does not push the user's next item back. */
static void forget_tag(NpdFairQueue *q, const Entry *gone)
{
    guint64 last = 0;
    for (GList *l = q->entries.head; l != NULL; l = l->next) {
        const Entry *o = l->data;
        if (o->uid == gone->uid && o->cls == gone->cls)
            last = MAX(last, o->tag);
    }
    if (last <= q->taken_tag[gone->cls])
        g_hash_table_remove(q->user_tags[gone->cls], GUINT_TO_POINTER(gone->uid));
    else
        set_user_tag(q, gone->cls, gone->uid, last);
}

gboolean npd_fair_queue_remove(NpdFairQueue *q, gpointer item)
{
    for (GList *l = q->entries.head; l != NULL; l = l->next) {
        Entry *e = l->data;
        if (e->item == item) {
            g_queue_delete_link(&q->entries, l);
            forget_tag(q, e);
            g_free(e);
            return TRUE;
        }
    }
    return FALSE;
}

gpointer npd_fair_queue_find(const NpdFairQueue *q, NpdFairQueueMatch match, gconstpointer key)
{
    for (GList *l = q->entries.head; l != NULL; l = l->next) {
        const Entry *e = l->data;
        if (match(e->item, key))
            return e->item;
    }
    return NULL;
}

void npd_fair_queue_foreach(const NpdFairQueue *q, GFunc func, gpointer user_data)
{
    for (GList *l = q->entries.head; l != NULL; l = l->next)
        func(((const Entry *)l->data)->item, user_data);
}

gboolean npd_fair_queue_is_empty(const NpdFairQueue *q)
{
    return g_queue_is_empty((GQueue *)&q->entries);
}
