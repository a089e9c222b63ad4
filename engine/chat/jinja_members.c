/* Members chat templates use: the methods of strings, dicts, lists and
 * `loop` and the attributes of `loop`, as one table of {name, function
 * for each kind of receiver} the parser resolves each `.name` against
 * (jmember_find). */
#include <string.h>

#include "jinja_builtins.h"

#define METHOD(fn) static jv fn(jrender *r, const jv *self, const jmember_def *d, const jargs *a)

METHOD(m_strip) /* mode bit 1: left, bit 2: right */
{
    return jstr_strip(r, self->u.s, jarg(a, 0, "chars"), d->mode & 1, d->mode & 2, a->line);
}

METHOD(m_split)
{
    const jv *m = jarg(a, 1, "maxsplit");
    return jstr_split(r, self->u.s, jarg(a, 0, "sep"), m ? jneed_int(r, m, "split", a->line) : -1, a->line);
}

METHOD(m_splitlines)
{
    jstr s = self->u.s;
    jv l = jv_list(r->a);
    size_t st = 0;
    for (size_t i = 0; i < s.n; i++)
        if (s.s[i] == '\n' || s.s[i] == '\r') {
            jlist_push(r->a, l.u.l, jv_str(s.s + st, i - st, s.mask ? s.mask + st : NULL));
            if (s.s[i] == '\r' && i + 1 < s.n && s.s[i + 1] == '\n')
                i++;
            st = i + 1;
        }
    if (st < s.n)
        jlist_push(r->a, l.u.l, jv_str(s.s + st, s.n - st, s.mask ? s.mask + st : NULL));
    return l;
}

METHOD(m_affix) /* mode 0: startswith, 1: endswith */
{
    return jv_bool(jstr_affix(r, self->u.s, jarg(a, 0, NULL), d->mode, a->line));
}

METHOD(m_case) /* mode: jstr_case's */
{
    return jstr_case(r, self->u.s, (char)d->mode);
}

METHOD(m_replace)
{
    const jv *c = jarg(a, 2, "count");
    return jstr_replace(r, self->u.s, jneed_str(r, jarg(a, 0, "old"), "replace", a->line),
                        jneed_str(r, jarg(a, 1, "new"), "replace", a->line),
                        c ? jneed_int(r, c, "replace", a->line) : -1);
}

METHOD(m_find) /* mode 0: find, 1: rfind */
{
    return jv_int(jstr_find(r, self->u.s, jneed_str(r, jarg(a, 0, NULL), "find", a->line), d->mode));
}

METHOD(m_str_count)
{
    jstr s = self->u.s;
    jstr p = jneed_str(r, jarg(a, 0, NULL), "count", a->line);
    int64_t c = 0, at;
    for (size_t i = 0; p.n && (at = jfind(r->a, s, p, i)) >= 0; i = (size_t)at + p.n) {
        jstep(r);
        c++;
    }
    return jv_int(p.n ? c : (int64_t)s.n + 1);
}

METHOD(m_str_join)
{
    const jv *seq = jarg(a, 0, NULL);
    if (!seq)
        jfail(r->a, "line %u: str.join needs an iterable argument", a->line);
    return jjoin(r, seq, self->u.s, NULL, a->line);
}

METHOD(m_format) /* positional {} only */
{
    jstr s = self->u.s;
    jsb b;
    jsb_init(&b, r->a, r->lim->max_output);
    size_t k = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (s.s[i] == '{' && i + 1 < s.n && s.s[i + 1] == '}') {
            if (k >= a->n)
                jfail(r->a, "line %u: format: not enough arguments", a->line);
            jv_to_str(&b, &a->v[k++]);
            i++;
        } else {
            jsb_add(&b, s.s + i, 1, s.mask ? s.mask + i : NULL);
        }
    }
    return jstr_v(jsb_done(&b));
}

METHOD(m_items)
{
    return jitems_of(r, self, a->line);
}

METHOD(m_keys_values) /* mode 0: keys, 1: values */
{
    jv l = jv_list(r->a);
    for (size_t i = 0; i < self->u.d->n; i++)
        jlist_push(r->a, l.u.l, d->mode ? self->u.d->vals[i] : jstr_v(self->u.d->keys[i]));
    return l;
}

METHOD(m_get)
{
    jstr k = jneed_str(r, jarg(a, 0, NULL), "get", a->line);
    const jv *v = jdict_lookup(r->a, self->u.d, k.s, k.n);
    const jv *dv = jarg(a, 1, "default");
    return v ? *v : dv ? *dv : jv_none();
}

METHOD(m_append)
{
    if (a->n != 1)
        jfail(r->a, "line %u: append takes one argument", a->line);
    jlist_push(r->a, self->u.l, a->v[0]);
    return jv_none();
}

METHOD(m_list_index) /* mode 0: count, 1: index */
{
    const jv *x = jarg(a, 0, NULL);
    int64_t c = 0;
    for (size_t i = 0; x && i < self->u.l->n; i++)
        if (jv_equal(r->a, &self->u.l->v[i], x)) {
            if (d->mode)
                return jv_int((int64_t)i);
            c++;
        }
    if (d->mode)
        jfail(r->a, "line %u: index: value not in list", a->line);
    return jv_int(c);
}

METHOD(m_cycle)
{
    if (a->n == 0)
        jfail(r->a, "line %u: loop.cycle needs arguments", a->line);
    return a->v[self->u.loop->index0 % a->n];
}

