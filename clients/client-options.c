#include "client-options.h"

#include <math.h>
#include <string.h>

#include "npullm-protocol.h"

static const char summary[] =
    "Commands:\n"
    "  generate PROMPT...        stream the answer to one prompt ('-' reads stdin)\n"
    "  chat                      interactive conversation, one user turn per line of stdin\n"
    "  describe-image FILE [PROMPT]  describe an image (needs a vision model)\n"
    "  models                    list the installed models\n"
    "  status                    show the service's state\n"
    "  load NAME | unload NAME   load or unload a model (needs authorization)\n"
    "  forget-cache              drop the conversations the service keeps for your requests\n"
    "  add FILE [--name NAME]    install a GGUF model for the service (needs authorization)\n"
    "  import-ollama NAME[:TAG]  install a model from your Ollama store (~/.ollama/models)\n"
    "  remove NAME               remove a model installed with add (needs authorization)\n"
    "  cancel PATH               cancel a request made on this connection\n"
    "  embed TEXT...             one embedding vector per text ('-' or none: the lines of stdin)\n"
    "  rerank --query Q DOC...   score documents against a query, best first ('-' or none: stdin's lines)\n"
    "\n"
    "Exit status: 0 success, 1 error, 2 usage, 3 not authorized, 4 busy,\n"
    "5 no such model, 130 interrupted.";

static gboolean read_option_file(const char *flag, const char *path, gchar **out, GError **error)
{
    g_autoptr(GError) read_error = NULL;
    if (g_file_get_contents(path, out, NULL, &read_error))
        return TRUE;
    g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "%s: %s", flag, read_error->message);
    return FALSE;
}

