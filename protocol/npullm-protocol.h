/* The npullm D-Bus protocol in one place: names, paths, error names, the
 * request-path rule and the options schema. Used by npullmd, libnpullm and
 * npullm-client, so that the three cannot disagree. (The method and
 * signal signatures themselves live in dbus/org.npullm.xml.) */
#ifndef NPULLM_PROTOCOL_H
#define NPULLM_PROTOCOL_H

#include <glib.h>

#define NPP_BUS_NAME "org.npullm"
#define NPP_MANAGER_PATH "/org/npullm"
#define NPP_MANAGER_IFACE "org.npullm.Manager"
#define NPP_REQUEST_IFACE "org.npullm.Request"
#define NPP_REQUEST_ROOT "/org/npullm/Request"

/* ---- errors ----------------------------------------------------------- */

/* The org.npullm.Error.* names, in code order (NpdError in the daemon and
 * the public NpullmError share these codes). */
typedef enum {
    NPP_ERROR_INVALID_ARGUMENT,
    NPP_ERROR_NOT_AUTHORIZED,
    NPP_ERROR_BUSY,
    NPP_ERROR_NO_SUCH_MODEL,
    NPP_ERROR_NOT_SUPPORTED,
    NPP_ERROR_MODEL_LOAD_FAILED,
    NPP_ERROR_CONTEXT_OVERFLOW,
    NPP_ERROR_CANCELLED,
    NPP_ERROR_INTERNAL,
    NPP_ERROR_NO_SPACE,
} NppError;

#define NPP_ERROR_N_CODES (NPP_ERROR_NO_SPACE + 1)

/* "org.npullm.Error.InvalidArgument" etc.; out-of-range codes give the
 * Internal name. */
const char *npp_error_name(guint code);

/* ---- request objects ---------------------------------------------------- */

/* Node under NPP_REQUEST_ROOT for a request that the connection with the
 * unique name sender creates with handle_token: "c" + sender without ':'
 * and with '.' turned into '_', then '_' + token. E.g. ":1.42", "t1" ->
 * "c1_42_t1". A client computes it to subscribe before calling. */
gchar *npp_request_node_for_token(const char *sender, const char *handle_token);
gchar *npp_request_path_for_token(const char *sender, const char *handle_token);

/* ---- file descriptors ------------------------------------------------- */

/* Images one Chat call may carry, in all its messages' "images" (ah). */
#define NPP_MAX_CHAT_IMAGES 8

/* How many file descriptors a Manager call may carry: one per 'h' in its
 * signature (DescribeImage: the image; AddModel: the model, and one more
 * for the projector its options may name), for Chat one per handle in its
 * messages' "images", at most NPP_MAX_CHAT_IMAGES. */
guint npp_call_max_fds(const char *method, const char *signature, GVariant *params);

/* ---- options (the a{sv} of Generate, Chat, DescribeImage, Complete) ----- */

/* The methods that take options; also the bit positions in
 * NppOption.calls. */
typedef enum {
    NPP_CALL_GENERATE,
    NPP_CALL_CHAT,
    NPP_CALL_DESCRIBE_IMAGE,
    NPP_CALL_COMPLETE,
    NPP_CALL_EMBED, /* Embed: model, priority, dimensions, truncate only */
    NPP_CALL_RERANK, /* Rerank: model, priority, truncate, top_n only */
} NppCall;

#define NPP_CALLS_ALL 0xfu /* the generating calls (not Embed) */
#define NPP_CALLS_EMBED (1u << NPP_CALL_EMBED)
#define NPP_CALLS_RERANK (1u << NPP_CALL_RERANK)
#define NPP_CALLS_WITH_OBJECT 0x7u /* every call that creates a request object */
#define NPP_CALLS_TEXT ((1u << NPP_CALL_GENERATE) | (1u << NPP_CALL_COMPLETE))

typedef enum {
    NPP_OPT_MODEL,
    NPP_OPT_MAX_TOKENS,
    NPP_OPT_TEMPERATURE,
    NPP_OPT_TOP_P,
    NPP_OPT_TOP_K,
    NPP_OPT_MIN_P,
    NPP_OPT_REPEAT_PENALTY,
    NPP_OPT_SEED,
    NPP_OPT_STOP,
    NPP_OPT_SYSTEM,
    NPP_OPT_RAW,
    NPP_OPT_PRIORITY,
    NPP_OPT_HANDLE_TOKEN,
    NPP_OPT_THINK,
    NPP_OPT_FORMAT,
    NPP_OPT_TOOLS,
    NPP_OPT_TOOL_CHOICE,
    NPP_OPT_DIMENSIONS,
    NPP_OPT_TRUNCATE,
    NPP_OPT_PARALLEL_TOOL_CALLS,
    NPP_OPT_TOP_N,
    NPP_OPT_REASONING_EFFORT,
} NppOptionId;

#define NPP_N_OPTIONS (NPP_OPT_REASONING_EFFORT + 1)

#define NPP_MAX_STOP_STRINGS 16
#define NPP_MAX_STOP_BYTES 256
#define NPP_MAX_HANDLE_TOKEN 64
#define NPP_MAX_MODEL_NAME 128
/* format: "json" or a JSON Schema of at most this many bytes */
#define NPP_MAX_FORMAT_BYTES (64 * 1024)
/* tools: a JSON array of function definitions of at most this many bytes */
#define NPP_MAX_TOOLS_BYTES (256 * 1024)

/* Embed: the caps on one call (InvalidArgument naming the cap when
 * exceeded). The service packs a call's texts into engine passes of at
 * most NPP_EMBED_STEP_TEXTS texts, one pass per scheduling step. */
#define NPP_MAX_EMBED_TEXTS 2048
#define NPP_MAX_EMBED_TEXT_BYTES (1024 * 1024)
#define NPP_MAX_EMBED_BYTES (8 * 1024 * 1024)
#define NPP_EMBED_STEP_TEXTS 64
#define NPP_MAX_EMBED_DIMENSIONS 65536

typedef struct {
    NppOptionId id;
    const char *key;     /* the a{sv} key */
    const char *type;    /* its GVariant type string */
    /* Numbers: the accepted range; min_open excludes min itself. */
    double min, max;
    gboolean min_open;
    /* "s" with a fixed set of values: NULL-terminated. */
    const char *const *choices;
    guint calls;         /* bit (1 << NppCall) per method that accepts it */
    const char *summary; /* one line for documentation */
} NppOption;

/* All options, indexed by NppOptionId. */
extern const NppOption npp_options[NPP_N_OPTIONS];

/* NULL when key is not an option. */
const NppOption *npp_option_lookup(const char *key);

/* Does value (already of the option's type) lie in its range? Numbers are
 * checked as the type the service stores them in (float for "d"), so a
 * value that passes is never rounded out of range. */
gboolean npp_option_in_range(const NppOption *opt, GVariant *value);

/* The option's range as text for messages, "[0, 10]" or "(0, 1]". */
gchar *npp_option_range_text(const NppOption *opt);

/* At most max_bytes of text, cut back to a UTF-8 character boundary, so
 * that client-supplied strings can be quoted in error messages. Returns
 * the byte count to print with "%.*s". */
int npp_utf8_prefix_len(const char *text, gsize max_bytes);

#endif