#define LOOP_ATTR(fn, expr)                      \
    static jv fn(const jloop *lp)                \
    {                                            \
        int64_t i = (int64_t)lp->index0;         \
        int64_t n = (int64_t)lp->length;         \
        (void)i, (void)n;                        \
        return expr;                             \
    }
LOOP_ATTR(l_index, jv_int(i + 1))
LOOP_ATTR(l_index0, jv_int(i))
LOOP_ATTR(l_revindex, jv_int(n - i))
LOOP_ATTR(l_revindex0, jv_int(n - i - 1))
LOOP_ATTR(l_first, jv_bool(i == 0))
LOOP_ATTR(l_last, jv_bool(i == n - 1))
LOOP_ATTR(l_length, jv_int(n))
LOOP_ATTR(l_previtem, i > 0 ? lp->items->v[i - 1] : jv_undef())
LOOP_ATTR(l_nextitem, i + 1 < n ? lp->items->v[i + 1] : jv_undef())

static const jmember_def members[] = {
    {JNAME("strip"), .str = m_strip, .mode = 3},
    {JNAME("lstrip"), .str = m_strip, .mode = 1},
    {JNAME("rstrip"), .str = m_strip, .mode = 2},
    {JNAME("split"), .str = m_split},
    {JNAME("splitlines"), .str = m_splitlines},
    {JNAME("startswith"), .str = m_affix, .mode = 0},
    {JNAME("endswith"), .str = m_affix, .mode = 1},
    {JNAME("upper"), .str = m_case, .mode = 'u'},
    {JNAME("lower"), .str = m_case, .mode = 'l'},
    {JNAME("title"), .str = m_case, .mode = 't'},
    {JNAME("capitalize"), .str = m_case, .mode = 'c'},
    {JNAME("replace"), .str = m_replace},
    {JNAME("find"), .str = m_find, .mode = 0},
    {JNAME("rfind"), .str = m_find, .mode = 1},
    {JNAME("count"), .str = m_str_count, .list = m_list_index, .mode = 0},
    {JNAME("join"), .str = m_str_join},
    {JNAME("format"), .str = m_format},
    {JNAME("items"), .dict = m_items},
    {JNAME("keys"), .dict = m_keys_values, .mode = 0},
    {JNAME("values"), .dict = m_keys_values, .mode = 1},
    {JNAME("get"), .dict = m_get},
    {JNAME("append"), .list = m_append},
    {JNAME("index"), .list = m_list_index, .loop_attr = l_index, .mode = 1},
    {JNAME("cycle"), .loop = m_cycle},
    {JNAME("index0"), .loop_attr = l_index0},
    {JNAME("revindex"), .loop_attr = l_revindex},
    {JNAME("revindex0"), .loop_attr = l_revindex0},
    {JNAME("first"), .loop_attr = l_first},
    {JNAME("last"), .loop_attr = l_last},
    {JNAME("length"), .loop_attr = l_length},
    {JNAME("previtem"), .loop_attr = l_previtem},
    {JNAME("nextitem"), .loop_attr = l_nextitem},
};

const jmember_def *jmember_find(jstr name)
{
    for (size_t i = 0; i < sizeof members / sizeof members[0]; i++)
        if (name.n == members[i].len && memcmp(name.s, members[i].name, name.n) == 0)
            return &members[i];
    return NULL;
}

static jmethod_fn method_of(const jmember_def *m, jkind k)
{
    if (!m)
        return NULL;
    switch (k) {
    case JV_STR: return m->str;
    case JV_DICT: return m->dict;
    case JV_LIST: return m->list;
    case JV_LOOP: return m->loop;
    default: return NULL;
    }
}

static jv bind(jrender *r, const jv *obj, const jmember_def *m)
{
    jv *self = jarena_alloc(r->a, sizeof *self);
    *self = *obj;
    return (jv){.k = JV_METHOD, .u.member = m, .self = self};
}

/* obj.name with m the member of that name, looked up here (only when a
 * dict has no such key) unless resolved. */
static jv attr(jrender *r, const jv *obj, jstr name, const jmember_def *m, bool resolved, uint32_t line)
{
    switch (obj->k) {
    case JV_UNDEF: jfail(r->a, "line %u: '%.*s' of an undefined value", line, (int)name.n, name.s);
    case JV_DICT:
    case JV_NS: {
        const jv *v = jdict_lookup(r->a, obj->u.d, name.s, name.n);
        if (v)
            return *v;
        break;
    }
    default: break;
    }
    if (!resolved)
        m = jmember_find(name);
    if (obj->k == JV_LOOP && m && m->loop_attr)
        return m->loop_attr(obj->u.loop);
    return method_of(m, obj->k) ? bind(r, obj, m) : jv_undef();
}

jv jattr_member(jrender *r, const jv *obj, jstr name, const jmember_def *m, uint32_t line)
{
    return attr(r, obj, name, m, true, line);
}

jv jattr(jrender *r, const jv *obj, jstr name, uint32_t line)
{
    return attr(r, obj, name, NULL, false, line);
}

jv jcall_method(jrender *r, const jv *self, const jmember_def *m, const jargs *a)
{
    jmethod_fn fn = method_of(m, self->k);
    if (!fn)
        jfail(r->a, "line %u: unknown method %s of a %s", a->line, m ? m->name : "?", jv_kind_name(self->k));
    return fn(r, self, m, a);
}
