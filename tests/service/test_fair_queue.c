/* service/worker/fair-queue.c on its own: the order the engine worker
 * starts waiting jobs in (round-robin between users, FIFO within each,
 * interactive before background), and that cancelling or taking jobs out
 * moves nobody back.
 *
 *   test-fair-queue [--tap] */
#include <string.h>

#include "fair-queue.h"

typedef struct {
    const char *name; /* "a1": user a's first */
    guint32 uid;
    NpdFairClass cls;
} Item;

/* The names popped, space-separated. */
static gchar *drain(NpdFairQueue *q)
{
    GString *order = g_string_new(NULL);
    const Item *it;
    while ((it = npd_fair_queue_pop(q)) != NULL)
        g_string_append_printf(order, "%s%s", order->len > 0 ? " " : "", it->name);
    return g_string_free(order, FALSE);
}

static void push(NpdFairQueue *q, const Item *it)
{
    npd_fair_queue_push(q, (gpointer)it, it->uid, it->cls);
}

static void test_fifo_one_user(void)
{
    g_autoptr(NpdFairQueue) q = npd_fair_queue_new();
    const Item a[] = {{"a1", 1, NPD_FAIR_INTERACTIVE}, {"a2", 1, NPD_FAIR_INTERACTIVE}, {"a3", 1, NPD_FAIR_INTERACTIVE}};
    for (guint i = 0; i < G_N_ELEMENTS(a); i++)
        push(q, &a[i]);
    g_autofree gchar *order = drain(q);
    g_assert_cmpstr(order, ==, "a1 a2 a3");
    g_assert_true(npd_fair_queue_is_empty(q));
}

/* A user who floods the queue first still lets another's job in after
 * one of its own. */
static void test_round_robin(void)
{
    g_autoptr(NpdFairQueue) q = npd_fair_queue_new();
    const Item items[] = {{"a1", 1, NPD_FAIR_INTERACTIVE}, {"a2", 1, NPD_FAIR_INTERACTIVE},
                          {"a3", 1, NPD_FAIR_INTERACTIVE}, {"b1", 2, NPD_FAIR_INTERACTIVE},
                          {"c1", 3, NPD_FAIR_INTERACTIVE}, {"b2", 2, NPD_FAIR_INTERACTIVE}};
    for (guint i = 0; i < G_N_ELEMENTS(items); i++)
        push(q, &items[i]);
    g_autofree gchar *order = drain(q);
    g_assert_cmpstr(order, ==, "a1 b1 c1 a2 b2 a3");
}

static void test_background_last(void)
{
    g_autoptr(NpdFairQueue) q = npd_fair_queue_new();
    const Item items[] = {{"A1", 1, NPD_FAIR_BACKGROUND}, {"b1", 2, NPD_FAIR_INTERACTIVE},
                          {"A2", 1, NPD_FAIR_BACKGROUND}, {"a1", 1, NPD_FAIR_INTERACTIVE},
                          {"b2", 2, NPD_FAIR_INTERACTIVE}};
    for (guint i = 0; i < G_N_ELEMENTS(items); i++)
        push(q, &items[i]);
    g_autofree gchar *order = drain(q);
    g_assert_cmpstr(order, ==, "b1 a1 b2 A1 A2");
}

/* Cancelling a user's last queued job gives its place back: the user's
 * next job is not pushed behind it. */
static void test_remove_keeps_place(void)
{
    g_autoptr(NpdFairQueue) q = npd_fair_queue_new();
    const Item items[] = {{"a1", 1, NPD_FAIR_INTERACTIVE}, {"a2", 1, NPD_FAIR_INTERACTIVE},
                          {"a3", 1, NPD_FAIR_INTERACTIVE}, {"b1", 2, NPD_FAIR_INTERACTIVE},
                          {"b2", 2, NPD_FAIR_INTERACTIVE}, {"b3", 2, NPD_FAIR_INTERACTIVE}};
    const Item b4 = {"b4", 2, NPD_FAIR_INTERACTIVE}, a4 = {"a4", 1, NPD_FAIR_INTERACTIVE};
    for (guint i = 0; i < G_N_ELEMENTS(items); i++)
        push(q, &items[i]);
    g_assert_true(npd_fair_queue_remove(q, (gpointer)&items[2]));
    g_assert_false(npd_fair_queue_remove(q, (gpointer)&items[2]));
    push(q, &b4);
    push(q, &a4); /* a3's turn, not one after it */
    g_autofree gchar *order = drain(q);
    g_assert_cmpstr(order, ==, "a1 b1 a2 b2 b3 a4 b4");
}

/* Jobs taken out move their class on: a user back after a while waits
 * behind nobody's old turns, and the newcomers keep arrival order. */
static void test_pop_moves_class_on(void)
{
    g_autoptr(NpdFairQueue) q = npd_fair_queue_new();
    const Item a[] = {{"a1", 1, NPD_FAIR_INTERACTIVE}, {"a2", 1, NPD_FAIR_INTERACTIVE}, {"a3", 1, NPD_FAIR_INTERACTIVE}};
    const Item later[] = {{"b1", 2, NPD_FAIR_INTERACTIVE}, {"a4", 1, NPD_FAIR_INTERACTIVE},
                          {"b2", 2, NPD_FAIR_INTERACTIVE}};
    for (guint i = 0; i < G_N_ELEMENTS(a); i++)
        push(q, &a[i]);
    g_autofree gchar *first = drain(q);
    g_assert_cmpstr(first, ==, "a1 a2 a3");
    for (guint i = 0; i < G_N_ELEMENTS(later); i++)
        push(q, &later[i]);
    g_autofree gchar *order = drain(q);
    g_assert_cmpstr(order, ==, "b1 a4 b2");
}

static gboolean named(gconstpointer item, gconstpointer name)
{
    return strcmp(((const Item *)item)->name, name) == 0;
}

static void count(gpointer item, gpointer data)
{
    (*(guint *)data)++;
}

static void test_find_and_walk(void)
{
    g_autoptr(NpdFairQueue) q = npd_fair_queue_new();
    const Item items[] = {{"a1", 1, NPD_FAIR_INTERACTIVE}, {"b1", 2, NPD_FAIR_BACKGROUND}};
    g_assert_true(npd_fair_queue_is_empty(q));
    g_assert_null(npd_fair_queue_peek(q));
    g_assert_null(npd_fair_queue_pop(q));
    for (guint i = 0; i < G_N_ELEMENTS(items); i++)
        push(q, &items[i]);
    g_assert_true(npd_fair_queue_find(q, named, "b1") == &items[1]);
    g_assert_null(npd_fair_queue_find(q, named, "c1"));
    g_assert_true(npd_fair_queue_peek(q) == &items[0]);
    guint n = 0;
    npd_fair_queue_foreach(q, count, &n);
    g_assert_cmpuint(n, ==, 2);
    /* freed with items still queued: they are the caller's */
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/fair-queue/fifo-one-user", test_fifo_one_user);
    g_test_add_func("/fair-queue/round-robin", test_round_robin);
    g_test_add_func("/fair-queue/background-last", test_background_last);
    g_test_add_func("/fair-queue/remove-keeps-place", test_remove_keeps_place);
    g_test_add_func("/fair-queue/pop-moves-class-on", test_pop_moves_class_on);
    g_test_add_func("/fair-queue/find-and-walk", test_find_and_walk);
    return g_test_run();
}
