/* Grammar text -> compiled grammar (grammar_internal.h).
 *
 * The format is GBNF-like: `name ::= alternatives`, alternatives split by
 * `|`, elements are "literals", [classes], rule names, (groups), `.`,
 * with postfix `*` `+` `?` `{m}` `{m,}` `{m,n}`; `#` starts a comment. A
 * rule's body runs until the next `name ::=`. Errors name line:column. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_internal.h"
#include "npl_hex.h"
#include "unicode_utf8.h"

#define MAX_CP 0x10FFFFu

/* ---- text building (also used by the schema compiler) ----------------- */

void gbuf_add(gbuf *b, const char *s, size_t n)
{
    if (!b->oom && npl_buf_append(&b->buf, s, n, NULL) != NPL_OK)
        b->oom = true;
}

void gbuf_puts(gbuf *b, const char *s)
{
    gbuf_add(b, s, strlen(s));
}

void gbuf_printf(gbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (!b->oom && npl_buf_vappendf(&b->buf, NULL, fmt, ap) != NPL_OK)
        b->oom = true;
    va_end(ap);
}

void gbuf_literal(gbuf *b, const char *s, size_t n)
{
    gbuf_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            gbuf_add(b, e, 2);
        } else if (c < 0x20 || c == 0x7f) {
            gbuf_printf(b, "\\x%02x", c);
        } else {
            gbuf_add(b, (const char *)&c, 1);
        }
    }
    gbuf_add(b, "\"", 1);
}

/* ---- classes ---------------------------------------------------------- */

bool gclass_meets(const struct npl_grammar *g, const gclass *c, uint32_t lo, uint32_t hi)
{
    for (uint32_t cp = lo; cp <= hi && cp < 128; cp++)
        if (gclass_has(g, c, cp))
            return true;
    for (uint32_t i = 0; i < c->n_ranges; i++) {
        const uint32_t *r = g->ranges[c->first_range + i];
        if (r[0] <= hi && r[1] >= lo)
            return true;
    }
    return false;
}

/* ---- parser state ----------------------------------------------------- */

typedef struct evec {
    gelem *v;
    uint32_t n, cap;
} evec;

typedef struct prule {
    char *name;
    size_t name_len;
    evec *alts;
    uint32_t n_alts, cap_alts;
    bool defined;
    size_t ref_off; /* first reference, for "undefined rule" */
    uint32_t owner; /* helper rules: the rule they were written in */
} prule;

typedef struct range {
    uint32_t lo, hi;
} range;

typedef struct parser {
    const char *s;
    size_t n, p;
    prule *rules;
    uint32_t n_rules, cap_rules;
    uint32_t *hash; /* rule index + 1, open addressing */
    size_t hash_cap;
    gclass *classes;
    uint32_t n_classes, cap_classes;
    range *ranges;
    uint32_t n_ranges, cap_ranges;
    uint32_t ascii_class[128]; /* class index + 1 of single ASCII chars */
    size_t total_elems;
    uint32_t current; /* rule being defined */
    char *err;
    size_t err_cap;
    bool failed;
} parser;

