/* The idle tracker (idle.h). */
#include "idle.h"

struct NpdIdle {
    guint timeout; /* seconds, 0: never */
    NpdIdleFunc on_timeout;
    gpointer user_data;
    GHashTable *tokens; /* token -> reason (owned) */
    guint next_token;
    guint timer_id;
    gboolean started;
};

static gboolean timeout_cb(gpointer data)
{
    NpdIdle *idle = data;
    idle->timer_id = 0;
    idle->on_timeout(idle->user_data);
    return G_SOURCE_REMOVE;
}

/* The timer runs exactly while no token is held. */
static void update_timer(NpdIdle *idle)
{
    gboolean busy = g_hash_table_size(idle->tokens) > 0;
    if (busy && idle->timer_id != 0) {
        g_debug("busy: %s", (const char *)g_hash_table_lookup(idle->tokens, GUINT_TO_POINTER(idle->next_token)));
        g_source_remove(idle->timer_id);
        idle->timer_id = 0;
    } else if (!busy && idle->timer_id == 0 && idle->timeout > 0 && idle->started) {
        idle->timer_id = g_timeout_add_seconds(idle->timeout, timeout_cb, idle);
    }
}

NpdIdle *npd_idle_new(guint timeout, NpdIdleFunc on_timeout, gpointer user_data)
{
    NpdIdle *idle = g_new0(NpdIdle, 1);
    idle->timeout = timeout;
    idle->on_timeout = on_timeout;
    idle->user_data = user_data;
    idle->tokens = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    return idle;
}

void npd_idle_start(NpdIdle *idle)
{
    idle->started = TRUE;
    update_timer(idle);
}

void npd_idle_free(NpdIdle *idle)
{
    if (idle == NULL)
        return;
    if (idle->timer_id != 0)
        g_source_remove(idle->timer_id);
    g_hash_table_destroy(idle->tokens);
    g_free(idle);
}

guint npd_idle_inhibit(NpdIdle *idle, const char *reason)
{
    do
        idle->next_token++;
    while (idle->next_token == 0 || g_hash_table_contains(idle->tokens, GUINT_TO_POINTER(idle->next_token)));
    g_hash_table_insert(idle->tokens, GUINT_TO_POINTER(idle->next_token), g_strdup(reason));
    update_timer(idle); /* (the debug line names this newest token's reason) */
    return idle->next_token;
}

void npd_idle_uninhibit(NpdIdle *idle, guint token)
{
    if (token == 0)
        return;
    if (!g_hash_table_remove(idle->tokens, GUINT_TO_POINTER(token)))
        g_warning("idle: token %u is not held", token);
    update_timer(idle);
}

guint npd_idle_inhibitors(const NpdIdle *idle)
{
    return g_hash_table_size(idle->tokens);
}
