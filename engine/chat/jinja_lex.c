/* Jinja lexer: template text and the tokens inside {% %}, {{ }}; comments
 * dropped. Whitespace control is applied here: `-` on a tag strips the
 * whitespace next to it, trim_blocks drops the newline after a block or
 * comment tag, lstrip_blocks drops the indentation before one ({%+
 * keeps it). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"
#include "npl_hex.h"

typedef struct lexer {
    jarena *a;
    const char *src;
    size_t n, p;
    uint32_t line;
    jtoks *out;
} lexer;

static void push(lexer *L, jtok t)
{
    jtoks *o = L->out;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 256;
        jtok *v = jarena_alloc(L->a, cap * sizeof *v);
        if (o->n)
            memcpy(v, o->v, o->n * sizeof *v);
        o->v = v;
        o->cap = cap;
    }
    t.line = t.line ? t.line : L->line;
    o->v[o->n++] = t;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static bool is_ident_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static uint32_t count_lines(const char *s, size_t n)
{
    uint32_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == '\n';
    return k;
}

/* Next tag opener at or after p: returns its position (n if none). */
static size_t find_open(const lexer *L, size_t p)
{
    for (; p + 1 < L->n; p++)
        if (L->src[p] == '{' && (L->src[p + 1] == '%' || L->src[p + 1] == '{' || L->src[p + 1] == '#'))
            return p;
    return L->n;
}

static void lex_string(lexer *L)
{
    char q = L->src[L->p++];
    jsb b;
    jsb_init(&b, L->a, 0);
    uint32_t line = L->line;
    for (;;) {
        if (L->p >= L->n)
            jfail(L->a, "line %u: unterminated string", line);
        char c = L->src[L->p++];
        if (c == q)
            break;
        if (c == '\n')
            L->line++;
        if (c != '\\') {
            jsb_add(&b, &c, 1, NULL);
            continue;
        }
        if (L->p >= L->n)
            jfail(L->a, "line %u: unterminated string", line);
        char e = L->src[L->p++];
        const char *rep = NULL;
        switch (e) {
        case 'n': rep = "\n"; break;
        case 't': rep = "\t"; break;
        case 'r': rep = "\r"; break;
        case '\\': rep = "\\"; break;
        case '\'': rep = "'"; break;
        case '"': rep = "\""; break;
        case '0': rep = ""; jsb_add(&b, "\0", 1, NULL); break;
        case '\n': rep = ""; L->line++; break;
        case 'x':
        case 'u':
        case 'U': {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            for (int i = 0; i < digits; i++) {
                int h = L->p < L->n ? npl_hex_digit(L->src[L->p]) : -1;
                if (h < 0)
                    jfail(L->a, "line %u: bad \\%c escape in a string", L->line, e);
                cp = cp * 16 + (uint32_t)h;
                L->p++;
            }
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                jfail(L->a, "line %u: escape \\%c names no character", L->line, e);
            jsb_add_utf8(&b, cp);
            rep = "";
            break;
        }
        default: /* Python keeps unknown escapes as written */
            jsb_add(&b, "\\", 1, NULL);
            jsb_add(&b, &e, 1, NULL);
            rep = "";
        }
        jsb_addc(&b, rep);
    }
    push(L, (jtok){.k = JT_STRING, .s = jsb_done(&b), .line = line});
}

static const char *const OPS[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                  ">", "=", "|", ".", ",", ":", "(", ")", "[", "]", "{", "}", NULL};

