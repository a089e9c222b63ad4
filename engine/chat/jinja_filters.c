/* The Jinja filters chat templates use, as a table of {name, function}
 * the parser resolves each `| name` against (jfilter_find). */
#include <stdlib.h>
#include <string.h>

#include "jinja_builtins.h"

#define FILTER(fn) static jv fn(jrender *r, jframe *f, const jfilter_def *d, jv in, const jargs *a)

FILTER(f_tojson)
{
    const jv *ind = jarg(a, 0, "indent");
    int indent = -1;
    if (ind && ind->k != JV_NONE) {
        int64_t k = jneed_int(r, ind, "tojson indent", a->line);
        indent = k < 0 ? 0 : k > 16 ? 16 : (int)k;
    }
    const jv *ascii = jkwarg(a, "ensure_ascii"), *sort = jkwarg(a, "sort_keys");
    jjson_opts jo = {.indent = indent, .ensure_ascii = ascii && jv_truthy(ascii), .sort_keys = sort && jv_truthy(sort)};
    jsb b;
    jsb_init(&b, r->a, r->lim->max_output);
    jv_to_json(&b, &in, &jo, 0);
    return jstr_v(jsb_done(&b));
}

FILTER(f_trim) /* an undefined value trims to "" (jinja2: a missing description) */
{
    if (in.k == JV_UNDEF)
        return jv_cstr("");
    return jstr_strip(r, jneed_str(r, &in, "trim", a->line), jarg(a, 0, "chars"), true, true, a->line);
}

FILTER(f_length)
{
    switch (in.k) {
    case JV_STR: {
        int64_t c = 0;
        for (size_t i = 0; i < in.u.s.n; i++)
            c += ((unsigned char)in.u.s.s[i] & 0xC0) != 0x80;
        return jv_int(c);
    }
    case JV_LIST: return jv_int((int64_t)in.u.l->n);
    case JV_DICT:
    case JV_NS: return jv_int((int64_t)in.u.d->n);
    case JV_UNDEF: return jv_int(0);
    default: jfail(r->a, "line %u: length of a %s", a->line, jv_kind_name(in.k));
    }
}

FILTER(f_default)
{
    const jv *dv = jarg(a, 0, "default_value");
    const jv *boolean = jarg(a, 1, "boolean");
    bool use = in.k == JV_UNDEF || (boolean && jv_truthy(boolean) && !jv_truthy(&in));
    return use ? (dv ? *dv : jv_str("", 0, NULL)) : in;
}

FILTER(f_join)
{
    const jv *sep = jarg(a, 0, "d");
    return jjoin(r, &in, sep ? jv_as_str(r->a, sep) : (jstr){"", 0, NULL}, jarg(a, 1, "attribute"), a->line);
}

FILTER(f_list)
{
    jlist *l = jv_iterable(r, &in, a->line);
    jv out = jv_list(r->a);
    for (size_t i = 0; i < l->n; i++)
        jlist_push(r->a, out.u.l, l->v[i]);
    return out;
}

FILTER(f_first_last) /* mode 0: first, 1: last */
{
    jlist *l = jv_iterable(r, &in, a->line);
    if (l->n == 0)
        return jv_undef();
    return d->mode ? l->v[l->n - 1] : l->v[0];
}

FILTER(f_reverse)
{
    jlist *l = jv_iterable(r, &in, a->line);
    if (in.k == JV_STR) {
        jsb b;
        jsb_init(&b, r->a, 0);
        for (size_t i = l->n; i-- > 0;)
            jsb_addstr(&b, l->v[i].u.s);
        return jstr_v(jsb_done(&b));
    }
    jv out = jv_list(r->a);
    for (size_t i = l->n; i-- > 0;)
        jlist_push(r->a, out.u.l, l->v[i]);
    return out;
}

