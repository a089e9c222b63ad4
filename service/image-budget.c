#include "image-budget.h"

#include "dbus-errors.h"

struct NpdImageBudget {
    GMutex lock;
    guint max_images;
    guint64 max_bytes;
    guint images;
    guint64 bytes;
};

NpdImageBudget *npd_image_budget_new(guint max_images, guint64 max_bytes)
{
    NpdImageBudget *b = g_new0(NpdImageBudget, 1);
    g_mutex_init(&b->lock);
    b->max_images = max_images;
    b->max_bytes = max_bytes;
    return b;
}

void npd_image_budget_free(NpdImageBudget *b)
{
    if (b == NULL)
        return;
    g_mutex_lock(&b->lock);
    gboolean busy = b->images != 0 || b->bytes != 0;
    g_mutex_unlock(&b->lock);
    if (busy) {
        /* A read still running in a worker thread gives its bytes back
         * here: leave the budget to the process exit. */
        g_message("exiting with %u images still being read", b->images);
        return;
    }
    g_mutex_clear(&b->lock);
    g_free(b);
}

gboolean npd_image_budget_take_slot(NpdImageBudget *b, GError **error)
{
    g_mutex_lock(&b->lock);
    gboolean ok = b->images < b->max_images;
    if (ok)
        b->images++;
    g_mutex_unlock(&b->lock);
    if (!ok)
        g_set_error(error, NPD_ERROR, NPD_ERROR_BUSY, "too many images being read at once (limit %u)",
                    b->max_images);
    return ok;
}

void npd_image_budget_give_slot(NpdImageBudget *b)
{
    g_mutex_lock(&b->lock);
    g_warn_if_fail(b->images > 0);
    if (b->images > 0)
        b->images--;
    g_mutex_unlock(&b->lock);
}

gboolean npd_image_budget_take_bytes(NpdImageBudget *b, guint64 n, GError **error)
{
    g_mutex_lock(&b->lock);
    gboolean ok = n <= b->max_bytes - b->bytes;
    guint64 in_use = b->bytes;
    if (ok)
        b->bytes += n;
    g_mutex_unlock(&b->lock);
    if (!ok)
        g_set_error(error, NPD_ERROR, NPD_ERROR_BUSY,
                    "image memory is exhausted: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
                    " bytes in use, %" G_GUINT64_FORMAT " more needed",
                    in_use, b->max_bytes, n);
    return ok;
}

void npd_image_budget_give_bytes(NpdImageBudget *b, guint64 n)
{
    g_mutex_lock(&b->lock);
    g_warn_if_fail(b->bytes >= n);
    b->bytes -= MIN(n, b->bytes);
    g_mutex_unlock(&b->lock);
}

void npd_image_budget_usage(NpdImageBudget *b, guint *images, guint64 *bytes)
{
    g_mutex_lock(&b->lock);
    *images = b->images;
    *bytes = b->bytes;
    g_mutex_unlock(&b->lock);
}

guint64 npd_image_budget_max_bytes(NpdImageBudget *b)
{
    return b->max_bytes; /* fixed at creation: no lock needed */
}
