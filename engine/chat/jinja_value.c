/* Jinja values: the arena they live in, constructors, truth and equality
 * (Python's rules), and their text forms: str() for output, repr() for
 * containers, json.dumps() for tojson, and JSON input. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja_internal.h"
#include "npl_hex.h"
#include "unicode_utf8.h"

/* ---- arena ------------------------------------------------------------- */

struct jarena_block {
    jarena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void jarena_init(jarena *a, size_t limit, jmp_buf *on_fail, char *err_msg, size_t err_cap)
{
    memset(a, 0, sizeof *a);
    a->limit = limit;
    a->on_fail = on_fail;
    a->err_msg = err_msg;
    a->err_cap = err_cap;
}

void jfail(jarena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->err_msg, a->err_cap, fmt, ap);
    va_end(ap);
    longjmp(*a->on_fail, 1);
}

/* ---- work budget -------------------------------------------------------- */

/* The clock is read every this many steps: often enough that a render
 * overshoots its deadline by well under a millisecond of node steps. */
#define JCLOCK_EVERY 4096

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void jcharge(jarena *a, uint64_t steps)
{
    jbudget *b = a->budget;
    if (!b)
        return;
    b->steps += steps;
    if (b->steps > b->max_steps)
        jfail(a, "template takes more than %llu steps (limit max_steps; string work costs a step per %d bytes)",
              (unsigned long long)b->max_steps, NPL_JINJA_BYTES_PER_STEP);
    if (b->deadline_ns && b->steps >= b->next_clock) {
        b->next_clock = b->steps + JCLOCK_EVERY;
        if (monotonic_ns() > b->deadline_ns)
            jfail(a, "template takes more than %u ms to render (limit max_time_ms)", b->max_time_ms);
    }
}

void jcharge_bytes(jarena *a, size_t bytes)
{
    jcharge(a, bytes / NPL_JINJA_BYTES_PER_STEP);
}

int64_t jfind(jarena *a, jstr hay, jstr needle, size_t from)
{
    if (from > hay.n || needle.n > hay.n - from) {
        jcharge_bytes(a, needle.n);
        return -1;
    }
    const char *p = memmem(hay.s + from, hay.n - from, needle.s, needle.n);
    size_t scanned = p ? (size_t)(p - hay.s) - from : hay.n - from;
    jcharge_bytes(a, scanned + 2 * needle.n);
    return p ? (int64_t)(p - hay.s) : -1;
}

void *jarena_alloc(jarena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    if (n > a->limit || a->used_total > a->limit - n)
        jfail(a, "template needs more than %zu bytes of memory", a->limit);
    jarena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        b = malloc(sizeof *b + cap);
        if (!b)
            jfail(a, "out of memory");
        b->used = 0;
        b->cap = cap;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    a->used_total += n;
    memset(p, 0, n);
    return p;
}

char *jarena_strdup(jarena *a, const char *s, size_t n)
{
    char *d = jarena_alloc(a, n + 1);
    if (n)
        memcpy(d, s, n);
    return d;
}

void jarena_free(jarena *a)
{
    jarena_block *b = a->head;
    while (b) {
        jarena_block *nx = b->next;
        free(b);
        b = nx;
    }
    a->head = NULL;
}

/* ---- constructors --------------------------------------------------------- */

jv jv_undef(void) { return (jv){.k = JV_UNDEF}; }
jv jv_none(void) { return (jv){.k = JV_NONE}; }
jv jv_bool(bool b) { return (jv){.k = JV_BOOL, .u.b = b}; }
jv jv_int(int64_t i) { return (jv){.k = JV_INT, .u.i = i}; }
jv jv_float(double f) { return (jv){.k = JV_FLOAT, .u.f = f}; }

jv jv_str(const char *s, size_t n, const uint8_t *mask)
{
    return (jv){.k = JV_STR, .u.s = {s ? s : "", n, mask}};
}

jv jv_cstr(const char *s)
{
    return jv_str(s, strlen(s), NULL);
}

jv jv_list(jarena *a)
{
    return (jv){.k = JV_LIST, .u.l = jarena_alloc(a, sizeof(jlist))};
}

jv jv_dict(jarena *a)
{
    return (jv){.k = JV_DICT, .u.d = jarena_alloc(a, sizeof(jdict))};
}

void jlist_push(jarena *a, jlist *l, jv v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jv *nv = jarena_alloc(a, cap * sizeof *nv);
        if (l->n)
            memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

const jv *jdict_get(const jdict *d, const char *key, size_t n)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->keys[i].n == n && memcmp(d->keys[i].s, key, n) == 0)
            return &d->vals[i];
    return NULL;
}

