/* npullm-client embed: one vector per text (arguments, or the lines of
 * stdin), a line of values each, or with --json one object. */
#ifndef NPC_CLIENT_EMBED_H
#define NPC_CLIENT_EMBED_H

#include "client-events.h"
#include "client-options.h"

int npc_run_embed(NpullmClient *lib, const NpcOptions *opts, NpcOutput *out, int argc, char **argv);

/* npullm-client rerank --query Q: the documents (arguments, or the lines
 * of stdin) best first, a line each (index, score, text), or with --json
 * one object. */
int npc_run_rerank(NpullmClient *lib, const NpcOptions *opts, NpcOutput *out, int argc, char **argv);

#endif
