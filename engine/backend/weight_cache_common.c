/* Shared pieces of the weight caches (see weight_cache_common.h). */
#include "weight_cache_common.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

bool npl_weight_cache_place(const char *model_path, const char *cache_dir, const char *suffix,
                            const char *label, char *dir, size_t dir_cap, char *file_name,
                            size_t name_cap, char *why, size_t why_cap)
{
    if (cache_dir && !cache_dir[0]) {
        snprintf(why, why_cap, "%s off (no cache directory)", label);
        return false;
    }
    const char *slash = strrchr(model_path, '/');
    const char *base = slash ? slash + 1 : model_path;
    int n = snprintf(file_name, name_cap, "%s%s", base, suffix);
    if (!base[0] || n < 0 || (size_t)n >= name_cap || n > NAME_MAX) {
        snprintf(why, why_cap, "%s off (no usable file name from the model path)", label);
        return false;
    }
    size_t dir_len;
    const char *dir_src;
    if (cache_dir) {
        dir_src = cache_dir;
        dir_len = strlen(cache_dir);
    } else if (!slash) {
        dir_src = ".";
        dir_len = 1;
    } else {
        dir_src = model_path;
        dir_len = slash == model_path ? 1 : (size_t)(slash - model_path); /* "/model.gguf" */
    }
    if (dir_len >= dir_cap) {
        snprintf(why, why_cap, "%s off (its directory's path is too long)", label);
        return false;
    }
    memcpy(dir, dir_src, dir_len);
    dir[dir_len] = '\0';
    return true;
}

void npl_cache_note_add(char *note, size_t cap, const char *fmt, ...)
{
    size_t used = strlen(note);
    if (used + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note + used, cap - used, fmt, ap);
    va_end(ap);
}