const jv *jdict_lookup(jarena *a, const jdict *d, const char *key, size_t n)
{
    size_t compared = 0;
    for (size_t i = 0; i < d->n; i++)
        compared += d->keys[i].n == n ? n : 0;
    jcharge_bytes(a, compared);
    return jdict_get(d, key, n);
}

void jdict_set(jarena *a, jdict *d, jstr key, jv v)
{
    jv *old = (jv *)jdict_lookup(a, d, key.s, key.n);
    if (old) {
        *old = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jstr *nk = jarena_alloc(a, cap * sizeof *nk);
        jv *nv = jarena_alloc(a, cap * sizeof *nv);
        if (d->n) {
            memcpy(nk, d->keys, d->n * sizeof *nk);
            memcpy(nv, d->vals, d->n * sizeof *nv);
        }
        d->keys = nk;
        d->vals = nv;
        d->cap = cap;
    }
    d->keys[d->n] = key;
    d->vals[d->n] = v;
    d->n++;
}

/* ---- truth and equality ---------------------------------------------------- */

bool jv_truthy(const jv *v)
{
    switch (v->k) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v->u.b;
    case JV_INT: return v->u.i != 0;
    case JV_FLOAT: return v->u.f != 0;
    case JV_STR: return v->u.s.n != 0;
    case JV_LIST: return v->u.l->n != 0;
    case JV_DICT: return v->u.d->n != 0;
    default: return true;
    }
}

bool jv_num(const jv *v, double *out)
{
    if (v->k == JV_INT)
        *out = (double)v->u.i;
    else if (v->k == JV_FLOAT)
        *out = v->u.f;
    else if (v->k == JV_BOOL)
        *out = v->u.b;
    else
        return false;
    return true;
}

bool jv_equal(jarena *arena, const jv *a, const jv *b)
{
    double x, y;
    if (a->k == JV_INT && b->k == JV_INT)
        return a->u.i == b->u.i;
    if (jv_num(a, &x) && jv_num(b, &y))
        return x == y;
    if (a->k != b->k)
        return false;
    switch (a->k) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR:
        if (a->u.s.n != b->u.s.n)
            return false;
        jcharge_bytes(arena, a->u.s.n);
        return memcmp(a->u.s.s, b->u.s.s, a->u.s.n) == 0;
    case JV_LIST:
        if (a->u.l->n != b->u.l->n)
            return false;
        for (size_t i = 0; i < a->u.l->n; i++)
            if (!jv_equal(arena, &a->u.l->v[i], &b->u.l->v[i]))
                return false;
        return true;
    case JV_DICT:
    case JV_NS:
        if (a->u.d->n != b->u.d->n)
            return false;
        for (size_t i = 0; i < a->u.d->n; i++) {
            const jv *o = jdict_lookup(arena, b->u.d, a->u.d->keys[i].s, a->u.d->keys[i].n);
            if (!o || !jv_equal(arena, &a->u.d->vals[i], o))
                return false;
        }
        return true;
    default: return a->u.d == b->u.d;
    }
}

bool jv_is_str(const jv *v, const char *lit)
{
    return v->k == JV_STR && v->u.s.n == strlen(lit) && memcmp(v->u.s.s, lit, v->u.s.n) == 0;
}

const char *jv_kind_name(jkind k)
{
    static const char *const names[] = {"undefined", "none", "boolean", "integer", "float", "string", "list",
                                        "dict", "namespace", "macro", "function", "method", "loop"};
    return names[k];
}

/* ---- string building ------------------------------------------------------------ */

void jsb_init(jsb *b, jarena *a, size_t limit)
{
    memset(b, 0, sizeof *b);
    b->a = a;
    b->limit = limit;
}

