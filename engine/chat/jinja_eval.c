/* Jinja evaluator: statements write to the output, expressions give
 * values. Scoping follows Jinja: a for loop or macro call opens a frame
 * (its `set`s vanish at its end; namespace() objects carry values out),
 * `if` does not. Every node costs a step, and string work a step per
 * NPL_JINJA_BYTES_PER_STEP bytes; steps, wall-clock time, nesting, output
 * and memory are bounded by the render's limits. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja_internal.h"

struct npl_jinja_template {
    jarena arena;
    const jnode *root;
    npl_jinja_limits lim;
};

void npl_jinja_limits_default(npl_jinja_limits *lim)
{
    lim->max_memory = 64u << 20;
    lim->max_output = 4u << 20;
    lim->max_steps = 20000000;
    lim->max_depth = 100;
    lim->max_time_ms = NPL_JINJA_DEFAULT_TIME_MS;
}

void jstep(jrender *r)
{
    jcharge(r->a, 1);
}

static const jv *lookup(jframe *f, jstr name)
{
    for (; f; f = f->parent) {
        const jv *v = jdict_get(&f->vars, name.s, name.n);
        if (v)
            return v;
    }
    return NULL;
}

static void assign(jrender *r, jframe *f, jstr name, jv v)
{
    jdict_set(r->a, &f->vars, name, v);
}

static void assign_targets(jrender *r, jframe *f, const jstr *names, size_t n, jv v, uint32_t line)
{
    if (n == 1) {
        assign(r, f, names[0], v);
        return;
    }
    jlist *l = jv_iterable(r, &v, line);
    if (l->n != n)
        jfail(r->a, "line %u: cannot unpack %zu values into %zu names", line, l->n, n);
    for (size_t i = 0; i < n; i++)
        assign(r, f, names[i], l->v[i]);
}

/* ---- expressions ------------------------------------------------------------- */

static bool int_of(const jv *v, int64_t *i)
{
    if (v->k == JV_INT)
        *i = v->u.i;
    else if (v->k == JV_BOOL)
        *i = v->u.b;
    else
        return false;
    return true;
}

static _Noreturn void type_error(jrender *r, uint32_t line, const char *op, const jv *a, const jv *b)
{
    jfail(r->a, "line %u: unsupported operand types for %s: %s and %s", line, op, jv_kind_name(a->k),
          jv_kind_name(b->k));
}

static jstr concat(jrender *r, jstr x, jstr y)
{
    jsb b;
    jsb_init(&b, r->a, r->lim->max_output);
    jsb_addstr(&b, x);
    jsb_addstr(&b, y);
    return jsb_done(&b);
}

static bool contains(jrender *r, const jv *hay, const jv *needle, uint32_t line)
{
    if (hay->k == JV_STR) {
        if (needle->k != JV_STR)
            jfail(r->a, "line %u: 'in <string>' needs a string on the left", line);
        return jfind(r->a, hay->u.s, needle->u.s, 0) >= 0;
    }
    if (hay->k == JV_LIST) {
        for (size_t i = 0; i < hay->u.l->n; i++)
            if (jv_equal(r->a, &hay->u.l->v[i], needle))
                return true;
        return false;
    }
    if (hay->k == JV_DICT || hay->k == JV_NS)
        return needle->k == JV_STR && jdict_lookup(r->a, hay->u.d, needle->u.s.s, needle->u.s.n) != NULL;
    if (hay->k == JV_UNDEF)
        return false;
    jfail(r->a, "line %u: 'in' needs a string, list or mapping, not %s", line, jv_kind_name(hay->k));
}

static int compare(jrender *r, const jv *a, const jv *b, uint32_t line)
{
    double x, y;
    if (a->k == JV_INT && b->k == JV_INT)
        return a->u.i < b->u.i ? -1 : a->u.i > b->u.i;
    if (jv_num(a, &x) && jv_num(b, &y))
        return x < y ? -1 : x > y;
    if (a->k == JV_STR && b->k == JV_STR) {
        size_t n = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
        jcharge_bytes(r->a, n);
        int c = memcmp(a->u.s.s, b->u.s.s, n);
        if (c)
            return c < 0 ? -1 : 1;
        return a->u.s.n < b->u.s.n ? -1 : a->u.s.n > b->u.s.n;
    }
    type_error(r, line, "comparison", a, b);
}

