/* The npullm.h tool-call entry point that takes a model (apart from
 * tool_format.c so that the format code links without the model code). */
#include <stdlib.h>

#include "gguf.h"
#include "npullm.h"
#include "tokenizer.h"

static bool vocab_has(const char *text, void *ctx)
{
    return npl_tokenizer_find(ctx, text) >= 0;
}

npl_tool_family npl_model_tool_family(const npl_model *m)
{
    if (!m)
        return NPL_TOOLS_GENERIC;
    npl_str tmpl = {0};
    const npl_gguf *g = npl_model_gguf(m);
    char *src = g && npl_gguf_get_str(g, "tokenizer.chat_template", &tmpl) ? npl_str_dup(tmpl) : NULL;
    npl_tool_family f = npl_tool_family_detect(src, vocab_has, (void *)npl_model_tokenizer(m));
    free(src);
    return f;
}
