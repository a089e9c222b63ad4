/* A sequence's position in a grammar and the token mask at that position.
 *
 * The mask walks the vocabulary trie (grammar_vocab.h) in preorder with
 * one grammar state per trie depth, dropping a subtree when its prefix is
 * refused. Two things keep a step cheap at a 256k vocabulary:
 *  - a repeated character class (the inside of a JSON string) takes, in
 *    one go, every subtree whose tokens are made only of characters of
 *    that class ("pure" subtrees: the index knows which characters each
 *    subtree holds); when that class is bounded (x{m,n}) and nothing else
 *    at that point can take its characters, a pure subtree's tokens are
 *    taken by their length in characters instead of being walked;
 *  - masks are cached by grammar state (the positions on the stacks, a
 *    bounded repetition's count only as far as one token can reach), so a
 *    state met again (the next character of a string) costs a copy. */
#include <stdlib.h>
#include <string.h>

#include "grammar_internal.h"
#include "grammar_vocab.h"

#define MAX_STAR_SLOTS 32u
#define CACHE_ENTRIES 32u
#define CACHE_MAX_KEY 4096u  /* words; longer states are not cached */
#define COLLECT_AFTER_BLOCKS 16u

typedef struct cache_entry {
    uint64_t hash;
    uint32_t *key;
    uint32_t key_n;
    uint32_t *mask;
    size_t allowed;
    uint64_t used; /* 0 = empty */
} cache_entry;

/* What a matcher and its clones share: the grammar bound to a vocabulary. */
typedef struct gbinding {
    unsigned refs;
    const npl_grammar *g;
    const npl_vocab_index *vi;
    uint32_t n_words; /* mask words */
    uint32_t n_star;
    uint32_t star_class[MAX_STAR_SLOTS];
    uint8_t nonascii[MAX_STAR_SLOTS]; /* SLOT_*: the class's code points >= 0x80 */
    uint8_t *pure[MAX_STAR_SLOTS]; /* SLOT_SOME: one bit per trie node, found on first use */
    uint8_t *slot_of_class;        /* class -> star slot + 1 (0: none) */
    uint8_t *disjoint;             /* class * MAX_STAR_SLOTS + slot: 0 unknown, 1 disjoint, 2 not */
    cache_entry cache[CACHE_ENTRIES];
    uint64_t clock;
    /* scratch of the walk and of advancing */
    garena walk;
    const gnode **lvl_tops;
    size_t lvl_cap;
    const gnode **tmp[2];
    uint32_t *key;
} gbinding;

struct npl_grammar_matcher {
    gbinding *b;
    garena arena;
    const gnode **tops;
    gstate state;
    bool finished;
};

static void binding_unref(gbinding *b)
{
    if (!b || --b->refs)
        return;
    for (uint32_t i = 0; i < b->n_star; i++)
        free(b->pure[i]);
    free(b->slot_of_class);
    free(b->disjoint);
    for (uint32_t i = 0; i < CACHE_ENTRIES; i++) {
        free(b->cache[i].key);
        free(b->cache[i].mask);
    }
    garena_free(&b->walk);
    free(b->lvl_tops);
    free(b->tmp[0]);
    free(b->tmp[1]);
    free(b->key);
    free(b);
}

/* Subtrees whose every token is a run of whole characters of class c. */
static uint8_t *find_pure(const npl_grammar *g, const npl_vocab_index *vi, const gclass *c)
{
    uint8_t *pure = calloc(((size_t)vi->n_nodes + 7) / 8, 1);
    if (!pure)
        return NULL;
    for (uint32_t i = vi->n_nodes; i-- > 1;) {
        const tnode *n = &vi->nodes[i];
        bool ok;
        if (n->cp_state == TN_INVALID)
            ok = false;
        else if (n->cp_state == TN_BOUNDARY)
            ok = gclass_has(g, c, n->cp);
        else
            ok = n->own_end == n->tok_lo; /* no token ends mid-character */
        for (uint32_t j = i + 1; ok && j < n->end; j = vi->nodes[j].end)
            ok = (pure[j >> 3] >> (j & 7)) & 1;
        if (ok)
            pure[i >> 3] |= (uint8_t)(1u << (i & 7));
    }
    return pure;
}

enum { SLOT_NONE = 0, SLOT_ALL, SLOT_SOME };

