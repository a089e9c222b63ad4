/* npullm-client embed: one vector per text (arguments, or the lines of
 * stdin), a line of values each, or with --json one object. */
#ifndef NPC_CLIENT_EMBED_H
#define NPC_CLIENT_EMBED_H

#include "client-events.h"
#include "client-options.h"

int npc_run_embed(NpullmClient *lib, const NpcOptions *opts, NpcOutput *out, int argc, char **argv);

#endif
