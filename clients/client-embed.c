#include "client-embed.h"

#include <gio/gunixinputstream.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The texts: the arguments, else ("-" or none) the non-empty lines of
 * stdin. */
static GPtrArray *read_texts(int argc, char **argv, GError **error)
{
    GPtrArray *texts = g_ptr_array_new_with_free_func(g_free);
    if (argc > 0 && !(argc == 1 && strcmp(argv[0], "-") == 0)) {
        for (int i = 0; i < argc; i++)
            g_ptr_array_add(texts, g_strdup(argv[i]));
    } else {
        g_autoptr(GInputStream) in = g_unix_input_stream_new(STDIN_FILENO, FALSE);
        g_autoptr(GDataInputStream) lines = g_data_input_stream_new(in);
        gchar *line;
        gsize len;
        while ((line = g_data_input_stream_read_line(lines, &len, NULL, error)) != NULL) {
            if (len > 0)
                g_ptr_array_add(texts, line);
            else
                g_free(line);
        }
        if (*error != NULL) {
            g_ptr_array_unref(texts);
            return NULL;
        }
    }
    g_ptr_array_add(texts, NULL);
    return texts;
}

static void print_json(GVariant *vectors, GVariant *info)
{
    g_autoptr(JsonNode) vecs = json_gvariant_serialize(vectors);
    g_autoptr(JsonNode) inf = json_gvariant_serialize(info);
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "embeddings");
    json_builder_add_value(b, json_node_ref(vecs));
    json_builder_set_member_name(b, "info");
    json_builder_add_value(b, json_node_ref(inf));
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autofree gchar *text = json_to_string(root, FALSE);
    printf("%s\n", text);
}

static void print_rows(GVariant *vectors)
{
    GVariantIter it;
    GVariant *row;
    g_variant_iter_init(&it, vectors);
    while ((row = g_variant_iter_next_value(&it)) != NULL) {
        gsize n = 0;
        const double *v = g_variant_get_fixed_array(row, &n, sizeof(double));
        for (gsize k = 0; k < n; k++)
            printf(k == 0 ? "%.7g" : " %.7g", v[k]);
        printf("\n");
        g_variant_unref(row);
    }
}

static void store_result(GObject *source, GAsyncResult *res, gpointer data)
{
    *(GAsyncResult **)data = g_object_ref(res);
}

/* The texts of embed and rerank, checked; NULL with *code set on
 * failure. */
static GPtrArray *input_texts(const char *command, int argc, char **argv, int *code)
{
    g_autoptr(GError) error = NULL;
    if (argc == 0 && isatty(STDIN_FILENO)) {
        g_printerr("npullm-client: %s needs texts (or '-' to read one per line from stdin)\n", command);
        *code = NPC_EXIT_USAGE;
        return NULL;
    }
    GPtrArray *texts = read_texts(argc, argv, &error);
    if (texts == NULL) {
        g_printerr("npullm-client: reading stdin: %s\n", error->message);
        *code = NPC_EXIT_ERROR;
        return NULL;
    }
    for (guint i = 0; i + 1 < texts->len; i++)
        if (!g_utf8_validate(texts->pdata[i], -1, NULL)) {
            g_printerr("npullm-client: text %u is not valid UTF-8\n", i + 1);
            g_ptr_array_unref(texts);
            *code = NPC_EXIT_USAGE;
            return NULL;
        }
    return texts;
}

static GAsyncResult *wait_result(GAsyncResult **res)
{
    while (*res == NULL)
        g_main_context_iteration(NULL, TRUE);
    return *res;
}

static void print_stats(const NpcOutput *out, GVariant *info, const char *what, gsize n)
{
    guint32 tokens = 0;
    double ms = 0;
    g_variant_lookup(info, "prompt_tokens", "u", &tokens);
    g_variant_lookup(info, "total_time_ms", "d", &ms);
    if (out->stats && !out->json)
        g_printerr("%zu %s, %u tokens, %.1f ms\n", n, what, tokens, ms);
}

int npc_run_embed(NpullmClient *lib, const NpcOptions *opts, NpcOutput *out, int argc, char **argv)
{
    int code = NPC_EXIT_OK;
    g_autoptr(GPtrArray) texts = input_texts("embed", argc, argv, &code);
    if (texts == NULL)
        return code;
    g_autoptr(GError) error = NULL;
    g_autoptr(NpullmOptions) options = npc_options_to_npullm(opts);
    GAsyncResult *res = NULL;
    npullm_client_embed_async(lib, (const char *const *)texts->pdata, options, NULL, store_result, &res);
    g_autoptr(GVariant) info = NULL;
    g_autoptr(GVariant) vectors = npullm_client_embed_finish(lib, wait_result(&res), &info, &error);
    g_object_unref(res);
    if (vectors == NULL) {
        npc_output_error(out, error);
        return npc_exit_code_for_error(error);
    }
    if (out->json)
        print_json(vectors, info);
    else
        print_rows(vectors);
    print_stats(out, info, "texts", g_variant_n_children(vectors));
    return NPC_EXIT_OK;
}

/* --json: {"results": [{"index", "score"}...], "info": {...}}. */
static void print_ranked_json(GVariant *results, GVariant *info)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "results");
    json_builder_begin_array(b);
    GVariantIter it;
    guint32 index;
    double score;
    g_variant_iter_init(&it, results);
    while (g_variant_iter_next(&it, "(ud)", &index, &score)) {
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "index");
        json_builder_add_int_value(b, index);
        json_builder_set_member_name(b, "score");
        json_builder_add_double_value(b, score);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "info");
    json_builder_add_value(b, json_gvariant_serialize(info));
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autofree gchar *text = json_to_string(root, FALSE);
    printf("%s\n", text);
}

/* A line per document, best first: its index (from 0), score and text. */
static void print_ranked(GVariant *results, GPtrArray *docs)
{
    GVariantIter it;
    guint32 index;
    double score;
    g_variant_iter_init(&it, results);
    while (g_variant_iter_next(&it, "(ud)", &index, &score))
        printf("%u\t%.7g\t%s\n", index, score, index + 1 < docs->len ? (const char *)docs->pdata[index] : "");
}

int npc_run_rerank(NpullmClient *lib, const NpcOptions *opts, NpcOutput *out, int argc, char **argv)
{
    if (opts->query == NULL) {
        g_printerr("npullm-client: rerank needs --query\n");
        return NPC_EXIT_USAGE;
    }
    if (!g_utf8_validate(opts->query, -1, NULL)) {
        g_printerr("npullm-client: the query is not valid UTF-8\n");
        return NPC_EXIT_USAGE;
    }
    int code = NPC_EXIT_OK;
    g_autoptr(GPtrArray) docs = input_texts("rerank", argc, argv, &code);
    if (docs == NULL)
        return code;
    g_autoptr(GError) error = NULL;
    g_autoptr(NpullmOptions) options = npc_options_to_npullm(opts);
    GAsyncResult *res = NULL;
    npullm_client_rerank_async(lib, opts->query, (const char *const *)docs->pdata, options, NULL, store_result, &res);
    g_autoptr(GVariant) info = NULL;
    g_autoptr(GVariant) results = npullm_client_rerank_finish(lib, wait_result(&res), &info, &error);
    g_object_unref(res);
    if (results == NULL) {
        npc_output_error(out, error);
        return npc_exit_code_for_error(error);
    }
    if (out->json)
        print_ranked_json(results, info);
    else
        print_ranked(results, docs);
    print_stats(out, info, "documents", docs->len - 1);
    return NPC_EXIT_OK;
}