FILTER(f_map)
{
    jlist *l = jv_iterable(r, &in, a->line);
    jv out = jv_list(r->a);
    const jv *attr = jkwarg(a, "attribute");
    const jv *dflt = jkwarg(a, "default");
    for (size_t i = 0; i < l->n; i++) {
        jstep(r);
        jv v;
        if (attr) {
            v = l->v[i].k == JV_UNDEF ? jv_undef() : jattr(r, &l->v[i], jneed_str(r, attr, "map", a->line), a->line);
            if (v.k == JV_UNDEF && dflt)
                v = *dflt;
        } else {
            if (a->n < 1)
                jfail(r->a, "line %u: map needs a filter name or attribute=", a->line);
            jstr fname = jneed_str(r, &a->v[0], "map", a->line);
            jargs rest = *a;
            rest.v++;
            rest.n--;
            v = jfilter(r, f, jfilter_find(fname), fname, l->v[i], &rest);
        }
        jlist_push(r->a, out.u.l, v);
    }
    return out;
}

/* select, reject, selectattr, rejectattr: mode bit 1 = by attribute,
 * bit 2 = keep what passes. */
FILTER(f_select)
{
    jv out = jv_list(r->a);
    if (in.k == JV_NONE || in.k == JV_UNDEF) /* as llama.cpp: functionary's `none | selectattr(...)` */
        return out;
    uint32_t line = a->line;
    bool by_attr = d->mode & 1, keep = d->mode & 2;
    jlist *l = jv_iterable(r, &in, line);
    size_t a0 = by_attr ? 1 : 0;
    if (by_attr && a->n < 1)
        jfail(r->a, "line %u: selectattr/rejectattr need an attribute", line);
    bool by_test = a->n > a0;
    jargs targs = {.v = a->v + a0 + 1, .n = by_test ? a->n - a0 - 1 : 0, .line = line};
    jstr test = {0};
    const jtest_def *t_def = NULL;
    bool looked_up = false;
    for (size_t i = 0; i < l->n; i++) {
        jstep(r);
        jv v = l->v[i];
        if (by_attr) {
            if (v.k == JV_UNDEF)
                continue;
            v = jattr(r, &v, jneed_str(r, &a->v[0], "selectattr", line), line);
        }
        if (by_test && !looked_up) { /* once, when there is an item to test */
            test = jneed_str(r, &a->v[a0], "select test", line);
            t_def = jtest_find(test);
            looked_up = true;
        }
        bool t = by_test ? jtest(r, t_def, test, &v, &targs) : jv_truthy(&v);
        if (t == keep)
            jlist_push(r->a, out.u.l, l->v[i]);
    }
    return out;
}

FILTER(f_items)
{
    return jitems_of(r, &in, a->line);
}

FILTER(f_string)
{
    return jstr_v(jv_as_str(r->a, &in));
}

/* The leading number of a string input (strtoll / strtod of at most
 * cap - 1 bytes), false when it is not all a number. */
static bool parse_number(jstr s, bool integer, int64_t *i, double *x)
{
    char buf[64];
    size_t cap = integer ? 32 : sizeof buf;
    size_t k = s.n < cap - 1 ? s.n : cap - 1;
    memcpy(buf, s.s, k);
    buf[k] = 0;
    char *end;
    if (integer)
        *i = strtoll(buf, &end, 10);
    else
        *x = strtod(buf, &end);
    return end != buf && *end == 0;
}

FILTER(f_int)
{
    int64_t v;
    if (in.k == JV_INT)
        return in;
    if (in.k == JV_FLOAT)
        return jv_int((int64_t)in.u.f);
    if (in.k == JV_BOOL)
        return jv_int(in.u.b);
    if (in.k == JV_STR && parse_number(in.u.s, true, &v, NULL))
        return jv_int(v);
    const jv *dv = jarg(a, 0, "default");
    return dv ? *dv : jv_int(0);
}

FILTER(f_float)
{
    double x;
    if (in.k == JV_INT)
        return jv_float((double)in.u.i);
    if (in.k == JV_FLOAT)
        return in;
    if (in.k == JV_STR && parse_number(in.u.s, false, NULL, &x))
        return jv_float(x);
    return jv_float(0);
}

FILTER(f_case) /* mode: jstr_case's */
{
    return jstr_case(r, jv_as_str(r->a, &in), (char)d->mode);
}

FILTER(f_replace)
{
    const jv *c = jarg(a, 2, "count");
    return jstr_replace(r, jv_as_str(r->a, &in), jneed_str(r, jarg(a, 0, "old"), "replace", a->line),
                        jneed_str(r, jarg(a, 1, "new"), "replace", a->line),
                        c ? jneed_int(r, c, "replace", a->line) : -1);
}

