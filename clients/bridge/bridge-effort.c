/* Reasoning effort: the APIs' levels mapped onto npullm's options think
 * and reasoning_effort (docs/bridge.md). */
#include "bridge-effort.h"

#include "bridge-http.h"

#include <string.h>

#include "npullm-protocol.h"

/* the levels the service accepts */
#define LEVELS (npp_options[NPP_OPT_REASONING_EFFORT].choices)

gboolean bridge_option_ollama_think(NpullmOptions *options, JsonNode *think, GError **error)
{
    if (think == NULL || JSON_NODE_HOLDS_NULL(think))
        return TRUE;
    GType type = json_node_get_value_type(think);
    if (type == G_TYPE_BOOLEAN) {
        g_object_set(options, "think", json_node_get_boolean(think), NULL);
        return TRUE;
    }
    if (type != G_TYPE_STRING || !g_strv_contains(LEVELS, json_node_get_string(think))) {
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                            "\"think\" must be true, false, \"low\", \"medium\" or \"high\"");
        return FALSE;
    }
    g_object_set(options, "think", TRUE, "reasoning-effort", json_node_get_string(think), NULL);
    return TRUE;
}

gboolean bridge_option_openai_effort(NpullmOptions *options, JsonObject *body, GError **error)
{
    const char *level = NULL;
    if (!bridge_json_string(body, "reasoning_effort", &level, error))
        return FALSE;
    if (level == NULL)
        return TRUE;
    if (g_strv_contains(LEVELS, level)) {
        g_object_set(options, "reasoning-effort", level, NULL);
    } else if (strcmp(level, "minimal") == 0) {
        g_object_set(options, "reasoning-effort", "low", NULL);
    } else if (strcmp(level, "none") == 0) {
        g_object_set(options, "think", FALSE, "reasoning-effort", "low", NULL);
    } else {
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                            "\"reasoning_effort\" must be \"none\", \"minimal\", \"low\", \"medium\" or \"high\"");
        return FALSE;
    }
    return TRUE;
}
