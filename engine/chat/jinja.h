/* A Jinja2 subset for the chat templates shipped in model files
 * (docs/chat-and-sampling.md lists the syntax). Strict and bounded: every
 * render has limits on memory, output, steps and nesting, and a template
 * that breaks one fails with an error instead of running away. */
#ifndef NPL_JINJA_H
#define NPL_JINJA_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "npl_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct npl_jinja_limits {
    size_t max_memory; /* bytes of values and syntax tree */
    size_t max_output; /* bytes of rendered text */
    uint64_t max_steps; /* evaluation steps (bounds time): one per node evaluated, and one
                         * per NPL_JINJA_BYTES_PER_STEP bytes a string operation reads or
                         * writes (comparisons, searches, concatenation, filters) */
    unsigned max_depth; /* nesting of expressions, blocks and macro calls */
    unsigned max_time_ms; /* wall-clock time of one render; 0 = none */
} npl_jinja_limits;

#define NPL_JINJA_BYTES_PER_STEP 64
/* npl_jinja_limits_default's max_time_ms: far above what a real chat
 * template needs (milliseconds), short enough that a hostile one frees its
 * thread soon. */
#define NPL_JINJA_DEFAULT_TIME_MS 2000

void npl_jinja_limits_default(npl_jinja_limits *lim);

typedef struct npl_jinja_template npl_jinja_template;

/* Parses a template (trim_blocks and lstrip_blocks on, as transformers
 * renders chat templates). NPL_ERR_FORMAT with the line on bad syntax. */
npl_jinja_template *npl_jinja_parse(const char *src, size_t len, const npl_jinja_limits *lim,
                                    npl_error *err);
void npl_jinja_free(npl_jinja_template *t);

typedef struct npl_jinja_output {
    char *text;    /* NUL-terminated, malloc'd */
    uint8_t *mask; /* per byte: 1 = came from caller data; malloc'd */
    size_t len;
} npl_jinja_output;

void npl_jinja_output_free(npl_jinja_output *o);

/* Renders with the top-level variables of two JSON objects: `vars_json`
 * (template settings such as bos_token) and `data_json` (caller data:
 * messages, tools; its strings are marked in the output mask). Either
 * may be NULL. `now` is what strftime_now() formats. A template that
 * raises, or breaks a limit, gives NPL_ERR_FORMAT with the reason. */
npl_status npl_jinja_render(const npl_jinja_template *t, const char *vars_json,
                            const char *data_json, const struct tm *now, npl_jinja_output *out,
                            npl_error *err);

#ifdef __cplusplus
}
#endif

#endif