static bool class_equal(const npl_grammar *g, const gclass *a, const gclass *b)
{
    return !memcmp(a->ascii, b->ascii, sizeof a->ascii) && a->n_ranges == b->n_ranges &&
           !memcmp(g->ranges[a->first_range], g->ranges[b->first_range], a->n_ranges * sizeof *g->ranges);
}

/* Whether a class holds none, all (surrogates aside) or some code points >= 0x80. */
static uint8_t nonascii_of(const npl_grammar *g, const gclass *c)
{
    if (!c->n_ranges)
        return SLOT_NONE;
    uint32_t next = 0x80;
    for (uint32_t i = 0; i < c->n_ranges; i++) {
        const uint32_t *r = g->ranges[c->first_range + i];
        if (r[0] > next && !(next == 0xD800 && r[0] <= 0xE000))
            return SLOT_SOME;
        if (r[1] + 1 > next)
            next = r[1] + 1;
    }
    return next > 0x10FFFF ? SLOT_ALL : SLOT_SOME;
}

/* One star slot per distinct repeated class (schemas repeat [0-9] often). */
static void assign_slots(gbinding *b)
{
    const npl_grammar *g = b->g;
    for (uint32_t i = 0; i < g->n_elems; i++) {
        uint32_t c = g->elems[i].arg;
        if ((g->elems[i].kind != G_STAR && g->elems[i].kind != G_REPC) || b->slot_of_class[c])
            continue;
        for (uint32_t s = 0; s < b->n_star && !b->slot_of_class[c]; s++)
            if (class_equal(g, &g->classes[c], &g->classes[b->star_class[s]]))
                b->slot_of_class[c] = (uint8_t)(s + 1);
        if (b->slot_of_class[c] || b->n_star == MAX_STAR_SLOTS)
            continue;
        uint32_t s = b->n_star++;
        b->star_class[s] = c;
        b->nonascii[s] = nonascii_of(g, &g->classes[c]);
        b->slot_of_class[c] = (uint8_t)(s + 1);
    }
}

static gbinding *binding_create(const npl_grammar *g, const npl_vocab_index *vi)
{
    gbinding *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->refs = 1;
    b->g = g;
    b->vi = vi;
    b->n_words = (vi->n_vocab + 31) / 32;
    garena_init(&b->walk);
    b->slot_of_class = calloc(g->n_classes ? g->n_classes : 1, 1);
    b->disjoint = calloc((g->n_classes ? g->n_classes : 1) * (size_t)MAX_STAR_SLOTS, 1);
    b->tmp[0] = malloc(NPL_GRAMMAR_MAX_STACKS * sizeof *b->tmp[0]);
    b->tmp[1] = malloc(NPL_GRAMMAR_MAX_STACKS * sizeof *b->tmp[1]);
    b->key = malloc(CACHE_MAX_KEY * sizeof *b->key);
    b->lvl_cap = (size_t)NPL_GRAMMAR_MAX_STACKS * 4;
    b->lvl_tops = malloc(b->lvl_cap * sizeof *b->lvl_tops);
    if (!b->slot_of_class || !b->disjoint || !b->tmp[0] || !b->tmp[1] || !b->key || !b->lvl_tops) {
        binding_unref(b);
        return NULL;
    }
    assign_slots(b);
    return b;
}

/* ---- state memory ------------------------------------------------------- */

typedef struct ptr_map {
    const gnode **from;
    gnode **to;
    size_t cap;
} ptr_map;

static const gnode *copy_stack(ptr_map *m, garena *a, const gnode *n, bool *oom)
{
    if (!n)
        return NULL;
    size_t i = ((uintptr_t)n >> 4) * 0x9E3779B97F4A7C15ull & (m->cap - 1);
    while (m->from[i]) {
        if (m->from[i] == n)
            return m->to[i];
        i = (i + 1) & (m->cap - 1);
    }
    const gnode *parent = copy_stack(m, a, n->parent, oom);
    gnode *c = garena_node(a);
    if (!c) {
        *oom = true;
        return NULL;
    }
    *c = *n;
    c->parent = parent;
    /* the recursion may have filled slots: find a free one again */
    i = ((uintptr_t)n >> 4) * 0x9E3779B97F4A7C15ull & (m->cap - 1);
    while (m->from[i])
        i = (i + 1) & (m->cap - 1);
    m->from[i] = n;
    m->to[i] = c;
    return c;
}

