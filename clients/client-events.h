/* How npullm-client shows what happens: plain text for people, or with
 * --json one JSON object per line ({"event": ...}) for programs. */
#ifndef NPC_CLIENT_EVENTS_H
#define NPC_CLIENT_EVENTS_H

#include <gio/gio.h>

enum {
    NPC_EXIT_OK = 0,
    NPC_EXIT_ERROR = 1,
    NPC_EXIT_USAGE = 2,
    NPC_EXIT_NOT_AUTHORIZED = 3,
    NPC_EXIT_BUSY = 4,
    NPC_EXIT_NO_SUCH_MODEL = 5,
    NPC_EXIT_INTERRUPTED = 130,
};

typedef struct {
    gboolean json;
    gboolean stats;
    gboolean at_line_start; /* text mode: whether stdout ends with a newline */
} NpcOutput;

/* Exit status for an error from the bus or the daemon. */
int npc_exit_code_for_error(const GError *error);
/* Same for an error name carried in Finished stats ("error_name"). */
int npc_exit_code_for_error_name(const char *name);

void npc_output_request(NpcOutput *out, const char *path);
void npc_output_token(NpcOutput *out, const char *text);
/* A reasoning model's thinking: {"event": "thinking"}, or on stderr. */
void npc_output_thinking(NpcOutput *out, const char *text);
/* A tool call: a JSON event, or "[tool call ID] NAME ARGUMENTS" on stdout. */
void npc_output_tool_call(NpcOutput *out, const char *id, const char *name, const char *arguments);
void npc_output_state(NpcOutput *out, const char *state, guint queue_position);
void npc_output_finished(NpcOutput *out, const char *reason, GVariant *stats);
void npc_output_error(NpcOutput *out, const GError *error);
void npc_output_message(NpcOutput *out, const char *event, const char *message);
/* ListModels reply (aa{sv}) and Properties.GetAll (a{sv}). */
void npc_output_models(NpcOutput *out, GVariant *models);
void npc_output_status(NpcOutput *out, GVariant *properties);
/* Ends a partial line of streamed text. */
void npc_output_end_line(NpcOutput *out);

#endif
