/* libnpullm-1 against a real dbus-daemon and npullmd (started by
 * test_libnpullm.py, which runs one case per process):
 *   objects, stream, cancel, dispose, errors, image-pipe IMAGE, image-file IMAGE,
 *   concurrent, forged, restart (waits for a line on stdin between its two
 *   requests while the harness restarts the daemon).
 * The bus is the one in DBUS_SYSTEM_BUS_ADDRESS. Exit status 0: passed. */
#include <math.h>
#include <npullm.h>

#include <gio/gunixinputstream.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "npl_test.h"

/* Every check ends the program when it fails (ENSURE): what a client sees
 * after a failed step depends on a daemon in an unknown state. */

static NpullmClient *client;

/* ---- waiting for results ----------------------------------------------- */

static void store_result(GObject *source, GAsyncResult *res, gpointer data)
{
    *(GAsyncResult **)data = g_object_ref(res);
}

static GAsyncResult *wait_result(GAsyncResult **slot)
{
    while (*slot == NULL)
        g_main_context_iteration(NULL, TRUE);
    return *slot;
}

typedef struct {
    NpullmRequest *request;
    GString *tokens;
    gchar *reason;
    GVariant *stats;
    GCancellable *cancel_on_token; /* cancelled at the first token */
    gboolean drop_on_token;        /* unref the request at the first token */
} Stream;

static void on_token(NpullmRequest *r, const char *text, Stream *s)
{
    g_string_append(s->tokens, text);
    if (s->cancel_on_token != NULL)
        g_cancellable_cancel(s->cancel_on_token);
}

static void on_finished(NpullmRequest *r, const char *reason, GVariant *stats, Stream *s)
{
    s->reason = g_strdup(reason);
    s->stats = g_variant_ref(stats);
}

static Stream *stream_new(NpullmRequest *request)
{
    Stream *s = g_new0(Stream, 1);
    s->request = request;
    s->tokens = g_string_new(NULL);
    g_signal_connect(request, "token", G_CALLBACK(on_token), s);
    g_signal_connect(request, "finished", G_CALLBACK(on_finished), s);
    return s;
}

static void stream_wait(Stream *s)
{
    while (s->reason == NULL)
        g_main_context_iteration(NULL, TRUE);
}

static void stream_free(Stream *s)
{
    if (s->request != NULL) {
        g_signal_handlers_disconnect_by_data(s->request, s);
        g_object_unref(s->request);
    }
    g_string_free(s->tokens, TRUE);
    g_free(s->reason);
    if (s->stats != NULL)
        g_variant_unref(s->stats);
    g_free(s);
}

static NpullmOptions *greedy(guint max_tokens)
{
    NpullmOptions *o = npullm_options_new();
    g_object_set(o, "temperature", 0.0, "max-tokens", max_tokens, NULL);
    return o;
}

static NpullmRequest *generate(const char *prompt, NpullmOptions *opts, GCancellable *cancellable, GError **error)
{
    GAsyncResult *res = NULL;
    npullm_client_generate_async(client, prompt, opts, cancellable, store_result, &res);
    NpullmRequest *r = npullm_client_generate_finish(client, wait_result(&res), error);
    g_object_unref(res);
    return r;
}

static Stream *run(const char *prompt, NpullmOptions *opts)
{
    g_autoptr(GError) error = NULL;
    NpullmRequest *r = generate(prompt, opts, NULL, &error);
    if (r == NULL)
        fprintf(stderr, "generate: %s\n", error->message);
    ENSURE(r != NULL);
    Stream *s = stream_new(r);
    stream_wait(s);
    return s;
}

static void wait_idle(void)
{
    /* the Manager's properties follow PropertiesChanged */
    while (npullm_client_get_active_requests(client) != 0 || npullm_client_get_queued_requests(client) != 0)
        g_main_context_iteration(NULL, TRUE);
}

/* ---- cases ------------------------------------------------------------- */

