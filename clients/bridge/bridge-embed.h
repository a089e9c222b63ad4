#pragma once

#include "bridge.h"

/* /api/embed, /api/embeddings and /v1/embeddings (bridge-embed.c). */
void bridge_embed_register(Bridge *bridge);
