/* Usage records (usage-journal.h). */
#include "usage-journal.h"

#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

#include "app-identity.h"
#include "client-tracker.h"
#include "daemon.h"

/* journalctl MESSAGE_ID=... finds every usage record */
#define USAGE_MESSAGE_ID "6e8f1d2a4c5b47a1b0b3c9d8e7f6a5b4"

void npd_usage_journal_record(const NpdRequest *r, const NpdEvent *ev)
{
    const NpdJobStats zero = {0};
    const NpdJobStats *s = ev != NULL ? &ev->stats : &zero;
    const char *reason = ev != NULL ? npd_finish_reason_name(ev->reason) : "cancelled";
    const NpdAppIdentity *app = r->client->app;
    const char *app_id = app != NULL && app->id[0] != '\0' ? app->id : "unknown";
    const char *method = r->method != NULL ? r->method : "unknown";
    /* every value is the daemon's own or checked (app ids and model names
     * have no newlines or '%'); no text of the request goes in */
    int rc = sd_journal_send("MESSAGE=%s by uid %u (%s) on %s with %s: %u prompt + %u generated tokens, %s",
                             method, r->client->uid, app_id, r->daemon->device->device, r->model, s->prompt_tokens,
                             s->generated_tokens, reason,
                             "MESSAGE_ID=" USAGE_MESSAGE_ID, "PRIORITY=6",
                             "NPULLM_UID=%u", r->client->uid,
                             "NPULLM_APP=%s", app_id,
                             "NPULLM_APP_SOURCE=%s", app != NULL ? app->source : "unknown",
                             "NPULLM_METHOD=%s", method,
                             "NPULLM_MODEL=%s", r->model,
                             "NPULLM_DEVICE=%s", r->daemon->device->device,
                             "NPULLM_REASON=%s", reason,
                             "NPULLM_PROMPT_TOKENS=%u", s->prompt_tokens,
                             "NPULLM_CACHED_TOKENS=%u", s->cached_tokens,
                             "NPULLM_GENERATED_TOKENS=%u", s->generated_tokens,
                             "NPULLM_FIRST_TOKEN_MS=%.1f", s->time_to_first_token_ms,
                             "NPULLM_TOTAL_MS=%.1f", s->total_time_ms,
                             NULL);
    if (rc < 0)
        g_debug("usage record not journalled: %s", g_strerror(-rc));
}