/* Copies the state's stacks (sharing kept) into a fresh arena. */
static bool collect(const gstate *in, garena *dst, const gnode **tops)
{
    size_t nodes = 16; /* at most the sum of the stacks' depths */
    for (uint32_t i = 0; i < in->n; i++)
        nodes += in->tops[i] ? in->tops[i]->depth : 0;
    size_t cap = 64;
    while (cap < nodes * 2)
        cap *= 2;
    ptr_map m = {calloc(cap, sizeof *m.from), calloc(cap, sizeof *m.to), cap};
    bool oom = !m.from || !m.to;
    garena_init(dst);
    for (uint32_t i = 0; i < in->n && !oom; i++)
        tops[i] = copy_stack(&m, dst, in->tops[i], &oom);
    free(m.from);
    free(m.to);
    if (oom)
        garena_free(dst);
    return !oom;
}

static npl_grammar_matcher *matcher_new(gbinding *b)
{
    npl_grammar_matcher *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->b = b;
    m->tops = malloc(NPL_GRAMMAR_MAX_STACKS * sizeof *m->tops);
    if (!m->tops) {
        free(m);
        return NULL;
    }
    garena_init(&m->arena);
    m->state.tops = m->tops;
    return m;
}

static void matcher_release(npl_grammar_matcher *m)
{
    garena_free(&m->arena);
    free(m->tops);
    free(m);
}

npl_grammar_matcher *npl_grammar_matcher_create(const npl_grammar *g, const npl_vocab_index *vi, npl_error *err)
{
    if (!g || !vi) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "grammar matcher: grammar or vocabulary index is NULL");
        return NULL;
    }
    gbinding *b = binding_create(g, vi);
    npl_grammar_matcher *m = b ? matcher_new(b) : NULL;
    if (!m) {
        binding_unref(b);
        npl_error_set(err, NPL_ERR_NOMEM, "grammar matcher: out of memory");
        return NULL;
    }
    gstep st = gstate_start(g, &m->arena, &m->state);
    if (st != GSTEP_OK) {
        npl_grammar_matcher_free(m);
        npl_error_set(err, NPL_ERR_INVALID_ARG,
                      "grammar: its start expands to more than %u parse stacks or deeper than %u (the limits)",
                      NPL_GRAMMAR_MAX_STACKS, NPL_GRAMMAR_MAX_DEPTH);
        return NULL;
    }
    return m;
}

void npl_grammar_matcher_free(npl_grammar_matcher *m)
{
    if (!m)
        return;
    binding_unref(m->b);
    matcher_release(m);
}

npl_grammar_matcher *npl_grammar_matcher_clone(const npl_grammar_matcher *m, npl_error *err)
{
    if (!m) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "grammar matcher: NULL");
        return NULL;
    }
    npl_grammar_matcher *c = matcher_new(m->b);
    if (!c || !collect(&m->state, &c->arena, c->tops)) {
        if (c)
            matcher_release(c);
        npl_error_set(err, NPL_ERR_NOMEM, "grammar matcher: out of memory");
        return NULL;
    }
    m->b->refs++;
    c->state = m->state;
    c->state.tops = c->tops;
    c->finished = m->finished;
    return c;
}

void npl_grammar_matcher_reset(npl_grammar_matcher *m)
{
    if (!m)
        return;
    garena_free(&m->arena);
    garena_init(&m->arena);
    m->finished = false;
    /* the start expanded once already, so it fits */
    gstate_start(m->b->g, &m->arena, &m->state);
}

uint32_t npl_grammar_matcher_n_vocab(const npl_grammar_matcher *m)
{
    return m ? m->b->vi->n_vocab : 0;
}

bool npl_grammar_matcher_is_complete(const npl_grammar_matcher *m)
{
    return m && (m->finished || gstate_complete(&m->state));
}

bool npl_grammar_matcher_is_finished(const npl_grammar_matcher *m)
{
    return m && m->finished;
}

bool npl_grammar_matcher_can_continue(const npl_grammar_matcher *m)
{
    if (!m || m->finished)
        return false;
    for (uint32_t i = 0; i < m->state.n; i++)
        if (m->state.tops[i])
            return true;
    return false;
}