static void case_stream(void)
{
    ENSURE(g_strcmp0(npullm_client_get_default_model(client), "tiny") == 0);
    ENSURE(g_strcmp0(npullm_client_get_device(client), "cpu") == 0);
    ENSURE(npullm_client_get_version(client)[0] != '\0');
    g_autoptr(NpullmOptions) opts = greedy(8);
    Stream *s = run("Hello there", opts);
    ENSURE(strcmp(s->reason, "length") == 0);
    ENSURE(strcmp(s->tokens->str, npullm_request_get_text(s->request)) == 0);
    ENSURE(s->tokens->len > 0);
    guint32 generated = 0;
    ENSURE(g_variant_lookup(s->stats, "generated_tokens", "u", &generated) && generated == 8);
    ENSURE(npullm_request_get_state(s->request) == NPULLM_REQUEST_STATE_FINISHED);
    ENSURE(npullm_request_propagate_error(s->request, NULL));

    /* complete_async gives the same (greedy) text */
    GAsyncResult *res = NULL;
    npullm_client_complete_async(client, "Hello there", opts, NULL, store_result, &res);
    g_autofree char *text = npullm_client_complete_finish(client, wait_result(&res), NULL);
    g_object_unref(res);
    ENSURE(g_strcmp0(text, s->tokens->str) == 0);

    /* chat appends the streamed reply to the conversation */
    g_autoptr(NpullmConversation) conv = npullm_conversation_new();
    npullm_conversation_add_message(conv, "user", "Hello there");
    res = NULL;
    npullm_client_chat_async(client, conv, opts, NULL, store_result, &res);
    NpullmRequest *chat = npullm_client_chat_finish(client, wait_result(&res), NULL);
    g_object_unref(res);
    ENSURE(chat != NULL);
    Stream *cs = stream_new(chat);
    stream_wait(cs);
    ENSURE(npullm_conversation_get_n_messages(conv) == 2);
    ENSURE(strcmp(npullm_conversation_get_role(conv, 1), "assistant") == 0);
    ENSURE(strcmp(npullm_conversation_get_content(conv, 1), cs->tokens->str) == 0);
    /* Generate of one user turn and Chat of the same turn are the same prompt */
    ENSURE(strcmp(cs->tokens->str, s->tokens->str) == 0);
    stream_free(cs);
    stream_free(s);

    /* models */
    res = NULL;
    npullm_client_list_models_async(client, NULL, store_result, &res);
    g_autoptr(GVariant) models = npullm_client_list_models_finish(client, wait_result(&res), NULL);
    g_object_unref(res);
    ENSURE(models != NULL && g_variant_n_children(models) >= 2);

    /* applications: this program while its request runs (long enough to
     * outlast the call, then cancelled), nothing once idle */
    g_autoptr(NpullmOptions) long_opts = greedy(2000);
    NpullmRequest *busy = generate("Hello there", long_opts, NULL, NULL);
    ENSURE(busy != NULL);
    res = NULL;
    npullm_client_list_applications_async(client, NULL, store_result, &res);
    g_autoptr(GVariant) apps = npullm_client_list_applications_finish(client, wait_result(&res), NULL);
    g_object_unref(res);
    ENSURE(apps != NULL && g_variant_n_children(apps) == 1);
    g_autoptr(GVariant) app = g_variant_get_child_value(apps, 0);
    const char *app_id = NULL;
    guint32 running = 0, queued = 0;
    ENSURE(g_variant_lookup(app, "app_id", "&s", &app_id) && g_str_has_prefix(app_id, "test-libnpullm"));
    ENSURE(g_variant_lookup(app, "running", "u", &running) && g_variant_lookup(app, "queued", "u", &queued));
    ENSURE(running + queued == 1);
    Stream *bs = stream_new(busy);
    npullm_request_cancel(busy);
    stream_wait(bs);
    stream_free(bs);
    wait_idle();
    res = NULL;
    npullm_client_list_applications_async(client, NULL, store_result, &res);
    g_autoptr(GVariant) none = npullm_client_list_applications_finish(client, wait_result(&res), NULL);
    g_object_unref(res);
    ENSURE(none != NULL && g_variant_n_children(none) == 0);

    /* manage: load, unload, IdleTimeout (the polkit mock allows them) */
    g_autoptr(GError) error = NULL;
    res = NULL;
    npullm_client_load_model_async(client, "tiny2", NULL, store_result, &res);
    ENSURE(npullm_client_load_model_finish(client, wait_result(&res), &error));
    g_clear_object(&res);
    while (npullm_client_get_loaded_models(client) == NULL ||
           !g_strv_contains(npullm_client_get_loaded_models(client), "tiny2"))
        g_main_context_iteration(NULL, TRUE);
    npullm_client_unload_model_async(client, "tiny2", NULL, store_result, &res);
    ENSURE(npullm_client_unload_model_finish(client, wait_result(&res), &error));
    g_clear_object(&res);
    while (g_strv_contains(npullm_client_get_loaded_models(client), "tiny2"))
        g_main_context_iteration(NULL, TRUE);
    /* the caller's own KV caches (ForgetCache) */
    npullm_client_forget_cache_async(client, NULL, store_result, &res);
    ENSURE(npullm_client_forget_cache_finish(client, wait_result(&res), &error));
    g_clear_object(&res);
    npullm_client_load_model_async(client, "nonexistent", NULL, store_result, &res);
    ENSURE(!npullm_client_load_model_finish(client, wait_result(&res), &error));
    ENSURE(g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_NO_SUCH_MODEL));
    g_clear_error(&error);
    g_clear_object(&res);
    guint before = npullm_client_get_idle_timeout(client);
    npullm_client_set_idle_timeout_async(client, before + 1, NULL, store_result, &res);
    ENSURE(npullm_client_set_idle_timeout_finish(client, wait_result(&res), &error));
    g_clear_object(&res);
    while (npullm_client_get_idle_timeout(client) != before + 1) /* PropertiesChanged */
        g_main_context_iteration(NULL, TRUE);
    npullm_client_set_idle_timeout_async(client, before, NULL, store_result, &res);
    ENSURE(npullm_client_set_idle_timeout_finish(client, wait_result(&res), &error));
    g_clear_object(&res);
}

