/* Jinja built-ins used by chat templates: what filters, tests and members
 * share (arguments, iteration, items, join) and the global functions
 * (range, namespace, raise_exception, strftime_now, dict). The filters,
 * tests and members themselves are tables (jinja_filters.c,
 * jinja_tests.c, jinja_members.c) the parser resolves names against. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja_builtins.h"

const jv *jkwarg(const jargs *a, const char *name)
{
    for (size_t i = 0; i < a->n_kw; i++)
        if (jname_is(a->kwn[i], name))
            return &a->kwv[i];
    return NULL;
}

const jv *jarg(const jargs *a, size_t i, const char *name)
{
    if (i < a->n)
        return &a->v[i];
    return name ? jkwarg(a, name) : NULL;
}

jstr jneed_str(jrender *r, const jv *v, const char *what, uint32_t line)
{
    if (!v || v->k != JV_STR)
        jfail(r->a, "line %u: %s needs a string, not %s", line, what, v ? jv_kind_name(v->k) : "nothing");
    return v->u.s;
}

int64_t jneed_int(jrender *r, const jv *v, const char *what, uint32_t line)
{
    if (v && v->k == JV_INT)
        return v->u.i;
    if (v && v->k == JV_BOOL)
        return v->u.b;
    jfail(r->a, "line %u: %s needs an integer, not %s", line, what, v ? jv_kind_name(v->k) : "nothing");
}

jv jstr_v(jstr s)
{
    return (jv){.k = JV_STR, .u.s = s};
}

/* ---- iteration ----------------------------------------------------------------- */

jlist *jv_iterable(jrender *r, const jv *v, uint32_t line)
{
    jlist *l;
    switch (v->k) {
    case JV_LIST: return v->u.l;
    case JV_UNDEF:
    case JV_NONE:
        if (v->k == JV_NONE)
            jfail(r->a, "line %u: none is not iterable", line);
        return jarena_alloc(r->a, sizeof(jlist));
    case JV_DICT:
    case JV_NS:
        l = jarena_alloc(r->a, sizeof *l);
        for (size_t i = 0; i < v->u.d->n; i++)
            jlist_push(r->a, l, jstr_v(v->u.d->keys[i]));
        return l;
    case JV_STR: {
        l = jarena_alloc(r->a, sizeof *l);
        jstr s = v->u.s;
        for (size_t i = 0; i < s.n;) {
            size_t k = 1;
            while (i + k < s.n && ((unsigned char)s.s[i + k] & 0xC0) == 0x80)
                k++;
            jlist_push(r->a, l, jv_str(s.s + i, k, s.mask ? s.mask + i : NULL));
            i += k;
        }
        return l;
    }
    default: jfail(r->a, "line %u: a %s is not iterable", line, jv_kind_name(v->k));
    }
}

jv jitems_of(jrender *r, const jv *d, uint32_t line)
{
    if (d->k == JV_UNDEF)
        return jv_list(r->a);
    if (d->k != JV_DICT && d->k != JV_NS)
        jfail(r->a, "line %u: items needs a mapping, not %s", line, jv_kind_name(d->k));
    jv l = jv_list(r->a);
    for (size_t i = 0; i < d->u.d->n; i++) {
        jv pair = jv_list(r->a);
        jlist_push(r->a, pair.u.l, jstr_v(d->u.d->keys[i]));
        jlist_push(r->a, pair.u.l, d->u.d->vals[i]);
        jlist_push(r->a, l.u.l, pair);
    }
    return l;
}

jv jjoin(jrender *r, const jv *seq, jstr sep, const jv *attribute, uint32_t line)
{
    jlist *l = jv_iterable(r, seq, line);
    jsb b;
    jsb_init(&b, r->a, r->lim->max_output);
    for (size_t i = 0; i < l->n; i++) {
        jstep(r);
        if (i)
            jsb_addstr(&b, sep);
        jv v = l->v[i];
        if (attribute)
            v = jattr(r, &v, jv_as_str(r->a, attribute), line);
        jv_to_str(&b, &v);
    }
    return jstr_v(jsb_done(&b));
}

/* ---- global functions -------------------------------------------------------------------- */

jv jcall_func(jrender *r, int func, const jargs *a)
{
    const jv *args = a->v;
    size_t n_args = a->n;
    uint32_t line = a->line;
    switch (func) {
    case JF_RANGE: {
        if (n_args < 1 || n_args > 3)
            jfail(r->a, "line %u: range takes 1 to 3 arguments", line);
        int64_t lo = 0, b, s = 1;
        if (n_args == 1) {
            b = jneed_int(r, &args[0], "range", line);
        } else {
            lo = jneed_int(r, &args[0], "range", line);
            b = jneed_int(r, &args[1], "range", line);
            if (n_args == 3)
                s = jneed_int(r, &args[2], "range", line);
        }
        if (s == 0)
            jfail(r->a, "line %u: range step cannot be zero", line);
        jv l = jv_list(r->a);
        for (int64_t i = lo; s > 0 ? i < b : i > b; i += s) {
            jstep(r);
            jlist_push(r->a, l.u.l, jv_int(i));
            if ((s > 0 && i > INT64_MAX - s) || (s < 0 && i < INT64_MIN - s))
                break;
        }
        return l;
    }
    case JF_NAMESPACE:
    case JF_DICT: {
        jv d = jv_dict(r->a);
        d.k = func == JF_NAMESPACE ? JV_NS : JV_DICT;
        for (size_t i = 0; i < n_args; i++) {
            if (args[i].k != JV_DICT && args[i].k != JV_NS)
                jfail(r->a, "line %u: %s takes a mapping or keywords", line, func == JF_DICT ? "dict" : "namespace");
            for (size_t k = 0; k < args[i].u.d->n; k++)
                jdict_set(r->a, d.u.d, args[i].u.d->keys[k], args[i].u.d->vals[k]);
        }
        for (size_t i = 0; i < a->n_kw; i++)
            jdict_set(r->a, d.u.d, a->kwn[i], a->kwv[i]);
        return d;
    }
    case JF_RAISE: {
        jstr m = n_args ? jv_as_str(r->a, &args[0]) : (jstr){"", 0, NULL};
        jfail(r->a, "line %u: the template raised: %.*s", line, (int)(m.n > 160 ? 160 : m.n), m.s);
    }
    case JF_STRFTIME: {
        jstr fmt = jneed_str(r, n_args ? &args[0] : NULL, "strftime_now", line);
        if (!r->now)
            jfail(r->a, "line %u: strftime_now: no date given", line);
        char f[128], buf[256];
        if (fmt.n >= sizeof f)
            jfail(r->a, "line %u: strftime_now: format too long", line);
        memcpy(f, fmt.s, fmt.n);
        f[fmt.n] = 0;
        size_t k = strftime(buf, sizeof buf, f, r->now);
        return jv_str(jarena_strdup(r->a, buf, k), k, NULL);
    }
    default: jfail(r->a, "line %u: unknown function", line);
    }
}
