/* Admission (admission.h). */
#include "admission.h"

struct NpdAdmission {
    const NpdConfig *cfg;
    const NpdRequestCounts *requests; /* the registry's, read live */
    NpdImageBudget *image_budget;
};

NpdAdmission *npd_admission_new(const NpdConfig *cfg, NpdRequests *requests, NpdImageBudget *image_budget)
{
    NpdAdmission *a = g_new0(NpdAdmission, 1);
    a->cfg = cfg;
    a->requests = npd_requests_counts(requests);
    a->image_budget = image_budget;
    return a;
}

void npd_admission_free(NpdAdmission *a)
{
    g_free(a);
}

static gboolean user_busy(GError **error, const char *what, guint used, guint limit, guint connections)
{
    g_set_error(error, NPD_ERROR, NPD_ERROR_BUSY, "too many %s from this user (%u of %u, over %u connection%s)", what,
                used, limit, connections, connections == 1 ? "" : "s");
    return FALSE;
}

static gboolean admit_user_requests(NpdAdmission *a, const NpdUserUsage *u, GError **error)
{
    if (u->requests >= a->cfg->max_per_user)
        return user_busy(error, "unfinished requests", u->requests, a->cfg->max_per_user, u->connections);
    return TRUE;
}

gboolean npd_admission_admit_call(NpdAdmission *a, NpdClient *c, gboolean makes_request, GError **error)
{
    /* the call counts itself: the limits compare what was there before it */
    g_return_val_if_fail(c->pending_calls > 0, FALSE);
    if (c->pending_calls - 1 >= a->cfg->max_per_client) {
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_BUSY,
                            "too many calls from this client waiting for authorization");
        return FALSE;
    }
    const NpdUserUsage *u = c->user;
    guint calls = u->calls - 1;
    if (calls >= a->cfg->max_calls_per_user)
        return user_busy(error, "calls waiting for authorization", calls, a->cfg->max_calls_per_user, u->connections);
    /* checked again when the request is made */
    return !makes_request || admit_user_requests(a, u, error);
}

gboolean npd_admission_admit_request(NpdAdmission *a, NpdClient *c, GError **error)
{
    guint active = a->requests->active, queued = a->requests->queued;
    if (active + queued >= a->cfg->max_running + a->cfg->max_queued) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_BUSY, "the queue is full (%u running, %u waiting)", active,
                    queued);
        return FALSE;
    }
    if (c->outstanding >= a->cfg->max_per_client) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_BUSY, "too many unfinished requests from this client (limit %u)",
                    a->cfg->max_per_client);
        return FALSE;
    }
    return admit_user_requests(a, c->user, error);
}

gboolean npd_admission_take_image(NpdAdmission *a, NpdClient *c, GError **error)
{
    const NpdUserUsage *u = c->user;
    if (u->images >= a->cfg->max_images_per_user)
        return user_busy(error, "images being read", u->images, a->cfg->max_images_per_user, u->connections);
    if (!npd_image_budget_take_slot(a->image_budget, error))
        return FALSE;
    c->images++;
    c->user->images++;
    return TRUE;
}

void npd_admission_release_image(NpdAdmission *a, NpdClient *c)
{
    g_return_if_fail(c->images > 0);
    c->images--;
    c->user->images--;
    npd_image_budget_give_slot(a->image_budget);
}