static void fail_at(parser *P, size_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail_at(parser *P, size_t off, const char *fmt, ...)
{
    if (P->failed)
        return;
    P->failed = true;
    unsigned line = 1, col = 1;
    for (size_t i = 0; i < off && i < P->n; i++) {
        if (P->s[i] == '\n') {
            line++;
            col = 1;
        } else if (((unsigned char)P->s[i] & 0xC0) != 0x80) {
            col++;
        }
    }
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(P->err, P->err_cap, "grammar: line %u, column %u: %s", line, col, msg);
}

static void fail_limit(parser *P, const char *what, unsigned limit)
{
    fail_at(P, P->p, "more than %u %s (the limit)", limit, what);
}

static bool evec_push(parser *P, evec *e, gelem x)
{
    if (P->failed)
        return false;
    if (++P->total_elems > NPL_GRAMMAR_MAX_ELEMS) {
        fail_limit(P, "grammar elements", NPL_GRAMMAR_MAX_ELEMS);
        return false;
    }
    if (e->n == e->cap) {
        uint32_t cap = e->cap ? e->cap * 2 : 8;
        gelem *nv = realloc(e->v, cap * sizeof *nv);
        if (!nv) {
            fail_at(P, P->p, "out of memory");
            return false;
        }
        e->v = nv;
        e->cap = cap;
    }
    e->v[e->n++] = x;
    return true;
}

static uint64_t name_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static uint32_t new_rule(parser *P, const char *name, size_t len, uint32_t owner)
{
    if (P->failed)
        return 0;
    if (P->n_rules >= NPL_GRAMMAR_MAX_RULES) {
        fail_limit(P, "rules", NPL_GRAMMAR_MAX_RULES);
        return 0;
    }
    if (P->n_rules == P->cap_rules) {
        uint32_t cap = P->cap_rules ? P->cap_rules * 2 : 32;
        prule *nr = realloc(P->rules, cap * sizeof *nr);
        if (!nr) {
            fail_at(P, P->p, "out of memory");
            return 0;
        }
        P->rules = nr;
        P->cap_rules = cap;
    }
    prule *r = &P->rules[P->n_rules];
    memset(r, 0, sizeof *r);
    r->name = malloc(len + 1);
    if (!r->name) {
        fail_at(P, P->p, "out of memory");
        return 0;
    }
    memcpy(r->name, name, len);
    r->name[len] = 0;
    r->name_len = len;
    r->owner = owner == UINT32_MAX ? P->n_rules : owner;
    return P->n_rules++;
}

/* Index of the named rule, created (undefined) on first sight. */
static uint32_t rule_named(parser *P, const char *name, size_t len, size_t off)
{
    size_t mask = P->hash_cap - 1;
    size_t i = (size_t)name_hash(name, len) & mask;
    while (P->hash[i]) {
        prule *r = &P->rules[P->hash[i] - 1];
        if (r->name_len == len && memcmp(r->name, name, len) == 0)
            return P->hash[i] - 1;
        i = (i + 1) & mask;
    }
    uint32_t k = new_rule(P, name, len, UINT32_MAX);
    if (P->failed)
        return 0;
    P->rules[k].ref_off = off;
    P->hash[i] = k + 1;
    return k;
}

static evec *rule_new_alt(parser *P, uint32_t r)
{
    prule *R = &P->rules[r];
    if (R->n_alts == R->cap_alts) {
        uint32_t cap = R->cap_alts ? R->cap_alts * 2 : 4;
        evec *na = realloc(R->alts, cap * sizeof *na);
        if (!na) {
            fail_at(P, P->p, "out of memory");
            return NULL;
        }
        R->alts = na;
        R->cap_alts = cap;
    }
    evec *e = &R->alts[R->n_alts++];
    memset(e, 0, sizeof *e);
    return e;
}

static uint32_t helper_rule(parser *P)
{
    char name[64];
    snprintf(name, sizeof name, "%s-%u", P->rules[P->current].name, P->n_rules);
    uint32_t r = new_rule(P, name, strlen(name), P->current);
    if (!P->failed)
        P->rules[r].defined = true;
    return r;
}

/* ---- classes from ranges ------------------------------------------------ */

static int range_cmp(const void *a, const void *b)
{
    const range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static uint32_t add_class(parser *P, range *rs, size_t n, bool negate)
{
    if (P->failed)
        return 0;
    if (n)
        qsort(rs, n, sizeof *rs, range_cmp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && rs[i].lo <= rs[k - 1].hi + 1) {
            if (rs[i].hi > rs[k - 1].hi)
                rs[k - 1].hi = rs[i].hi;
        } else {
            rs[k++] = rs[i];
        }
    }
    n = k;
    if (P->n_classes == P->cap_classes) {
        uint32_t cap = P->cap_classes ? P->cap_classes * 2 : 64;
        gclass *nc = realloc(P->classes, cap * sizeof *nc);
        if (!nc) {
            fail_at(P, P->p, "out of memory");
            return 0;
        }
        P->classes = nc;
        P->cap_classes = cap;
    }
    gclass *c = &P->classes[P->n_classes];
    memset(c, 0, sizeof *c);
    c->first_range = P->n_ranges;
    /* Walk the (possibly complemented) set as ranges. */
    uint32_t next = 0; /* for negation: first code point not yet covered */
    for (size_t i = 0; i <= n; i++) {
        uint32_t lo, hi;
        if (negate) {
            if (i < n) {
                if (rs[i].lo == 0) {
                    next = rs[i].hi + 1;
                    continue;
                }
                lo = next;
                hi = rs[i].lo - 1;
                next = rs[i].hi + 1;
            } else {
                if (next > MAX_CP)
                    break;
                lo = next;
                hi = MAX_CP;
            }
            if (lo > hi)
                continue;
        } else {
            if (i == n)
                break;
            lo = rs[i].lo;
            hi = rs[i].hi;
        }
        for (uint32_t cp = lo; cp <= hi && cp < 128; cp++)
            c->ascii[cp >> 5] |= 1u << (cp & 31);
        if (hi >= 128) {
            if (lo < 128)
                lo = 128;
            if (P->n_ranges == P->cap_ranges) {
                uint32_t cap = P->cap_ranges ? P->cap_ranges * 2 : 64;
                range *nr = realloc(P->ranges, cap * sizeof *nr);
                if (!nr) {
                    fail_at(P, P->p, "out of memory");
                    return 0;
                }
                P->ranges = nr;
                P->cap_ranges = cap;
            }
            P->ranges[P->n_ranges++] = (range){lo, hi};
            c->n_ranges++;
        }
    }
    return P->n_classes++;
}

static uint32_t char_class(parser *P, uint32_t cp)
{
    if (cp < 128 && P->ascii_class[cp])
        return P->ascii_class[cp] - 1;
    range r = {cp, cp};
    uint32_t c = add_class(P, &r, 1, false);
    if (cp < 128 && !P->failed)
        P->ascii_class[cp] = c + 1;
    return c;
}

/* ---- lexing ------------------------------------------------------------ */

static void skip_space(parser *P)
{
    while (P->p < P->n) {
        char c = P->s[P->p];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            P->p++;
        } else if (c == '#') {
            while (P->p < P->n && P->s[P->p] != '\n')
                P->p++;
        } else {
            break;
        }
    }
}

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static size_t name_len_at(const parser *P, size_t p)
{
    size_t k = 0;
    while (p + k < P->n && is_name_char(P->s[p + k]))
        k++;
    return k;
}

