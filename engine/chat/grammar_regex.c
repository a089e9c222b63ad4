/* The regular expressions of JSON Schema "pattern", translated into the
 * grammar of a JSON string's content. The subset: literals, `.`,
 * classes [...] and [^...] with ranges, \d \D \w \W \s \S and escaped
 * punctuation, groups (...) and (?:...), `|`, quantifiers * + ? {m}
 * {m,} {m,n} (lazy forms too), ^ at the start and $ at the end. Without
 * ^ (or $) any characters may come before (after) the match, as the
 * pattern searches the string. Character classes never produce `"`, `\`
 * or control characters, and \s produces a space: a subset of what the
 * pattern allows, so every output still matches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_internal.h"
#include "unicode_utf8.h"

#define MAX_CP 0x10FFFFu
#define MAX_REGEX_NESTING 32u

typedef struct rx {
    const char *s;
    size_t n, p;
    gbuf *out;
    char *err;
    size_t err_cap;
    bool failed;
    unsigned nesting;
} rx;

static void rx_fail(rx *R, const char *msg)
{
    if (R->failed)
        return;
    R->failed = true;
    snprintf(R->err, R->err_cap, "pattern: %s at offset %zu", msg, R->p);
}

typedef struct cprange {
    uint32_t lo, hi;
} cprange;

typedef struct rset {
    cprange r[64];
    size_t n;
} rset;

static void rset_add(rx *R, rset *s, uint32_t lo, uint32_t hi)
{
    if (s->n == sizeof s->r / sizeof s->r[0]) {
        rx_fail(R, "character class with more than 64 ranges");
        return;
    }
    s->r[s->n++] = (cprange){lo, hi};
}

static int cprange_cmp(const void *a, const void *b)
{
    const cprange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Emits a grammar class for s (negated or not), never `"`, `\` or controls. */
static void emit_class(rx *R, rset *s, bool negate)
{
    rset t = {.n = 0};
    if (negate) {
        /* complement first, so the forbidden characters are simply cut */
        qsort(s->r, s->n, sizeof s->r[0], cprange_cmp);
        uint32_t next = 0;
        for (size_t i = 0; i < s->n; i++) {
            if (s->r[i].lo > next)
                rset_add(R, &t, next, s->r[i].lo - 1);
            if (s->r[i].hi + 1 > next)
                next = s->r[i].hi + 1;
        }
        if (next <= MAX_CP)
            rset_add(R, &t, next, MAX_CP);
    } else {
        t = *s;
    }
    gbuf_puts(R->out, "[");
    bool any = false;
    for (size_t i = 0; i < t.n; i++) {
        /* cut 0x00-0x1F, '"' (0x22) and '\\' (0x5C) */
        const cprange cuts[] = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, MAX_CP}};
        for (size_t c = 0; c < 3; c++) {
            uint32_t lo = t.r[i].lo > cuts[c].lo ? t.r[i].lo : cuts[c].lo;
            uint32_t hi = t.r[i].hi < cuts[c].hi ? t.r[i].hi : cuts[c].hi;
            if (lo > hi)
                continue;
            gbuf_printf(R->out, "\\U%08X-\\U%08X", lo, hi);
            any = true;
        }
    }
    if (!any)
        rx_fail(R, "character class that allows no character a JSON string can hold unescaped");
    gbuf_puts(R->out, "]");
}

static void shorthand(rx *R, char c, rset *s, bool *negate)
{
    *negate = c == 'D' || c == 'W' || c == 'S';
    switch (c) {
    case 'd': case 'D': rset_add(R, s, '0', '9'); break;
    case 'w': case 'W':
        rset_add(R, s, '0', '9');
        rset_add(R, s, 'A', 'Z');
        rset_add(R, s, 'a', 'z');
        rset_add(R, s, '_', '_');
        break;
    case 's':
        rset_add(R, s, ' ', ' ');
        break;
    case 'S':
        rset_add(R, s, 0, ' ');
        break;
    default: break;
    }
}

static bool is_shorthand(char c)
{
    return c == 'd' || c == 'D' || c == 'w' || c == 'W' || c == 's' || c == 'S';
}