static void case_cancel(void)
{
    /* through a GCancellable, once running */
    g_autoptr(GCancellable) cancellable = g_cancellable_new();
    g_autoptr(NpullmOptions) opts = greedy(200);
    g_autoptr(GError) error = NULL;
    NpullmRequest *r = generate("Tell a long story", opts, cancellable, &error);
    ENSURE(r != NULL);
    Stream *s = stream_new(r);
    s->cancel_on_token = cancellable;
    stream_wait(s);
    ENSURE(strcmp(s->reason, "cancelled") == 0);
    ENSURE(!npullm_request_propagate_error(r, &error));
    ENSURE(g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_CANCELLED));
    g_clear_error(&error);
    stream_free(s);

    /* with npullm_request_cancel() */
    r = generate("Tell a long story", opts, NULL, &error);
    ENSURE(r != NULL);
    s = stream_new(r);
    npullm_request_cancel(r);
    stream_wait(s);
    ENSURE(strcmp(s->reason, "cancelled") == 0);
    stream_free(s);

    /* cancelled before the call: an error from finish, nothing left running */
    g_autoptr(GCancellable) early = g_cancellable_new();
    g_cancellable_cancel(early);
    r = generate("Tell a long story", opts, early, &error);
    ENSURE(r == NULL && g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED));
    wait_idle();
}

static void on_first_token(NpullmRequest *r, const char *text, gboolean *seen)
{
    *seen = TRUE;
}

static gboolean too_long(gpointer what)
{
    fprintf(stderr, "%s: no finished signal within 60 s\n", (const char *)what);
    exit(1);
}

static void case_dispose(void)
{
    guint deadline = g_timeout_add_seconds(60, too_long, "a dropped request");
    /* dropped right after the call: it runs to its end all the same, its
     * signals still come (the client holds it, as a GTask holds itself) */
    g_autoptr(NpullmOptions) opts = greedy(12);
    NpullmRequest *r = generate("Tell a long story", opts, NULL, NULL);
    ENSURE(r != NULL);
    Stream *s = stream_new(r);
    s->request = NULL;
    GWeakRef weak;
    g_weak_ref_init(&weak, r);
    g_object_unref(r);
    stream_wait(s);
    ENSURE(strcmp(s->reason, "length") == 0);
    ENSURE(s->tokens->len > 0);
    guint32 generated = 0;
    ENSURE(g_variant_lookup(s->stats, "generated_tokens", "u", &generated) && generated == 12);
    /* and once it has finished, nothing holds it any more */
    NpullmRequest *left = g_weak_ref_get(&weak);
    ENSURE(left == NULL);
    g_weak_ref_clear(&weak);
    stream_free(s);

    /* its client going away cancels it: finished says so at once, and
     * the service stops it rather than generating 200 tokens for nobody */
    g_autoptr(GError) error = NULL;
    NpullmClient *second = npullm_client_new_sync(npullm_client_get_connection(client), NULL, &error);
    ENSURE(second != NULL);
    g_autoptr(NpullmOptions) many = greedy(200);
    GAsyncResult *res = NULL;
    npullm_client_generate_async(second, "Tell a long story", many, NULL, store_result, &res);
    r = npullm_client_generate_finish(second, wait_result(&res), &error);
    g_object_unref(res);
    ENSURE(r != NULL);
    s = stream_new(r);
    gboolean seen = FALSE;
    g_signal_connect(r, "token", G_CALLBACK(on_first_token), &seen);
    while (!seen)
        g_main_context_iteration(NULL, TRUE);
    g_object_unref(second);
    ENSURE(g_strcmp0(s->reason, "cancelled") == 0);
    ENSURE(!npullm_request_propagate_error(r, &error));
    ENSURE(g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_CANCELLED));
    stream_free(s);
    wait_idle();
    g_autoptr(NpullmOptions) small = greedy(2);
    s = run("Hi", small);
    ENSURE(strcmp(s->reason, "length") == 0);
    stream_free(s);
    g_source_remove(deadline);
}

