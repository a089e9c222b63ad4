/* Shared by the grammar files (grammar_*.c): the compiled form of a
 * grammar and the parse stacks a matcher follows. */
#ifndef NPL_GRAMMAR_INTERNAL_H
#define NPL_GRAMMAR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar.h"
#include "npl_buf.h"

/* A rule is a list of alternatives; an alternative is a run of elements
 * ending with G_END. Groups, options and repetitions are compiled into
 * helper rules, except a repeated character class, which stays one
 * G_STAR element (the common case inside strings, and the cheapest). */
typedef enum gkind { G_END = 0, G_CHAR, G_STAR, G_RULE, G_REPC } gkind;

/* G_REPC: a class repeated min..max times (max <= NPL_GRAMMAR_MAX_REPEAT),
 * one element whose stack node counts the characters taken so far. */
typedef struct gelem {
    uint32_t kind; /* gkind */
    uint32_t arg;  /* G_CHAR/G_STAR/G_REPC: class index; G_RULE: rule index */
    uint16_t min, max; /* G_REPC */
} gelem;

/* A set of code points: a bitmap for ASCII and sorted ranges above. */
typedef struct gclass {
    uint32_t ascii[4];
    uint32_t first_range, n_ranges; /* into npl_grammar.ranges */
} gclass;

struct npl_grammar {
    gelem *elems;
    uint32_t n_elems;
    uint32_t *alts;      /* start element of each alternative */
    uint32_t *rule_alts; /* rule r: alts[rule_alts[r] .. rule_alts[r + 1]) */
    uint32_t n_rules;
    uint32_t root;
    gclass *classes;
    uint32_t n_classes;
    uint32_t (*ranges)[2]; /* inclusive [lo, hi], code points >= 0x80 */
    uint32_t n_ranges;
};

static inline bool gclass_has(const struct npl_grammar *g, const gclass *c, uint32_t cp)
{
    if (cp < 128)
        return (c->ascii[cp >> 5] >> (cp & 31)) & 1u;
    for (uint32_t i = 0; i < c->n_ranges; i++) {
        const uint32_t *r = g->ranges[c->first_range + i];
        if (cp < r[0])
            return false;
        if (cp <= r[1])
            return true;
    }
    return false;
}

/* Any code point of [lo, hi] in the class. */
bool gclass_meets(const struct npl_grammar *g, const gclass *c, uint32_t lo, uint32_t hi);

/* ---- parse stacks --------------------------------------------------------
 * A stack is a linked list of nodes, top first; tails are shared between
 * stacks. A top node's element is G_CHAR or G_STAR; the nodes below hold
 * where to continue once the rule above returns. The NULL stack means the
 * root rule is complete. */
typedef struct gnode {
    uint32_t pos;
    uint16_t depth;
    uint16_t count; /* G_REPC tops: characters taken */
    const struct gnode *parent;
} gnode;

/* Node memory in blocks that never move, released back to a mark. */
typedef struct garena {
    char **blocks;
    size_t n_blocks, cap_blocks;
    size_t block;  /* current block */
    size_t used;   /* bytes used in it */
} garena;

typedef struct garena_mark {
    size_t block, used;
} garena_mark;

void garena_init(garena *a);
void garena_free(garena *a);
gnode *garena_node(garena *a); /* NULL when out of memory */
static inline garena_mark garena_get_mark(const garena *a)
{
    return (garena_mark){a->block, a->used};
}
static inline void garena_release(garena *a, garena_mark m)
{
    a->block = m.block;
    a->used = m.used;
}

/* A set of stacks plus an unfinished UTF-8 sequence. */
typedef struct gstate {
    const gnode **tops;
    uint32_t n;
    uint8_t pend[4];   /* bytes of an unfinished UTF-8 sequence */
    uint8_t n_pend;
    uint8_t need;      /* its full length */
} gstate;

typedef enum gstep {
    GSTEP_OK = 0,
    GSTEP_DEAD,     /* no stack survives: the byte is not allowed */
    GSTEP_OVERFLOW, /* a limit (stacks, depth, memory) was reached */
} gstep;

/* Expands the start of rule `root` into out (capacity NPL_GRAMMAR_MAX_STACKS). */
gstep gstate_start(const struct npl_grammar *g, garena *a, gstate *out);
/* out = in advanced by one byte; out->tops must not alias in->tops. */
gstep gstate_advance_byte(const struct npl_grammar *g, garena *a, const gstate *in, uint8_t b, gstate *out);
/* The tops that follow once top's element is complete (what a G_REPC
 * continues with after its last character, whichever character it was). */
gstep gstate_after(const struct npl_grammar *g, garena *a, const gnode *top, gstate *out);
/* A stack is empty (root complete) and no UTF-8 sequence is unfinished. */
bool gstate_complete(const gstate *s);

/* Grammar text being built, shared by the schema compiler and the regex
 * translator: a buffer whose first failure sticks (oom), checked once
 * when the text is complete. */
typedef struct gbuf {
    npl_buf buf;
    bool oom;
} gbuf;
void gbuf_add(gbuf *b, const char *s, size_t n);
void gbuf_puts(gbuf *b, const char *s);
void gbuf_printf(gbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A grammar string literal "..." holding bytes s[0..n). */
void gbuf_literal(gbuf *b, const char *s, size_t n);

/* Appends to out the grammar of a JSON string whose content matches the
 * regular expression pattern (the subset docs/chat-and-sampling.md
 * lists); rules are named prefix-N. false with a message in err. */
bool npl_regex_to_grammar(const char *pattern, size_t n, const char *prefix, gbuf *rules, gbuf *expr, char *err,
                          size_t err_cap);

#endif
