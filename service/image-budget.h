/* The global bound on image work: how many DescribeImage images may be
 * read and decoded at once, and how many bytes they may hold together
 * (the encoded file, the decoder's peak estimate, the preprocessed
 * tensor). A slot is taken when the call arrives, before polkit and before
 * anything is read, and given back when the image is handed to the engine
 * or refused; bytes are taken as the work goes, and the tensor's stay
 * taken until its NpdImagePixels is freed (queued requests' images
 * count). Beyond either bound the
 * answer is NPD_ERROR_BUSY. Thread-safe (the reads run in worker
 * threads). */
#ifndef NPD_IMAGE_BUDGET_H
#define NPD_IMAGE_BUDGET_H

#include <glib.h>

typedef struct NpdImageBudget NpdImageBudget;

NpdImageBudget *npd_image_budget_new(guint max_images, guint64 max_bytes);
void npd_image_budget_free(NpdImageBudget *b);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NpdImageBudget, npd_image_budget_free)

/* One image slot, or NPD_ERROR_BUSY. */
gboolean npd_image_budget_take_slot(NpdImageBudget *b, GError **error);
void npd_image_budget_give_slot(NpdImageBudget *b);

/* n more bytes, or NPD_ERROR_BUSY (what is, what was asked). */
gboolean npd_image_budget_take_bytes(NpdImageBudget *b, guint64 n, GError **error);
void npd_image_budget_give_bytes(NpdImageBudget *b, guint64 n);

/* The bound itself: work needing more can never be done. */
guint64 npd_image_budget_max_bytes(NpdImageBudget *b);

/* Slots and bytes in use (tests and logs). */
void npd_image_budget_usage(NpdImageBudget *b, guint *images, guint64 *bytes);

#endif
