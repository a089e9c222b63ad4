/* JSON Schema -> grammar text (then compiled like any grammar). The
 * subset is the one OpenAI's strict mode and Ollama accept; see
 * docs/chat-and-sampling.md. Output is compact JSON with at most one
 * space around separators, properties in the schema's order. Errors name
 * the schema path as a JSON pointer (/properties/age/type). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_internal.h"
#include "jinja_internal.h"

#define INT_CAP 9999999999999999LL /* 16 digits: the largest magnitude produced */
#define MAX_REFS 512u

/* Shared building blocks, emitted when used. */
enum {
    P_VALUE = 1 << 0,
    P_STRING = 1 << 1,
    P_NUMBER = 1 << 2,
    P_INT = 1 << 3,
    P_DATE = 1 << 4,
    P_TIME = 1 << 5,
    P_UUID = 1 << 6,
};

static const char prim_text[] =
    "ws ::= \" \"?\n"
    "json-value ::= json-object | json-array | json-string | json-number | \"true\" | \"false\" | \"null\"\n"
    "json-object ::= \"{\" ws ( json-string ws \":\" ws json-value ( ws \",\" ws json-string ws \":\" ws json-value )* ws )? \"}\"\n"
    "json-array ::= \"[\" ws ( json-value ( ws \",\" ws json-value )* ws )? \"]\"\n";
static const char prim_string[] =
    "json-string ::= \"\\\"\" json-chars \"\\\"\"\n"
    "json-chars ::= [^\"\\\\\\x00-\\x1f]* ( \"\\\\\" json-esc json-chars )?\n"
    "json-char ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" json-esc\n"
    "json-esc ::= [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}\n";
static const char prim_int[] = "json-int ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n";
static const char prim_number[] =
    "json-number ::= json-int ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?\n";
static const char prim_date[] =
    "fmt-date ::= [0-9]{4} \"-\" ( ( \"01\" | \"03\" | \"05\" | \"07\" | \"08\" | \"10\" | \"12\" ) \"-\" fmt-d31 | "
    "( \"04\" | \"06\" | \"09\" | \"11\" ) \"-\" fmt-d30 | \"02-\" fmt-d28 )\n"
    "fmt-d28 ::= \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]\n"
    "fmt-d30 ::= fmt-d28 | \"29\" | \"30\"\n"
    "fmt-d31 ::= fmt-d30 | \"31\"\n";
static const char prim_time[] =
    "fmt-time ::= ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,6} )? "
    "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )\n";
static const char prim_uuid[] =
    "fmt-uuid ::= [0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12}\n";

typedef struct schema_ref {
    const jv *target;
    char name[24];
} schema_ref;

typedef struct sc {
    jarena a;
    jmp_buf jb;
    char amsg[256];
    gbuf rules;
    char path[1024];
    size_t path_n;
    const jv *root;
    schema_ref refs[MAX_REFS];
    unsigned n_refs;
    unsigned n_rules;
    unsigned depth;
    unsigned prims;
    char err[1500];
    bool failed;
} sc;