static jv arith(jrender *r, int op, const jv *a, const jv *b, uint32_t line)
{
    int64_t i, j, res;
    double x, y;
    if (op == JOP_ADD && a->k == JV_STR && b->k == JV_STR)
        return (jv){.k = JV_STR, .u.s = concat(r, a->u.s, b->u.s)};
    /* string + undefined is the string, as llama.cpp renders it (Command-R's and Gemma 3's
     * templates add attributes a message may lack) */
    if (op == JOP_ADD && ((a->k == JV_STR && b->k == JV_UNDEF) || (a->k == JV_UNDEF && b->k == JV_STR)))
        return a->k == JV_STR ? *a : *b;
    if (op == JOP_ADD && a->k == JV_LIST && b->k == JV_LIST) {
        jv l = jv_list(r->a);
        for (size_t k = 0; k < a->u.l->n; k++)
            jlist_push(r->a, l.u.l, a->u.l->v[k]);
        for (size_t k = 0; k < b->u.l->n; k++)
            jlist_push(r->a, l.u.l, b->u.l->v[k]);
        return l;
    }
    if (op == JOP_MUL && ((a->k == JV_STR && int_of(b, &j)) || (b->k == JV_STR && int_of(a, &j)))) {
        jstr s = a->k == JV_STR ? a->u.s : b->u.s;
        jsb sb;
        jsb_init(&sb, r->a, r->lim->max_output);
        for (int64_t k = 0; k < j; k++) {
            jstep(r);
            jsb_addstr(&sb, s);
        }
        return (jv){.k = JV_STR, .u.s = jsb_done(&sb)};
    }
    static const char *const names[] = {[JOP_ADD] = "+", [JOP_SUB] = "-", [JOP_MUL] = "*", [JOP_DIV] = "/",
                                        [JOP_MOD] = "%"};
    const char *opname = op == JOP_FLOORDIV ? "//" : op == JOP_POW ? "**" : names[op];
    if (int_of(a, &i) && int_of(b, &j) && op != JOP_DIV) {
        switch (op) {
        case JOP_ADD:
            if (__builtin_add_overflow(i, j, &res))
                break;
            return jv_int(res);
        case JOP_SUB:
            if (__builtin_sub_overflow(i, j, &res))
                break;
            return jv_int(res);
        case JOP_MUL:
            if (__builtin_mul_overflow(i, j, &res))
                break;
            return jv_int(res);
        case JOP_FLOORDIV:
        case JOP_MOD: {
            if (j == 0)
                jfail(r->a, "line %u: division by zero", line);
            if (i == INT64_MIN && j == -1)
                break;
            int64_t q = i / j, m = i % j;
            if (m != 0 && ((m < 0) != (j < 0))) {
                q--;
                m += j;
            }
            return jv_int(op == JOP_MOD ? m : q);
        }
        case JOP_POW: {
            if (j < 0)
                return jv_float(pow((double)i, (double)j));
            int64_t acc = 1;
            for (int64_t k = 0; k < j; k++) {
                if (__builtin_mul_overflow(acc, i, &acc))
                    jfail(r->a, "line %u: integer overflow in **", line);
                if (acc == 0 || acc == 1)
                    break;
            }
            return jv_int(acc);
        }
        }
        jfail(r->a, "line %u: integer overflow in %s", line, opname);
    }
    if (jv_num(a, &x) && jv_num(b, &y)) {
        switch (op) {
        case JOP_ADD: return jv_float(x + y);
        case JOP_SUB: return jv_float(x - y);
        case JOP_MUL: return jv_float(x * y);
        case JOP_DIV:
            if (y == 0)
                jfail(r->a, "line %u: division by zero", line);
            return jv_float(x / y);
        case JOP_FLOORDIV:
            if (y == 0)
                jfail(r->a, "line %u: division by zero", line);
            return jv_float(floor(x / y));
        case JOP_MOD:
            if (y == 0)
                jfail(r->a, "line %u: division by zero", line);
            return jv_float(x - floor(x / y) * y);
        case JOP_POW: return jv_float(pow(x, y));
        }
    }
    type_error(r, line, opname, a, b);
}

