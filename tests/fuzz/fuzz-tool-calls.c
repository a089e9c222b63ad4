/* Fuzz target for the streaming tool-call parser: the first byte picks the
 * family, the rest is model output. The output is parsed whole and byte by
 * byte; whatever the input, both give the same text and calls, every call
 * has a name and a JSON object as arguments, and no text is made up (the
 * text is never longer than the output). Any violated invariant aborts,
 * which libFuzzer reports as a crash. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_target.h"
#include "npl_buf.h"
#include "npullm.h"

static void require(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz-tool-calls: invariant violated: %s\n", what);
        abort();
    }
}

typedef struct events {
    npl_buf all;     /* text and calls, in order */
    size_t text_len; /* bytes of text */
} events;

static void on_text(const char *t, size_t n, void *ctx)
{
    events *e = ctx;
    require(n > 0, "empty text event");
    e->text_len += n;
    npl_buf_append(&e->all, t, n, NULL);
}

static void on_call(const npl_tool_call *c, void *ctx)
{
    size_t an = strlen(c->arguments);
    require(c->id[0] && c->name[0], "a call without id or name");
    require(an >= 2 && c->arguments[0] == '{' && c->arguments[an - 1] == '}', "arguments are not an object");
    npl_buf_appendf(&((events *)ctx)->all, NULL, "\x01%s\x02%s\x02%s\x01", c->id, c->name, c->arguments);
}

static void parse(npl_tool_family f, const char *s, size_t n, size_t step, events *e)
{
    npl_tool_parser *p = npl_tool_parser_new(f, NULL, on_text, on_call, e);
    require(p != NULL, "no parser");
    for (size_t i = 0; i < n; i += step)
        require(npl_tool_parser_feed(p, s + i, n - i < step ? n - i : step, NULL) == NPL_OK, "feed failed");
    require(npl_tool_parser_finish(p, NULL) == NPL_OK, "finish failed");
    npl_tool_parser_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    npl_tool_family f = (npl_tool_family)(data[0] % NPL_TOOLS_COUNT);
    const char *s = (const char *)data + 1;
    size_t n = size - 1;
    events whole = {0}, bytes = {0};
    parse(f, s, n, n ? n : 1, &whole);
    parse(f, s, n, 1, &bytes);
    require(whole.all.len == bytes.all.len && (!whole.all.len || memcmp(whole.all.data, bytes.all.data, whole.all.len) == 0),
            "byte-by-byte parsing differs from the whole");
    require(whole.text_len <= n, "more text than output");
    npl_buf_free(&whole.all);
    npl_buf_free(&bytes.all);
    return 0;
}