static void case_errors(void)
{
    /* every org.npullm.Error name maps to its NpullmError code and back */
    GEnumClass *codes = g_type_class_ref(NPULLM_TYPE_ERROR);
    ENSURE(codes->n_values == 10);
    for (guint i = 0; i < codes->n_values; i++) {
        const char *name = npullm_error_to_dbus_name(codes->values[i].value);
        ENSURE(g_str_has_prefix(name, "org.npullm.Error."));
        g_autoptr(GError) e = g_dbus_error_new_for_dbus_error(name, "message");
        ENSURE(e->domain == NPULLM_ERROR && e->code == codes->values[i].value);
        g_autofree gchar *back = g_dbus_error_encode_gerror(e);
        ENSURE(strcmp(back, name) == 0);
    }
    g_type_class_unref(codes);

    /* errors returned by the real service */
    g_autoptr(GError) error = NULL;
    g_autoptr(NpullmOptions) opts = npullm_options_new();
    g_object_set(opts, "model", "nonexistent", NULL);
    ENSURE(generate("hi", opts, NULL, &error) == NULL);
    ENSURE(g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_NO_SUCH_MODEL));
    ENSURE(!g_dbus_error_is_remote_error(error)); /* stripped */
    g_clear_error(&error);
    /* not a GGUF file: listed, but the engine cannot run it */
    g_object_set(opts, "model", "broken", NULL);
    ENSURE(generate("hi", opts, NULL, &error) == NULL);
    ENSURE(g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_NOT_SUPPORTED));
    g_clear_error(&error);
    g_autoptr(NpullmOptions) bad = npullm_options_new();
    g_object_set(bad, "priority", "urgent", NULL);
    ENSURE(generate("hi", bad, NULL, &error) == NULL);
    ENSURE(g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT));
    ENSURE(strstr(error->message, "priority") != NULL);
    g_clear_error(&error);

    /* text that is not UTF-8 (a lone surrogate as a JSON parser decodes
     * "\ud800") cannot go on the bus: an error, never a critical */
    const char *surrogate = "a\xed\xa0\x80" "b";
    ENSURE(generate(surrogate, NULL, NULL, &error) == NULL);
    ENSURE(g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT));
    ENSURE(strstr(error->message, "prompt is not valid UTF-8") != NULL);
    g_clear_error(&error);
    g_autoptr(NpullmOptions) not_utf8 = npullm_options_new();
    g_object_set(not_utf8, "system", surrogate, NULL);
    ENSURE(generate("hi", not_utf8, NULL, &error) == NULL);
    ENSURE(g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT));
    ENSURE(strstr(error->message, "system is not valid UTF-8") != NULL);
    g_clear_error(&error);
    const char *stop[] = {"ok", surrogate, NULL};
    g_object_set(not_utf8, "system", "fine", "stop", stop, NULL);
    ENSURE(generate("hi", not_utf8, NULL, &error) == NULL);
    ENSURE(strstr(error->message, "stop is not valid UTF-8") != NULL);
    g_clear_error(&error);
    g_autoptr(NpullmConversation) conv = npullm_conversation_new();
    npullm_conversation_add_message(conv, "user", surrogate);
    GAsyncResult *chat_res = NULL;
    npullm_client_chat_async(client, conv, NULL, NULL, store_result, &chat_res);
    ENSURE(npullm_client_chat_finish(client, wait_result(&chat_res), &error) == NULL);
    g_object_unref(chat_res);
    ENSURE(g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT));
    g_clear_error(&error);
    GAsyncResult *load_res = NULL;
    npullm_client_load_model_async(client, surrogate, NULL, store_result, &load_res);
    ENSURE(!npullm_client_load_model_finish(client, wait_result(&load_res), &error));
    g_object_unref(load_res);
    ENSURE(g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT));
    g_clear_error(&error);

    /* NotSupported: an image for a text-only model */
    g_autoptr(NpullmOptions) text_only = npullm_options_new();
    g_object_set(text_only, "model", "tiny2", NULL);
    GAsyncResult *res = NULL;
    g_autoptr(GInputStream) png = g_memory_input_stream_new_from_data("\x89PNG\r\n\x1a\n", 8, NULL);
    npullm_client_describe_image_stream_async(client, png, NULL, text_only, NULL, store_result, &res);
    ENSURE(npullm_client_describe_image_stream_finish(client, wait_result(&res), &error) == NULL);
    g_object_unref(res);
    ENSURE(g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_NOT_SUPPORTED));
}

static NpullmOptions *vision_options(void)
{
    NpullmOptions *o = greedy(4);
    g_object_set(o, "model", "vision", NULL);
    return o;
}

static void check_image_stream(NpullmRequest *r)
{
    ENSURE(r != NULL);
    Stream *s = stream_new(r);
    stream_wait(s);
    if (strcmp(s->reason, "length") != 0 && strcmp(s->reason, "stop") != 0) {
        g_autofree gchar *stats = g_variant_print(s->stats, FALSE);
        fprintf(stderr, "image request: %s %s\n", s->reason, stats);
    }
    ENSURE(strcmp(s->reason, "length") == 0 || strcmp(s->reason, "stop") == 0);
    stream_free(s);
}

static gpointer write_all_thread(gpointer data)
{
    GBytes *bytes = data;
    int fd = GPOINTER_TO_INT(g_object_get_data(G_OBJECT(client), "test-pipe-fd"));
    gsize n = 0;
    const char *p = g_bytes_get_data(bytes, &n);
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            break;
        p += w;
        n -= (gsize)w;
    }
    close(fd);
    return NULL;
}

