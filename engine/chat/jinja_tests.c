/* The Jinja tests (`x is name`) chat templates use, as a table of
 * {name, function} the parser resolves each test against (jtest_find). */
#include <string.h>

#include "jinja_builtins.h"

#define TEST(fn) static bool fn(jrender *r, const jtest_def *d, const jv *in, const jargs *a)
#define KIND(k) (1 << (k))

TEST(t_kind) /* mode: the kinds that pass */
{
    return (d->mode & KIND(in->k)) != 0;
}

TEST(t_bool_value) /* mode: the value that passes */
{
    return in->k == JV_BOOL && in->u.b == (d->mode != 0);
}

TEST(t_case) /* mode 'l': no upper-case ASCII letter, 'u': no lower-case one */
{
    if (in->k != JV_STR)
        return false;
    for (size_t i = 0; i < in->u.s.n; i++) {
        char c = in->u.s.s[i];
        if (d->mode == 'l' ? (c >= 'A' && c <= 'Z') : (c >= 'a' && c <= 'z'))
            return false;
    }
    return true;
}

TEST(t_parity) /* mode 0: even, 1: odd */
{
    int64_t v = jneed_int(r, in, "even/odd", a->line);
    return (v % 2 == 0) == (d->mode == 0);
}

TEST(t_divisibleby)
{
    int64_t dv = jneed_int(r, a->n ? &a->v[0] : NULL, "divisibleby", a->line);
    if (dv == 0)
        jfail(r->a, "line %u: divisibleby zero", a->line);
    return jneed_int(r, in, "divisibleby", a->line) % dv == 0;
}

TEST(t_equal) /* mode 0: equal, 1: not equal, 2: same kind and equal */
{
    const jv *a0 = &a->v[0];
    if (d->mode == 1)
        return !jv_equal(r->a, in, a0);
    return (d->mode == 0 || in->k == a0->k) && jv_equal(r->a, in, a0);
}

TEST(t_in)
{
    const jv *a0 = &a->v[0];
    jlist *l = a0->k == JV_STR ? NULL : jv_iterable(r, a0, a->line);
    if (!l)
        return in->k == JV_STR && jfind(r->a, a0->u.s, in->u.s, 0) >= 0;
    for (size_t i = 0; i < l->n; i++)
        if (jv_equal(r->a, &l->v[i], in))
            return true;
    return false;
}

static const jtest_def tests[] = {
    {JNAME("defined"), t_kind, ~KIND(JV_UNDEF), false},
    {JNAME("undefined"), t_kind, KIND(JV_UNDEF), false},
    {JNAME("none"), t_kind, KIND(JV_NONE), false},
    {JNAME("string"), t_kind, KIND(JV_STR), false},
    {JNAME("number"), t_kind, KIND(JV_INT) | KIND(JV_FLOAT), false},
    {JNAME("integer"), t_kind, KIND(JV_INT), false},
    {JNAME("float"), t_kind, KIND(JV_FLOAT), false},
    {JNAME("boolean"), t_kind, KIND(JV_BOOL), false},
    {JNAME("true"), t_bool_value, 1, false},
    {JNAME("false"), t_bool_value, 0, false},
    {JNAME("mapping"), t_kind, KIND(JV_DICT) | KIND(JV_NS), false},
    {JNAME("sequence"), t_kind, KIND(JV_LIST) | KIND(JV_STR) | KIND(JV_DICT), false},
    {JNAME("iterable"), t_kind, KIND(JV_LIST) | KIND(JV_STR) | KIND(JV_DICT), false},
    {JNAME("callable"), t_kind, KIND(JV_MACRO) | KIND(JV_FUNC) | KIND(JV_METHOD), false},
    {JNAME("lower"), t_case, 'l', false},
    {JNAME("upper"), t_case, 'u', false},
    {JNAME("even"), t_parity, 0, false},
    {JNAME("odd"), t_parity, 1, false},
    {JNAME("divisibleby"), t_divisibleby, 0, false},
    {JNAME("equalto"), t_equal, 0, true},
    {JNAME("eq"), t_equal, 0, true},
    {JNAME("=="), t_equal, 0, true},
    {JNAME("ne"), t_equal, 1, true},
    {JNAME("!="), t_equal, 1, true},
    {JNAME("sameas"), t_equal, 2, true},
    {JNAME("in"), t_in, 0, true},
};

const jtest_def *jtest_find(jstr name)
{
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        if (name.n == tests[i].len && memcmp(name.s, tests[i].name, name.n) == 0)
            return &tests[i];
    return NULL;
}

bool jtest(jrender *r, const jtest_def *d, jstr name, const jv *in, const jargs *a)
{
    if ((!d || d->needs_arg) && a->n == 0)
        jfail(r->a, "line %u: test %.*s needs an argument or is unknown", a->line, (int)name.n, name.s);
    if (!d)
        jfail(r->a, "line %u: unknown test %.*s", a->line, (int)name.n, name.s);
    return d->fn(r, d, in, a);
}