/* A rule definition starts here: name ::= */
static bool at_definition(parser *P)
{
    size_t k = name_len_at(P, P->p);
    if (!k)
        return false;
    size_t q = P->p + k;
    while (q < P->n && (P->s[q] == ' ' || P->s[q] == '\t' || P->s[q] == '\n' || P->s[q] == '\r'))
        q++;
    return q + 3 <= P->n && memcmp(P->s + q, "::=", 3) == 0;
}

static uint32_t hex_value(parser *P, size_t digits)
{
    uint32_t v = 0;
    for (size_t i = 0; i < digits; i++) {
        char c = P->p < P->n ? P->s[P->p] : 0;
        int d = npl_hex_digit(c);
        if (d < 0) {
            fail_at(P, P->p, "expected %zu hex digits", digits);
            return 0;
        }
        v = v * 16 + (uint32_t)d;
        P->p++;
    }
    return v;
}

/* One character of a literal or class, escapes decoded. */
static uint32_t read_char(parser *P)
{
    if (P->p >= P->n) {
        fail_at(P, P->p, "unexpected end of grammar");
        return 0;
    }
    unsigned char c = (unsigned char)P->s[P->p];
    if (c == '\\') {
        P->p++;
        if (P->p >= P->n) {
            fail_at(P, P->p, "unexpected end after '\\'");
            return 0;
        }
        char e = P->s[P->p++];
        switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '0': return 0;
        case 'x': return hex_value(P, 2);
        case 'u': return hex_value(P, 4);
        case 'U': {
            uint32_t v = hex_value(P, 8);
            if (v > MAX_CP)
                fail_at(P, P->p, "code point U+%X is beyond U+10FFFF", v);
            return v;
        }
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'':
            return (uint32_t)e;
        default:
            fail_at(P, P->p - 1, "unknown escape '\\%c'", e);
            return 0;
        }
    }
    uint32_t cp;
    int k = npl_utf8_decode_strict((const unsigned char *)P->s + P->p, P->n - P->p, &cp);
    if (k <= 0) {
        fail_at(P, P->p, "invalid UTF-8");
        return 0;
    }
    P->p += (size_t)k;
    return cp;
}