static void case_image_pipe(void)
{
    ENSURE(nt_arg(0) != NULL);
    g_autoptr(GBytes) bytes = NULL;
    g_autoptr(GFile) file = g_file_new_for_path(nt_arg(0));
    bytes = g_file_load_bytes(file, NULL, NULL, NULL);
    ENSURE(bytes != NULL);
    g_autoptr(NpullmOptions) opts = vision_options();

    /* a pipe's read end, written by another thread */
    int fds[2];
    ENSURE(g_unix_open_pipe(fds, FD_CLOEXEC, NULL));
    g_object_set_data(G_OBJECT(client), "test-pipe-fd", GINT_TO_POINTER(fds[1]));
    GThread *writer = g_thread_new("writer", write_all_thread, bytes);
    GAsyncResult *res = NULL;
    npullm_client_describe_image_fd_async(client, fds[0], "What is this?", opts, NULL, store_result, &res);
    close(fds[0]); /* the library keeps its own copy */
    NpullmRequest *r = npullm_client_describe_image_fd_finish(client, wait_result(&res), NULL);
    g_object_unref(res);
    g_thread_join(writer);
    check_image_stream(r);

    /* a stream that is no descriptor: the library pipes it */
    g_autoptr(GInputStream) mem = g_memory_input_stream_new_from_bytes(bytes);
    res = NULL;
    npullm_client_describe_image_stream_async(client, mem, NULL, opts, NULL, store_result, &res);
    r = npullm_client_describe_image_stream_finish(client, wait_result(&res), NULL);
    g_object_unref(res);
    check_image_stream(r);
}

static void case_image_file(void)
{
    ENSURE(nt_arg(0) != NULL);
    g_autoptr(GFile) file = g_file_new_for_path(nt_arg(0));
    g_autoptr(NpullmOptions) opts = vision_options();
    GAsyncResult *res = NULL;
    npullm_client_describe_image_async(client, file, "What is this?", opts, NULL, store_result, &res);
    g_autoptr(GError) error = NULL;
    NpullmRequest *r = npullm_client_describe_image_finish(client, wait_result(&res), &error);
    g_object_unref(res);
    check_image_stream(r);
    /* a file that is not there fails here, not in the service */
    g_autoptr(GFile) missing = g_file_new_for_path("/nonexistent/image.png");
    res = NULL;
    npullm_client_describe_image_async(client, missing, NULL, opts, NULL, store_result, &res);
    ENSURE(npullm_client_describe_image_finish(client, wait_result(&res), &error) == NULL);
    g_object_unref(res);
    ENSURE(g_error_matches(error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND));
}

#define N_CONCURRENT 8 /* MaxPerClient of the test daemon */

static void case_concurrent(void)
{
    g_autoptr(NpullmOptions) opts = greedy(6);
    /* each prompt alone first */
    gchar *expected[N_CONCURRENT];
    for (int i = 0; i < N_CONCURRENT; i++) {
        g_autofree gchar *prompt = g_strdup_printf("Count to %d", i);
        Stream *s = run(prompt, opts);
        expected[i] = g_strdup(s->tokens->str);
        stream_free(s);
    }
    /* then all at once from the same client */
    GAsyncResult *res[N_CONCURRENT] = {0};
    for (int i = 0; i < N_CONCURRENT; i++) {
        g_autofree gchar *prompt = g_strdup_printf("Count to %d", i);
        npullm_client_generate_async(client, prompt, opts, NULL, store_result, &res[i]);
    }
    Stream *streams[N_CONCURRENT];
    for (int i = 0; i < N_CONCURRENT; i++) {
        g_autoptr(GError) error = NULL;
        NpullmRequest *r = npullm_client_generate_finish(client, wait_result(&res[i]), &error);
        if (r == NULL)
            fprintf(stderr, "request %d: %s\n", i, error->message);
        ENSURE(r != NULL);
        g_object_unref(res[i]);
        streams[i] = stream_new(r);
    }
    for (int i = 0; i < N_CONCURRENT; i++) {
        stream_wait(streams[i]);
        ENSURE(strcmp(streams[i]->reason, "length") == 0);
        /* no token lost, none from another request */
        ENSURE(strcmp(streams[i]->tokens->str, expected[i]) == 0);
        ENSURE(strcmp(npullm_request_get_text(streams[i]->request), expected[i]) == 0);
        stream_free(streams[i]);
        g_free(expected[i]);
    }
}

static void count_raw(GDBusConnection *bus, const char *sender, const char *path, const char *iface,
                      const char *member, GVariant *params, gpointer data)
{
    const char *text = NULL;
    if (g_strcmp0(member, "Token") != 0 || !g_variant_is_of_type(params, G_VARIANT_TYPE("(s)")))
        return;
    g_variant_get(params, "(&s)", &text);
    if (strcmp(text, "FORGED") == 0)
        (*(int *)data)++;
}

