/* What the NPU's Q4NX cache and the CPU's packed-weight cache share: where
 * a cache derived from a model file lives (<dir>/<model basename><suffix>)
 * and the one-line report of what happened to it. */
#ifndef NPL_WEIGHT_CACHE_COMMON_H
#define NPL_WEIGHT_CACHE_COMMON_H

#include <stdbool.h>
#include <stddef.h>

/* The cache's directory and file name for model_path: cache_dir, or the
 * model's own directory when cache_dir is NULL; "" = no cache. False, with
 * the reason (prefixed by label) in why, when there is no cache. */
bool npl_weight_cache_place(const char *model_path, const char *cache_dir, const char *suffix,
                            const char *label, char *dir, size_t dir_cap, char *file_name,
                            size_t name_cap, char *why, size_t why_cap);

/* Appends to the NUL-terminated line in note (cap bytes), cut when full. */
void npl_cache_note_add(char *note, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
