/* A usage record in the journal for every request (usage-journal.c):
 * who (uid, application), what (method, model, device), how much (token
 * counts) and how long; never any of the prompt or the output. So that
 *   journalctl -u npullmd NPULLM_APP=org.gnome.TextEditor
 * answers who used the accelerator, and when (docs/desktop.md). */
#ifndef NPD_USAGE_JOURNAL_H
#define NPD_USAGE_JOURNAL_H

#include "requests.h"

/* The record of r: ev its Finished event, or NULL when r ends without
 * one (its caller left first, or the daemon stops). */
void npd_usage_journal_record(const NpdRequest *r, const NpdEvent *ev);

#endif