/* ---- advancing ---------------------------------------------------------- */

bool npl_grammar_matcher_accept_bytes(npl_grammar_matcher *m, const char *s, size_t n)
{
    if (!m || m->finished || (!s && n))
        return false;
    if (n == 0)
        return true;
    gbinding *b = m->b;
    garena_mark mark = garena_get_mark(&m->arena);
    gstate cur = m->state, next;
    int flip = 0;
    for (size_t i = 0; i < n; i++) {
        next.tops = b->tmp[flip];
        if (gstate_advance_byte(b->g, &m->arena, &cur, (uint8_t)s[i], &next) != GSTEP_OK) {
            garena_release(&m->arena, mark);
            return false;
        }
        cur = next;
        flip ^= 1;
    }
    memcpy(m->tops, cur.tops, cur.n * sizeof *cur.tops);
    cur.tops = m->tops;
    m->state = cur;
    if (m->arena.block >= COLLECT_AFTER_BLOCKS) {
        garena fresh;
        if (collect(&m->state, &fresh, m->tops)) {
            garena_free(&m->arena);
            m->arena = fresh;
        }
    }
    return true;
}

static bool is_eog(const npl_vocab_index *vi, int32_t id)
{
    for (uint32_t i = 0; i < vi->n_eog; i++)
        if (vi->eog[i] == id)
            return true;
    return false;
}

bool npl_grammar_matcher_accept_token(npl_grammar_matcher *m, int32_t id)
{
    if (!m || m->finished || id < 0 || (uint32_t)id >= m->b->vi->n_vocab)
        return false;
    const npl_vocab_index *vi = m->b->vi;
    if (is_eog(vi, id)) {
        if (!gstate_complete(&m->state))
            return false;
        m->finished = true;
        return true;
    }
    uint32_t off = vi->tok_off[id], n = vi->tok_off[id + 1] - off;
    if (n == 0 || n > NPL_VOCAB_MAX_TOKEN_BYTES)
        return false; /* control tokens spell nothing a grammar can take; the mask leaves out huge ones */
    return npl_grammar_matcher_accept_bytes(m, vi->blob + off, n);
}

/* ---- the mask ------------------------------------------------------------ */

/* The state as positions (pointers differ between equal states). A
 * bounded repetition's count enters as the characters it still needs and
 * may take, each capped past the longest token: states that differ only
 * beyond what one token can reach have the same mask. */
static uint32_t state_key(const gbinding *b, const gstate *s, uint32_t *key)
{
    uint32_t k = 0, cap = b->vi->max_chars + 1;
    for (uint32_t i = 0; i < s->n; i++) {
        for (const gnode *t = s->tops[i]; t; t = t->parent) {
            if (k + 3 >= CACHE_MAX_KEY)
                return 0;
            const gelem *e = &b->g->elems[t->pos];
            key[k++] = t->pos + 1;
            if (e->kind == G_REPC) {
                uint32_t need = e->min > t->count ? e->min - t->count : 0, left = e->max - t->count;
                key[k++] = (need < cap ? need : cap) << 16 | (left < cap ? left : cap);
            }
        }
        key[k++] = 0;
    }
    if (k + 2 >= CACHE_MAX_KEY)
        return 0;
    key[k++] = 0xFFFFFFFFu;
    uint32_t pend = (uint32_t)s->n_pend | (uint32_t)s->need << 4;
    for (uint8_t i = 0; i < s->n_pend && i < 3; i++)
        pend |= (uint32_t)s->pend[i] << (8 * (i + 1));
    key[k++] = pend;
    return k;
}

static uint64_t key_hash(const uint32_t *key, uint32_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ key[i]) * 1099511628211ull;
    return h;
}

static void set_range(const npl_vocab_index *vi, uint32_t lo, uint32_t hi, uint32_t *mask, size_t *allowed)
{
    for (uint32_t k = lo; k < hi; k++) {
        uint32_t id = vi->order[k];
        mask[id >> 5] |= 1u << (id & 31);
    }
    *allowed += hi - lo;
}

/* Which repeated classes a state is inside, and how many more characters
 * each may take (rem[slot], UINT16_MAX for a G_STAR). */
