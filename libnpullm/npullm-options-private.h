#pragma once

#include "npullm-options.h"

/* The a{sv} to send (floating): what was set, plus handle_token when
 * not NULL. self may be NULL. */
GVariant *_npullm_options_to_variant(NpullmOptions *self, const char *handle_token);
/* FALSE with an InvalidArgument error when a string option was set to
 * text that is not UTF-8 (it could not be sent). self may be NULL. */
gboolean _npullm_options_check(NpullmOptions *self, GError **error);
