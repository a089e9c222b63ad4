/* Jinja built-ins used by chat templates: filters, tests, attributes and
 * methods of strings, dicts, lists and `loop`, and the global functions
 * (range, namespace, raise_exception, strftime_now, dict). Case changes
 * (upper, lower, title, capitalize) apply to ASCII letters only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja_internal.h"

static bool name_is(jstr n, const char *lit)
{
    return n.n == strlen(lit) && memcmp(n.s, lit, n.n) == 0;
}

static const jv *kwarg(const jstr *kwn, const jv *kwv, size_t n_kw, const char *name)
{
    for (size_t i = 0; i < n_kw; i++)
        if (name_is(kwn[i], name))
            return &kwv[i];
    return NULL;
}

/* Positional argument i, else keyword `name`, else NULL. */
static const jv *arg(const jv *args, size_t n_args, size_t i, const jstr *kwn, const jv *kwv, size_t n_kw,
                     const char *name)
{
    if (i < n_args)
        return &args[i];
    return name ? kwarg(kwn, kwv, n_kw, name) : NULL;
}

static jstr need_str(jrender *r, const jv *v, const char *what, uint32_t line)
{
    if (!v || v->k != JV_STR)
        jfail(r->a, "line %u: %s needs a string, not %s", line, what, v ? jv_kind_name(v->k) : "nothing");
    return v->u.s;
}

static int64_t need_int(jrender *r, const jv *v, const char *what, uint32_t line)
{
    if (v && v->k == JV_INT)
        return v->u.i;
    if (v && v->k == JV_BOOL)
        return v->u.b;
    jfail(r->a, "line %u: %s needs an integer, not %s", line, what, v ? jv_kind_name(v->k) : "nothing");
}

static jv str_v(jstr s)
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
            jlist_push(r->a, l, str_v(v->u.d->keys[i]));
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

static jv items_of(jrender *r, const jv *d, uint32_t line)
{
    if (d->k == JV_UNDEF)
        return jv_list(r->a);
    if (d->k != JV_DICT && d->k != JV_NS)
        jfail(r->a, "line %u: items needs a mapping, not %s", line, jv_kind_name(d->k));
    jv l = jv_list(r->a);
    for (size_t i = 0; i < d->u.d->n; i++) {
        jv pair = jv_list(r->a);
        jlist_push(r->a, pair.u.l, str_v(d->u.d->keys[i]));
        jlist_push(r->a, pair.u.l, d->u.d->vals[i]);
        jlist_push(r->a, l.u.l, pair);
    }
    return l;
}

/* ---- string helpers ---------------------------------------------------------------- */

static bool py_space(const char *s, size_t n, size_t i, size_t *len)
{
    unsigned char c = (unsigned char)s[i];
    *len = 1;
    if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F))
        return true;
    /* U+0085, U+00A0 */
    if (c == 0xC2 && i + 1 < n && ((unsigned char)s[i + 1] == 0x85 || (unsigned char)s[i + 1] == 0xA0)) {
        *len = 2;
        return true;
    }
    if (c == 0xE1 && i + 2 < n && (unsigned char)s[i + 1] == 0x9A && (unsigned char)s[i + 2] == 0x80) {
        *len = 3; /* U+1680 */
        return true;
    }
    if (c == 0xE2 && i + 2 < n) {
        unsigned char b = (unsigned char)s[i + 1], d = (unsigned char)s[i + 2];
        if ((b == 0x80 && (d <= 0x8A || d == 0xA8 || d == 0xA9 || d == 0xAF)) || (b == 0x81 && d == 0x9F)) {
            *len = 3;
            return true;
        }
    }
    if (c == 0xE3 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 && (unsigned char)s[i + 2] == 0x80) {
        *len = 3; /* U+3000 */
        return true;
    }
    return false;
}

/* Length of the whitespace character ending at byte end (0 if none). */
static size_t space_before(const char *s, size_t start, size_t end)
{
    for (size_t k = 1; k <= 3 && k <= end - start; k++) {
        size_t len;
        if (py_space(s, end, end - k, &len) && len == k)
            return k;
    }
    return 0;
}