FILTER(f_safe)
{
    return in;
}

FILTER(f_indent)
{
    const jv *w = jarg(a, 0, "width");
    int64_t width = w ? jneed_int(r, w, "indent", a->line) : 4;
    const jv *first = jarg(a, 1, "first");
    const jv *blank = jarg(a, 2, "blank");
    jstr s = jv_as_str(r->a, &in);
    if (width < 0 || width > 1000)
        jfail(r->a, "line %u: indent width out of range", a->line);
    jsb b;
    jsb_init(&b, r->a, r->lim->max_output);
    size_t st = 0;
    bool first_line = true;
    for (size_t i = 0; i <= s.n; i++) {
        if (i < s.n && s.s[i] != '\n')
            continue;
        bool empty = i == st;
        if ((first_line ? first && jv_truthy(first) : true) && (!empty || (blank && jv_truthy(blank))))
            for (int64_t k = 0; k < width; k++)
                jsb_addc(&b, " ");
        jsb_add(&b, s.s + st, i - st, s.mask ? s.mask + st : NULL);
        if (i < s.n)
            jsb_addc(&b, "\n");
        st = i + 1;
        first_line = false;
    }
    return jstr_v(jsb_done(&b));
}

FILTER(f_unique)
{
    jlist *l = jv_iterable(r, &in, a->line);
    jv out = jv_list(r->a);
    for (size_t i = 0; i < l->n; i++) {
        bool seen = false;
        for (size_t k = 0; k < out.u.l->n && !seen; k++) {
            jstep(r);
            seen = jv_equal(r->a, &out.u.l->v[k], &l->v[i]);
        }
        if (!seen)
            jlist_push(r->a, out.u.l, l->v[i]);
    }
    return out;
}

FILTER(f_abs)
{
    if (in.k == JV_INT)
        return jv_int(in.u.i < 0 && in.u.i != INT64_MIN ? -in.u.i : in.u.i);
    if (in.k == JV_FLOAT)
        return jv_float(in.u.f < 0 ? -in.u.f : in.u.f);
    jfail(r->a, "line %u: unknown filter abs (or wrong input: %s)", a->line, jv_kind_name(in.k));
}

static const jfilter_def filters[] = {
    {JNAME("tojson"), f_tojson, 0},
    {JNAME("trim"), f_trim, 0},
    {JNAME("length"), f_length, 0},
    {JNAME("count"), f_length, 0},
    {JNAME("default"), f_default, 0},
    {JNAME("d"), f_default, 0},
    {JNAME("join"), f_join, 0},
    {JNAME("list"), f_list, 0},
    {JNAME("first"), f_first_last, 0},
    {JNAME("last"), f_first_last, 1},
    {JNAME("reverse"), f_reverse, 0},
    {JNAME("map"), f_map, 0},
    {JNAME("selectattr"), f_select, 3},
    {JNAME("rejectattr"), f_select, 1},
    {JNAME("select"), f_select, 2},
    {JNAME("reject"), f_select, 0},
    {JNAME("items"), f_items, 0},
    {JNAME("string"), f_string, 0},
    {JNAME("int"), f_int, 0},
    {JNAME("float"), f_float, 0},
    {JNAME("upper"), f_case, 'u'},
    {JNAME("lower"), f_case, 'l'},
    {JNAME("title"), f_case, 't'},
    {JNAME("capitalize"), f_case, 'c'},
    {JNAME("replace"), f_replace, 0},
    {JNAME("safe"), f_safe, 0},
    {JNAME("indent"), f_indent, 0},
    {JNAME("unique"), f_unique, 0},
    {JNAME("abs"), f_abs, 0},
};

const jfilter_def *jfilter_find(jstr name)
{
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
        if (name.n == filters[i].len && memcmp(name.s, filters[i].name, name.n) == 0)
            return &filters[i];
    return NULL;
}

jv jfilter(jrender *r, jframe *f, const jfilter_def *d, jstr name, jv in, const jargs *a)
{
    if (!d)
        jfail(r->a, "line %u: unknown filter %.*s (or wrong input: %s)", a->line, (int)name.n, name.s,
              jv_kind_name(in.k));
    return d->fn(r, f, d, in, a);
}
