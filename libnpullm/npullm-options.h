#pragma once

#if !defined(__NPULLM_H_INSIDE__) && !defined(NPULLM_COMPILATION)
#error "Only <npullm.h> can be included directly."
#endif

#include <glib-object.h>

#include "npullm-export.h"

G_BEGIN_DECLS

#define NPULLM_TYPE_OPTIONS (npullm_options_get_type())
NPULLM_EXPORT G_DECLARE_FINAL_TYPE(NpullmOptions, npullm_options, NPULLM, OPTIONS, GObject)

NPULLM_EXPORT NpullmOptions *npullm_options_new(void);
NPULLM_EXPORT gboolean npullm_options_is_set(NpullmOptions *self, const char *name);
NPULLM_EXPORT void npullm_options_unset(NpullmOptions *self, const char *name);

G_END_DECLS
