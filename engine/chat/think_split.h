/* Separates a reasoning model's thinking from its answer in streamed
 * output: text inside <think>...</think> at the start of the output (or
 * from the start when the prompt already opened the block, as some
 * templates do) is thinking; the whitespace after </think> is dropped;
 * everything else is answer. Pieces of a tag split across calls are held
 * until they are decided, so each call's output is whole UTF-8 when its
 * input was. After a harmony generation prompt (gpt-oss) the channels
 * decide instead (harmony_split.h). */
#ifndef NPL_THINK_SPLIT_H
#define NPL_THINK_SPLIT_H

#include <stdbool.h>
#include <stddef.h>

#include "harmony_split.h"
#include "npl_buf.h"
#include "npl_error.h"

typedef enum npl_think_state {
    NPL_THINK_START,  /* nothing but whitespace yet: a block may open */
    NPL_THINK_INSIDE, /* in the block */
    NPL_THINK_AFTER,  /* just closed: whitespace is dropped */
    NPL_THINK_ANSWER, /* everything is answer */
    NPL_THINK_HARMONY, /* harmony channels (harmony_split.h) */
} npl_think_state;

typedef struct npl_think_split {
    npl_think_state state;
    npl_buf held; /* undecided bytes */
    npl_harmony_split harmony; /* NPL_THINK_HARMONY */
} npl_think_split;

/* prompt: the rendered prompt (may be NULL); when it ends with an open
 * <think> (and optional whitespace) the output starts inside the block;
 * when it ends with "<|start|>assistant", with a harmony header. */
void npl_think_split_init(npl_think_split *s, const char *prompt);
void npl_think_split_free(npl_think_split *s);

/* Appends the decided part of text[0..n) to answer and thinking. */
npl_status npl_think_split_push(npl_think_split *s, const char *text, size_t n, npl_buf *answer,
                                npl_buf *thinking, npl_error *err);

/* End of output: whatever is held goes where the state says. */
npl_status npl_think_split_finish(npl_think_split *s, npl_buf *answer, npl_buf *thinking, npl_error *err);

#endif
