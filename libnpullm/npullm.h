/* libnpullm-1: the GObject client library of npullmd (org.npullm). */
#pragma once

#define __NPULLM_H_INSIDE__

#include "npullm-export.h"
#include "npullm-error.h"
#include "npullm-options.h"
#include "npullm-conversation.h"
#include "npullm-request.h"
#include "npullm-client.h"

#undef __NPULLM_H_INSIDE__
