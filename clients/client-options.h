/* npullm-client's command line: global switches and the generation
 * options that map one-to-one onto the D-Bus options dictionary. */
#ifndef NPC_CLIENT_OPTIONS_H
#define NPC_CLIENT_OPTIONS_H

#include <glib.h>
#include <npullm.h>

typedef struct {
    /* connection and output */
    gboolean session_bus;
    gchar *address;
    gboolean json;
    gboolean stats;
    /* generation options; unset ones are not sent */
    gchar *model;
    gint64 max_tokens;   /* -1: unset */
    gdouble temperature; /* NaN: unset */
    gdouble top_p;
    gint64 top_k;
    gdouble min_p;
    gdouble repeat_penalty;
    gchar *seed;         /* text, parsed as uint64 */
    gchar *system;
    gchar **stop;
    gboolean raw;
    gchar *priority;
    gint think;          /* -1: unset (the template's default), 0: --no-think, 1: --think */
    gchar *reasoning_effort; /* --reasoning-effort: low, medium or high; NULL: unset */
    gchar *format;       /* --format: "json" or the JSON Schema file's text */
    gchar *tools;        /* --tools: the file's text (a JSON array) */
    gchar *tool_choice;  /* --tool-choice */
    gint parallel_tool_calls; /* -1: unset, 0: --no-parallel-tool-calls, 1: --parallel-tool-calls */
    gchar *name;         /* add, import-ollama: the installed model's name */
    gchar **images;      /* chat: image files shown with the first user turn */
    gint dimensions;     /* embed: 0 unset */
    gboolean no_truncate; /* embed, rerank: refuse texts longer than the context */
    gchar *query;        /* rerank: the query */
    gint top_n;          /* rerank: 0 unset */
} NpcOptions;

/* Parses argv in place (options may appear anywhere; "--" ends them).
 * Leaves the command and its arguments in argv. */
gboolean npc_options_parse(NpcOptions *opts, int *argc, char ***argv, GError **error);
void npc_options_clear(NpcOptions *opts);

/* The generation options that were given (the service validates the
 * values). */
NpullmOptions *npc_options_to_npullm(const NpcOptions *opts);

#endif
