/* The harmony format's channels (gpt-oss) in streamed output: after the
 * template's "<|start|>assistant", the model writes messages
 * "<|channel|>NAME<|message|>TEXT", each next one after "<|start|>assistant"
 * (the <|end|> between them is a control token, not in the text). TEXT of
 * the analysis channel is thinking; that of final is answer; any other
 * channel (commentary: tool calls and preambles) is answer with its header
 * kept as text, so a caller still sees the recipient and the arguments. A
 * message without a header is answer. Markers split across calls are held
 * until decided. Used by think_split.c when the prompt ends a harmony
 * generation prompt. */
#ifndef NPL_HARMONY_SPLIT_H
#define NPL_HARMONY_SPLIT_H

#include <stdbool.h>
#include <stddef.h>

#include "npl_buf.h"
#include "npl_error.h"

/* Length of the longest suffix of p[0..n) that is a proper prefix of tag
 * (a tag that may be completed by the next piece). */
size_t npl_tag_partial(const char *p, size_t n, const char *tag);

/* Whether the rendered prompt p[0..n) ends with harmony's generation prompt. */
bool npl_harmony_prompt(const char *p, size_t n);

typedef struct npl_harmony_split {
    bool in_header;  /* between <|start|> or <|channel|> and <|message|> */
    bool to_thinking; /* the current message's text is thinking */
    npl_buf header;  /* the header so far */
} npl_harmony_split;

/* Decides as much of held (consumed from the front) as it can. */
npl_status npl_harmony_split_decide(npl_harmony_split *h, npl_buf *held, npl_buf *answer, npl_buf *thinking,
                                    npl_error *err);
/* End of output: the held text and an unfinished header are answer. */
npl_status npl_harmony_split_finish(npl_harmony_split *h, npl_buf *held, npl_buf *answer, npl_buf *thinking,
                                    npl_error *err);
void npl_harmony_split_free(npl_harmony_split *h);

#endif