void jsb_add(jsb *b, const char *s, size_t n, const uint8_t *mask)
{
    if (n == 0)
        return;
    if (b->limit && (n > b->limit || b->n > b->limit - n))
        jfail(b->a, "template output exceeds %zu bytes", b->limit);
    jcharge_bytes(b->a, n);
    if (b->n + n + 1 > b->cap) {
        jcharge_bytes(b->a, b->n); /* the copy into the grown buffer */
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *ns = jarena_alloc(b->a, cap);
        if (b->n)
            memcpy(ns, b->s, b->n);
        b->s = ns;
        if (b->any_mask) {
            uint8_t *nm = jarena_alloc(b->a, cap);
            memcpy(nm, b->mask, b->n);
            b->mask = nm;
        }
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    if (mask && !b->any_mask) {
        b->mask = jarena_alloc(b->a, b->cap);
        b->any_mask = true;
    }
    if (b->any_mask) {
        if (mask)
            memcpy(b->mask + b->n, mask, n);
        else
            memset(b->mask + b->n, 0, n);
    }
    b->n += n;
    b->s[b->n] = 0;
}

void jsb_addc(jsb *b, const char *s)
{
    jsb_add(b, s, strlen(s), NULL);
}

void jsb_addstr(jsb *b, jstr s)
{
    jsb_add(b, s.s, s.n, s.mask);
}

void jsb_addf(jsb *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0)
        jsb_add(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1, NULL);
}

void jsb_add_utf8(jsb *b, uint32_t cp)
{
    unsigned char u[4];
    size_t k = npl_utf8_encode(cp, u);
    jsb_add(b, (const char *)u, k, NULL);
}

jstr jsb_done(jsb *b)
{
    return (jstr){b->s ? b->s : "", b->n, b->any_mask ? b->mask : NULL};
}

/* ---- text forms ------------------------------------------------------------------- */

