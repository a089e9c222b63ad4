#include "log-limit.h"

gboolean npd_log_limit_allow(NpdLogLimit *l, guint burst, gint64 period_us, guint *left_out)
{
    gint64 now = g_get_monotonic_time();
    if (l->window_start == 0 || now - l->window_start >= period_us) {
        l->window_start = now;
        l->written = 0;
    }
    if (l->written >= burst) {
        l->left_out++;
        return FALSE;
    }
    l->written++;
    *left_out = l->left_out;
    l->left_out = 0;
    return TRUE;
}