static bool in_chars(jstr chars, const char *s, size_t i, size_t n, size_t *len)
{
    size_t k = 1;
    while (i + k < n && ((unsigned char)s[i + k] & 0xC0) == 0x80)
        k++;
    *len = k;
    for (size_t j = 0; j + k <= chars.n; j++)
        if (memcmp(chars.s + j, s + i, k) == 0)
            return true;
    return false;
}

/* Python str.strip/lstrip/rstrip with optional character set. */
static jv strip(jrender *r, jstr s, const jv *chars, bool left, bool right, uint32_t line)
{
    size_t b = 0, e = s.n, len;
    bool custom = chars && chars->k != JV_NONE && chars->k != JV_UNDEF;
    jstr cs = custom ? need_str(r, chars, "strip", line) : (jstr){0};
    if (left)
        while (b < e && (custom ? in_chars(cs, s.s, b, e, &len) : py_space(s.s, e, b, &len))) {
            jcharge_bytes(r->a, cs.n + len);
            b += len;
        }
    if (right) {
        while (e > b) {
            jcharge_bytes(r->a, cs.n + 1);
            size_t k = 0;
            if (custom) {
                size_t st = e - 1;
                while (st > b && ((unsigned char)s.s[st] & 0xC0) == 0x80)
                    st--;
                if (in_chars(cs, s.s, st, e, &len) && st + len == e)
                    k = len;
            } else {
                k = space_before(s.s, b, e);
            }
            if (!k)
                break;
            e -= k;
        }
    }
    return jv_str(s.s + b, e - b, s.mask ? s.mask + b : NULL);
}

static jv change_case(jrender *r, jstr s, char mode)
{
    char *d = jarena_alloc(r->a, s.n + 1);
    bool word_start = true;
    for (size_t i = 0; i < s.n; i++) {
        char c = s.s[i];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        bool up = mode == 'u' || ((mode == 't' || mode == 'c') && word_start && alpha);
        if (mode == 'c' && i > 0)
            up = false;
        if (up && c >= 'a' && c <= 'z')
            c = (char)(c - 32);
        else if (!up && mode != 'u' && c >= 'A' && c <= 'Z')
            c = (char)(c + 32);
        d[i] = c;
        word_start = !alpha;
    }
    return jv_str(d, s.n, s.mask);
}

static bool starts_with(jrender *r, jstr s, jstr p)
{
    jcharge_bytes(r->a, p.n);
    return p.n <= s.n && memcmp(s.s, p.s, p.n) == 0;
}

static bool ends_with(jrender *r, jstr s, jstr p)
{
    jcharge_bytes(r->a, p.n);
    return p.n <= s.n && memcmp(s.s + s.n - p.n, p.s, p.n) == 0;
}

static bool affix_match(jrender *r, jstr s, const jv *a, bool end, uint32_t line)
{
    if (a && a->k == JV_LIST) {
        for (size_t i = 0; i < a->u.l->n; i++)
            if (affix_match(r, s, &a->u.l->v[i], end, line))
                return true;
        return false;
    }
    jstr p = need_str(r, a, end ? "endswith" : "startswith", line);
    return end ? ends_with(r, s, p) : starts_with(r, s, p);
}

/* Python str.replace; a non-empty `old` is searched for (linear), an
 * empty one matches between every character. */
static jv replace(jrender *r, jstr s, jstr old, jstr new, int64_t count)
{
    jsb b;
    jsb_init(&b, r->a, r->lim->max_output);
    size_t i = 0;
    int64_t done = 0;
    while (old.n > 0) {
        int64_t at = count < 0 || done < count ? jfind(r->a, s, old, i) : -1;
        size_t end = at < 0 ? s.n : (size_t)at;
        jstep(r);
        jsb_add(&b, s.s + i, end - i, s.mask ? s.mask + i : NULL);
        if (at < 0)
            return str_v(jsb_done(&b));
        jsb_addstr(&b, new);
        done++;
        i = end + old.n;
    }
    while (i <= s.n) {
        jstep(r);
        if (count < 0 || done < count) {
            jsb_addstr(&b, new);
            done++;
            if (i < s.n)
                jsb_add(&b, s.s + i, 1, s.mask ? s.mask + i : NULL);
            i++;
        } else {
            if (i < s.n)
                jsb_add(&b, s.s + i, 1, s.mask ? s.mask + i : NULL);
            i++;
        }
    }
    return str_v(jsb_done(&b));
}

