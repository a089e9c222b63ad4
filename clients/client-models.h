/* npullm-client's model library commands: add FILE [--name N],
 * remove NAME, import-ollama NAME[:TAG] (from the caller's own Ollama
 * store, $OLLAMA_MODELS or ~/.ollama/models, read client-side; a
 * projector layer is passed along). */
#ifndef NPC_CLIENT_MODELS_H
#define NPC_CLIENT_MODELS_H

#include <gio/gio.h>

#include "client-events.h"
#include "client-options.h"

/* Runs command against the daemon (its unique name) and returns the
 * exit status; a progress bar goes to stderr when it is a terminal. */
int npc_models_run(GDBusConnection *bus, const char *daemon, const NpcOptions *opts, NpcOutput *out,
                   const char *command, int argc, char **argv);

#endif