static void case_forged(void)
{
    g_autoptr(NpullmOptions) opts = greedy(40);
    NpullmRequest *r = generate("Tell a story", opts, NULL, NULL);
    ENSURE(r != NULL);
    Stream *s = stream_new(r);
    GDBusConnection *bus = npullm_client_get_connection(client);
    const char *path = npullm_request_get_object_path(r);
    /* proof that the forgeries reach this connection at all */
    int delivered = 0;
    guint raw = g_dbus_connection_signal_subscribe(bus, NULL, "org.npullm.Request", "Token", path, NULL,
                                                   G_DBUS_SIGNAL_FLAGS_NONE, count_raw, &delivered, NULL);
    g_autoptr(GDBusConnection) forger = g_dbus_connection_new_for_address_sync(
        g_getenv("DBUS_SYSTEM_BUS_ADDRESS"),
        G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION, NULL, NULL,
        NULL);
    ENSURE(forger != NULL);
    const char *me = g_dbus_connection_get_unique_name(bus);
    ENSURE(g_dbus_connection_emit_signal(forger, me, path, "org.npullm.Request", "Token",
                                        g_variant_new("(s)", "FORGED"), NULL));
    GVariantBuilder stats;
    g_variant_builder_init(&stats, G_VARIANT_TYPE_VARDICT);
    ENSURE(g_dbus_connection_emit_signal(forger, me, path, "org.npullm.Request", "Finished",
                                        g_variant_new("(sa{sv})", "stop", &stats), NULL));
    ENSURE(g_dbus_connection_flush_sync(forger, NULL, NULL));
    stream_wait(s);
    while (delivered == 0)
        g_main_context_iteration(NULL, TRUE);
    g_dbus_connection_signal_unsubscribe(bus, raw);
    ENSURE(strcmp(s->reason, "length") == 0); /* the real end, not the forged one */
    ENSURE(strstr(s->tokens->str, "FORGED") == NULL);
    ENSURE(strstr(npullm_request_get_text(r), "FORGED") == NULL);
    stream_free(s);
}

static void on_owner_props(GObject *obj, GParamSpec *pspec, int *count)
{
    (*count)++;
}

static void case_restart(void)
{
    g_autoptr(NpullmOptions) opts = greedy(4);
    Stream *s = run("Hello", opts);
    ENSURE(strcmp(s->reason, "length") == 0);
    g_autofree gchar *first = g_strdup(s->tokens->str);
    stream_free(s);

    /* a request running when the daemon dies */
    g_autoptr(NpullmOptions) long_opts = greedy(3000);
    NpullmRequest *r = generate("Tell a long story", long_opts, NULL, NULL);
    ENSURE(r != NULL);
    Stream *running = stream_new(r);
    while (running->tokens->len == 0)
        g_main_context_iteration(NULL, TRUE);

    int notified = 0;
    g_signal_connect(client, "notify::idle-timeout", G_CALLBACK(on_owner_props), &notified);
    printf("RESTART\n");
    fflush(stdout);
    char line[64];
    ENSURE(fgets(line, sizeof line, stdin) != NULL);
    /* the harness killed npullmd and started another (new unique name,
     * IdleTimeout 77): the running request ends with an error */
    stream_wait(running);
    ENSURE(strcmp(running->reason, "error") == 0);
    g_autoptr(GError) error = NULL;
    ENSURE(!npullm_request_propagate_error(r, &error));
    ENSURE(g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_INTERNAL));
    stream_free(running);
    /* and the next request goes to the new daemon */
    s = run("Hello", opts);
    ENSURE(strcmp(s->reason, "length") == 0);
    ENSURE(strcmp(s->tokens->str, first) == 0);
    stream_free(s);
    /* and the properties follow the new daemon */
    while (npullm_client_get_idle_timeout(client) != 77)
        g_main_context_iteration(NULL, TRUE);
    ENSURE(notified >= 1);
}

static void count_changed(NpullmConversation *conv, guint index, guint *count)
{
    (*count)++;
}