/* Tokens of one tag up to its closer; returns whether the closer had `-`. */
static bool lex_tag(lexer *L, char close_c, jtok_kind close_k)
{
    int depth = 0; /* open ( [ {: a closer inside them is not the tag's end */
    for (;;) {
        while (L->p < L->n && is_ws(L->src[L->p])) {
            if (L->src[L->p] == '\n')
                L->line++;
            L->p++;
        }
        if (L->p >= L->n)
            jfail(L->a, "line %u: tag not closed", L->line);
        const char *s = L->src + L->p;
        size_t left = L->n - L->p;
        if (depth == 0 && left >= 3 && s[0] == '-' && s[1] == close_c && s[2] == '}') {
            L->p += 3;
            push(L, (jtok){.k = close_k});
            return true;
        }
        if (depth == 0 && left >= 2 && s[0] == close_c && s[1] == '}') {
            L->p += 2;
            push(L, (jtok){.k = close_k});
            return false;
        }
        char c = s[0];
        if (c == '\'' || c == '"') {
            lex_string(L);
        } else if (is_ident_start(c)) {
            size_t k = 1;
            while (k < left && (is_ident_start(s[k]) || is_digit(s[k])))
                k++;
            push(L, (jtok){.k = JT_NAME, .s = {s, k, NULL}});
            L->p += k;
        } else if (is_digit(c)) {
            size_t k = 0;
            bool is_float = false;
            while (k < left && (is_digit(s[k]) || s[k] == '_'))
                k++;
            if (k + 1 < left && s[k] == '.' && is_digit(s[k + 1])) {
                is_float = true;
                k++;
                while (k < left && is_digit(s[k]))
                    k++;
            }
            if (k < left && (s[k] == 'e' || s[k] == 'E')) {
                size_t e = k + 1;
                if (e < left && (s[e] == '+' || s[e] == '-'))
                    e++;
                if (e < left && is_digit(s[e])) {
                    is_float = true;
                    k = e;
                    while (k < left && is_digit(s[k]))
                        k++;
                }
            }
            char buf[64];
            size_t m = 0;
            for (size_t i = 0; i < k && m + 1 < sizeof buf; i++)
                if (s[i] != '_')
                    buf[m++] = s[i];
            buf[m] = 0;
            jtok t = {.k = is_float ? JT_FLOAT : JT_INT};
            if (is_float) {
                t.f = strtod(buf, NULL);
            } else {
                errno = 0;
                unsigned long long v = strtoull(buf, NULL, 10);
                if (errno || v > INT64_MAX)
                    jfail(L->a, "line %u: integer literal too large", L->line);
                t.i = (int64_t)v;
            }
            push(L, t);
            L->p += k;
        } else {
            const char *op = NULL;
            for (int i = 0; OPS[i]; i++) {
                size_t k = strlen(OPS[i]);
                if (k <= left && memcmp(s, OPS[i], k) == 0) {
                    op = OPS[i];
                    break;
                }
            }
            if (!op)
                jfail(L->a, "line %u: unexpected character '%c'", L->line, c);
            push(L, (jtok){.k = JT_OP, .s = {op, strlen(op), NULL}});
            L->p += strlen(op);
            if (op[1] == 0 && (op[0] == '(' || op[0] == '[' || op[0] == '{'))
                depth++;
            else if (op[1] == 0 && (op[0] == ')' || op[0] == ']' || op[0] == '}') && depth > 0)
                depth--;
        }
    }
}

/* {% raw %} ... {% endraw %} from r (just after "raw"): the text between
 * as it is. Returns whether the endraw tag ended with '-'. */
static bool lex_raw(lexer *L, size_t r)
{
    const char *src = L->src;
    size_t n = L->n;
    L->out->n--; /* no statement token for raw */
    L->p = r + 3;
    lexer sub = *L;
    jtoks tmp = {0};
    sub.out = &tmp;
    bool m2 = lex_tag(&sub, '%', JT_STMT_CLOSE);
    if (tmp.n != 1)
        jfail(L->a, "line %u: bad raw tag", L->line);
    L->p = sub.p;
    L->line = sub.line;
    const char *end = NULL;
    for (size_t e = L->p; e + 1 < n && !end; e++) {
        if (src[e] == '{' && src[e + 1] == '%') {
            size_t f = e + 2;
            if (f < n && (src[f] == '-' || src[f] == '+'))
                f++;
            while (f < n && is_ws(src[f]))
                f++;
            if (n - f >= 6 && memcmp(src + f, "endraw", 6) == 0)
                end = src + e;
        }
    }
    if (!end)
        jfail(L->a, "line %u: raw block not closed", L->line);
    size_t bs = L->p, be = (size_t)(end - src);
    if (m2)
        while (bs < be && is_ws(src[bs]))
            bs++;
    else if (bs < be && src[bs] == '\n')
        bs++;
    if (be + 2 < n && src[be + 2] == '-')
        while (be > bs && is_ws(src[be - 1]))
            be--;
    if (be > bs)
        push(L, (jtok){.k = JT_TEXT, .s = {src + bs, be - bs, NULL}});
    L->line += count_lines(src + L->p, (size_t)(end - src) - L->p);
    L->p = (size_t)(end - src) + 2;
    if (L->p < n && (src[L->p] == '-' || src[L->p] == '+'))
        L->p++;
    sub = *L;
    sub.out = &tmp;
    tmp.n = 0;
    bool strip_next = lex_tag(&sub, '%', JT_STMT_CLOSE);
    L->p = sub.p;
    L->line = sub.line;
    return strip_next;
}