static uint32_t star_slots(const gbinding *b, const gstate *s, uint16_t *rem)
{
    uint32_t slots = 0;
    if (!b->n_star || s->n_pend)
        return 0;
    for (uint32_t i = 0; i < s->n; i++) {
        const gnode *t = s->tops[i];
        if (!t)
            continue;
        const gelem *e = &b->g->elems[t->pos];
        if (e->kind != G_STAR && e->kind != G_REPC)
            continue;
        uint8_t slot = b->slot_of_class[e->arg];
        if (!slot)
            continue;
        uint16_t r = e->kind == G_STAR ? UINT16_MAX : (uint16_t)(e->max - t->count);
        uint32_t bit = 1u << (slot - 1);
        if (!(slots & bit) || r > rem[slot - 1])
            rem[slot - 1] = r;
        slots |= bit;
    }
    return slots;
}

/* The tokens of subtree i are all whole characters of slot s's class. */
static bool subtree_pure(gbinding *b, uint32_t s, uint32_t i)
{
    const npl_vocab_index *vi = b->vi;
    const tnode *n = &vi->nodes[i];
    if (b->nonascii[s] == SLOT_SOME) {
        if (!b->pure[s])
            b->pure[s] = find_pure(b->g, vi, &b->g->classes[b->star_class[s]]);
        return b->pure[s] && ((b->pure[s][i >> 3] >> (i & 7)) & 1);
    }
    if ((n->sub & TS_BROKEN) || ((n->sub & TS_NONASCII) && b->nonascii[s] == SLOT_NONE))
        return false;
    const uint32_t *sa = vi->sub_ascii[i], *ca = b->g->classes[b->star_class[s]].ascii;
    return !((sa[0] & ~ca[0]) | (sa[1] & ~ca[1]) | (sa[2] & ~ca[2]) | (sa[3] & ~ca[3]));
}

/* Class cls has no code point in common with slot s's class. */
static bool disjoint(gbinding *b, uint32_t cls, uint32_t s)
{
    uint8_t *d = &b->disjoint[(size_t)cls * MAX_STAR_SLOTS + s];
    if (!*d) {
        const npl_grammar *g = b->g;
        const gclass *x = &g->classes[cls], *y = &g->classes[b->star_class[s]];
        bool meet = false;
        for (int w = 0; w < 4; w++)
            meet |= (x->ascii[w] & y->ascii[w]) != 0;
        for (uint32_t r = 0; r < x->n_ranges && !meet; r++)
            meet = gclass_meets(g, y, g->ranges[x->first_range + r][0], g->ranges[x->first_range + r][1]);
        *d = meet ? 2 : 1;
    }
    return *d == 1;
}

/* Slot s's repetition is the only stack of st that can take a character
 * of its class, and what follows it (its last character, for a bounded
 * one) cannot take them either. Then each character of the class leaves
 * the repetition plus what follows it, at most 1 + after.n stacks: a
 * pure subtree's tokens are allowed exactly when they fit the characters
 * the repetition has left, and taking them never reaches a stack limit.
 * Otherwise other stacks may multiply with each character (an ambiguous
 * grammar) until a limit refuses the token, which only the walk sees. */
static bool exclusive(gbinding *b, const gstate *st, uint32_t s)
{
    const npl_grammar *g = b->g;
    const gnode *rep = NULL;
    for (uint32_t i = 0; i < st->n; i++) {
        const gnode *t = st->tops[i];
        if (!t)
            continue;
        const gelem *e = &g->elems[t->pos];
        if ((e->kind == G_STAR || e->kind == G_REPC) && b->slot_of_class[e->arg] == s + 1) {
            if (rep)
                return false;
            rep = t;
        } else if (!disjoint(b, e->arg, s)) {
            return false;
        }
    }
    if (!rep)
        return false;
    garena_mark mark = garena_get_mark(&b->walk);
    gstate after = {.tops = b->tmp[0]};
    bool ok = gstate_after(g, &b->walk, rep, &after) == GSTEP_OK && after.n < NPL_GRAMMAR_MAX_STACKS;
    for (uint32_t i = 0; i < after.n && ok; i++)
        ok = !after.tops[i] || disjoint(b, g->elems[after.tops[i]->pos].arg, s);
    garena_release(&b->walk, mark);
    return ok;
}