/* Python's repr() of a float: the shortest digits that read back the same. */
static void float_repr(jsb *b, double f)
{
    if (isnan(f)) {
        jsb_addc(b, "nan");
        return;
    }
    if (isinf(f)) {
        jsb_addc(b, f < 0 ? "-inf" : "inf");
        return;
    }
    char e[40];
    int prec;
    for (prec = 0; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec, f);
        if (strtod(e, NULL) == f)
            break;
    }
    snprintf(e, sizeof e, "%.*e", prec, f);
    /* e = [-]d[.ddd]e[+-]XX */
    char digits[24];
    size_t nd = 0;
    const char *p = e;
    bool neg = *p == '-';
    if (neg)
        p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    if (neg)
        jsb_addc(b, "-");
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            jsb_addc(b, "0.");
            for (int i = -1; i > exp; i--)
                jsb_addc(b, "0");
            jsb_add(b, digits, nd, NULL);
        } else {
            for (int i = 0; i <= exp; i++)
                jsb_add(b, i < (int)nd ? &digits[i] : "0", 1, NULL);
            jsb_addc(b, ".");
            if ((int)nd > exp + 1)
                jsb_add(b, digits + exp + 1, nd - (size_t)exp - 1, NULL);
            else
                jsb_addc(b, "0");
        }
    } else {
        jsb_add(b, digits, 1, NULL);
        if (nd > 1) {
            jsb_addc(b, ".");
            jsb_add(b, digits + 1, nd - 1, NULL);
        }
        jsb_addf(b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

static void str_repr(jsb *b, jstr s)
{
    bool has_sq = memchr(s.s, '\'', s.n) != NULL, has_dq = memchr(s.s, '"', s.n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jsb_add(b, &q, 1, NULL);
    for (size_t i = 0; i < s.n; i++) {
        unsigned char c = (unsigned char)s.s[i];
        const uint8_t *m = s.mask ? s.mask + i : NULL;
        if (c == '\\')
            jsb_add(b, "\\\\", 2, NULL);
        else if (c == (unsigned char)q)
            jsb_addf(b, "\\%c", q);
        else if (c == '\n')
            jsb_addc(b, "\\n");
        else if (c == '\r')
            jsb_addc(b, "\\r");
        else if (c == '\t')
            jsb_addc(b, "\\t");
        else if (c < 0x20 || c == 0x7f)
            jsb_addf(b, "\\x%02x", c);
        else
            jsb_add(b, (const char *)&s.s[i], 1, m);
    }
    jsb_add(b, &q, 1, NULL);
}

void jv_repr(jsb *b, const jv *v)
{
    switch (v->k) {
    case JV_STR: str_repr(b, v->u.s); return;
    case JV_LIST:
        jsb_addc(b, "[");
        for (size_t i = 0; i < v->u.l->n; i++) {
            if (i)
                jsb_addc(b, ", ");
            jv_repr(b, &v->u.l->v[i]);
        }
        jsb_addc(b, "]");
        return;
    case JV_DICT:
    case JV_NS:
        jsb_addc(b, v->k == JV_NS ? "<Namespace {" : "{");
        for (size_t i = 0; i < v->u.d->n; i++) {
            if (i)
                jsb_addc(b, ", ");
            str_repr(b, v->u.d->keys[i]);
            jsb_addc(b, ": ");
            jv_repr(b, &v->u.d->vals[i]);
        }
        jsb_addc(b, v->k == JV_NS ? "}>" : "}");
        return;
    default: jv_to_str(b, v);
    }
}

void jv_to_str(jsb *b, const jv *v)
{
    switch (v->k) {
    case JV_UNDEF: return;
    case JV_NONE: jsb_addc(b, "None"); return;
    case JV_BOOL: jsb_addc(b, v->u.b ? "True" : "False"); return;
    case JV_INT: jsb_addf(b, "%lld", (long long)v->u.i); return;
    case JV_FLOAT: float_repr(b, v->u.f); return;
    case JV_STR: jsb_addstr(b, v->u.s); return;
    case JV_LIST:
    case JV_DICT:
    case JV_NS: jv_repr(b, v); return;
    case JV_MACRO: jsb_addc(b, "<macro>"); return;
    case JV_FUNC:
    case JV_METHOD: jsb_addc(b, "<function>"); return;
    case JV_LOOP: jsb_addc(b, "<loop>"); return;
    }
}

jstr jv_as_str(jarena *a, const jv *v)
{
    if (v->k == JV_STR)
        return v->u.s;
    jsb b;
    jsb_init(&b, a, 0);
    jv_to_str(&b, v);
    return jsb_done(&b);
}

/* Decodes the UTF-8 character at s[i] (*len bytes); invalid -> U+FFFD, 1 byte. */
static uint32_t utf8_at(const unsigned char *s, size_t n, size_t i, size_t *len)
{
    uint32_t cp;
    int k = npl_utf8_decode_strict(s + i, n - i, &cp);
    *len = k > 0 ? (size_t)k : 1;
    return k > 0 ? cp : NPL_UTF8_REPLACEMENT;
}

static void json_str(jsb *b, jstr s, bool ascii)
{
    jsb_addc(b, "\"");
    for (size_t i = 0; i < s.n; i++) {
        unsigned char c = (unsigned char)s.s[i];
        const uint8_t *m = s.mask ? s.mask + i : NULL;
        if (ascii && c >= 0x80) { /* Python's ensure_ascii: \uXXXX, surrogate pairs */
            size_t len;
            uint32_t cp = utf8_at((const unsigned char *)s.s, s.n, i, &len);
            if (cp >= 0x10000)
                jsb_addf(b, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF));
            else
                jsb_addf(b, "\\u%04x", cp);
            i += len - 1;
            continue;
        }
        switch (c) {
        case '"': jsb_add(b, "\\\"", 2, m ? (const uint8_t *)"\1\1" : NULL); break;
        case '\\': jsb_add(b, "\\\\", 2, m ? (const uint8_t *)"\1\1" : NULL); break;
        case '\n': jsb_addc(b, "\\n"); break;
        case '\r': jsb_addc(b, "\\r"); break;
        case '\t': jsb_addc(b, "\\t"); break;
        case '\b': jsb_addc(b, "\\b"); break;
        case '\f': jsb_addc(b, "\\f"); break;
        default:
            if (c < 0x20)
                jsb_addf(b, "\\u%04x", c);
            else
                jsb_add(b, (const char *)&s.s[i], 1, m);
        }
    }
    jsb_addc(b, "\"");
}

static void newline_indent(jsb *b, int indent, int depth)
{
    jsb_addc(b, "\n");
    for (int i = 0; i < indent * depth; i++)
        jsb_addc(b, " ");
}

/* Key order for sort_keys: by code point (= UTF-8 byte order). */
static size_t *sorted_keys(jsb *b, const jdict *d)
{
    size_t *ix = jarena_alloc(b->a, (d->n + 1) * sizeof *ix);
    for (size_t i = 0; i < d->n; i++) {
        size_t k = i;
        while (k > 0) {
            jstr x = d->keys[ix[k - 1]], y = d->keys[i];
            size_t n = x.n < y.n ? x.n : y.n;
            jcharge_bytes(b->a, n);
            int c = memcmp(x.s, y.s, n);
            if (c < 0 || (c == 0 && x.n <= y.n))
                break;
            ix[k] = ix[k - 1];
            k--;
        }
        ix[k] = i;
    }
    return ix;
}

/* json.dumps(v, ensure_ascii, indent=indent or None, sort_keys): separators
 * ", " / ": " without indent, "," + newline with it; keys in order. */
void jv_to_json(jsb *b, const jv *v, const jjson_opts *o, int depth)
{
    int indent = o->indent;
    if (depth > 100)
        jfail(b->a, "tojson: value nested too deeply");
    switch (v->k) {
    case JV_UNDEF:
    case JV_NONE: jsb_addc(b, "null"); return;
    case JV_BOOL: jsb_addc(b, v->u.b ? "true" : "false"); return;
    case JV_INT: jsb_addf(b, "%lld", (long long)v->u.i); return;
    case JV_FLOAT:
        if (isnan(v->u.f))
            jsb_addc(b, "NaN");
        else if (isinf(v->u.f))
            jsb_addc(b, v->u.f < 0 ? "-Infinity" : "Infinity");
        else
            float_repr(b, v->u.f);
        return;
    case JV_STR: json_str(b, v->u.s, o->ensure_ascii); return;
    case JV_LIST:
        if (v->u.l->n == 0) {
            jsb_addc(b, "[]");
            return;
        }
        jsb_addc(b, "[");
        for (size_t i = 0; i < v->u.l->n; i++) {
            if (i)
                jsb_addc(b, indent >= 0 ? "," : ", ");
            if (indent >= 0)
                newline_indent(b, indent, depth + 1);
            jv_to_json(b, &v->u.l->v[i], o, depth + 1);
        }
        if (indent >= 0)
            newline_indent(b, indent, depth);
        jsb_addc(b, "]");
        return;
    case JV_DICT:
    case JV_NS:
        if (v->u.d->n == 0) {
            jsb_addc(b, "{}");
            return;
        }
        jsb_addc(b, "{");
        const size_t *ix = o->sort_keys ? sorted_keys(b, v->u.d) : NULL;
        for (size_t i = 0; i < v->u.d->n; i++) {
            size_t k = ix ? ix[i] : i;
            if (i)
                jsb_addc(b, indent >= 0 ? "," : ", ");
            if (indent >= 0)
                newline_indent(b, indent, depth + 1);
            json_str(b, v->u.d->keys[k], o->ensure_ascii);
            jsb_addc(b, ": ");
            jv_to_json(b, &v->u.d->vals[k], o, depth + 1);
        }
        if (indent >= 0)
            newline_indent(b, indent, depth);
        jsb_addc(b, "}");
        return;
    default: jfail(b->a, "tojson: a %s cannot be written as JSON", jv_kind_name(v->k));
    }
}

/* ---- JSON input --------------------------------------------------------------------- */

typedef struct jreader {
    jarena *a;
    const char *s;
    size_t n, p;
    bool mask;
    const uint8_t *ones; /* mask bytes for caller strings */
} jreader;

static void skip_ws(jreader *R)
{
    while (R->p < R->n && (R->s[R->p] == ' ' || R->s[R->p] == '\t' || R->s[R->p] == '\n' || R->s[R->p] == '\r'))
        R->p++;
}

static _Noreturn void json_fail(jreader *R, const char *what)
{
    jfail(R->a, "JSON: %s at byte %zu", what, R->p);
}

static unsigned hex4(jreader *R)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        if (R->p >= R->n)
            json_fail(R, "bad \\u escape");
        char c = R->s[R->p++];
        int h = npl_hex_digit(c);
        if (h < 0)
            json_fail(R, "bad \\u escape");
        v = v * 16 + (unsigned)h;
    }
    return v;
}