static jv binary_op(jrender *r, int op, const jv *a, const jv *b, uint32_t line)
{
    switch (op) {
    case JOP_CAT: {
        jstr x = jv_as_str(r->a, a), y = jv_as_str(r->a, b);
        return (jv){.k = JV_STR, .u.s = concat(r, x, y)};
    }
    case JOP_EQ: return jv_bool(jv_equal(r->a, a, b));
    case JOP_NE: return jv_bool(!jv_equal(r->a, a, b));
    case JOP_LT: return jv_bool(compare(r, a, b, line) < 0);
    case JOP_LE: return jv_bool(compare(r, a, b, line) <= 0);
    case JOP_GT: return jv_bool(compare(r, a, b, line) > 0);
    case JOP_GE: return jv_bool(compare(r, a, b, line) >= 0);
    case JOP_IN: return jv_bool(contains(r, b, a, line));
    case JOP_NOTIN: return jv_bool(!contains(r, b, a, line));
    default: return arith(r, op, a, b, line);
    }
}

/* Python slice bounds over a sequence of len items. */
static void slice_bounds(jrender *r, const jv *sv, const jv *ev, const jv *stv, int64_t len, int64_t *start,
                         int64_t *stop, int64_t *step, uint32_t line)
{
    *step = 1;
    if (stv && stv->k != JV_NONE && !int_of(stv, step))
        jfail(r->a, "line %u: slice step must be an integer", line);
    if (*step == 0)
        jfail(r->a, "line %u: slice step cannot be zero", line);
    int64_t lo = *step > 0 ? 0 : -1, hi = *step > 0 ? len : len - 1;
    const jv *ends[2] = {sv, ev};
    int64_t out[2] = {*step > 0 ? lo : hi, *step > 0 ? hi : lo};
    for (int k = 0; k < 2; k++) {
        int64_t v;
        if (!ends[k] || ends[k]->k == JV_NONE)
            continue;
        if (!int_of(ends[k], &v))
            jfail(r->a, "line %u: slice bounds must be integers", line);
        if (v < 0) {
            v += len;
            if (v < lo)
                v = lo;
        } else if (v > hi) {
            v = hi;
        }
        out[k] = v;
    }
    *start = out[0];
    *stop = out[1];
}

/* Byte offsets of each UTF-8 character (cp_off[count] = n). */
static size_t utf8_offsets(jrender *r, jstr s, size_t **offs)
{
    size_t *o = jarena_alloc(r->a, (s.n + 1) * sizeof *o);
    jcharge_bytes(r->a, s.n);
    size_t k = 0;
    for (size_t i = 0; i < s.n; i++)
        if (((unsigned char)s.s[i] & 0xC0) != 0x80)
            o[k++] = i;
    o[k] = s.n;
    *offs = o;
    return k;
}

static jv slice(jrender *r, const jv *obj, const jv *sv, const jv *ev, const jv *stv, uint32_t line)
{
    int64_t start, stop, step;
    if (obj->k == JV_LIST) {
        slice_bounds(r, sv, ev, stv, (int64_t)obj->u.l->n, &start, &stop, &step, line);
        jv l = jv_list(r->a);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
            jlist_push(r->a, l.u.l, obj->u.l->v[i]);
        return l;
    }
    if (obj->k == JV_STR) {
        size_t *off;
        size_t nc = utf8_offsets(r, obj->u.s, &off);
        slice_bounds(r, sv, ev, stv, (int64_t)nc, &start, &stop, &step, line);
        jstr s = obj->u.s;
        if (step == 1) {
            if (stop <= start)
                return jv_str("", 0, NULL);
            size_t b0 = off[start], b1 = off[stop];
            return jv_str(s.s + b0, b1 - b0, s.mask ? s.mask + b0 : NULL);
        }
        jsb b;
        jsb_init(&b, r->a, 0);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
            jsb_add(&b, s.s + off[i], off[i + 1] - off[i], s.mask ? s.mask + off[i] : NULL);
        return (jv){.k = JV_STR, .u.s = jsb_done(&b)};
    }
    jfail(r->a, "line %u: cannot slice a %s", line, jv_kind_name(obj->k));
}