gboolean npc_options_parse(NpcOptions *opts, int *argc, char ***argv, GError **error)
{
    opts->max_tokens = -1;
    opts->top_k = -1;
    opts->temperature = opts->top_p = opts->min_p = opts->repeat_penalty = NAN;
    gint max_tokens = -1, top_k = -1;
    gboolean think = FALSE, no_think = FALSE, parallel = FALSE, no_parallel = FALSE;
    g_autofree gchar *format = NULL, *tools = NULL;
    GOptionEntry entries[] = {
        {"session", 0, 0, G_OPTION_ARG_NONE, &opts->session_bus, "Talk to npullmd on the session bus", NULL},
        {"address", 0, 0, G_OPTION_ARG_STRING, &opts->address, "Talk to the bus at this D-Bus address", "ADDR"},
        {"json", 'j', 0, G_OPTION_ARG_NONE, &opts->json, "Print one JSON object per event and line", NULL},
        {"stats", 0, 0, G_OPTION_ARG_NONE, &opts->stats, "Print generation statistics to stderr", NULL},
        {"model", 'm', 0, G_OPTION_ARG_STRING, &opts->model, "Model name (default: the service's)", "NAME"},
        {"max-tokens", 'n', 0, G_OPTION_ARG_INT, &max_tokens, "Generate at most N tokens", "N"},
        {"temperature", 0, 0, G_OPTION_ARG_DOUBLE, &opts->temperature, "Sampling temperature (0: greedy)", "T"},
        {"top-p", 0, 0, G_OPTION_ARG_DOUBLE, &opts->top_p, "Nucleus sampling threshold", "P"},
        {"top-k", 0, 0, G_OPTION_ARG_INT, &top_k, "Sample among the K most likely tokens", "K"},
        {"min-p", 0, 0, G_OPTION_ARG_DOUBLE, &opts->min_p, "Minimum probability relative to the best", "P"},
        {"repeat-penalty", 0, 0, G_OPTION_ARG_DOUBLE, &opts->repeat_penalty, "Repetition penalty", "R"},
        {"seed", 0, 0, G_OPTION_ARG_STRING, &opts->seed, "Random seed (unsigned 64-bit)", "S"},
        {"system", 0, 0, G_OPTION_ARG_STRING, &opts->system, "System prompt", "TEXT"},
        {"stop", 0, 0, G_OPTION_ARG_STRING_ARRAY, &opts->stop, "Stop at this text (repeatable)", "TEXT"},
        {"raw", 0, 0, G_OPTION_ARG_NONE, &opts->raw, "Plain completion: no chat template", NULL},
        {"priority", 0, 0, G_OPTION_ARG_STRING, &opts->priority, "interactive (default) or background", "P"},
        {"think", 0, 0, G_OPTION_ARG_NONE, &think, "Reasoning models: think before answering", NULL},
        {"no-think", 0, 0, G_OPTION_ARG_NONE, &no_think, "Reasoning models: answer without thinking", NULL},
        {"reasoning-effort", 0, 0, G_OPTION_ARG_STRING, &opts->reasoning_effort,
         "gpt-oss: reason for low, medium or high effort (default: the template's)", "LEVEL"},
        {"format", 0, 0, G_OPTION_ARG_FILENAME, &format,
         "Constrained output: json (any JSON value) or a JSON Schema file", "json|FILE"},
        {"tools", 0, 0, G_OPTION_ARG_FILENAME, &tools, "chat: offer the tools of this JSON file (an array)", "FILE"},
        {"tool-choice", 0, 0, G_OPTION_ARG_STRING, &opts->tool_choice, "chat: auto, none, required or a tool's name",
         "CHOICE"},
        {"parallel-tool-calls", 0, 0, G_OPTION_ARG_NONE, &parallel,
         "chat: a required or named tool choice may make several calls (the default)", NULL},
        {"no-parallel-tool-calls", 0, 0, G_OPTION_ARG_NONE, &no_parallel,
         "chat: a required or named tool choice makes exactly one call", NULL},
        {"name", 0, 0, G_OPTION_ARG_STRING, &opts->name, "add, import-ollama: name of the installed model", "NAME"},
        {"image", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &opts->images,
         "chat: show this image with the first user turn (repeatable)", "FILE"},
        {"dimensions", 0, 0, G_OPTION_ARG_INT, &opts->dimensions, "embed: keep the first N values of each vector",
         "N"},
        {"no-truncate", 0, 0, G_OPTION_ARG_NONE, &opts->no_truncate,
         "embed, rerank: refuse texts longer than the context", NULL},
        {"query", 0, 0, G_OPTION_ARG_STRING, &opts->query, "rerank: the query to score the documents against", "Q"},
        {"top-n", 0, 0, G_OPTION_ARG_INT, &opts->top_n, "rerank: print only the N best documents", "N"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("COMMAND [ARGS...]");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_option_context_set_summary(ctx, "Talks to npullmd, the local language model service.");
    g_option_context_set_description(ctx, summary);
    if (!g_option_context_parse(ctx, argc, argv, error))
        return FALSE;
    if (max_tokens != -1) {
        if (max_tokens <= 0) {
            g_set_error_literal(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--max-tokens must be positive");
            return FALSE;
        }
        opts->max_tokens = max_tokens;
    }
    if (top_k != -1) {
        if (top_k < 0) {
            g_set_error_literal(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--top-k must not be negative");
            return FALSE;
        }
        opts->top_k = top_k;
    }
    if (opts->seed != NULL && !g_ascii_string_to_unsigned(opts->seed, 10, 0, G_MAXUINT64, NULL, NULL)) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--seed '%s' is not an unsigned number",
                    opts->seed);
        return FALSE;
    }
    if (think && no_think) {
        g_set_error_literal(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--think and --no-think exclude each other");
        return FALSE;
    }
    opts->think = think ? 1 : no_think ? 0 : -1;
    /* the protocol's levels, checked here so that a typo fails before any connection */
    const NppOption *effort = &npp_options[NPP_OPT_REASONING_EFFORT];
    if (opts->reasoning_effort != NULL && !g_strv_contains(effort->choices, opts->reasoning_effort)) {
        g_autofree gchar *levels = npp_option_range_text(effort);
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--reasoning-effort '%s': expected %s",
                    opts->reasoning_effort, levels);
        return FALSE;
    }
    if (parallel && no_parallel) {
        g_set_error_literal(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                            "--parallel-tool-calls and --no-parallel-tool-calls exclude each other");
        return FALSE;
    }
    opts->parallel_tool_calls = parallel ? 1 : no_parallel ? 0 : -1;
    if (tools != NULL && !read_option_file("--tools", tools, &opts->tools, error))
        return FALSE;
    if (format != NULL && strcmp(format, "json") == 0) {
        opts->format = g_steal_pointer(&format);
    } else if (format != NULL) {
        /* the service checks the schema (and its size) */
        if (!read_option_file("--format", format, &opts->format, error))
            return FALSE;
    }
    /* the service checks the upper bounds; a negative count would reach it
     * as a huge unsigned one and be named so */
    if (opts->dimensions < 0 || opts->top_n < 0) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "%s %d: expected a whole number of 1 or more",
                    opts->dimensions < 0 ? "--dimensions" : "--top-n",
                    opts->dimensions < 0 ? opts->dimensions : opts->top_n);
        return FALSE;
    }
    if (opts->address != NULL && opts->session_bus) {
        g_set_error_literal(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                            "--address and --session exclude each other");
        return FALSE;
    }
    return TRUE;
}

