/* Parse stacks of a grammar (grammar_internal.h): expanding rules into
 * the character elements that may come next, and advancing every stack
 * by one byte of output (UTF-8 sequences are followed byte by byte, and
 * an unfinished one is allowed while some stack could still take it). */
#include <stdlib.h>
#include <string.h>

#include "grammar_internal.h"

#define GARENA_BLOCK_NODES 4096u
#define GARENA_MAX_BLOCKS 4096u /* 256 MB of nodes */
#define EXPAND_MAX_RECURSION 4096u

void garena_init(garena *a)
{
    memset(a, 0, sizeof *a);
}

void garena_free(garena *a)
{
    for (size_t i = 0; i < a->n_blocks; i++)
        free(a->blocks[i]);
    free(a->blocks);
    memset(a, 0, sizeof *a);
}

gnode *garena_node(garena *a)
{
    const size_t block_bytes = GARENA_BLOCK_NODES * sizeof(gnode);
    if (a->n_blocks == 0 || a->used + sizeof(gnode) > block_bytes) {
        size_t next = a->n_blocks == 0 ? 0 : a->block + 1;
        if (next >= GARENA_MAX_BLOCKS)
            return NULL;
        if (next >= a->n_blocks) {
            if (a->n_blocks == a->cap_blocks) {
                size_t cap = a->cap_blocks ? a->cap_blocks * 2 : 8;
                char **nb = realloc(a->blocks, cap * sizeof *nb);
                if (!nb)
                    return NULL;
                a->blocks = nb;
                a->cap_blocks = cap;
            }
            char *b = malloc(block_bytes);
            if (!b)
                return NULL;
            a->blocks[a->n_blocks++] = b;
        }
        a->block = next;
        a->used = 0;
    }
    gnode *n = (gnode *)(a->blocks[a->block] + a->used);
    a->used += sizeof(gnode);
    return n;
}

typedef struct expander {
    const npl_grammar *g;
    garena *a;
    gstate *out;
    gstep st;
    unsigned recursion;
} expander;

static bool has_top(const gstate *s, uint32_t pos, const gnode *parent, uint16_t count)
{
    for (uint32_t i = 0; i < s->n; i++) {
        const gnode *t = s->tops[i];
        if (t && t->pos == pos && t->parent == parent && t->count == count)
            return true;
    }
    return false;
}

static void push_top(expander *x, const gnode *n)
{
    gstate *s = x->out;
    if (!n) {
        for (uint32_t i = 0; i < s->n; i++)
            if (!s->tops[i])
                return;
    }
    if (s->n >= NPL_GRAMMAR_MAX_STACKS) {
        x->st = GSTEP_OVERFLOW;
        return;
    }
    s->tops[s->n++] = n;
}

static const gnode *make_node(expander *x, uint32_t pos, const gnode *parent, uint16_t count)
{
    uint32_t depth = parent ? parent->depth + 1u : 1u;
    gnode *n = depth > NPL_GRAMMAR_MAX_DEPTH ? NULL : garena_node(x->a);
    if (!n) {
        x->st = GSTEP_OVERFLOW;
        return NULL;
    }
    n->pos = pos;
    n->depth = (uint16_t)depth;
    n->count = count;
    n->parent = parent;
    return n;
}

/* A G_REPC top that has taken count characters (when more may come). */
static void push_rep(expander *x, uint32_t pos, const gnode *parent, uint16_t count)
{
    if (count >= x->g->elems[pos].max || has_top(x->out, pos, parent, count))
        return;
    const gnode *n = make_node(x, pos, parent, count);
    if (n)
        push_top(x, n);
}

/* Adds to x->out every top reachable from element pos with parent below. */
static void expand(expander *x, uint32_t pos, const gnode *parent)
{
    const npl_grammar *g = x->g;
    if (++x->recursion > EXPAND_MAX_RECURSION) {
        x->st = GSTEP_OVERFLOW;
        x->recursion--;
        return;
    }
    while (x->st == GSTEP_OK) {
        const gelem *e = &g->elems[pos];
        if (e->kind == G_END) {
            if (!parent) {
                push_top(x, NULL);
                break;
            }
            pos = parent->pos;
            parent = parent->parent;
            continue;
        }
        if (e->kind == G_REPC) {
            push_rep(x, pos, parent, 0);
            if (e->min > 0)
                break;
            pos++;
            continue;
        }
        if (e->kind == G_CHAR || e->kind == G_STAR) {
            if (!has_top(x->out, pos, parent, 0)) {
                const gnode *n = make_node(x, pos, parent, 0);
                if (n)
                    push_top(x, n);
            }
            if (e->kind == G_CHAR)
                break;
            pos++;
            continue;
        }
        /* G_RULE: continue after it once the rule returns (a rule that
         * ends an alternative returns straight to our parent). */
        const gnode *np = parent;
        if (g->elems[pos + 1].kind != G_END) {
            np = make_node(x, pos + 1, parent, 0);
            if (!np)
                break;
        }
        for (uint32_t a = g->rule_alts[e->arg]; a < g->rule_alts[e->arg + 1] && x->st == GSTEP_OK; a++)
            expand(x, g->alts[a], np);
        break;
    }
    x->recursion--;
}