static jv index_value(jrender *r, const jv *obj, const jv *key, uint32_t line)
{
    int64_t i;
    if ((obj->k == JV_DICT || obj->k == JV_NS) && key->k == JV_STR) {
        const jv *v = jdict_lookup(r->a, obj->u.d, key->u.s.s, key->u.s.n);
        return v ? *v : jattr(r, obj, key->u.s, line);
    }
    if (obj->k == JV_LIST && int_of(key, &i)) {
        int64_t n = (int64_t)obj->u.l->n;
        if (i < 0)
            i += n;
        return i >= 0 && i < n ? obj->u.l->v[i] : jv_undef();
    }
    if (obj->k == JV_STR && int_of(key, &i)) {
        size_t *off;
        int64_t n = (int64_t)utf8_offsets(r, obj->u.s, &off);
        if (i < 0)
            i += n;
        if (i < 0 || i >= n)
            return jv_undef();
        jstr s = obj->u.s;
        return jv_str(s.s + off[i], off[i + 1] - off[i], s.mask ? s.mask + off[i] : NULL);
    }
    if (obj->k == JV_UNDEF)
        jfail(r->a, "line %u: subscript of an undefined value", line);
    if (key->k == JV_STR)
        return jattr(r, obj, key->u.s, line);
    return jv_undef();
}

/* Evaluates a node's call arguments, positional and keywords apart. */
static jargs eval_args(jrender *r, jframe *f, const jnode *n)
{
    size_t np = 0, nk = 0;
    jv *a = jarena_alloc(r->a, (n->n_kids + 1) * sizeof *a);
    jv *kv = jarena_alloc(r->a, (n->n_kids + 1) * sizeof *kv);
    jstr *kn = jarena_alloc(r->a, (n->n_kids + 1) * sizeof *kn);
    for (size_t i = 0; i < n->n_kids; i++) {
        jv v = jeval(r, f, n->kids[i]);
        if (n->names && n->names[i].n) {
            kn[nk] = n->names[i];
            kv[nk++] = v;
        } else {
            a[np++] = v;
        }
    }
    return (jargs){.v = a, .n = np, .kwn = kn, .kwv = kv, .n_kw = nk, .line = n->line};
}

static void exec_body(jrender *r, jframe *f, const jnode *body);

static jv call_macro(jrender *r, const jnode *m, const jv *args, size_t n_args, const jstr *kwn, const jv *kwv,
                     size_t n_kw, uint32_t line)
{
    if (n_args > m->n_names)
        jfail(r->a, "line %u: macro %.*s takes %zu arguments, got %zu", line, (int)m->name.n, m->name.s,
              m->n_names, n_args);
    if (++r->depth > r->lim->max_depth)
        jfail(r->a, "line %u: macro calls nested more than %u deep", line, r->lim->max_depth);
    jframe *mf = jarena_alloc(r->a, sizeof *mf);
    mf->parent = r->globals;
    for (size_t i = 0; i < m->n_names; i++) {
        jv v = jv_undef();
        if (i < n_args)
            v = args[i];
        else if (m->kids[i])
            v = jeval(r, mf, m->kids[i]);
        for (size_t k = 0; k < n_kw; k++)
            if (kwn[k].n == m->names[i].n && memcmp(kwn[k].s, m->names[i].s, kwn[k].n) == 0)
                v = kwv[k];
        assign(r, mf, m->names[i], v);
    }
    jsb saved = r->out;
    jsb_init(&r->out, r->a, r->lim->max_output);
    exec_body(r, mf, m->a);
    jstr s = jsb_done(&r->out);
    r->out = saved;
    r->depth--;
    return (jv){.k = JV_STR, .u.s = s};
}

jv jcall_value(jrender *r, const jv *callee, const jargs *a)
{
    switch (callee->k) {
    case JV_MACRO: return call_macro(r, callee->u.macro, a->v, a->n, a->kwn, a->kwv, a->n_kw, a->line);
    case JV_FUNC: return jcall_func(r, callee->u.func, a);
    case JV_METHOD: return jcall_method(r, callee->self, callee->u.member, a);
    default: jfail(r->a, "line %u: a %s is not callable", a->line, jv_kind_name(callee->k));
    }
}