/* One trie depth of the walk: its state (tops at off in lvl_tops; a
 * level that reuses an ancestor's state points at that one's tops), where
 * the next depth's tops may go, the arena mark after it, the repeated
 * classes it is inside. */
typedef struct level {
    size_t off, next;
    gstate st;
    garena_mark mark;
    uint32_t slots;
    uint32_t excl_known, excl; /* exclusive() per slot, found on first use */
    uint32_t fixed; /* slots whose characters leave this state as it is */
    uint32_t cbase; /* the depth where the character being read began */
    uint16_t rem[MAX_STAR_SLOTS];
} level;

static bool level_exclusive(gbinding *b, level *l, uint32_t s)
{
    uint32_t bit = 1u << s;
    if (!(l->excl_known & bit)) {
        l->excl_known |= bit;
        if (exclusive(b, &l->st, s))
            l->excl |= bit;
    }
    return l->excl & bit;
}

/* Takes subtree i at once when its tokens are all characters of a class
 * the parent level repeats, and that repetition is exclusive(); false
 * when it has to be walked. */
static bool take_pure(gbinding *b, level *p, uint32_t i, uint32_t *mask, size_t *allowed)
{
    const npl_vocab_index *vi = b->vi;
    const tnode *n = &vi->nodes[i];
    /* characters on the path above the subtree, and the most it adds */
    uint32_t pc = n->chars - (n->cp_state == TN_BOUNDARY), need = (uint32_t)n->maxc - pc;
    for (uint32_t slots = p->slots; slots; slots &= slots - 1) {
        uint32_t s = (uint32_t)__builtin_ctz(slots);
        if (!subtree_pure(b, s, i) || !level_exclusive(b, p, s))
            continue;
        if (need <= p->rem[s]) {
            set_range(vi, n->tok_lo, tnode_tok_hi(vi, i), mask, allowed);
            return true;
        }
        uint32_t most = pc + p->rem[s];
        for (uint32_t k = n->tok_lo, hi = tnode_tok_hi(vi, i); k < hi; k++) {
            if (vi->tok_chars[k] <= most) {
                uint32_t id = vi->order[k];
                mask[id >> 5] |= 1u << (id & 31);
                (*allowed)++;
            }
        }
        return true;
    }
    return false;
}

static void level_set(gbinding *b, level *l, size_t off)
{
    l->off = off;
    l->st.tops = b->lvl_tops + off;
    l->excl_known = l->excl = l->fixed = 0;
}

/* The slot of an unbounded repetition that is exclusive() at l and takes
 * cp, as a bit (0: none). Taking cp leaves that repetition plus what
 * follows it, and so does every further character of its class: the
 * state reached is a fixed point for them. */
static uint32_t star_taking(gbinding *b, level *l, uint32_t cp)
{
    for (uint32_t slots = l->slots; slots; slots &= slots - 1) {
        uint32_t s = (uint32_t)__builtin_ctz(slots);
        if (l->rem[s] == UINT16_MAX && gclass_has(b->g, &b->g->classes[b->star_class[s]], cp) &&
            level_exclusive(b, l, s))
            return 1u << s;
    }
    return 0;
}

/* Node n completes a character that q (the level where the character
 * began) takes, and q is a fixed point for it: q, or NULL. */
static const level *same_state(gbinding *b, const level *q, const tnode *n)
{
    if (n->cp_state != TN_BOUNDARY)
        return NULL;
    for (uint32_t f = q->fixed; f; f &= f - 1)
        if (gclass_has(b->g, &b->g->classes[b->star_class[__builtin_ctz(f)]], n->cp))
            return q;
    return NULL;
}