static jv split(jrender *r, jstr s, const jv *sep, int64_t maxsplit, uint32_t line)
{
    jv l = jv_list(r->a);
    if (!sep || sep->k == JV_NONE || sep->k == JV_UNDEF) {
        size_t i = 0, len;
        while (i < s.n) {
            jstep(r);
            while (i < s.n && py_space(s.s, s.n, i, &len))
                i += len;
            if (i >= s.n)
                break;
            size_t st = i;
            if (maxsplit >= 0 && (int64_t)l.u.l->n >= maxsplit) {
                size_t e = s.n;
                size_t k;
                while (e > st && (k = space_before(s.s, st, e)) != 0)
                    e -= k;
                jlist_push(r->a, l.u.l, jv_str(s.s + st, e - st, s.mask ? s.mask + st : NULL));
                break;
            }
            while (i < s.n && !py_space(s.s, s.n, i, &len))
                i++;
            jlist_push(r->a, l.u.l, jv_str(s.s + st, i - st, s.mask ? s.mask + st : NULL));
        }
        return l;
    }
    jstr p = need_str(r, sep, "split", line);
    if (p.n == 0)
        jfail(r->a, "line %u: split: empty separator", line);
    size_t st = 0;
    int64_t at;
    while ((maxsplit < 0 || (int64_t)l.u.l->n < maxsplit) && (at = jfind(r->a, s, p, st)) >= 0) {
        jstep(r);
        jlist_push(r->a, l.u.l, jv_str(s.s + st, (size_t)at - st, s.mask ? s.mask + st : NULL));
        st = (size_t)at + p.n;
    }
    jlist_push(r->a, l.u.l, jv_str(s.s + st, s.n - st, s.mask ? s.mask + st : NULL));
    return l;
}

static int64_t find(jrender *r, jstr s, jstr p, bool last)
{
    int64_t hit = jfind(r->a, s, p, 0);
    while (last && hit >= 0 && (size_t)hit < s.n) {
        int64_t next = jfind(r->a, s, p, (size_t)hit + 1);
        if (next < 0)
            break;
        jstep(r);
        hit = next;
    }
    return hit;
}

/* ---- attributes and methods ----------------------------------------------------------- */

static const char *const STR_METHODS[] = {"strip", "lstrip", "rstrip", "split", "startswith", "endswith",
                                          "upper", "lower", "replace", "title", "capitalize", "find",
                                          "rfind", "count", "join", "format", "splitlines", NULL};
static const char *const DICT_METHODS[] = {"items", "keys", "values", "get", NULL};
static const char *const LIST_METHODS[] = {"append", "index", "count", NULL};

static bool listed(const char *const *names, jstr n)
{
    for (size_t i = 0; names[i]; i++)
        if (name_is(n, names[i]))
            return true;
    return false;
}

static jv method(jrender *r, const jv *obj, jstr name)
{
    jv *self = jarena_alloc(r->a, sizeof *self);
    *self = *obj;
    return (jv){.k = JV_METHOD, .u.s = name, .self = self};
}

