#pragma once

#include "npullm-options.h"

/* The a{sv} to send (floating): what was set, plus handle_token when
 * not NULL. self may be NULL. */
GVariant *_npullm_options_to_variant(NpullmOptions *self, const char *handle_token);
