#pragma once

#include "bridge.h"

/* /v1/rerank and llama.cpp's server's aliases of it (bridge-rerank.c). */
void bridge_rerank_register(Bridge *bridge);