static size_t walk(gbinding *b, const gstate *start, uint32_t *mask)
{
    const npl_grammar *g = b->g;
    const npl_vocab_index *vi = b->vi;
    size_t allowed = 0;
    level *lv = malloc((vi->max_depth + 1) * sizeof *lv);
    if (!lv)
        return 0;
    garena_release(&b->walk, (garena_mark){0, 0});
    memcpy(b->lvl_tops, start->tops, start->n * sizeof *start->tops);
    lv[0].st = *start;
    level_set(b, &lv[0], 0);
    lv[0].next = start->n;
    lv[0].cbase = 0;
    lv[0].mark = garena_get_mark(&b->walk);
    lv[0].slots = star_slots(b, start, lv[0].rem);
    bool use_pure = start->n_pend == 0;
    for (uint32_t i = 1; i < vi->n_nodes;) {
        const tnode *n = &vi->nodes[i];
        level *p = &lv[n->depth - 1], *q = &lv[p->cbase]; /* q: where n's character began */
        if (use_pure && q->slots && take_pure(b, q, i, mask, &allowed)) {
            i = n->end;
            continue;
        }
        /* room for this level's tops after the parent's */
        size_t off = p->next;
        if (off + NPL_GRAMMAR_MAX_STACKS > b->lvl_cap) {
            size_t cap = b->lvl_cap * 2;
            while (cap < off + NPL_GRAMMAR_MAX_STACKS)
                cap *= 2;
            const gnode **nt = realloc(b->lvl_tops, cap * sizeof *nt);
            if (!nt)
                break;
            b->lvl_tops = nt;
            b->lvl_cap = cap;
            for (uint32_t d = 0; d < n->depth; d++)
                lv[d].st.tops = b->lvl_tops + lv[d].off;
        }
        garena_release(&b->walk, p->mark);
        level *c = &lv[n->depth];
        const level *same = use_pure ? same_state(b, q, n) : NULL;
        if (same) {
            *c = *same; /* skips advancing: most nodes inside a string */
            c->next = off;
            c->mark = p->mark;
            c->cbase = n->depth;
        } else {
            level_set(b, c, off);
            if (gstate_advance_byte(g, &b->walk, &p->st, n->byte, &c->st) != GSTEP_OK) {
                i = n->end;
                continue;
            }
            c->next = off + c->st.n;
            c->mark = garena_get_mark(&b->walk);
            c->slots = star_slots(b, &c->st, c->rem);
            c->cbase = n->cp_state == TN_MID ? p->cbase : n->depth;
            if (use_pure && n->cp_state == TN_BOUNDARY)
                c->fixed = star_taking(b, q, n->cp);
        }
        if (n->own_end > n->tok_lo)
            set_range(vi, n->tok_lo, n->own_end, mask, &allowed);
        i++;
    }
    if (gstate_complete(start)) {
        for (uint32_t k = 0; k < vi->n_eog; k++) {
            uint32_t id = (uint32_t)vi->eog[k];
            if (!((mask[id >> 5] >> (id & 31)) & 1)) {
                mask[id >> 5] |= 1u << (id & 31);
                allowed++;
            }
        }
    }
    free(lv);
    return allowed;
}

size_t npl_grammar_matcher_mask(npl_grammar_matcher *m, uint32_t *mask)
{
    if (!m || !mask)
        return 0;
    gbinding *b = m->b;
    memset(mask, 0, (size_t)b->n_words * sizeof *mask);
    if (m->finished)
        return 0;
    uint32_t kn = state_key(b, &m->state, b->key);
    uint64_t h = kn ? key_hash(b->key, kn) : 0;
    if (kn) {
        for (uint32_t i = 0; i < CACHE_ENTRIES; i++) {
            cache_entry *e = &b->cache[i];
            if (e->used && e->hash == h && e->key_n == kn && !memcmp(e->key, b->key, kn * sizeof *b->key)) {
                e->used = ++b->clock;
                memcpy(mask, e->mask, (size_t)b->n_words * sizeof *mask);
                return e->allowed;
            }
        }
    }
    size_t allowed = walk(b, &m->state, mask);
    if (!kn)
        return allowed;
    cache_entry *victim = &b->cache[0];
    for (uint32_t i = 1; i < CACHE_ENTRIES; i++)
        if (b->cache[i].used < victim->used)
            victim = &b->cache[i];
    if (!victim->mask)
        victim->mask = malloc((size_t)b->n_words * sizeof *victim->mask);
    uint32_t *nk = realloc(victim->key, kn * sizeof *nk);
    if (!victim->mask || !nk) {
        if (nk)
            victim->key = nk;
        victim->used = 0;
        return allowed;
    }
    victim->key = nk;
    memcpy(victim->key, b->key, kn * sizeof *b->key);
    memcpy(victim->mask, mask, (size_t)b->n_words * sizeof *mask);
    victim->key_n = kn;
    victim->hash = h;
    victim->allowed = allowed;
    victim->used = ++b->clock;
    return allowed;
}