gstep gstate_start(const npl_grammar *g, garena *a, gstate *out)
{
    expander x = {.g = g, .a = a, .out = out};
    out->n = 0;
    out->n_pend = out->need = 0;
    for (uint32_t r = g->rule_alts[g->root]; r < g->rule_alts[g->root + 1] && x.st == GSTEP_OK; r++)
        expand(&x, g->alts[r], NULL);
    return x.st;
}

gstep gstate_after(const npl_grammar *g, garena *a, const gnode *top, gstate *out)
{
    expander x = {.g = g, .a = a, .out = out};
    out->n = 0;
    out->n_pend = out->need = 0;
    expand(&x, top->pos + 1, top->parent);
    return x.st;
}

bool gstate_complete(const gstate *s)
{
    if (s->n_pend)
        return false;
    for (uint32_t i = 0; i < s->n; i++)
        if (!s->tops[i])
            return true;
    return false;
}

static gstep advance_cp(const npl_grammar *g, garena *a, const gstate *in, uint32_t cp, gstate *out)
{
    expander x = {.g = g, .a = a, .out = out};
    out->n = 0;
    out->n_pend = out->need = 0;
    for (uint32_t i = 0; i < in->n && x.st == GSTEP_OK; i++) {
        const gnode *t = in->tops[i];
        if (!t)
            continue;
        const gelem *e = &g->elems[t->pos];
        if (!gclass_has(g, &g->classes[e->arg], cp))
            continue;
        if (e->kind == G_REPC) {
            uint16_t k = (uint16_t)(t->count + 1);
            push_rep(&x, t->pos, t->parent, k);
            if (k >= e->min)
                expand(&x, t->pos + 1, t->parent);
            continue;
        }
        if (e->kind == G_STAR && !has_top(out, t->pos, t->parent, 0))
            push_top(&x, t);
        expand(&x, t->pos + 1, t->parent);
    }
    if (x.st != GSTEP_OK)
        return x.st;
    return out->n ? GSTEP_OK : GSTEP_DEAD;
}

/* Code points an unfinished UTF-8 sequence can still become. */
static bool pending_range(const uint8_t *p, uint8_t n, uint8_t need, uint32_t *lo, uint32_t *hi)
{
    static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t l = p[0] & (0x7Fu >> need), h = l;
    for (uint8_t i = 1; i < need; i++) {
        uint32_t c = i < n ? (p[i] & 0x3Fu) : 0;
        l = (l << 6) | c;
        h = (h << 6) | (i < n ? c : 0x3Fu);
    }
    if (l < min_of[need])
        l = min_of[need];
    if (h > 0x10FFFF)
        h = 0x10FFFF;
    *lo = l;
    *hi = h;
    return l <= h;
}

gstep gstate_advance_byte(const npl_grammar *g, garena *a, const gstate *in, uint8_t b, gstate *out)
{
    if (in->n_pend == 0 && b < 0x80)
        return advance_cp(g, a, in, b, out);
    uint8_t pend[4];
    uint8_t n = in->n_pend, need = in->need;
    memcpy(pend, in->pend, n);
    if (n == 0) {
        need = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
        if (!need)
            return GSTEP_DEAD;
    } else if ((b & 0xC0) != 0x80) {
        return GSTEP_DEAD;
    }
    pend[n++] = b;
    uint32_t lo, hi;
    if (!pending_range(pend, n, need, &lo, &hi))
        return GSTEP_DEAD;
    if (n == need) {
        if (lo >= 0xD800 && lo <= 0xDFFF)
            return GSTEP_DEAD; /* surrogates are not characters */
        return advance_cp(g, a, in, lo, out);
    }
    bool viable = false;
    for (uint32_t i = 0; i < in->n && !viable; i++) {
        const gnode *t = in->tops[i];
        if (t && gclass_meets(g, &g->classes[g->elems[t->pos].arg], lo, hi))
            viable = true;
    }
    if (!viable)
        return GSTEP_DEAD;
    if (out->tops != in->tops)
        memcpy(out->tops, in->tops, in->n * sizeof *in->tops);
    out->n = in->n;
    memcpy(out->pend, pend, n);
    out->n_pend = n;
    out->need = need;
    return GSTEP_OK;
}
