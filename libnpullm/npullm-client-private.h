#pragma once

#include "npullm-client.h"

/* Unfinished requests are told when the daemon leaves the bus. */
void _npullm_client_track(NpullmClient *self, NpullmRequest *request);
