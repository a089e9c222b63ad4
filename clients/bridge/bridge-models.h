#pragma once

#include "bridge.h"

typedef void (*BridgeModelsReady)(Bridge *bridge, SoupServerMessage *msg, GVariant *models, gpointer data);

/* Lists npullmd's models for @msg (paused meanwhile) and calls @ready with
 * the aa{sv} of ListModels, unless the listing failed (then an error is
 * the reply) or the client went away. */
void bridge_models_fetch(Bridge *bridge, SoupServerMessage *msg, BridgeApi api, BridgeModelsReady ready,
                         gpointer data, GDestroyNotify data_free);

/* The model of that name: exactly, else NAME for NAME:latest (the tag
 * Ollama clients add). NULL when none. */
GVariant *bridge_models_find(GVariant *models, const char *name);

/* The name shown to Ollama clients: ours, with ":latest" when it has no tag. */
char *bridge_models_ollama_name(const char *name);

/* Ollama's "capabilities" member from ListModels' capabilities:
 * ["embedding"] for an embedding model, else "completion" (and "vision"). */
void bridge_models_add_capabilities(JsonBuilder *b, GVariant *model);