static jstr json_read_str(jreader *R)
{
    R->p++; /* opening quote */
    jsb b;
    jsb_init(&b, R->a, 0);
    for (;;) {
        if (R->p >= R->n)
            json_fail(R, "unterminated string");
        unsigned char c = (unsigned char)R->s[R->p++];
        if (c == '"')
            break;
        if (c < 0x20)
            json_fail(R, "control character in a string");
        if (c != '\\') {
            jsb_add(&b, (const char *)&c, 1, NULL);
            continue;
        }
        if (R->p >= R->n)
            json_fail(R, "unterminated string");
        char e = R->s[R->p++];
        char out;
        switch (e) {
        case '"': out = '"'; break;
        case '\\': out = '\\'; break;
        case '/': out = '/'; break;
        case 'b': out = '\b'; break;
        case 'f': out = '\f'; break;
        case 'n': out = '\n'; break;
        case 'r': out = '\r'; break;
        case 't': out = '\t'; break;
        case 'u': {
            unsigned cp = hex4(R);
            if (cp >= 0xD800 && cp < 0xDC00 && R->p + 1 < R->n && R->s[R->p] == '\\' && R->s[R->p + 1] == 'u') {
                R->p += 2;
                unsigned lo = hex4(R);
                if (lo >= 0xDC00 && lo < 0xE000)
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else
                    cp = 0xFFFD;
            } else if (cp >= 0xD800 && cp < 0xE000) {
                cp = 0xFFFD;
            }
            jsb_add_utf8(&b, cp);
            continue;
        }
        default: json_fail(R, "bad escape");
        }
        jsb_add(&b, &out, 1, NULL);
    }
    jstr s = jsb_done(&b);
    if (R->mask && s.n) {
        uint8_t *m = jarena_alloc(R->a, s.n);
        memset(m, 1, s.n);
        s.mask = m;
    }
    return s;
}

