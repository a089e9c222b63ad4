#include "request-path.h"

gchar *npd_request_node_for_token(const char *sender, const char *handle_token)
{
    GString *node = g_string_new("c");
    for (const char *p = sender; *p != '\0'; p++) {
        if (g_ascii_isalnum(*p))
            g_string_append_c(node, *p);
        else if (*p == '.')
            g_string_append_c(node, '_');
    }
    g_string_append_c(node, '_');
    g_string_append(node, handle_token);
    return g_string_free(node, FALSE);
}

gchar *npd_request_path_for_token(const char *sender, const char *handle_token)
{
    g_autofree gchar *node = npd_request_node_for_token(sender, handle_token);
    return g_strconcat(NPD_REQUEST_ROOT "/", node, NULL);
}
