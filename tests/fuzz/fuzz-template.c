/* Fuzz target for the chat-template engine: the input is a template,
 * optionally followed by a NUL byte and the caller data (a JSON object,
 * e.g. {"messages": [...]}). Parsing and rendering run under tight limits;
 * whatever the input, the result is either a rendering within the output
 * limit with a 0/1 mask, or an explained NPL_ERR_FORMAT. Any violated
 * invariant aborts, which libFuzzer reports as a crash. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_target.h"
#include "jinja.h"

static const char DEFAULT_DATA[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \" Hi \"},"
    " {\"role\": \"assistant\", \"content\": \"Yo\", \"tool_calls\": [{\"type\": \"function\", \"function\":"
    " {\"name\": \"f\", \"arguments\": {\"a\": 1}}}]}, {\"role\": \"tool\", \"content\": \"42\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}]}";
static const char VARS[] = "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"add_generation_prompt\": true}";
static const struct tm DAY = {.tm_year = 124, .tm_mon = 6, .tm_mday = 26};

static void require(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz-template: invariant violated: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t tlen = nul ? (size_t)(nul - data) : size;
    char *json = NULL;
    if (nul) {
        size_t jlen = size - tlen - 1;
        json = malloc(jlen + 1);
        if (!json)
            return 0;
        memcpy(json, nul + 1, jlen);
        json[jlen] = 0;
        if (strlen(json) != jlen) { /* a second NUL: not a C string */
            free(json);
            return 0;
        }
    }
    npl_jinja_limits lim = {.max_memory = 16u << 20, .max_output = 1u << 16, .max_steps = 200000, .max_depth = 60};
    npl_error err = {0};
    npl_jinja_template *t = npl_jinja_parse((const char *)data, tlen, &lim, &err);
    if (!t) {
        require(err.code == NPL_ERR_FORMAT || err.code == NPL_ERR_NOMEM, "parse error status");
        require(err.message[0] != '\0', "parse error explained");
        free(json);
        return 0;
    }
    npl_jinja_output out;
    npl_status st = npl_jinja_render(t, VARS, json ? json : DEFAULT_DATA, &DAY, &out, &err);
    if (st == NPL_OK) {
        require(out.text && out.mask && out.text[out.len] == '\0', "output terminated");
        require(out.len <= lim.max_output, "output within the limit");
        for (size_t i = 0; i < out.len; i++)
            require(out.mask[i] <= 1, "mask is 0/1");
    } else {
        require(st == NPL_ERR_FORMAT || st == NPL_ERR_NOMEM, "render error status");
        require(err.message[0] != '\0', "render error explained");
        require(out.text == NULL && out.len == 0, "no output on error");
    }
    npl_jinja_output_free(&out);
    npl_jinja_free(t);
    free(json);
    return 0;
}