/* A literal character of the content, as its JSON text. */
static void emit_literal(rx *R, uint32_t cp)
{
    char buf[8];
    size_t k;
    if (cp == '"' || cp == '\\') {
        buf[0] = '\\';
        buf[1] = (char)cp;
        k = 2;
    } else if (cp == '\n' || cp == '\t' || cp == '\r') {
        buf[0] = '\\';
        buf[1] = cp == '\n' ? 'n' : cp == '\t' ? 't' : 'r';
        k = 2;
    } else if (cp < 0x20) {
        k = (size_t)snprintf(buf, sizeof buf, "\\u%04x", cp);
    } else {
        k = npl_utf8_encode(cp, (unsigned char *)buf);
    }
    gbuf_literal(R->out, buf, k);
}

static uint32_t rx_escape_char(rx *R, char e)
{
    switch (e) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
            rx_fail(R, "unsupported escape");
            return 0;
        }
        return (uint32_t)(unsigned char)e;
    }
}

static uint32_t rx_char(rx *R)
{
    uint32_t cp;
    int k = npl_utf8_decode_strict((const unsigned char *)R->s + R->p, R->n - R->p, &cp);
    if (k <= 0) {
        rx_fail(R, "invalid UTF-8");
        return 0;
    }
    R->p += (size_t)k;
    return cp;
}

/* Past a backslash at R->p: the escaped character in *e, or false (and
 * failed) when the pattern ends there. */
static bool rx_take_escape(rx *R, char *e)
{
    R->p++;
    if (R->p >= R->n) {
        rx_fail(R, "pattern ends after '\\'");
        return false;
    }
    *e = R->s[R->p++];
    return true;
}

static void rx_class(rx *R)
{
    R->p++; /* [ */
    bool negate = false;
    if (R->p < R->n && R->s[R->p] == '^') {
        negate = true;
        R->p++;
    }
    rset s = {.n = 0};
    bool first = true;
    while (!R->failed) {
        if (R->p >= R->n) {
            rx_fail(R, "unterminated character class");
            return;
        }
        if (R->s[R->p] == ']' && !first)
            break;
        first = false;
        uint32_t lo;
        if (R->s[R->p] == '\\') {
            char e;
            if (!rx_take_escape(R, &e))
                return;
            if (is_shorthand(e)) {
                bool neg;
                rset sub = {.n = 0};
                shorthand(R, e, &sub, &neg);
                if (neg) {
                    rx_fail(R, "\\D, \\W and \\S inside a class are not supported");
                    return;
                }
                for (size_t i = 0; i < sub.n; i++)
                    rset_add(R, &s, sub.r[i].lo, sub.r[i].hi);
                continue;
            }
            lo = rx_escape_char(R, e);
        } else {
            lo = rx_char(R);
        }
        uint32_t hi = lo;
        if (R->p + 1 < R->n && R->s[R->p] == '-' && R->s[R->p + 1] != ']') {
            R->p++;
            if (R->s[R->p] == '\\') {
                R->p++;
                hi = R->p < R->n ? rx_escape_char(R, R->s[R->p++]) : 0;
            } else {
                hi = rx_char(R);
            }
            if (hi < lo)
                rx_fail(R, "range is backwards");
        }
        rset_add(R, &s, lo, hi);
    }
    if (R->failed)
        return;
    R->p++; /* ] */
    emit_class(R, &s, negate);
}

static void rx_alt(rx *R);

static bool rx_uint(rx *R, unsigned *out)
{
    size_t st = R->p;
    unsigned v = 0;
    while (R->p < R->n && R->s[R->p] >= '0' && R->s[R->p] <= '9') {
        v = v * 10 + (unsigned)(R->s[R->p++] - '0');
        if (v > NPL_GRAMMAR_MAX_REPEAT) {
            rx_fail(R, "repetition count above the limit of 256");
            return false;
        }
    }
    *out = v;
    return R->p > st;
}