static void sfail(sc *S, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sfail(sc *S, const char *fmt, ...)
{
    if (S->failed)
        return;
    S->failed = true;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(S->err, sizeof S->err, "schema: %s: %s", S->path_n ? S->path : "(root)", msg);
}

static size_t path_push(sc *S, const char *seg, size_t n)
{
    size_t saved = S->path_n;
    if (S->path_n + 2 * n + 2 >= sizeof S->path)
        return saved; /* the path is only for messages: cut it short */
    S->path[S->path_n++] = '/';
    for (size_t i = 0; i < n; i++) {
        if (seg[i] == '~' || seg[i] == '/') {
            S->path[S->path_n++] = '~';
            S->path[S->path_n++] = seg[i] == '~' ? '0' : '1';
        } else {
            S->path[S->path_n++] = seg[i];
        }
    }
    S->path[S->path_n] = 0;
    return saved;
}

static void path_pop(sc *S, size_t saved)
{
    S->path_n = saved;
    S->path[saved] = 0;
}

static const jv *get(const jv *s, const char *key)
{
    return s && s->k == JV_DICT ? jdict_get(s->u.d, key, strlen(key)) : NULL;
}

static void new_rule_name(sc *S, char name[24])
{
    snprintf(name, 24, "s%u", S->n_rules++);
}

static void schema_expr(sc *S, const jv *s, gbuf *out);

/* Compiles subschema s (at path/key) into out as an expression. */
static void sub_expr(sc *S, const jv *s, const char *key, gbuf *out)
{
    size_t saved = path_push(S, key, strlen(key));
    schema_expr(S, s, out);
    path_pop(S, saved);
}

/* A rule holding s's expression; its name in name. */
static void sub_rule(sc *S, const jv *s, const char *key, char name[24])
{
    gbuf body = {0};
    sub_expr(S, s, key, &body);
    new_rule_name(S, name);
    gbuf_printf(&S->rules, "%s ::= %s\n", name, body.buf.data ? body.buf.data : "\"\"");
    free(body.buf.data);
}

static void json_literal(sc *S, const jv *v, gbuf *out)
{
    jsb b;
    jsb_init(&b, &S->a, 0);
    jjson_opts o = {.indent = -1, .ensure_ascii = false, .sort_keys = false};
    jv_to_json(&b, v, &o, 0);
    jstr t = jsb_done(&b);
    gbuf_literal(out, t.s, t.n);
}

static bool num_of(const jv *v, double *out)
{
    if (!v || (v->k != JV_INT && v->k != JV_FLOAT))
        return false;
    *out = v->k == JV_INT ? (double)v->u.i : v->u.f;
    return true;
}

/* ---- integer ranges ------------------------------------------------------ */

static int n_digits(long long v)
{
    int d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* Equal-length digit strings x..y (x <= y). */
static void same_len(gbuf *out, const char *x, const char *y, size_t n)
{
    if (n == 0)
        return;
    if (!memcmp(x, y, n)) {
        gbuf_literal(out, x, n);
        return;
    }
    bool low_rest = true, high_rest = true;
    for (size_t i = 1; i < n; i++) {
        low_rest &= x[i] == '0';
        high_rest &= y[i] == '9';
    }
    if (low_rest && high_rest) {
        gbuf_printf(out, "[%c-%c]", x[0], y[0]);
        if (n > 1)
            gbuf_printf(out, " [0-9]{%zu}", n - 1);
        return;
    }
    if (x[0] == y[0]) {
        gbuf_printf(out, "\"%c\" ", x[0]);
        same_len(out, x + 1, y + 1, n - 1);
        return;
    }
    char nines[20], zeros[20];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    gbuf_printf(out, "( \"%c\" ", x[0]);
    same_len(out, x + 1, nines, n - 1);
    if (y[0] - x[0] > 1) {
        gbuf_printf(out, " | [%c-%c]", x[0] + 1, y[0] - 1);
        if (n > 1)
            gbuf_printf(out, " [0-9]{%zu}", n - 1);
    }
    gbuf_printf(out, " | \"%c\" ", y[0]);
    same_len(out, zeros, y + 1, n - 1);
    gbuf_puts(out, " )");
}

/* Non-negative integers a..b, without leading zeros. */
static void pos_range(gbuf *out, long long a, long long b)
{
    gbuf_puts(out, "(");
    bool first = true;
    long long p = 1;
    for (int k = 1; k <= n_digits(b); k++, p *= 10) {
        long long lo = k == 1 ? 0 : p, hi = p * 10 - 1;
        if (lo < a)
            lo = a;
        if (hi > b)
            hi = b;
        if (lo > hi || k < n_digits(a))
            continue;
        char xs[24], ys[24];
        snprintf(xs, sizeof xs, "%lld", lo);
        snprintf(ys, sizeof ys, "%lld", hi);
        gbuf_puts(out, first ? " " : " | ");
        first = false;
        same_len(out, xs, ys, strlen(xs));
    }
    gbuf_puts(out, " )");
}

/* Integers lo..hi (within +-INT_CAP); false when empty. */
static bool int_range(gbuf *out, long long lo, long long hi)
{
    if (lo > hi)
        return false;
    bool any = false;
    gbuf_puts(out, "(");
    if (hi >= 0) {
        gbuf_puts(out, " ");
        pos_range(out, lo > 0 ? lo : 0, hi);
        any = true;
    }
    if (lo < 0) {
        gbuf_puts(out, any ? " | \"-\" " : " \"-\" ");
        pos_range(out, hi < 0 ? -hi : 1, -lo);
    }
    gbuf_puts(out, " )");
    return true;
}

/* The smallest and largest allowed integers of a number schema. */
static void int_bounds(sc *S, const jv *s, long long *lo, long long *hi)
{
    double v;
    *lo = -INT_CAP;
    *hi = INT_CAP;
    const jv *emin = get(s, "exclusiveMinimum"), *emax = get(s, "exclusiveMaximum");
    bool emin_flag = emin && emin->k == JV_BOOL && emin->u.b, emax_flag = emax && emax->k == JV_BOOL && emax->u.b;
    if (num_of(get(s, "minimum"), &v)) {
        double c = ceil(v);
        if (emin_flag && c == v)
            c += 1;
        if (c > (double)*lo)
            *lo = c > (double)INT_CAP ? INT_CAP + 1 : (long long)c;
    }
    if (num_of(emin, &v)) {
        double c = floor(v) + 1;
        if (c > (double)*lo)
            *lo = c > (double)INT_CAP ? INT_CAP + 1 : (long long)c;
    }
    if (num_of(get(s, "maximum"), &v)) {
        double c = floor(v);
        if (emax_flag && c == v)
            c -= 1;
        if (c < (double)*hi)
            *hi = c < -(double)INT_CAP ? -INT_CAP - 1 : (long long)c;
    }
    if (num_of(emax, &v)) {
        double c = ceil(v) - 1;
        if (c < (double)*hi)
            *hi = c < -(double)INT_CAP ? -INT_CAP - 1 : (long long)c;
    }
    (void)S;
}

static bool has_bounds(const jv *s)
{
    return get(s, "minimum") || get(s, "maximum") || get(s, "exclusiveMinimum") || get(s, "exclusiveMaximum");
}

static void integer_expr(sc *S, const jv *s, gbuf *out)
{
    if (!has_bounds(s)) {
        S->prims |= P_INT;
        gbuf_puts(out, "json-int");
        return;
    }
    long long lo, hi;
    int_bounds(S, s, &lo, &hi);
    if (!int_range(out, lo, hi))
        sfail(S, "no integer lies within minimum/maximum (integers are produced up to 16 digits)");
}

/* Sound, not complete: values whose integer part lies in the bounds, a
 * fraction only where it cannot cross a bound. */
static void number_expr(sc *S, const jv *s, gbuf *out)
{
    if (!has_bounds(s)) {
        S->prims |= P_NUMBER | P_INT;
        gbuf_puts(out, "json-number");
        return;
    }
    long long A, B;
    int_bounds(S, s, &A, &B);
    if (A > B) {
        sfail(S, "no integer lies within minimum/maximum (a bounded number is produced from its integer part)");
        return;
    }
    gbuf_puts(out, "( ");
    int_range(out, A, B);
    long long lo = A > 0 ? A : 0, hi = B - 1;
    if (lo <= hi) {
        gbuf_puts(out, " | ");
        pos_range(out, lo, hi);
        gbuf_puts(out, " \".\" [0-9]{1,16}");
    }
    lo = -B > 0 ? -B : 0;
    hi = -A - 1;
    if (lo <= hi) {
        gbuf_puts(out, " | \"-\" ");
        pos_range(out, lo, hi);
        gbuf_puts(out, " \".\" [0-9]{1,16}");
    }
    gbuf_puts(out, " )");
}

/* ---- strings ------------------------------------------------------------- */

static bool count_of(sc *S, const jv *s, const char *key, long long *out)
{
    const jv *v = get(s, key);
    if (!v)
        return false;
    if (v->k != JV_INT || v->u.i < 0) {
        size_t saved = path_push(S, key, strlen(key));
        sfail(S, "must be a non-negative integer");
        path_pop(S, saved);
        return false;
    }
    *out = v->u.i;
    return true;
}

static void string_expr(sc *S, const jv *s, gbuf *out)
{
    const jv *fmt = get(s, "format"), *pat = get(s, "pattern");
    long long min = 0, max = -1;
    bool has_min = count_of(S, s, "minLength", &min), has_max = count_of(S, s, "maxLength", &max);
    if (S->failed)
        return;
    S->prims |= P_STRING;
    if (fmt) {
        size_t saved = path_push(S, "format", 6);
        if (fmt->k != JV_STR) {
            sfail(S, "must be a string");
        } else if (jv_is_str(fmt, "date")) {
            S->prims |= P_DATE;
            gbuf_puts(out, "\"\\\"\" fmt-date \"\\\"\"");
        } else if (jv_is_str(fmt, "time")) {
            S->prims |= P_TIME;
            gbuf_puts(out, "\"\\\"\" fmt-time \"\\\"\"");
        } else if (jv_is_str(fmt, "date-time")) {
            S->prims |= P_DATE | P_TIME;
            gbuf_puts(out, "\"\\\"\" fmt-date \"T\" fmt-time \"\\\"\"");
        } else if (jv_is_str(fmt, "uuid")) {
            S->prims |= P_UUID;
            gbuf_puts(out, "\"\\\"\" fmt-uuid \"\\\"\"");
        } else {
            sfail(S, "format '%.*s' is not supported (date, time, date-time, uuid are)", (int)fmt->u.s.n,
                  fmt->u.s.s);
        }
        path_pop(S, saved);
        if (!S->failed && (pat || has_min || has_max))
            sfail(S, "format with pattern, minLength or maxLength is not supported");
        return;
    }
    if (pat) {
        size_t saved = path_push(S, "pattern", 7);
        char msg[300];
        if (pat->k != JV_STR)
            sfail(S, "must be a string");
        else if (!npl_regex_to_grammar(pat->u.s.s, pat->u.s.n, "", &S->rules, out, msg, sizeof msg))
            sfail(S, "%s", msg);
        path_pop(S, saved);
        if (!S->failed && (has_min || has_max))
            sfail(S, "pattern with minLength or maxLength is not supported");
        return;
    }
    if (!has_min && !has_max) {
        gbuf_puts(out, "json-string");
        return;
    }
    if (has_max && max < min) {
        sfail(S, "maxLength is below minLength");
        return;
    }
    if (min > (long long)NPL_GRAMMAR_MAX_REPEAT || max > (long long)NPL_GRAMMAR_MAX_REPEAT) {
        sfail(S, "minLength and maxLength above %u are not supported (the limit)", NPL_GRAMMAR_MAX_REPEAT);
        return;
    }
    if (has_max) /* one counting element: no escapes in a bounded string */
        gbuf_printf(out, "\"\\\"\" [^\"\\\\\\x00-\\x1f]{%lld,%lld} \"\\\"\"", min, max);
    else
        gbuf_printf(out, "\"\\\"\" json-char{%lld,} \"\\\"\"", min);
}

/* ---- arrays and objects ------------------------------------------------- */

static void array_expr(sc *S, const jv *s, gbuf *out)
{
    long long min = 0, max = -1;
    bool has_max = count_of(S, s, "maxItems", &max);
    count_of(S, s, "minItems", &min);
    if (S->failed)
        return;
    if (has_max && max < min) {
        sfail(S, "maxItems is below minItems");
        return;
    }
    if (min > (long long)NPL_GRAMMAR_MAX_REPEAT || max > (long long)NPL_GRAMMAR_MAX_REPEAT) {
        sfail(S, "minItems and maxItems above %u are not supported (the limit)", NPL_GRAMMAR_MAX_REPEAT);
        return;
    }
    if (get(s, "prefixItems")) {
        sfail(S, "prefixItems is not supported");
        return;
    }
    char item[24];
    const jv *items = get(s, "items");
    if (items) {
        sub_rule(S, items, "items", item);
    } else {
        S->prims |= P_VALUE | P_STRING | P_NUMBER | P_INT;
        snprintf(item, sizeof item, "json-value");
    }
    if (S->failed)
        return;
    if (has_max && max == 0) {
        gbuf_puts(out, "\"[\" ws \"]\"");
        return;
    }
    char more[64];
    long long mmin = min > 0 ? min - 1 : 0;
    if (has_max)
        snprintf(more, sizeof more, "{%lld,%lld}", mmin, max - 1);
    else
        snprintf(more, sizeof more, "{%lld,}", mmin);
    if (min == 0)
        gbuf_printf(out, "\"[\" ws ( %s ( ws \",\" ws %s )%s ws )? \"]\"", item, item, more);
    else
        gbuf_printf(out, "\"[\" ws %s ( ws \",\" ws %s )%s ws \"]\"", item, item, more);
}

static bool is_required(const jv *req, const jstr *key)
{
    if (!req || req->k != JV_LIST)
        return false;
    for (size_t i = 0; i < req->u.l->n; i++) {
        const jv *r = &req->u.l->v[i];
        if (r->k == JV_STR && r->u.s.n == key->n && !memcmp(r->u.s.s, key->s, key->n))
            return true;
    }
    return false;
}

static void object_expr(sc *S, const jv *s, gbuf *out)
{
    const jv *props = get(s, "properties"), *req = get(s, "required"), *addl = get(s, "additionalProperties");
    if (props && props->k != JV_DICT) {
        size_t saved = path_push(S, "properties", 10);
        sfail(S, "must be an object");
        path_pop(S, saved);
        return;
    }
    if (req) {
        size_t saved = path_push(S, "required", 8);
        if (req->k != JV_LIST)
            sfail(S, "must be an array of property names");
        for (size_t i = 0; !S->failed && i < req->u.l->n; i++) {
            const jv *r = &req->u.l->v[i];
            if (r->k != JV_STR || !props || !jdict_get(props->u.d, r->u.s.s, r->u.s.n))
                sfail(S, "required property #%zu is not a name listed in properties", i);
        }
        path_pop(S, saved);
    }
    if (S->failed)
        return;
    size_t n = props ? props->u.d->n : 0;
    if (n == 0) {
        /* only extra properties: a map to additionalProperties' schema */
        if (addl && addl->k == JV_BOOL && !addl->u.b) {
            gbuf_puts(out, "\"{\" ws \"}\"");
            return;
        }
        char val[24];
        if (addl && addl->k == JV_DICT) {
            sub_rule(S, addl, "additionalProperties", val);
        } else {
            S->prims |= P_VALUE | P_NUMBER | P_INT;
            snprintf(val, sizeof val, "json-value");
        }
        S->prims |= P_STRING;
        gbuf_printf(out,
                    "\"{\" ws ( json-string ws \":\" ws %s ( ws \",\" ws json-string ws \":\" ws %s )* ws )? \"}\"",
                    val, val);
        return;
    }
    /* Known properties in order, optional ones may be left out:
     * first_i = props i.. with none written yet, after_i = with some. */
    char (*kv)[24] = calloc(n, sizeof *kv);
    bool *reqd = calloc(n, sizeof *reqd);
    if (!kv || !reqd) {
        sfail(S, "out of memory");
        free(kv);
        free(reqd);
        return;
    }
    size_t saved = path_push(S, "properties", 10);
    for (size_t i = 0; i < n && !S->failed; i++) {
        const jstr *key = &props->u.d->keys[i];
        reqd[i] = is_required(req, key);
        gbuf body = {0};
        jv kj = {.k = JV_STR, .u.s = *key};
        json_literal(S, &kj, &body);
        gbuf_puts(&body, " ws \":\" ws ");
        char keyz[256];
        snprintf(keyz, sizeof keyz, "%.*s", (int)(key->n < 200 ? key->n : 200), key->s);
        size_t ksaved = path_push(S, keyz, strlen(keyz));
        schema_expr(S, &props->u.d->vals[i], &body);
        path_pop(S, ksaved);
        new_rule_name(S, kv[i]);
        gbuf_printf(&S->rules, "%s ::= %s\n", kv[i], body.buf.data ? body.buf.data : "\"\"");
        free(body.buf.data);
    }
    path_pop(S, saved);
    unsigned base = S->n_rules;
    S->n_rules += 2 * (unsigned)n + 2;
    /* after_i */
    for (size_t i = 0; i <= n; i++) {
        gbuf_printf(&S->rules, "s%ua ::= ", base + (unsigned)i);
        if (i == n)
            gbuf_puts(&S->rules, "\"\"\n");
        else if (reqd[i])
            gbuf_printf(&S->rules, "ws \",\" ws %s s%ua\n", kv[i], base + (unsigned)i + 1);
        else
            gbuf_printf(&S->rules, "ws \",\" ws %s s%ua | s%ua\n", kv[i], base + (unsigned)i + 1,
                        base + (unsigned)i + 1);
    }
    /* first_i */
    for (size_t i = 0; i <= n; i++) {
        gbuf_printf(&S->rules, "s%uf ::= ", base + (unsigned)i);
        if (i == n)
            gbuf_puts(&S->rules, "\"\"\n");
        else if (reqd[i])
            gbuf_printf(&S->rules, "%s s%ua\n", kv[i], base + (unsigned)i + 1);
        else
            gbuf_printf(&S->rules, "%s s%ua | s%uf\n", kv[i], base + (unsigned)i + 1, base + (unsigned)i + 1);
    }
    gbuf_printf(out, "\"{\" ws s%uf ws \"}\"", base);
    free(kv);
    free(reqd);
}

/* ---- dispatch ------------------------------------------------------------ */

static const jv *resolve_ref(sc *S, const jv *ref)
{
    if (ref->k != JV_STR || ref->u.s.n == 0 || ref->u.s.s[0] != '#') {
        sfail(S, "only local references (#/...) are supported");
        return NULL;
    }
    const char *p = ref->u.s.s + 1, *end = ref->u.s.s + ref->u.s.n;
    const jv *cur = S->root;
    while (p < end && cur) {
        if (*p != '/') {
            sfail(S, "reference '%.*s' is not a JSON pointer", (int)ref->u.s.n, ref->u.s.s);
            return NULL;
        }
        p++;
        char seg[256];
        size_t k = 0;
        while (p < end && *p != '/' && k + 1 < sizeof seg) {
            if (*p == '~' && p + 1 < end) {
                seg[k++] = p[1] == '1' ? '/' : '~';
                p += 2;
            } else {
                seg[k++] = *p++;
            }
        }
        if (cur->k == JV_DICT) {
            cur = jdict_get(cur->u.d, seg, k);
        } else if (cur->k == JV_LIST) {
            seg[k] = 0;
            char *e;
            unsigned long idx = strtoul(seg, &e, 10);
            cur = *e || idx >= cur->u.l->n ? NULL : &cur->u.l->v[idx];
        } else {
            cur = NULL;
        }
    }
    if (!cur)
        sfail(S, "reference '%.*s' does not resolve", (int)ref->u.s.n, ref->u.s.s);
    return cur;
}

static void typed_expr(sc *S, const jv *s, const jv *type, gbuf *out)
{
    if (jv_is_str(type, "object"))
        object_expr(S, s, out);
    else if (jv_is_str(type, "array"))
        array_expr(S, s, out);
    else if (jv_is_str(type, "string"))
        string_expr(S, s, out);
    else if (jv_is_str(type, "integer"))
        integer_expr(S, s, out);
    else if (jv_is_str(type, "number"))
        number_expr(S, s, out);
    else if (jv_is_str(type, "boolean"))
        gbuf_puts(out, "( \"true\" | \"false\" )");
    else if (jv_is_str(type, "null"))
        gbuf_puts(out, "\"null\"");
    else {
        size_t saved = path_push(S, "type", 4);
        if (type->k == JV_STR)
            sfail(S, "unknown type '%.*s'", (int)type->u.s.n, type->u.s.s);
        else
            sfail(S, "must be a type name or an array of them");
        path_pop(S, saved);
    }
}

static const char *const refused[] = {
    "allOf", "not", "if", "then", "else", "patternProperties", "propertyNames", "dependentRequired",
    "dependentSchemas", "dependencies", "contains", "multipleOf", "minProperties", "maxProperties",
    "unevaluatedProperties", "unevaluatedItems", "uniqueItems", "additionalItems", "minContains", "maxContains",
};

static void schema_expr(sc *S, const jv *s, gbuf *out)
{
    if (S->failed)
        return;
    if (++S->depth > NPL_SCHEMA_MAX_DEPTH) {
        sfail(S, "subschemas nested deeper than %u (the limit)", NPL_SCHEMA_MAX_DEPTH);
        S->depth--;
        return;
    }
    if (s->k == JV_BOOL) {
        if (s->u.b) {
            S->prims |= P_VALUE | P_STRING | P_NUMBER | P_INT;
            gbuf_puts(out, "json-value");
        } else {
            sfail(S, "the schema 'false' allows no value");
        }
        S->depth--;
        return;
    }
    if (s->k != JV_DICT) {
        sfail(S, "a schema must be an object or a boolean");
        S->depth--;
        return;
    }
    for (size_t i = 0; i < sizeof refused / sizeof refused[0] && !S->failed; i++) {
        const jv *v = get(s, refused[i]);
        if (v && !(v->k == JV_BOOL && !v->u.b && !strcmp(refused[i], "uniqueItems"))) {
            size_t saved = path_push(S, refused[i], strlen(refused[i]));
            sfail(S, "'%s' is not supported", refused[i]);
            path_pop(S, saved);
        }
    }
    const jv *ref = get(s, "$ref"), *en = get(s, "enum"), *cn = get(s, "const"), *type = get(s, "type");
    const jv *any = get(s, "anyOf");
    const char *any_key = "anyOf";
    if (!any) {
        any = get(s, "oneOf");
        any_key = "oneOf";
    }
    if (S->failed) {
        /* reported */
    } else if (ref) {
        size_t saved = path_push(S, "$ref", 4);
        const jv *t = resolve_ref(S, ref);
        char name[24] = "";
        for (unsigned i = 0; t && i < S->n_refs; i++)
            if (S->refs[i].target == t)
                memcpy(name, S->refs[i].name, sizeof name);
        if (t && !name[0]) {
            if (S->n_refs == MAX_REFS) {
                sfail(S, "more than %u referenced schemas (the limit)", MAX_REFS);
            } else {
                schema_ref *r = &S->refs[S->n_refs++];
                r->target = t;
                new_rule_name(S, r->name);
                memcpy(name, r->name, sizeof name);
                gbuf body = {0};
                schema_expr(S, t, &body);
                gbuf_printf(&S->rules, "%s ::= %s\n", name, body.buf.data ? body.buf.data : "\"\"");
                free(body.buf.data);
            }
        }
        path_pop(S, saved);
        if (!S->failed)
            gbuf_puts(out, name);
    } else if (cn) {
        json_literal(S, cn, out);
    } else if (en) {
        size_t saved = path_push(S, "enum", 4);
        if (en->k != JV_LIST || en->u.l->n == 0) {
            sfail(S, "must be a non-empty array");
        } else {
            gbuf_puts(out, "(");
            for (size_t i = 0; i < en->u.l->n; i++) {
                gbuf_puts(out, i ? " | " : " ");
                json_literal(S, &en->u.l->v[i], out);
            }
            gbuf_puts(out, " )");
        }
        path_pop(S, saved);
    } else if (any) {
        size_t saved = path_push(S, any_key, 5);
        if (any->k != JV_LIST || any->u.l->n == 0) {
            sfail(S, "must be a non-empty array of schemas");
        } else {
            gbuf_puts(out, "(");
            for (size_t i = 0; i < any->u.l->n && !S->failed; i++) {
                char idx[24], name[24];
                snprintf(idx, sizeof idx, "%zu", i);
                sub_rule(S, &any->u.l->v[i], idx, name);
                gbuf_printf(out, "%s%s", i ? " | " : " ", name);
            }
            gbuf_puts(out, " )");
        }
        path_pop(S, saved);
    } else if (type && type->k == JV_LIST) {
        size_t saved = path_push(S, "type", 4);
        if (type->u.l->n == 0)
            sfail(S, "must not be empty");
        path_pop(S, saved);
        gbuf_puts(out, "(");
        for (size_t i = 0; i < type->u.l->n && !S->failed; i++) {
            gbuf_puts(out, i ? " | " : " ");
            typed_expr(S, s, &type->u.l->v[i], out);
        }
        gbuf_puts(out, " )");
    } else if (type) {
        typed_expr(S, s, type, out);
    } else if (get(s, "properties") || get(s, "additionalProperties") || get(s, "required")) {
        object_expr(S, s, out);
    } else if (get(s, "items") || get(s, "minItems") || get(s, "maxItems")) {
        array_expr(S, s, out);
    } else {
        S->prims |= P_VALUE | P_STRING | P_NUMBER | P_INT;
        gbuf_puts(out, "json-value");
    }
    S->depth--;
}

static void emit_prims(gbuf *g, unsigned prims)
{
    gbuf_puts(g, "ws ::= \" \"?\n");
    if (prims & P_VALUE)
        gbuf_puts(g, prim_text + strlen("ws ::= \" \"?\n"));
    if (prims & (P_STRING | P_VALUE))
        gbuf_puts(g, prim_string);
    if (prims & (P_INT | P_NUMBER | P_VALUE))
        gbuf_puts(g, prim_int);
    if (prims & (P_NUMBER | P_VALUE))
        gbuf_puts(g, prim_number);
    if (prims & P_DATE)
        gbuf_puts(g, prim_date);
    if (prims & P_TIME)
        gbuf_puts(g, prim_time);
    if (prims & P_UUID)
        gbuf_puts(g, prim_uuid);
}

char *npl_grammar_schema_to_text(const char *json, size_t len, npl_error *err)
{
    if (!json) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "schema: NULL");
        return NULL;
    }
    if (len > NPL_SCHEMA_MAX_TEXT) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "schema: %zu bytes is more than %u (the limit)", len,
                      NPL_SCHEMA_MAX_TEXT);
        return NULL;
    }
    sc *S = calloc(1, sizeof *S);
    if (!S) {
        npl_error_set(err, NPL_ERR_NOMEM, "schema: out of memory");
        return NULL;
    }
    jarena_init(&S->a, 64u << 20, &S->jb, S->amsg, sizeof S->amsg);
    char *text = NULL;
    if (setjmp(S->jb)) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "schema: not valid JSON: %s", S->amsg);
        goto out;
    }
    jv root = jv_from_json(&S->a, json, len, false);
    S->root = &root;
    gbuf body = {0};
    schema_expr(S, &root, &body);
    gbuf g = {0};
    if (!S->failed) {
        gbuf_printf(&g, "root ::= %s\n", body.buf.data ? body.buf.data : "\"\"");
        gbuf_add(&g, S->rules.buf.data ? S->rules.buf.data : "", S->rules.buf.len);
        emit_prims(&g, S->prims);
    }
    free(body.buf.data);
    if (S->failed) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "%s", S->err);
        free(g.buf.data);
    } else if (g.oom || S->rules.oom) {
        npl_error_set(err, NPL_ERR_NOMEM, "schema: out of memory");
        free(g.buf.data);
    } else {
        text = g.buf.data;
    }
out:
    free(S->rules.buf.data);
    jarena_free(&S->a);
    free(S);
    return text;
}

npl_grammar *npl_grammar_compile_schema(const char *json, size_t len, npl_error *err)
{
    char *text = npl_grammar_schema_to_text(json, len, err);
    if (!text)
        return NULL;
    npl_error e2 = {0};
    npl_grammar *g = npl_grammar_compile_text(text, strlen(text), &e2);
    if (!g)
        npl_error_set(err, e2.code ? e2.code : NPL_ERR_INVALID_ARG, "schema: its grammar is refused: %s", e2.message);
    free(text);
    return g;
}

npl_grammar *npl_grammar_json_any(npl_error *err)
{
    gbuf g = {0};
    gbuf_puts(&g, "root ::= json-value\n");
    emit_prims(&g, P_VALUE);
    if (g.oom) {
        free(g.buf.data);
        npl_error_set(err, NPL_ERR_NOMEM, "grammar: out of memory");
        return NULL;
    }
    npl_grammar *r = npl_grammar_compile_text(g.buf.data, g.buf.len, err);
    free(g.buf.data);
    return r;
}