jv jeval(jrender *r, jframe *f, const jnode *n)
{
    jstep(r);
    if (++r->depth > r->lim->max_depth + 200)
        jfail(r->a, "line %u: expression nested too deeply", n->line);
    jv res;
    switch (n->k) {
    case JN_LIT: res = n->lit; break;
    case JN_NAME: {
        const jv *v = lookup(f, n->name);
        res = v ? *v : jv_undef();
        break;
    }
    case JN_LIST:
        res = jv_list(r->a);
        for (size_t i = 0; i < n->n_kids; i++)
            jlist_push(r->a, res.u.l, jeval(r, f, n->kids[i]));
        break;
    case JN_DICT:
        res = jv_dict(r->a);
        for (size_t i = 0; i + 1 < n->n_kids; i += 2) {
            jv k = jeval(r, f, n->kids[i]);
            jdict_set(r->a, res.u.d, jv_as_str(r->a, &k), jeval(r, f, n->kids[i + 1]));
        }
        break;
    case JN_ATTR: {
        jv o = jeval(r, f, n->a);
        res = jattr_member(r, &o, n->name, n->member, n->line);
        break;
    }
    case JN_INDEX: {
        jv o = jeval(r, f, n->a), k = jeval(r, f, n->b);
        res = index_value(r, &o, &k, n->line);
        break;
    }
    case JN_SLICE: {
        jv o = jeval(r, f, n->a);
        jv s = n->b ? jeval(r, f, n->b) : jv_none(), e = n->c ? jeval(r, f, n->c) : jv_none(),
           st = n->d ? jeval(r, f, n->d) : jv_none();
        res = slice(r, &o, &s, &e, &st, n->line);
        break;
    }
    case JN_CALL: {
        jv callee = jeval(r, f, n->a);
        jargs a = eval_args(r, f, n);
        if (callee.k == JV_UNDEF)
            jfail(r->a, "line %u: call of an undefined function", n->line);
        res = jcall_value(r, &callee, &a);
        break;
    }
    case JN_FILTER: {
        jv in = jeval(r, f, n->a);
        jargs a = eval_args(r, f, n);
        res = jfilter(r, f, n->filter, n->name, in, &a);
        break;
    }
    case JN_TEST: {
        jv in = jeval(r, f, n->a);
        jargs a = eval_args(r, f, n);
        bool t = jtest(r, n->test, n->name, &in, &a);
        res = jv_bool(n->negate ? !t : t);
        break;
    }
    case JN_UNARY: {
        jv v = jeval(r, f, n->a);
        if (n->op == 'n') {
            res = jv_bool(!jv_truthy(&v));
        } else if (v.k == JV_INT) {
            if (n->op == '-' && v.u.i == INT64_MIN)
                jfail(r->a, "line %u: integer overflow", n->line);
            res = jv_int(n->op == '-' ? -v.u.i : v.u.i);
        } else if (v.k == JV_FLOAT) {
            res = jv_float(n->op == '-' ? -v.u.f : v.u.f);
        } else if (v.k == JV_BOOL) {
            res = jv_int(n->op == '-' ? -(int64_t)v.u.b : v.u.b);
        } else {
            jfail(r->a, "line %u: bad operand type for unary %c: %s", n->line, n->op, jv_kind_name(v.k));
        }
        break;
    }
    case JN_BINARY: {
        jv a = jeval(r, f, n->a), b = jeval(r, f, n->b);
        res = binary_op(r, n->op, &a, &b, n->line);
        break;
    }
    case JN_AND: {
        jv a = jeval(r, f, n->a);
        res = jv_truthy(&a) ? jeval(r, f, n->b) : a;
        break;
    }
    case JN_OR: {
        jv a = jeval(r, f, n->a);
        res = jv_truthy(&a) ? a : jeval(r, f, n->b);
        break;
    }
    case JN_COND: {
        jv c = jeval(r, f, n->b);
        res = jv_truthy(&c) ? jeval(r, f, n->a) : n->c ? jeval(r, f, n->c) : jv_undef();
        break;
    }
    default: jfail(r->a, "line %u: not an expression", n->line);
    }
    r->depth--;
    return res;
}