/* ---- syntax ------------------------------------------------------------ */

static void parse_alternatives(parser *P, uint32_t rule, unsigned nesting);

static bool parse_uint(parser *P, uint32_t *out)
{
    size_t st = P->p;
    uint64_t v = 0;
    while (P->p < P->n && P->s[P->p] >= '0' && P->s[P->p] <= '9') {
        v = v * 10 + (uint64_t)(P->s[P->p] - '0');
        if (v > NPL_GRAMMAR_MAX_REPEAT) {
            fail_at(P, st, "repetition count above %u (the limit)", NPL_GRAMMAR_MAX_REPEAT);
            return false;
        }
        P->p++;
    }
    if (P->p == st) {
        fail_at(P, P->p, "expected a number");
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

/* Wraps a run of elements into one element (a helper rule when needed). */
static gelem as_one(parser *P, evec *unit)
{
    if (unit->n == 1)
        return unit->v[0];
    uint32_t r = helper_rule(P);
    evec *a = P->failed ? NULL : rule_new_alt(P, r);
    if (a) {
        *a = *unit;
        unit->v = NULL;
        unit->n = unit->cap = 0;
    }
    return (gelem){G_RULE, r, 0, 0};
}

static uint32_t rule_of(parser *P, gelem e1, gelem e2, bool two)
{
    uint32_t r = helper_rule(P);
    evec *a = P->failed ? NULL : rule_new_alt(P, r);
    if (a) {
        evec_push(P, a, e1);
        if (two)
            evec_push(P, a, e2);
    }
    if (!P->failed)
        rule_new_alt(P, r); /* the empty alternative */
    return r;
}

/* e*: a class stays one G_STAR; anything else R ::= e R | (empty). */
static gelem star_of(parser *P, gelem e)
{
    if (e.kind == G_CHAR)
        return (gelem){G_STAR, e.arg, 0, 0};
    uint32_t r = helper_rule(P);
    evec *a = P->failed ? NULL : rule_new_alt(P, r);
    if (a) {
        evec_push(P, a, e);
        evec_push(P, a, (gelem){G_RULE, r, 0, 0});
        rule_new_alt(P, r);
    }
    return (gelem){G_RULE, r, 0, 0};
}

static void apply_repeat(parser *P, evec *seq, evec *unit, uint32_t min, uint32_t max, bool unbounded)
{
    if (unit->n == 0)
        return; /* repeating nothing matches nothing more */
    gelem e = as_one(P, unit);
    if (e.kind == G_CHAR && !unbounded) {
        /* a bounded run of one class: one counting element */
        if (max > 0)
            evec_push(P, seq, (gelem){G_REPC, e.arg, (uint16_t)min, (uint16_t)max});
        return;
    }
    for (uint32_t i = 0; i < min; i++)
        evec_push(P, seq, e);
    if (unbounded) {
        evec_push(P, seq, star_of(P, e));
        return;
    }
    /* up to max - min more: R1 ::= e | ; Rk ::= e R(k-1) | */
    gelem tail = {0};
    for (uint32_t k = 1; k + min <= max && !P->failed; k++) {
        uint32_t r = rule_of(P, e, tail, k > 1);
        tail = (gelem){G_RULE, r, 0, 0};
    }
    if (max > min)
        evec_push(P, seq, tail);
}

static void parse_class(parser *P, evec *unit)
{
    size_t st = P->p;
    P->p++; /* [ */
    bool negate = false;
    if (P->p < P->n && P->s[P->p] == '^') {
        negate = true;
        P->p++;
    }
    range *rs = NULL;
    size_t n = 0, cap = 0;
    while (!P->failed) {
        if (P->p >= P->n) {
            fail_at(P, st, "unterminated character class");
            break;
        }
        if (P->s[P->p] == ']')
            break;
        uint32_t lo = read_char(P), hi = lo;
        if (P->p + 1 < P->n && P->s[P->p] == '-' && P->s[P->p + 1] != ']') {
            P->p++;
            hi = read_char(P);
            if (hi < lo)
                fail_at(P, P->p, "range is backwards");
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            range *nr = realloc(rs, cap * sizeof *nr);
            if (!nr) {
                fail_at(P, P->p, "out of memory");
                break;
            }
            rs = nr;
        }
        rs[n++] = (range){lo, hi};
    }
    if (!P->failed) {
        P->p++; /* ] */
        uint32_t c = add_class(P, rs, n, negate);
        evec_push(P, unit, (gelem){G_CHAR, c, 0, 0});
    }
    free(rs);
}

static void parse_sequence(parser *P, evec *seq, unsigned nesting)
{
    evec unit = {0};
    for (;;) {
        skip_space(P);
        if (P->failed || P->p >= P->n)
            break;
        char c = P->s[P->p];
        if (c == '|' || c == ')' || at_definition(P))
            break;
        unit.n = 0;
        if (c == '"') {
            size_t st = P->p++;
            while (!P->failed) {
                if (P->p >= P->n) {
                    fail_at(P, st, "unterminated string literal");
                    break;
                }
                if (P->s[P->p] == '"') {
                    P->p++;
                    break;
                }
                uint32_t cp = read_char(P);
                if (!P->failed)
                    evec_push(P, &unit, (gelem){G_CHAR, char_class(P, cp), 0, 0});
            }
        } else if (c == '[') {
            parse_class(P, &unit);
        } else if (c == '.') {
            P->p++;
            range any = {0, MAX_CP};
            evec_push(P, &unit, (gelem){G_CHAR, add_class(P, &any, 1, false), 0, 0});
        } else if (c == '(') {
            size_t st = P->p++;
            if (nesting + 1 > NPL_GRAMMAR_MAX_NESTING) {
                fail_at(P, st, "parentheses nested deeper than %u (the limit)", NPL_GRAMMAR_MAX_NESTING);
                break;
            }
            uint32_t r = helper_rule(P);
            parse_alternatives(P, r, nesting + 1);
            skip_space(P);
            if (!P->failed && (P->p >= P->n || P->s[P->p] != ')'))
                fail_at(P, st, "'(' is not closed");
            P->p++;
            evec_push(P, &unit, (gelem){G_RULE, r, 0, 0});
        } else if (name_len_at(P, P->p)) {
            size_t k = name_len_at(P, P->p);
            uint32_t r = rule_named(P, P->s + P->p, k, P->p);
            P->p += k;
            evec_push(P, &unit, (gelem){G_RULE, r, 0, 0});
        } else {
            fail_at(P, P->p, "unexpected character '%c'", c);
            break;
        }
        if (P->failed)
            break;
        /* postfix operators (no space before them) */
        char q = P->p < P->n ? P->s[P->p] : 0;
        if (q == '*' || q == '+' || q == '?') {
            P->p++;
            apply_repeat(P, seq, &unit, q == '+' ? 1 : 0, 1, q != '?');
        } else if (q == '{') {
            size_t st = P->p++;
            uint32_t min = 0, max = 0;
            bool unbounded = false;
            if (!parse_uint(P, &min))
                break;
            if (P->p < P->n && P->s[P->p] == ',') {
                P->p++;
                if (P->p < P->n && P->s[P->p] == '}')
                    unbounded = true;
                else if (!parse_uint(P, &max))
                    break;
            } else {
                max = min;
            }
            if (P->p >= P->n || P->s[P->p] != '}') {
                fail_at(P, st, "expected '}' to close the repetition");
                break;
            }
            P->p++;
            if (!unbounded && max < min) {
                fail_at(P, st, "repetition {%u,%u} has max below min", min, max);
                break;
            }
            apply_repeat(P, seq, &unit, min, max, unbounded);
        } else {
            for (uint32_t i = 0; i < unit.n; i++)
                evec_push(P, seq, unit.v[i]);
        }
    }
    free(unit.v);
}

static void parse_alternatives(parser *P, uint32_t rule, unsigned nesting)
{
    for (;;) {
        evec *a = rule_new_alt(P, rule);
        if (!a)
            return;
        evec seq = {0};
        parse_sequence(P, &seq, nesting);
        /* the rule's alternative list may have moved while parsing */
        P->rules[rule].alts[P->rules[rule].n_alts - 1] = seq;
        skip_space(P);
        if (P->failed || P->p >= P->n || P->s[P->p] != '|')
            return;
        P->p++;
    }
}

static void parse_grammar(parser *P)
{
    for (;;) {
        skip_space(P);
        if (P->failed || P->p >= P->n)
            return;
        size_t k = name_len_at(P, P->p);
        if (!k || !at_definition(P)) {
            fail_at(P, P->p, "expected a rule definition 'name ::= ...'");
            return;
        }
        size_t off = P->p;
        uint32_t r = rule_named(P, P->s + P->p, k, P->p);
        if (P->failed)
            return;
        if (P->rules[r].defined) {
            fail_at(P, off, "rule '%s' is defined twice", P->rules[r].name);
            return;
        }
        P->rules[r].defined = true;
        P->p += k;
        skip_space(P);
        P->p += 3; /* ::= */
        P->current = r;
        parse_alternatives(P, r, 0);
        if (!P->failed && P->p < P->n && P->s[P->p] == ')') {
            fail_at(P, P->p, "')' without '('");
            return;
        }
    }
}

/* ---- checks ------------------------------------------------------------ */

static bool elem_nullable(const gelem *e, const bool *nullable)
{
    return e->kind == G_STAR || (e->kind == G_REPC && e->min == 0) || (e->kind == G_RULE && nullable[e->arg]);
}

/* A rule that can reach itself without consuming input would expand
 * forever; refuse it by name. */
static void check_left_recursion(parser *P)
{
    uint32_t n = P->n_rules;
    bool *nullable = calloc(n, sizeof *nullable);
    uint8_t *color = calloc(n, 1);
    uint32_t *stack = malloc((size_t)n * 2 * sizeof *stack);
    if (!nullable || !color || !stack) {
        fail_at(P, 0, "out of memory");
        goto out;
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t r = 0; r < n; r++) {
            if (nullable[r])
                continue;
            for (uint32_t a = 0; a < P->rules[r].n_alts && !nullable[r]; a++) {
                const evec *e = &P->rules[r].alts[a];
                uint32_t i = 0;
                while (i < e->n && elem_nullable(&e->v[i], nullable))
                    i++;
                if (i == e->n)
                    nullable[r] = changed = true;
            }
        }
    }
    /* Iterative DFS over "can start with" edges; stack holds (rule, next edge). */
    for (uint32_t s = 0; s < n && !P->failed; s++) {
        if (color[s])
            continue;
        uint32_t sp = 0;
        stack[sp++] = s;
        stack[sp++] = 0;
        color[s] = 1;
        while (sp && !P->failed) {
            uint32_t r = stack[sp - 2], edge = stack[sp - 1];
            /* enumerate edges as (alt, index) flattened by a running counter */
            uint32_t count = 0, target = UINT32_MAX;
            for (uint32_t a = 0; a < P->rules[r].n_alts && target == UINT32_MAX; a++) {
                const evec *e = &P->rules[r].alts[a];
                for (uint32_t i = 0; i < e->n; i++) {
                    if (e->v[i].kind == G_RULE) {
                        if (count++ == edge) {
                            target = e->v[i].arg;
                            break;
                        }
                    }
                    if (!elem_nullable(&e->v[i], nullable))
                        break;
                }
            }
            if (target == UINT32_MAX) {
                color[r] = 2;
                sp -= 2;
                continue;
            }
            stack[sp - 1] = edge + 1;
            if (color[target] == 1) {
                const prule *o = &P->rules[P->rules[target].owner];
                if (P->rules[target].owner != target)
                    fail_at(P, o->ref_off, "rule '%s' is left-recursive (a repetition of something that can be empty, or a rule that starts with itself)", o->name);
                else
                    fail_at(P, o->ref_off, "rule '%s' is left-recursive (it can start with itself)", o->name);
            } else if (color[target] == 0) {
                color[target] = 1;
                stack[sp++] = target;
                stack[sp++] = 0;
            }
        }
    }
out:
    free(nullable);
    free(color);
    free(stack);
}

/* ---- entry ------------------------------------------------------------- */

static void parser_free(parser *P)
{
    for (uint32_t r = 0; r < P->n_rules; r++) {
        for (uint32_t a = 0; a < P->rules[r].n_alts; a++)
            free(P->rules[r].alts[a].v);
        free(P->rules[r].alts);
        free(P->rules[r].name);
    }
    free(P->rules);
    free(P->hash);
    free(P->classes);
    free(P->ranges);
}

void npl_grammar_free(npl_grammar *g)
{
    if (!g)
        return;
    free(g->elems);
    free(g->alts);
    free(g->rule_alts);
    free(g->classes);
    free(g->ranges);
    free(g);
}

static npl_grammar *flatten(parser *P)
{
    npl_grammar *g = calloc(1, sizeof *g);
    size_t n_alts = 0, n_elems = 0;
    for (uint32_t r = 0; r < P->n_rules; r++) {
        n_alts += P->rules[r].n_alts;
        for (uint32_t a = 0; a < P->rules[r].n_alts; a++)
            n_elems += P->rules[r].alts[a].n + 1;
    }
    if (g) {
        g->elems = malloc(n_elems * sizeof *g->elems);
        g->alts = malloc((n_alts + 1) * sizeof *g->alts);
        g->rule_alts = malloc(((size_t)P->n_rules + 1) * sizeof *g->rule_alts);
        g->classes = malloc(((size_t)P->n_classes + 1) * sizeof *g->classes);
        g->ranges = malloc(((size_t)P->n_ranges + 1) * sizeof *g->ranges);
    }
    if (!g || !g->elems || !g->alts || !g->rule_alts || !g->classes || !g->ranges) {
        npl_grammar_free(g);
        return NULL;
    }
    uint32_t ai = 0, ei = 0;
    for (uint32_t r = 0; r < P->n_rules; r++) {
        g->rule_alts[r] = ai;
        for (uint32_t a = 0; a < P->rules[r].n_alts; a++) {
            g->alts[ai++] = ei;
            const evec *e = &P->rules[r].alts[a];
            if (e->n)
                memcpy(g->elems + ei, e->v, e->n * sizeof *e->v);
            ei += e->n;
            g->elems[ei++] = (gelem){G_END, 0, 0, 0};
        }
    }
    g->rule_alts[P->n_rules] = ai;
    g->n_elems = ei;
    g->n_rules = P->n_rules;
    if (P->n_classes)
        memcpy(g->classes, P->classes, P->n_classes * sizeof *g->classes);
    g->n_classes = P->n_classes;
    for (uint32_t i = 0; i < P->n_ranges; i++) {
        g->ranges[i][0] = P->ranges[i].lo;
        g->ranges[i][1] = P->ranges[i].hi;
    }
    g->n_ranges = P->n_ranges;
    return g;
}

npl_grammar *npl_grammar_compile_text(const char *text, size_t len, npl_error *err)
{
    if (!text) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "grammar: text is NULL");
        return NULL;
    }
    if (len > NPL_GRAMMAR_MAX_TEXT) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "grammar: %zu bytes is more than %u (the limit)", len,
                      NPL_GRAMMAR_MAX_TEXT);
        return NULL;
    }
    char msg[400] = "";
    parser P = {.s = text, .n = len, .err = msg, .err_cap = sizeof msg};
    P.hash_cap = 2 * (size_t)NPL_GRAMMAR_MAX_RULES;
    P.hash = calloc(P.hash_cap, sizeof *P.hash);
    if (!P.hash) {
        npl_error_set(err, NPL_ERR_NOMEM, "grammar: out of memory");
        return NULL;
    }
    parse_grammar(&P);
    if (!P.failed) {
        for (uint32_t r = 0; r < P.n_rules && !P.failed; r++)
            if (!P.rules[r].defined)
                fail_at(&P, P.rules[r].ref_off, "rule '%s' is used but not defined", P.rules[r].name);
    }
    uint32_t root = 0;
    if (!P.failed) {
        size_t mask = P.hash_cap - 1, i = (size_t)name_hash("root", 4) & mask;
        bool found = false;
        while (P.hash[i]) {
            if (!strcmp(P.rules[P.hash[i] - 1].name, "root")) {
                root = P.hash[i] - 1;
                found = true;
                break;
            }
            i = (i + 1) & mask;
        }
        if (!found)
            fail_at(&P, len, "no rule named 'root' (where output starts)");
    }
    if (!P.failed)
        check_left_recursion(&P);
    npl_grammar *g = NULL;
    if (!P.failed) {
        g = flatten(&P);
        if (!g)
            fail_at(&P, 0, "out of memory");
        else
            g->root = root;
    }
    parser_free(&P);
    if (!g)
        npl_error_set(err, NPL_ERR_INVALID_ARG, "%s", msg);
    return g;
}