jv jattr(jrender *r, const jv *obj, jstr name, uint32_t line)
{
    switch (obj->k) {
    case JV_UNDEF: jfail(r->a, "line %u: '%.*s' of an undefined value", line, (int)name.n, name.s);
    case JV_DICT:
    case JV_NS: {
        const jv *v = jdict_lookup(r->a, obj->u.d, name.s, name.n);
        if (v)
            return *v;
        if (obj->k == JV_DICT && listed(DICT_METHODS, name))
            return method(r, obj, name);
        return jv_undef();
    }
    case JV_STR: return listed(STR_METHODS, name) ? method(r, obj, name) : jv_undef();
    case JV_LIST: return listed(LIST_METHODS, name) ? method(r, obj, name) : jv_undef();
    case JV_LOOP: {
        const jloop *lp = obj->u.loop;
        int64_t i = (int64_t)lp->index0, n = (int64_t)lp->length;
        if (name_is(name, "index"))
            return jv_int(i + 1);
        if (name_is(name, "index0"))
            return jv_int(i);
        if (name_is(name, "revindex"))
            return jv_int(n - i);
        if (name_is(name, "revindex0"))
            return jv_int(n - i - 1);
        if (name_is(name, "first"))
            return jv_bool(i == 0);
        if (name_is(name, "last"))
            return jv_bool(i == n - 1);
        if (name_is(name, "length"))
            return jv_int(n);
        if (name_is(name, "previtem"))
            return i > 0 ? lp->items->v[i - 1] : jv_undef();
        if (name_is(name, "nextitem"))
            return i + 1 < n ? lp->items->v[i + 1] : jv_undef();
        if (name_is(name, "cycle"))
            return method(r, obj, name);
        return jv_undef();
    }
    default: return jv_undef();
    }
}

static jv join(jrender *r, const jv *seq, jstr sep, const jv *attribute, uint32_t line)
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
    return str_v(jsb_done(&b));
}