static void rx_seq(rx *R)
{
    bool empty = true;
    while (!R->failed && R->p < R->n) {
        char c = R->s[R->p];
        if (c == '|' || c == ')')
            break;
        if (c == '$') {
            if (R->p + 1 != R->n || R->nesting) {
                rx_fail(R, "'$' is supported only at the end of the pattern");
                return;
            }
            break;
        }
        if (c == '^') {
            rx_fail(R, "'^' is supported only at the start of the pattern");
            return;
        }
        gbuf_puts(R->out, " ");
        empty = false;
        if (c == '(') {
            R->p++;
            if (R->p + 1 < R->n && R->s[R->p] == '?') {
                if (R->s[R->p + 1] != ':') {
                    rx_fail(R, "only (?:...) groups are supported");
                    return;
                }
                R->p += 2;
            }
            if (++R->nesting > MAX_REGEX_NESTING) {
                rx_fail(R, "groups nested deeper than 32");
                return;
            }
            gbuf_puts(R->out, "(");
            rx_alt(R);
            R->nesting--;
            if (R->p >= R->n || R->s[R->p] != ')') {
                rx_fail(R, "'(' is not closed");
                return;
            }
            R->p++;
            gbuf_puts(R->out, ")");
        } else if (c == '[') {
            rx_class(R);
        } else if (c == '.') {
            R->p++;
            rset s = {.n = 0};
            emit_class(R, &s, true);
        } else if (c == '\\') {
            char e;
            if (!rx_take_escape(R, &e))
                return;
            if (is_shorthand(e)) {
                rset s = {.n = 0};
                bool neg;
                shorthand(R, e, &s, &neg);
                emit_class(R, &s, neg);
            } else {
                emit_literal(R, rx_escape_char(R, e));
            }
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            rx_fail(R, "quantifier without anything to repeat");
            return;
        } else {
            emit_literal(R, rx_char(R));
        }
        if (R->failed || R->p >= R->n)
            continue;
        c = R->s[R->p];
        if (c == '*' || c == '+' || c == '?') {
            R->p++;
            gbuf_add(R->out, &c, 1);
        } else if (c == '{') {
            R->p++;
            unsigned m = 0, n = 0;
            if (!rx_uint(R, &m)) {
                rx_fail(R, "expected a number after '{'");
                return;
            }
            bool comma = R->p < R->n && R->s[R->p] == ',';
            bool has_n = false;
            if (comma) {
                R->p++;
                has_n = rx_uint(R, &n);
            }
            if (R->failed)
                return;
            if (R->p >= R->n || R->s[R->p] != '}') {
                rx_fail(R, "expected '}'");
                return;
            }
            R->p++;
            if (!comma)
                gbuf_printf(R->out, "{%u}", m);
            else if (!has_n)
                gbuf_printf(R->out, "{%u,}", m);
            else if (n < m) {
                rx_fail(R, "repetition with max below min");
                return;
            } else
                gbuf_printf(R->out, "{%u,%u}", m, n);
        }
        if (R->p < R->n && R->s[R->p] == '?')
            R->p++; /* lazy: the same strings */
    }
    if (empty)
        gbuf_puts(R->out, " \"\"");
}

static void rx_alt(rx *R)
{
    rx_seq(R);
    while (!R->failed && R->p < R->n && R->s[R->p] == '|') {
        R->p++;
        gbuf_puts(R->out, " |");
        rx_seq(R);
    }
}

bool npl_regex_to_grammar(const char *pattern, size_t n, const char *prefix, gbuf *rules, gbuf *expr, char *err,
                          size_t err_cap)
{
    (void)prefix;
    (void)rules;
    rx R = {.s = pattern, .n = n, .out = expr, .err = err, .err_cap = err_cap};
    bool anchored_start = n > 0 && pattern[0] == '^';
    if (anchored_start)
        R.p = 1;
    bool anchored_end = n > 0 && pattern[n - 1] == '$' && !(n > 1 && pattern[n - 2] == '\\');
    gbuf_puts(expr, "\"\\\"\" ");
    if (!anchored_start)
        gbuf_puts(expr, "json-char* ");
    gbuf_puts(expr, "(");
    rx_alt(&R);
    if (!R.failed && R.p < n && pattern[R.p] == '$')
        R.p++;
    if (!R.failed && R.p < n)
        rx_fail(&R, "unmatched ')'");
    gbuf_puts(expr, " )");
    if (!anchored_end)
        gbuf_puts(expr, " json-char*");
    gbuf_puts(expr, " \"\\\"\"");
    return !R.failed;
}