static jv json_value(jreader *R, int depth)
{
    if (depth > 64)
        json_fail(R, "nested too deeply");
    skip_ws(R);
    if (R->p >= R->n)
        json_fail(R, "unexpected end");
    char c = R->s[R->p];
    if (c == '"') {
        jstr s = json_read_str(R);
        return (jv){.k = JV_STR, .u.s = s};
    }
    if (c == '[') {
        R->p++;
        jv l = jv_list(R->a);
        skip_ws(R);
        if (R->p < R->n && R->s[R->p] == ']') {
            R->p++;
            return l;
        }
        for (;;) {
            jlist_push(R->a, l.u.l, json_value(R, depth + 1));
            skip_ws(R);
            if (R->p < R->n && R->s[R->p] == ',') {
                R->p++;
                continue;
            }
            if (R->p < R->n && R->s[R->p] == ']') {
                R->p++;
                return l;
            }
            json_fail(R, "expected ',' or ']'");
        }
    }
    if (c == '{') {
        R->p++;
        jv d = jv_dict(R->a);
        skip_ws(R);
        if (R->p < R->n && R->s[R->p] == '}') {
            R->p++;
            return d;
        }
        for (;;) {
            skip_ws(R);
            if (R->p >= R->n || R->s[R->p] != '"')
                json_fail(R, "expected a key");
            bool m = R->mask;
            R->mask = false; /* keys are names, not content */
            jstr k = json_read_str(R);
            R->mask = m;
            skip_ws(R);
            if (R->p >= R->n || R->s[R->p] != ':')
                json_fail(R, "expected ':'");
            R->p++;
            jdict_set(R->a, d.u.d, k, json_value(R, depth + 1));
            skip_ws(R);
            if (R->p < R->n && R->s[R->p] == ',') {
                R->p++;
                continue;
            }
            if (R->p < R->n && R->s[R->p] == '}') {
                R->p++;
                return d;
            }
            json_fail(R, "expected ',' or '}'");
        }
    }
    static const struct { const char *w; jkind k; bool b; } words[] = {
        {"true", JV_BOOL, true}, {"false", JV_BOOL, false}, {"null", JV_NONE, false}};
    for (size_t i = 0; i < 3; i++) {
        size_t k = strlen(words[i].w);
        if (R->n - R->p >= k && memcmp(R->s + R->p, words[i].w, k) == 0) {
            R->p += k;
            return words[i].k == JV_BOOL ? jv_bool(words[i].b) : jv_none();
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        size_t st = R->p;
        bool is_float = false;
        if (R->s[R->p] == '-')
            R->p++;
        while (R->p < R->n) {
            char d = R->s[R->p];
            if (d == '.' || d == 'e' || d == 'E' || d == '+' || (d == '-' && R->p > st))
                is_float = true;
            else if (!(d >= '0' && d <= '9'))
                break;
            R->p++;
        }
        char buf[64];
        size_t k = R->p - st;
        if (k == 0 || k >= sizeof buf)
            json_fail(R, "bad number");
        memcpy(buf, R->s + st, k);
        buf[k] = 0;
        char *end;
        if (!is_float) {
            long long v = strtoll(buf, &end, 10);
            if (*end == 0 && !(v == LLONG_MAX || v == LLONG_MIN))
                return jv_int(v);
        }
        double f = strtod(buf, &end);
        if (*end)
            json_fail(R, "bad number");
        return jv_float(f);
    }
    json_fail(R, "unexpected character");
}

jv jv_from_json(jarena *a, const char *text, size_t n, bool mask)
{
    jreader R = {.a = a, .s = text, .n = n, .mask = mask};
    jv v = json_value(&R, 0);
    skip_ws(&R);
    if (R.p != R.n)
        json_fail(&R, "trailing characters");
    return v;
}
