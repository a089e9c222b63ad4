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

int npc_run_embed(NpullmClient *lib, const NpcOptions *opts, NpcOutput *out, int argc, char **argv)
{
    g_autoptr(GError) error = NULL;
    if (argc == 0 && isatty(STDIN_FILENO)) {
        g_printerr("npullm-client: embed needs texts (or '-' to read one per line from stdin)\n");
        return NPC_EXIT_USAGE;
    }
    g_autoptr(GPtrArray) texts = read_texts(argc, argv, &error);
    if (texts == NULL) {
        g_printerr("npullm-client: reading stdin: %s\n", error->message);
        return NPC_EXIT_ERROR;
    }
    for (guint i = 0; i + 1 < texts->len; i++)
        if (!g_utf8_validate(texts->pdata[i], -1, NULL)) {
            g_printerr("npullm-client: text %u is not valid UTF-8\n", i + 1);
            return NPC_EXIT_USAGE;
        }
    g_autoptr(NpullmOptions) options = npc_options_to_npullm(opts);
    GAsyncResult *res = NULL;
    npullm_client_embed_async(lib, (const char *const *)texts->pdata, options, NULL, store_result, &res);
    while (res == NULL)
        g_main_context_iteration(NULL, TRUE);
    g_autoptr(GVariant) info = NULL;
    g_autoptr(GVariant) vectors = npullm_client_embed_finish(lib, res, &info, &error);
    g_object_unref(res);
    if (vectors == NULL) {
        npc_output_error(out, error);
        return npc_exit_code_for_error(error);
    }
    if (out->json)
        print_json(vectors, info);
    else
        print_rows(vectors);
    guint32 tokens = 0;
    double ms = 0;
    g_variant_lookup(info, "prompt_tokens", "u", &tokens);
    g_variant_lookup(info, "total_time_ms", "d", &ms);
    if (out->stats && !out->json)
        g_printerr("%u texts, %u tokens, %.1f ms\n", (guint)g_variant_n_children(vectors), tokens, ms);
    return NPC_EXIT_OK;
}
