/* Admission: the one place that says yes, or Busy, to a call and to a
 * request, under every limit of [Limits]: the queue (running + waiting),
 * each client's calls and unfinished requests, each Unix user's calls,
 * requests and images (counted over all of its connections, so that more
 * connections buy no bigger share: the client tracker keeps each user's
 * counts), and the global image budget. Each
 * refusal is an NPD_ERROR_BUSY naming the limit. Main context only. */
#ifndef NPD_ADMISSION_H
#define NPD_ADMISSION_H

#include <gio/gio.h>

#include "client-tracker.h"
#include "daemon-config.h"
#include "image-budget.h"
#include "requests.h"

typedef struct NpdAdmission NpdAdmission;

NpdAdmission *npd_admission_new(const NpdConfig *cfg, NpdRequests *requests, NpdImageBudget *image_budget);
void npd_admission_free(NpdAdmission *a);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NpdAdmission, npd_admission_free)

/* A call of c about to wait for polkit (c counts it already): c's and
 * its user's calls in flight; a call that makes a request is checked
 * against the user's requests too, so that failing early spares polkit
 * and the image read. */
gboolean npd_admission_admit_call(NpdAdmission *a, NpdClient *c, gboolean makes_request, GError **error);
/* A request of c about to be queued: the queue, c's and its user's
 * unfinished requests. */
gboolean npd_admission_admit_request(NpdAdmission *a, NpdClient *c, GError **error);
/* An image of c about to be read (before polkit, before reading): its
 * user's images in flight, then a slot of the image budget, held until
 * npd_admission_release_image. */
gboolean npd_admission_take_image(NpdAdmission *a, NpdClient *c, GError **error);
void npd_admission_release_image(NpdAdmission *a, NpdClient *c);

#endif