/* ---- statements ----------------------------------------------------------------- */

static void exec_for(jrender *r, jframe *f, const jnode *n)
{
    jv it = jeval(r, f, n->a);
    jlist *items = jv_iterable(r, &it, n->line);
    if (n->d) { /* `for x in xs if cond`: filter first, loop.* counts what is left */
        jlist *kept = jarena_alloc(r->a, sizeof *kept);
        jframe *tf = jarena_alloc(r->a, sizeof *tf);
        tf->parent = f;
        for (size_t i = 0; i < items->n; i++) {
            jstep(r);
            assign_targets(r, tf, n->names, n->n_names, items->v[i], n->line);
            jv c = jeval(r, tf, n->d);
            if (jv_truthy(&c))
                jlist_push(r->a, kept, items->v[i]);
        }
        items = kept;
    }
    if (items->n == 0) {
        if (n->c)
            exec_body(r, f, n->c);
        return;
    }
    jloop *lp = jarena_alloc(r->a, sizeof *lp);
    lp->items = items;
    lp->length = items->n;
    jframe *lf = jarena_alloc(r->a, sizeof *lf);
    lf->parent = f;
    for (size_t i = 0; i < items->n; i++) {
        jstep(r);
        lf->vars.n = 0; /* fresh frame per iteration */
        lp->index0 = i;
        assign(r, lf, (jstr){"loop", 4, NULL}, (jv){.k = JV_LOOP, .u.loop = lp});
        assign_targets(r, lf, n->names, n->n_names, items->v[i], n->line);
        exec_body(r, lf, n->b);
        if (r->loop_ctl == 1) {
            r->loop_ctl = 0;
            break;
        }
        r->loop_ctl = 0;
    }
}

static void exec_node(jrender *r, jframe *f, const jnode *n)
{
    jstep(r);
    switch (n->k) {
    case JN_BODY: exec_body(r, f, n); return;
    case JN_TEXT: jsb_addstr(&r->out, n->name); return;
    case JN_OUTPUT: {
        jv v = jeval(r, f, n->a);
        if (!n->negate)
            jv_to_str(&r->out, &v);
        return;
    }
    case JN_IF: {
        jv c = jeval(r, f, n->c);
        if (jv_truthy(&c))
            exec_body(r, f, n->a);
        else if (n->b)
            exec_node(r, f, n->b);
        return;
    }
    case JN_FOR: exec_for(r, f, n); return;
    case JN_SET: assign_targets(r, f, n->names, n->n_names, jeval(r, f, n->a), n->line); return;
    case JN_SET_ATTR: {
        jv o = jeval(r, f, n->a);
        if (o.k != JV_NS)
            jfail(r->a, "line %u: only a namespace() takes attribute assignment, not a %s", n->line,
                  jv_kind_name(o.k));
        jdict_set(r->a, o.u.d, n->name, jeval(r, f, n->b));
        return;
    }
    case JN_SET_BLOCK: {
        jsb saved = r->out;
        jsb_init(&r->out, r->a, r->lim->max_output);
        exec_body(r, f, n->a);
        jstr s = jsb_done(&r->out);
        r->out = saved;
        assign(r, f, n->names[0], (jv){.k = JV_STR, .u.s = s});
        return;
    }
    case JN_MACRO: assign(r, f, n->name, (jv){.k = JV_MACRO, .u.macro = n}); return;
    case JN_BREAK: r->loop_ctl = 1; return;
    case JN_CONTINUE: r->loop_ctl = 2; return;
    default: jfail(r->a, "line %u: not a statement", n->line);
    }
}

static void exec_body(jrender *r, jframe *f, const jnode *body)
{
    if (++r->depth > r->lim->max_depth + 200)
        jfail(r->a, "line %u: blocks nested too deeply", body->line);
    for (size_t i = 0; i < body->n_kids && !r->loop_ctl; i++)
        exec_node(r, f, body->kids[i]);
    r->depth--;
}

