#pragma once

#include "npullm-error.h"

/* For errors of calls to the service. */
void _npullm_error_strip_remote(GError *error);