/* The value objects, without the service. */
static void case_objects(void)
{
    g_autoptr(NpullmOptions) o = npullm_options_new();
    ENSURE(!npullm_options_is_set(o, "temperature"));
    g_object_set(o, "temperature", 0.5, "top-k", 7u, "stop", (const char *const[]){"x", NULL}, NULL);
    ENSURE(npullm_options_is_set(o, "temperature") && npullm_options_is_set(o, "top_k"));
    double t = 0;
    g_auto(GStrv) stop = NULL;
    g_object_get(o, "temperature", &t, "stop", &stop, NULL);
    ENSURE(t == 0.5 && stop != NULL && g_strv_length(stop) == 1 && strcmp(stop[0], "x") == 0);
    npullm_options_unset(o, "temperature");
    ENSURE(!npullm_options_is_set(o, "temperature"));
    g_object_set(o, "stop", NULL, NULL); /* NULL unsets too */
    ENSURE(!npullm_options_is_set(o, "stop"));
    /* handle_token is the library's, not an option for callers */
    ENSURE(g_object_class_find_property(G_OBJECT_GET_CLASS(o), "handle-token") == NULL);

    g_autoptr(NpullmConversation) conv = npullm_conversation_new();
    guint changed = 0;
    g_signal_connect(conv, "changed", G_CALLBACK(count_changed), &changed);
    npullm_conversation_add_message(conv, "system", "Be brief.");
    npullm_conversation_add_message(conv, "user", "Hi");
    ENSURE(changed == 2 && npullm_conversation_get_n_messages(conv) == 2);
    ENSURE(strcmp(npullm_conversation_get_role(conv, 0), "system") == 0);
    ENSURE(npullm_conversation_get_content(conv, 2) == NULL);
    /* images go with the last message, a user message, 8 at most */
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    g_autoptr(GError) error = NULL;
    ENSURE(npullm_conversation_add_image_fd(conv, fd, &error) && changed == 3);
    ENSURE(npullm_conversation_get_n_images(conv, 1) == 1 && npullm_conversation_get_n_images(conv, 0) == 0);
    for (int i = 1; i < 8; i++)
        ENSURE(npullm_conversation_add_image_fd(conv, fd, NULL));
    ENSURE(!npullm_conversation_add_image_fd(conv, fd, &error));
    ENSURE(g_error_matches(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT));
    g_clear_error(&error);
    npullm_conversation_add_message(conv, "assistant", "Hello");
    ENSURE(!npullm_conversation_add_image_fd(conv, fd, &error));
    ENSURE(g_error_matches(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT));
    g_clear_error(&error);
    close(fd);
    npullm_conversation_clear(conv);
    ENSURE(npullm_conversation_get_n_messages(conv) == 0);
}

static void on_thinking(NpullmRequest *r, const char *text, GString *thinking)
{
    g_string_append(thinking, text);
}

/* The model "qwen" (tests/service/think-template.jinja) thinks unless told
 * not to: its thinking arrives on ::thinking, never in ::token or :text. */
static void case_thinking(void)
{
    for (int think = 0; think < 2; think++) {
        g_autoptr(NpullmOptions) opts = greedy(8);
        g_object_set(opts, "model", "qwen", "think", (gboolean)think, NULL);
        g_autoptr(GError) error = NULL;
        NpullmRequest *r = generate("What is 2 + 2?", opts, NULL, &error);
        ENSURE(r != NULL);
        GString *thinking = g_string_new(NULL);
        g_signal_connect(r, "thinking", G_CALLBACK(on_thinking), thinking);
        Stream *s = stream_new(r);
        stream_wait(s);
        ENSURE(g_strcmp0(s->reason, "length") == 0);
        ENSURE(think ? thinking->len > 0 && s->tokens->len == 0 : thinking->len == 0 && s->tokens->len > 0);
        ENSURE(g_strcmp0(npullm_request_get_text(r), s->tokens->str) == 0);
        g_signal_handlers_disconnect_by_data(r, thinking);
        g_string_free(thinking, TRUE);
        stream_free(s);
    }
}

/* reasoning-effort reaches the template of "qwen", which names the level
 * once (low), twice (medium) or three times (high): the prompt grows with
 * each level. NULL is unset; another level is the service's named error. */
static void case_reasoning_effort(void)
{
    const char *levels[] = {NULL, "low", "medium", "high"};
    guint32 last = 0;
    for (gsize i = 0; i < G_N_ELEMENTS(levels); i++) {
        g_autoptr(NpullmOptions) opts = greedy(1);
        g_object_set(opts, "model", "qwen", "reasoning-effort", levels[i], NULL);
        ENSURE(npullm_options_is_set(opts, "reasoning-effort") == (levels[i] != NULL));
        g_autofree gchar *back = NULL;
        g_object_get(opts, "reasoning-effort", &back, NULL);
        ENSURE(g_strcmp0(back, levels[i]) == 0);
        Stream *s = run("What is 2 + 2?", opts);
        guint32 prompt = 0;
        ENSURE(g_variant_lookup(s->stats, "prompt_tokens", "u", &prompt) && prompt > last);
        last = prompt;
        stream_free(s);
    }
    g_autoptr(NpullmOptions) bad = greedy(1);
    g_object_set(bad, "model", "qwen", "reasoning-effort", "extreme", NULL);
    g_autoptr(GError) error = NULL;
    ENSURE(generate("hi", bad, NULL, &error) == NULL);
    ENSURE(g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT));
    ENSURE(strstr(error->message, "reasoning_effort: expected low or medium or high") != NULL);
}

/* Embed: one unit vector per text, dimensions, the info; the errors of
 * a chat model and of text that is not UTF-8 (refused before sending). */
static GVariant *embed(const char *const *texts, NpullmOptions *o, GVariant **info, GError **error)
{
    GAsyncResult *res = NULL;
    npullm_client_embed_async(client, texts, o, NULL, store_result, &res);
    GVariant *v = npullm_client_embed_finish(client, wait_result(&res), info, error);
    g_object_unref(res);
    return v;
}