jv jcall_method(jrender *r, const jv *self, jstr name, const jv *args, size_t n_args, const jstr *kwnames,
                const jv *kwvals, size_t n_kw, uint32_t line)
{
#define ARG(i, kw) arg(args, n_args, (i), kwnames, kwvals, n_kw, (kw))
    if (self->k == JV_STR) {
        jstr s = self->u.s;
        if (name_is(name, "strip"))
            return strip(r, s, ARG(0, "chars"), true, true, line);
        if (name_is(name, "lstrip"))
            return strip(r, s, ARG(0, "chars"), true, false, line);
        if (name_is(name, "rstrip"))
            return strip(r, s, ARG(0, "chars"), false, true, line);
        if (name_is(name, "split")) {
            const jv *m = ARG(1, "maxsplit");
            return split(r, s, ARG(0, "sep"), m ? need_int(r, m, "split", line) : -1, line);
        }
        if (name_is(name, "splitlines")) {
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
        if (name_is(name, "startswith"))
            return jv_bool(affix_match(r, s, ARG(0, NULL), false, line));
        if (name_is(name, "endswith"))
            return jv_bool(affix_match(r, s, ARG(0, NULL), true, line));
        if (name_is(name, "upper"))
            return change_case(r, s, 'u');
        if (name_is(name, "lower"))
            return change_case(r, s, 'l');
        if (name_is(name, "title"))
            return change_case(r, s, 't');
        if (name_is(name, "capitalize"))
            return change_case(r, s, 'c');
        if (name_is(name, "replace")) {
            const jv *c = ARG(2, "count");
            return replace(r, s, need_str(r, ARG(0, "old"), "replace", line),
                           need_str(r, ARG(1, "new"), "replace", line), c ? need_int(r, c, "replace", line) : -1);
        }
        if (name_is(name, "find") || name_is(name, "rfind"))
            return jv_int(find(r, s, need_str(r, ARG(0, NULL), "find", line), name_is(name, "rfind")));
        if (name_is(name, "count")) {
            jstr p = need_str(r, ARG(0, NULL), "count", line);
            int64_t c = 0, at;
            for (size_t i = 0; p.n && (at = jfind(r->a, s, p, i)) >= 0; i = (size_t)at + p.n) {
                jstep(r);
                c++;
            }
            return jv_int(p.n ? c : (int64_t)s.n + 1);
        }
        if (name_is(name, "join")) {
            const jv *seq = ARG(0, NULL);
            if (!seq)
                jfail(r->a, "line %u: str.join needs an iterable argument", line);
            return join(r, seq, s, NULL, line);
        }
        if (name_is(name, "format")) { /* positional {} only */
            jsb b;
            jsb_init(&b, r->a, r->lim->max_output);
            size_t k = 0;
            for (size_t i = 0; i < s.n; i++) {
                if (s.s[i] == '{' && i + 1 < s.n && s.s[i + 1] == '}') {
                    if (k >= n_args)
                        jfail(r->a, "line %u: format: not enough arguments", line);
                    jv_to_str(&b, &args[k++]);
                    i++;
                } else {
                    jsb_add(&b, s.s + i, 1, s.mask ? s.mask + i : NULL);
                }
            }
            return str_v(jsb_done(&b));
        }
    } else if (self->k == JV_DICT) {
        if (name_is(name, "items"))
            return items_of(r, self, line);
        if (name_is(name, "keys") || name_is(name, "values")) {
            jv l = jv_list(r->a);
            for (size_t i = 0; i < self->u.d->n; i++)
                jlist_push(r->a, l.u.l, name_is(name, "keys") ? str_v(self->u.d->keys[i]) : self->u.d->vals[i]);
            return l;
        }
        if (name_is(name, "get")) {
            jstr k = need_str(r, ARG(0, NULL), "get", line);
            const jv *v = jdict_lookup(r->a, self->u.d, k.s, k.n);
            const jv *d = ARG(1, "default");
            return v ? *v : d ? *d : jv_none();
        }
    } else if (self->k == JV_LIST) {
        if (name_is(name, "append")) {
            if (n_args != 1)
                jfail(r->a, "line %u: append takes one argument", line);
            jlist_push(r->a, self->u.l, args[0]);
            return jv_none();
        }
        if (name_is(name, "index") || name_is(name, "count")) {
            const jv *x = ARG(0, NULL);
            int64_t c = 0;
            for (size_t i = 0; x && i < self->u.l->n; i++)
                if (jv_equal(r->a, &self->u.l->v[i], x)) {
                    if (name_is(name, "index"))
                        return jv_int((int64_t)i);
                    c++;
                }
            if (name_is(name, "index"))
                jfail(r->a, "line %u: index: value not in list", line);
            return jv_int(c);
        }
    } else if (self->k == JV_LOOP && name_is(name, "cycle")) {
        if (n_args == 0)
            jfail(r->a, "line %u: loop.cycle needs arguments", line);
        return args[self->u.loop->index0 % n_args];
    }
    jfail(r->a, "line %u: unknown method %.*s of a %s", line, (int)name.n, name.s, jv_kind_name(self->k));
#undef ARG
}

/* ---- global functions -------------------------------------------------------------------- */

jv jcall_func(jrender *r, int func, const jv *args, size_t n_args, const jstr *kwnames, const jv *kwvals,
              size_t n_kw, uint32_t line)
{
    switch (func) {
    case JF_RANGE: {
        if (n_args < 1 || n_args > 3)
            jfail(r->a, "line %u: range takes 1 to 3 arguments", line);
        int64_t a = 0, b, s = 1;
        if (n_args == 1) {
            b = need_int(r, &args[0], "range", line);
        } else {
            a = need_int(r, &args[0], "range", line);
            b = need_int(r, &args[1], "range", line);
            if (n_args == 3)
                s = need_int(r, &args[2], "range", line);
        }
        if (s == 0)
            jfail(r->a, "line %u: range step cannot be zero", line);
        jv l = jv_list(r->a);
        for (int64_t i = a; s > 0 ? i < b : i > b; i += s) {
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
        for (size_t i = 0; i < n_kw; i++)
            jdict_set(r->a, d.u.d, kwnames[i], kwvals[i]);
        return d;
    }
    case JF_RAISE: {
        jstr m = n_args ? jv_as_str(r->a, &args[0]) : (jstr){"", 0, NULL};
        jfail(r->a, "line %u: the template raised: %.*s", line, (int)(m.n > 160 ? 160 : m.n), m.s);
    }
    case JF_STRFTIME: {
        jstr fmt = need_str(r, n_args ? &args[0] : NULL, "strftime_now", line);
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

/* ---- tests ---------------------------------------------------------------------------------- */

bool jtest(jrender *r, jframe *f, const jstr *name, const jv *in, const jv *args, size_t n_args, uint32_t line)
{
    (void)f;
    jstr n = *name;
    const jv *a0 = n_args ? &args[0] : NULL;
    if (name_is(n, "defined"))
        return in->k != JV_UNDEF;
    if (name_is(n, "undefined"))
        return in->k == JV_UNDEF;
    if (name_is(n, "none"))
        return in->k == JV_NONE;
    if (name_is(n, "string"))
        return in->k == JV_STR;
    if (name_is(n, "number"))
        return in->k == JV_INT || in->k == JV_FLOAT;
    if (name_is(n, "integer"))
        return in->k == JV_INT;
    if (name_is(n, "float"))
        return in->k == JV_FLOAT;
    if (name_is(n, "boolean"))
        return in->k == JV_BOOL;
    if (name_is(n, "true"))
        return in->k == JV_BOOL && in->u.b;
    if (name_is(n, "false"))
        return in->k == JV_BOOL && !in->u.b;
    if (name_is(n, "mapping"))
        return in->k == JV_DICT || in->k == JV_NS;
    if (name_is(n, "sequence") || name_is(n, "iterable"))
        return in->k == JV_LIST || in->k == JV_STR || in->k == JV_DICT;
    if (name_is(n, "callable"))
        return in->k == JV_MACRO || in->k == JV_FUNC || in->k == JV_METHOD;
    if (name_is(n, "lower") || name_is(n, "upper")) {
        if (in->k != JV_STR)
            return false;
        for (size_t i = 0; i < in->u.s.n; i++) {
            char c = in->u.s.s[i];
            if (name_is(n, "lower") ? (c >= 'A' && c <= 'Z') : (c >= 'a' && c <= 'z'))
                return false;
        }
        return true;
    }
    if (name_is(n, "even") || name_is(n, "odd")) {
        int64_t v = need_int(r, in, "even/odd", line);
        return (v % 2 == 0) == name_is(n, "even");
    }
    if (name_is(n, "divisibleby")) {
        int64_t d = need_int(r, a0, "divisibleby", line);
        if (d == 0)
            jfail(r->a, "line %u: divisibleby zero", line);
        return need_int(r, in, "divisibleby", line) % d == 0;
    }
    if (!a0)
        jfail(r->a, "line %u: test %.*s needs an argument or is unknown", line, (int)n.n, n.s);
    if (name_is(n, "equalto") || name_is(n, "eq") || name_is(n, "=="))
        return jv_equal(r->a, in, a0);
    if (name_is(n, "ne") || name_is(n, "!="))
        return !jv_equal(r->a, in, a0);
    if (name_is(n, "sameas"))
        return in->k == a0->k && jv_equal(r->a, in, a0);
    if (name_is(n, "in")) {
        jlist *l = a0->k == JV_STR ? NULL : jv_iterable(r, a0, line);
        if (!l)
            return in->k == JV_STR && jfind(r->a, a0->u.s, in->u.s, 0) >= 0;
        for (size_t i = 0; i < l->n; i++)
            if (jv_equal(r->a, &l->v[i], in))
                return true;
        return false;
    }
    jfail(r->a, "line %u: unknown test %.*s", line, (int)n.n, n.s);
}

/* ---- filters ------------------------------------------------------------------------------------ */

static jv select_reject(jrender *r, jframe *f, jv in, const jv *args, size_t n_args, bool by_attr, bool keep,
                        uint32_t line)
{
    jv out = jv_list(r->a);
    if (in.k == JV_NONE || in.k == JV_UNDEF) /* as llama.cpp: functionary's `none | selectattr(...)` */
        return out;
    jlist *l = jv_iterable(r, &in, line);
    size_t a0 = by_attr ? 1 : 0;
    if (by_attr && n_args < 1)
        jfail(r->a, "line %u: selectattr/rejectattr need an attribute", line);
    for (size_t i = 0; i < l->n; i++) {
        jstep(r);
        jv v = l->v[i];
        if (by_attr) {
            if (v.k == JV_UNDEF)
                continue;
            v = jattr(r, &v, need_str(r, &args[0], "selectattr", line), line);
        }
        bool t;
        if (n_args > a0) {
            jstr test = need_str(r, &args[a0], "select test", line);
            t = jtest(r, f, &test, &v, args + a0 + 1, n_args - a0 - 1, line);
        } else {
            t = jv_truthy(&v);
        }
        if (t == keep)
            jlist_push(r->a, out.u.l, l->v[i]);
    }
    return out;
}

jv jfilter(jrender *r, jframe *f, const jstr *name, jv in, const jv *args, size_t n_args, const jstr *kwnames,
           const jv *kwvals, size_t n_kw, uint32_t line)
{
#define ARG(i, kw) arg(args, n_args, (i), kwnames, kwvals, n_kw, (kw))
    jstr n = *name;
    if (name_is(n, "tojson")) {
        const jv *ind = ARG(0, "indent");
        int indent = -1;
        if (ind && ind->k != JV_NONE) {
            int64_t k = need_int(r, ind, "tojson indent", line);
            indent = k < 0 ? 0 : k > 16 ? 16 : (int)k;
        }
        const jv *ascii = kwarg(kwnames, kwvals, n_kw, "ensure_ascii"), *sort = kwarg(kwnames, kwvals, n_kw, "sort_keys");
        jjson_opts jo = {.indent = indent, .ensure_ascii = ascii && jv_truthy(ascii), .sort_keys = sort && jv_truthy(sort)};
        jsb b;
        jsb_init(&b, r->a, r->lim->max_output);
        jv_to_json(&b, &in, &jo, 0);
        return str_v(jsb_done(&b));
    }
    if (name_is(n, "trim")) /* an undefined value trims to "" (jinja2: a missing description) */
        return in.k == JV_UNDEF ? jv_cstr("") : strip(r, need_str(r, &in, "trim", line), ARG(0, "chars"), true, true, line);
    if (name_is(n, "length") || name_is(n, "count")) {
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
        default: jfail(r->a, "line %u: length of a %s", line, jv_kind_name(in.k));
        }
    }
    if (name_is(n, "default") || name_is(n, "d")) {
        const jv *dv = ARG(0, "default_value");
        const jv *boolean = ARG(1, "boolean");
        bool use = in.k == JV_UNDEF || (boolean && jv_truthy(boolean) && !jv_truthy(&in));
        return use ? (dv ? *dv : jv_str("", 0, NULL)) : in;
    }
    if (name_is(n, "join")) {
        const jv *sep = ARG(0, "d");
        return join(r, &in, sep ? jv_as_str(r->a, sep) : (jstr){"", 0, NULL}, ARG(1, "attribute"), line);
    }
    if (name_is(n, "list")) {
        jlist *l = jv_iterable(r, &in, line);
        jv out = jv_list(r->a);
        for (size_t i = 0; i < l->n; i++)
            jlist_push(r->a, out.u.l, l->v[i]);
        return out;
    }
    if (name_is(n, "first") || name_is(n, "last")) {
        jlist *l = jv_iterable(r, &in, line);
        if (l->n == 0)
            return jv_undef();
        return name_is(n, "first") ? l->v[0] : l->v[l->n - 1];
    }
    if (name_is(n, "reverse")) {
        if (in.k == JV_STR) {
            jsb b;
            jsb_init(&b, r->a, 0);
            jlist *l = jv_iterable(r, &in, line);
            for (size_t i = l->n; i-- > 0;)
                jsb_addstr(&b, l->v[i].u.s);
            return str_v(jsb_done(&b));
        }
        jlist *l = jv_iterable(r, &in, line);
        jv out = jv_list(r->a);
        for (size_t i = l->n; i-- > 0;)
            jlist_push(r->a, out.u.l, l->v[i]);
        return out;
    }
    if (name_is(n, "map")) {
        jlist *l = jv_iterable(r, &in, line);
        jv out = jv_list(r->a);
        const jv *attr = kwarg(kwnames, kwvals, n_kw, "attribute");
        const jv *dflt = kwarg(kwnames, kwvals, n_kw, "default");
        for (size_t i = 0; i < l->n; i++) {
            jstep(r);
            jv v;
            if (attr) {
                v = l->v[i].k == JV_UNDEF ? jv_undef() : jattr(r, &l->v[i], need_str(r, attr, "map", line), line);
                if (v.k == JV_UNDEF && dflt)
                    v = *dflt;
            } else {
                if (n_args < 1)
                    jfail(r->a, "line %u: map needs a filter name or attribute=", line);
                jstr fname = need_str(r, &args[0], "map", line);
                v = jfilter(r, f, &fname, l->v[i], args + 1, n_args - 1, kwnames, kwvals, n_kw, line);
            }
            jlist_push(r->a, out.u.l, v);
        }
        return out;
    }
    if (name_is(n, "selectattr") || name_is(n, "rejectattr"))
        return select_reject(r, f, in, args, n_args, true, name_is(n, "selectattr"), line);
    if (name_is(n, "select") || name_is(n, "reject"))
        return select_reject(r, f, in, args, n_args, false, name_is(n, "select"), line);
    if (name_is(n, "items"))
        return items_of(r, &in, line);
    if (name_is(n, "string"))
        return str_v(jv_as_str(r->a, &in));
    if (name_is(n, "int")) {
        if (in.k == JV_INT)
            return in;
        if (in.k == JV_FLOAT)
            return jv_int((int64_t)in.u.f);
        if (in.k == JV_BOOL)
            return jv_int(in.u.b);
        if (in.k == JV_STR) {
            char buf[32];
            size_t k = in.u.s.n < sizeof buf - 1 ? in.u.s.n : sizeof buf - 1;
            memcpy(buf, in.u.s.s, k);
            buf[k] = 0;
            char *end;
            long long v = strtoll(buf, &end, 10);
            if (end != buf && *end == 0)
                return jv_int(v);
        }
        const jv *dv = ARG(0, "default");
        return dv ? *dv : jv_int(0);
    }
    if (name_is(n, "float")) {
        double d;
        if (in.k == JV_INT)
            return jv_float((double)in.u.i);
        if (in.k == JV_FLOAT)
            return in;
        if (in.k == JV_STR) {
            char buf[64];
            size_t k = in.u.s.n < sizeof buf - 1 ? in.u.s.n : sizeof buf - 1;
            memcpy(buf, in.u.s.s, k);
            buf[k] = 0;
            char *end;
            d = strtod(buf, &end);
            if (end != buf && *end == 0)
                return jv_float(d);
        }
        return jv_float(0);
    }
    if (name_is(n, "upper") || name_is(n, "lower") || name_is(n, "title") || name_is(n, "capitalize")) {
        jstr s = jv_as_str(r->a, &in);
        return change_case(r, s, name_is(n, "upper") ? 'u' : name_is(n, "lower") ? 'l' : name_is(n, "title") ? 't' : 'c');
    }
    if (name_is(n, "replace")) {
        const jv *c = ARG(2, "count");
        return replace(r, jv_as_str(r->a, &in), need_str(r, ARG(0, "old"), "replace", line),
                       need_str(r, ARG(1, "new"), "replace", line), c ? need_int(r, c, "replace", line) : -1);
    }
    if (name_is(n, "safe"))
        return in;
    if (name_is(n, "indent")) {
        const jv *w = ARG(0, "width");
        int64_t width = w ? need_int(r, w, "indent", line) : 4;
        const jv *first = ARG(1, "first");
        const jv *blank = ARG(2, "blank");
        jstr s = jv_as_str(r->a, &in);
        if (width < 0 || width > 1000)
            jfail(r->a, "line %u: indent width out of range", line);
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
        return str_v(jsb_done(&b));
    }
    if (name_is(n, "unique")) {
        jlist *l = jv_iterable(r, &in, line);
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
    if (name_is(n, "abs")) {
        if (in.k == JV_INT)
            return jv_int(in.u.i < 0 && in.u.i != INT64_MIN ? -in.u.i : in.u.i);
        if (in.k == JV_FLOAT)
            return jv_float(in.u.f < 0 ? -in.u.f : in.u.f);
    }
    jfail(r->a, "line %u: unknown filter %.*s (or wrong input: %s)", line, (int)n.n, n.s, jv_kind_name(in.k));
#undef ARG
}
