#include <npullm.h>

static void on_token(NpullmRequest *request, const char *text, gpointer loop)
{
    g_print("%s", text);
}

static void on_finished(NpullmRequest *request, const char *reason, GVariant *stats, gpointer loop)
{
    g_print("\n[%s]\n", reason);
    g_main_loop_quit(loop);
}

static void on_started(GObject *client, GAsyncResult *result, gpointer loop)
{
    g_autoptr(GError) error = NULL;
    /* dropped on return: a request runs until it has emitted "finished" */
    g_autoptr(NpullmRequest) request = npullm_client_generate_finish(NPULLM_CLIENT(client), result, &error);
    if (request == NULL)
        g_error("%s", error->message);
    g_signal_connect(request, "token", G_CALLBACK(on_token), loop);
    g_signal_connect(request, "finished", G_CALLBACK(on_finished), loop);
}

int main(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(NpullmClient) client = npullm_client_new_sync(NULL, NULL, &error);
    if (client == NULL)
        g_error("%s", error->message);
    g_autoptr(GMainLoop) loop = g_main_loop_new(NULL, FALSE);
    npullm_client_generate_async(client, "Write a haiku about a tiny neural processor.", NULL, NULL, on_started, loop);
    g_main_loop_run(loop);
    return 0;
}