/* ---- entry points -------------------------------------------------------------- */

npl_jinja_template *npl_jinja_parse(const char *src, size_t len, const npl_jinja_limits *lim, npl_error *err)
{
    npl_jinja_limits def;
    if (!lim) {
        npl_jinja_limits_default(&def);
        lim = &def;
    }
    npl_jinja_template *t = calloc(1, sizeof *t);
    if (!t) {
        npl_error_set(err, NPL_ERR_NOMEM, "template: out of memory");
        return NULL;
    }
    t->lim = *lim;
    jmp_buf jb;
    char msg[256] = "";
    jarena_init(&t->arena, lim->max_memory, &jb, msg, sizeof msg);
    if (setjmp(jb)) {
        npl_error_set(err, NPL_ERR_FORMAT, "chat template: %s", msg);
        jarena_free(&t->arena);
        free(t);
        return NULL;
    }
    char *copy = jarena_strdup(&t->arena, src ? src : "", src ? len : 0);
    jtoks toks = {0};
    jlex(&t->arena, copy, src ? len : 0, &toks);
    t->root = jparse(&t->arena, &toks);
    t->arena.on_fail = NULL;
    return t;
}

void npl_jinja_free(npl_jinja_template *t)
{
    if (!t)
        return;
    jarena_free(&t->arena);
    free(t);
}

void npl_jinja_output_free(npl_jinja_output *o)
{
    if (!o)
        return;
    free(o->text);
    free(o->mask);
    memset(o, 0, sizeof *o);
}

static void add_object(jrender *r, const char *json, bool mask)
{
    if (!json)
        return;
    jv v = jv_from_json(r->a, json, strlen(json), mask);
    if (v.k != JV_DICT)
        jfail(r->a, "template variables must be a JSON object");
    for (size_t i = 0; i < v.u.d->n; i++)
        assign(r, r->globals, v.u.d->keys[i], v.u.d->vals[i]);
}

npl_status npl_jinja_render(const npl_jinja_template *t, const char *vars_json, const char *data_json,
                            const struct tm *now, npl_jinja_output *out, npl_error *err)
{
    memset(out, 0, sizeof *out);
    if (!t)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "template: none");
    jarena a;
    jmp_buf jb;
    char msg[256] = "";
    jarena_init(&a, t->lim.max_memory, &jb, msg, sizeof msg);
    jrender r = {.a = &a, .lim = &t->lim, .now = now};
    r.budget.max_steps = t->lim.max_steps;
    r.budget.max_time_ms = t->lim.max_time_ms;
    if (t->lim.max_time_ms) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        r.budget.deadline_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + (int64_t)t->lim.max_time_ms * 1000000;
    }
    a.budget = &r.budget;
    if (setjmp(jb)) {
        jarena_free(&a);
        return npl_error_set(err, NPL_ERR_FORMAT, "chat template: %s", msg);
    }
    r.globals = jarena_alloc(&a, sizeof *r.globals);
    static const struct { const char *name; int func; } funcs[] = {
        {"range", JF_RANGE}, {"namespace", JF_NAMESPACE}, {"raise_exception", JF_RAISE},
        {"strftime_now", JF_STRFTIME}, {"dict", JF_DICT}};
    for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++)
        assign(&r, r.globals, (jstr){funcs[i].name, strlen(funcs[i].name), NULL},
               (jv){.k = JV_FUNC, .u.func = funcs[i].func});
    add_object(&r, vars_json, false);
    add_object(&r, data_json, true);
    jsb_init(&r.out, &a, t->lim.max_output);
    exec_body(&r, r.globals, t->root);
    jstr s = jsb_done(&r.out);
    out->text = malloc(s.n + 1);
    out->mask = calloc(s.n + 1, 1);
    if (!out->text || !out->mask) {
        npl_jinja_output_free(out);
        jarena_free(&a);
        return npl_error_set(err, NPL_ERR_NOMEM, "template: out of memory");
    }
    memcpy(out->text, s.s, s.n);
    out->text[s.n] = 0;
    if (s.mask)
        memcpy(out->mask, s.mask, s.n);
    out->len = s.n;
    jarena_free(&a);
    return NPL_OK;
}