void npc_options_clear(NpcOptions *opts)
{
    g_free(opts->address);
    g_free(opts->model);
    g_free(opts->name);
    g_free(opts->seed);
    g_free(opts->system);
    g_strfreev(opts->stop);
    g_strfreev(opts->images);
    g_free(opts->priority);
    g_free(opts->reasoning_effort);
    g_free(opts->format);
    g_free(opts->tools);
    g_free(opts->tool_choice);
    g_free(opts->query);
}

NpullmOptions *npc_options_to_npullm(const NpcOptions *opts)
{
    NpullmOptions *o = npullm_options_new();
    if (opts->model != NULL)
        g_object_set(o, "model", opts->model, NULL);
    if (opts->max_tokens > 0)
        g_object_set(o, "max-tokens", (guint)opts->max_tokens, NULL);
    if (!isnan(opts->temperature))
        g_object_set(o, "temperature", opts->temperature, NULL);
    if (!isnan(opts->top_p))
        g_object_set(o, "top-p", opts->top_p, NULL);
    if (opts->top_k >= 0)
        g_object_set(o, "top-k", (guint)opts->top_k, NULL);
    if (!isnan(opts->min_p))
        g_object_set(o, "min-p", opts->min_p, NULL);
    if (!isnan(opts->repeat_penalty))
        g_object_set(o, "repeat-penalty", opts->repeat_penalty, NULL);
    if (opts->seed != NULL) {
        guint64 seed = 0;
        g_ascii_string_to_unsigned(opts->seed, 10, 0, G_MAXUINT64, &seed, NULL);
        g_object_set(o, "seed", seed, NULL);
    }
    if (opts->system != NULL)
        g_object_set(o, "system", opts->system, NULL);
    if (opts->stop != NULL)
        g_object_set(o, "stop", opts->stop, NULL);
    if (opts->raw)
        g_object_set(o, "raw", TRUE, NULL);
    if (opts->priority != NULL)
        g_object_set(o, "priority", opts->priority, NULL);
    if (opts->think >= 0)
        g_object_set(o, "think", (gboolean)opts->think, NULL);
    if (opts->reasoning_effort != NULL)
        g_object_set(o, "reasoning-effort", opts->reasoning_effort, NULL);
    if (opts->format != NULL)
        g_object_set(o, "format", opts->format, NULL);
    if (opts->tools != NULL)
        g_object_set(o, "tools", opts->tools, NULL);
    if (opts->tool_choice != NULL)
        g_object_set(o, "tool-choice", opts->tool_choice, NULL);
    if (opts->parallel_tool_calls >= 0)
        g_object_set(o, "parallel-tool-calls", (gboolean)opts->parallel_tool_calls, NULL);
    if (opts->dimensions != 0) /* the service names one out of range */
        g_object_set(o, "dimensions", (guint)opts->dimensions, NULL);
    if (opts->no_truncate)
        g_object_set(o, "truncate", FALSE, NULL);
    if (opts->top_n != 0) /* as dimensions */
        g_object_set(o, "top-n", (guint)opts->top_n, NULL);
    return o;
}