static void case_embed(void)
{
    const char *texts[] = {"first text", "second text", NULL};
    g_autoptr(NpullmOptions) o = npullm_options_new();
    g_object_set(o, "model", "minilm", "priority", "background", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) info = NULL;
    g_autoptr(GVariant) v = embed(texts, o, &info, &error);
    ENSURE(v != NULL && g_variant_is_of_type(v, G_VARIANT_TYPE("aad")) && g_variant_n_children(v) == 2);
    g_autoptr(GVariant) row = g_variant_get_child_value(v, 1);
    gsize n = 0;
    const double *x = g_variant_get_fixed_array(row, &n, sizeof(double));
    double norm = 0;
    for (gsize k = 0; k < n; k++)
        norm += x[k] * x[k];
    guint32 dims = 0;
    ENSURE(n == 64 && fabs(norm - 1) < 1e-5 && g_variant_lookup(info, "dimensions", "u", &dims) && dims == 64);

    g_object_set(o, "dimensions", 8u, NULL);
    g_autoptr(GVariant) v8 = embed(texts, o, NULL, &error);
    g_autoptr(GVariant) row8 = g_variant_get_child_value(v8, 0);
    ENSURE(g_variant_n_children(row8) == 8);

    g_object_set(o, "model", "tiny", NULL);
    ENSURE(embed(texts, o, NULL, &error) == NULL && g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_NOT_SUPPORTED));
    g_clear_error(&error);
    const char *bad[] = {"ok", "\xff", NULL};
    ENSURE(embed(bad, NULL, NULL, &error) == NULL &&
           g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT));
}

static GVariant *rerank(const char *query, const char *const *docs, NpullmOptions *o, GVariant **info,
                       GError **error)
{
    GAsyncResult *res = NULL;
    npullm_client_rerank_async(client, query, docs, o, NULL, store_result, &res);
    GVariant *v = npullm_client_rerank_finish(client, wait_result(&res), info, error);
    g_object_unref(res);
    return v;
}

/* Every document once, best first; top-n cuts; the errors are mapped. */
static void case_rerank(void)
{
    const char *docs[] = {"a fox", "a dog", "", "the quick brown fox", NULL};
    g_autoptr(NpullmOptions) o = npullm_options_new();
    g_object_set(o, "model", "ranker", "priority", "background", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) info = NULL;
    g_autoptr(GVariant) v = rerank("fox", docs, o, &info, &error);
    ENSURE(v != NULL && g_variant_is_of_type(v, G_VARIANT_TYPE("a(ud)")) && g_variant_n_children(v) == 4);
    guint seen = 0;
    double last = INFINITY;
    for (gsize i = 0; i < 4; i++) {
        guint32 index;
        double score;
        g_variant_get_child(v, i, "(ud)", &index, &score);
        ENSURE(index < 4 && score <= last);
        seen |= 1u << index;
        last = score;
    }
    guint32 n = 0;
    ENSURE(seen == 0xf && g_variant_lookup(info, "documents", "u", &n) && n == 4);

    g_object_set(o, "top-n", 2u, NULL);
    g_autoptr(GVariant) top = rerank("fox", docs, o, NULL, &error);
    ENSURE(top != NULL && g_variant_n_children(top) == 2);
    g_autoptr(GVariant) best = g_variant_get_child_value(v, 0), top_best = g_variant_get_child_value(top, 0);
    ENSURE(g_variant_equal(best, top_best));

    g_object_set(o, "model", "minilm", NULL);
    ENSURE(rerank("fox", docs, o, NULL, &error) == NULL &&
           g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_NOT_SUPPORTED));
    g_clear_error(&error);
    ENSURE(rerank("\xff", docs, NULL, NULL, &error) == NULL &&
           g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT));
    g_clear_error(&error);
    const char *none[] = {NULL};
    ENSURE(rerank("fox", none, NULL, NULL, &error) == NULL &&
           g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT));
}

static const nt_case cases[] = {
    {"embed", case_embed},
    {"rerank", case_rerank},
    {"thinking", case_thinking},
    {"reasoning-effort", case_reasoning_effort},
    {"objects", case_objects},
    {"stream", case_stream},       {"cancel", case_cancel},         {"dispose", case_dispose},
    {"errors", case_errors},       {"image-pipe", case_image_pipe}, {"image-file", case_image_file},
    {"concurrent", case_concurrent}, {"forged", case_forged},       {"restart", case_restart},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test-libnpullm CASE [ARGS]\n");
        return 2;
    }
    alarm(240); /* bounded, whatever happens */
    g_autoptr(GError) error = NULL;
    GAsyncResult *res = NULL;
    npullm_client_new_async(NULL, NULL, store_result, &res);
    client = npullm_client_new_finish(wait_result(&res), &error);
    g_object_unref(res);
    if (client == NULL) {
        fprintf(stderr, "client: %s\n", error->message);
        return 1;
    }
    int rc = nt_main(argc, argv, cases, G_N_ELEMENTS(cases));
    g_object_unref(client);
    return rc;
}
