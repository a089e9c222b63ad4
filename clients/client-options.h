/* npullm-client's command line: global switches and the generation
 * options that map one-to-one onto the D-Bus options dictionary. */
#ifndef NPC_CLIENT_OPTIONS_H
#define NPC_CLIENT_OPTIONS_H

#include <glib.h>

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
    gchar *name;         /* add, import-ollama: the installed model's name */
} NpcOptions;

/* Parses argv in place (options may appear anywhere; "--" ends them).
 * Leaves the command and its arguments in argv. */
gboolean npc_options_parse(NpcOptions *opts, int *argc, char ***argv, GError **error);
void npc_options_clear(NpcOptions *opts);

/* The a{sv} options for Generate/Chat/DescribeImage, plus handle_token
 * when not NULL (the daemon validates the values). */
GVariant *npc_options_to_variant(const NpcOptions *opts, const char *handle_token);

#endif
