/* The APIs' sampling members mapped onto npullm's options. */
#include "bridge-options.h"

#include "bridge-http.h"

#include <math.h>

gboolean bridge_options_apply(JsonObject *o, const BridgeOptionMap *map, gsize n_map, NpullmOptions *options,
                              GError **error)
{
    for (gsize i = 0; i < n_map; i++) {
        const BridgeOptionMap *m = &map[i];
        if (m->kind == BRIDGE_OPTION_STOP) {
            if (!bridge_option_stop(options, json_object_get_member(o, m->key), error))
                return FALSE;
            continue;
        }
        double v = 0;
        gboolean present = FALSE;
        if (!bridge_json_number(o, m->key, &v, &present, error))
            return FALSE;
        if (!present)
            continue;
        /* 1e999 parses as infinity: refused, never dropped in silence */
        if (!isfinite(v)) {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "\"%s\" must be a finite number", m->key);
            return FALSE;
        }
        switch (m->kind) {
        case BRIDGE_OPTION_DOUBLE:
            g_object_set(options, m->property, v, NULL);
            break;
        case BRIDGE_OPTION_LIMIT:
        case BRIDGE_OPTION_SEED:
            /* Ollama's own meanings: num_predict -1 (no limit) and -2 (fill
             * the context) leave the daemon's default, seed -1 is random;
             * other negative numbers are mistakes */
            if (v == -1 || (v == -2 && m->kind == BRIDGE_OPTION_LIMIT))
                break;
            if (v < 0) {
                g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                            "\"%s\" must be a whole number from 0, or %s", m->key,
                            m->kind == BRIDGE_OPTION_LIMIT ? "-1 (no limit) or -2 (fill the context)" : "-1 (random)");
                return FALSE;
            }
            G_GNUC_FALLTHROUGH;
        case BRIDGE_OPTION_UINT:
            if (!bridge_option_uint(options, m->property, v,
                                    m->kind == BRIDGE_OPTION_SEED ? (guint64)9007199254740991 : G_MAXUINT32, m->key,
                                    error))
                return FALSE;
            break;
        case BRIDGE_OPTION_STOP:
            break;
        }
    }
    return TRUE;
}

static gboolean is_base64(const char *s)
{
    for (; *s; s++)
        if (!g_ascii_isalnum(*s) && *s != '+' && *s != '/' && *s != '=' && *s != '\n' && *s != '\r')
            return FALSE;
    return TRUE;
}

GBytes *bridge_decode_image(const char *text, GError **error)
{
    if (g_str_has_prefix(text, "data:")) {
        const char *comma = strchr(text, ',');
        if (comma == NULL || !g_strstr_len(text, comma - text, ";base64")) {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "an image must be a base64 data: URL");
            return NULL;
        }
        text = comma + 1;
    }
    if (*text == '\0' || !is_base64(text)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "an image must be base64 data");
        return NULL;
    }
    gsize len = 0;
    guchar *data = g_base64_decode(text, &len);
    if (len == 0) {
        g_free(data);
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "the image is empty");
        return NULL;
    }
    return g_bytes_new_take(data, len);
}