void jlex(jarena *a, const char *src, size_t n, jtoks *out)
{
    /* Jinja's keep_trailing_newline=False (transformers' setting): one
     * newline at the very end of the template is dropped. */
    if (n > 0 && src[n - 1] == '\n')
        n -= n > 1 && src[n - 2] == '\r' ? 2 : 1;
    lexer L = {.a = a, .src = src, .n = n, .line = 1, .out = out};
    bool strip_next = false; /* previous tag ended with - */
    bool trim_nl = false;    /* previous tag was a block/comment: drop one newline */
    while (L.p < L.n) {
        size_t q = find_open(&L, L.p);
        size_t ts = L.p, te = q; /* text [ts, te) */
        if (strip_next) {
            while (ts < te && is_ws(src[ts]))
                ts++;
        } else if (trim_nl) {
            if (ts < te && src[ts] == '\n')
                ts++;
            else if (ts + 1 < te && src[ts] == '\r' && src[ts + 1] == '\n')
                ts += 2;
        }
        char kind = q < n ? src[q + 1] : 0;
        bool minus = q + 2 < n && src[q + 2] == '-';
        bool plus = q + 2 < n && src[q + 2] == '+';
        if (q < n && minus) {
            while (te > ts && is_ws(src[te - 1]))
                te--;
        } else if (q < n && (kind == '%' || kind == '#') && !plus) {
            /* lstrip_blocks: only when the tag starts its line */
            size_t k = te;
            while (k > ts && (src[k - 1] == ' ' || src[k - 1] == '\t'))
                k--;
            /* k == L.p right after another tag: src[k-1] is its '}' */
            bool line_start = k == 0 || src[k - 1] == '\n';
            if (line_start)
                te = k;
        }
        if (te > ts)
            push(&L, (jtok){.k = JT_TEXT, .s = {src + ts, te - ts, NULL}});
        L.line += count_lines(src + L.p, q - L.p);
        if (q >= n)
            break;
        L.p = q + 2 + (minus || plus);
        if (kind == '#') {
            uint32_t line = L.line;
            size_t e = L.p;
            while (e + 1 < n && !(src[e] == '#' && src[e + 1] == '}'))
                e++;
            if (e + 1 >= n)
                jfail(a, "line %u: comment not closed", line);
            strip_next = e > L.p && src[e - 1] == '-';
            L.line += count_lines(src + L.p, e - L.p);
            L.p = e + 2;
            trim_nl = true;
            continue;
        }
        if (kind == '%') {
            push(&L, (jtok){.k = JT_STMT_OPEN});
            /* {% raw %} ... {% endraw %}: text as is */
            size_t r = L.p;
            while (r < n && is_ws(src[r]))
                r++;
            if (n - r >= 3 && memcmp(src + r, "raw", 3) == 0 && !(r + 3 < n && (is_ident_start(src[r + 3]) || is_digit(src[r + 3])))) {
                strip_next = lex_raw(&L, r);
                trim_nl = true;
                continue;
            }
            strip_next = lex_tag(&L, '%', JT_STMT_CLOSE);
            trim_nl = true;
        } else {
            push(&L, (jtok){.k = JT_EXPR_OPEN});
            strip_next = lex_tag(&L, '}', JT_EXPR_CLOSE);
            trim_nl = false;
        }
    }
    push(&L, (jtok){.k = JT_EOF});
}
