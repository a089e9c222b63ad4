/* Jinja parser: tokens -> syntax tree, with Jinja's operator precedence
 * (conditional < or < and < not < comparison < ~ < + - < * / // % < **
 * < unary < postfix, filters and tests). Nesting is bounded. */
#include <string.h>

#include "jinja_internal.h"

typedef struct parser {
    jarena *a;
    const jtok *t;
    size_t n, p;
    unsigned depth;
} parser;

#define MAX_PARSE_DEPTH 200

static const jtok *peek(parser *P)
{
    return &P->t[P->p];
}

static const jtok *next(parser *P)
{
    const jtok *t = &P->t[P->p];
    if (t->k != JT_EOF)
        P->p++;
    return t;
}

static bool tok_is(const jtok *t, jtok_kind k, const char *s)
{
    if (t->k != k)
        return false;
    return !s || (t->s.n == strlen(s) && memcmp(t->s.s, s, t->s.n) == 0);
}

static bool accept_op(parser *P, const char *op)
{
    if (tok_is(peek(P), JT_OP, op)) {
        P->p++;
        return true;
    }
    return false;
}

static bool accept_name(parser *P, const char *name)
{
    if (tok_is(peek(P), JT_NAME, name)) {
        P->p++;
        return true;
    }
    return false;
}

static _Noreturn void fail_at(parser *P, const char *what)
{
    const jtok *t = peek(P);
    jfail(P->a, "line %u: %s (found %.*s)", t->line, what,
          t->k == JT_EOF ? 3 : (int)(t->s.n > 40 ? 40 : t->s.n),
          t->k == JT_EOF ? "end" : t->s.n ? t->s.s : t->k == JT_STMT_CLOSE ? "%}" : "tag");
}

static void expect_op(parser *P, const char *op)
{
    if (!accept_op(P, op)) {
        char m[32];
        memcpy(m, "expected '", 10);
        size_t k = strlen(op);
        memcpy(m + 10, op, k);
        m[10 + k] = '\'';
        m[11 + k] = 0;
        fail_at(P, m);
    }
}

static jstr expect_name(parser *P)
{
    if (peek(P)->k != JT_NAME)
        fail_at(P, "expected a name");
    return next(P)->s;
}

static jnode *node(parser *P, jnode_kind k)
{
    jnode *n = jarena_alloc(P->a, sizeof *n);
    n->k = k;
    n->line = peek(P)->line;
    return n;
}

/* Growable arrays of children / names while parsing. */
typedef struct kids {
    const jnode **v;
    jstr *names;
    size_t n, cap;
} kids;

static void kids_push(parser *P, kids *k, const jnode *n, jstr name)
{
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 8;
        const jnode **v = jarena_alloc(P->a, cap * sizeof *v);
        jstr *nm = jarena_alloc(P->a, cap * sizeof *nm);
        if (k->n) {
            memcpy(v, k->v, k->n * sizeof *v);
            memcpy(nm, k->names, k->n * sizeof *nm);
        }
        k->v = v;
        k->names = nm;
        k->cap = cap;
    }
    k->v[k->n] = n;
    k->names[k->n] = name;
    k->n++;
}

static void enter(parser *P)
{
    if (++P->depth > MAX_PARSE_DEPTH)
        jfail(P->a, "line %u: template nested too deeply", peek(P)->line);
}

static const jnode *parse_expr(parser *P);
static const jnode *parse_or(parser *P);
static const jnode *parse_unary(parser *P, bool with_filter);

/* Arguments of a call or filter: positional, then name=value. */
static void parse_args(parser *P, jnode *n)
{
    kids k = {0};
    size_t n_kw = 0;
    while (!accept_op(P, ")")) {
        if (k.n)
            expect_op(P, ",");
        if (accept_op(P, ")"))
            break;
        jstr name = {0};
        if (peek(P)->k == JT_NAME && tok_is(&P->t[P->p + 1], JT_OP, "=")) {
            name = next(P)->s;
            next(P);
            n_kw++;
        } else if (n_kw) {
            fail_at(P, "positional argument after a keyword argument");
        }
        kids_push(P, &k, parse_expr(P), name);
    }
    n->kids = k.v;
    n->names = k.names;
    n->n_kids = n->n_names = k.n;
}

static const jnode *parse_primary(parser *P)
{
    const jtok *t = peek(P);
    jnode *n;
    switch (t->k) {
    case JT_NAME:
        next(P);
        n = node(P, JN_LIT);
        if (tok_is(t, JT_NAME, "true") || tok_is(t, JT_NAME, "True"))
            n->lit = jv_bool(true);
        else if (tok_is(t, JT_NAME, "false") || tok_is(t, JT_NAME, "False"))
            n->lit = jv_bool(false);
        else if (tok_is(t, JT_NAME, "none") || tok_is(t, JT_NAME, "None"))
            n->lit = jv_none();
        else {
            n->k = JN_NAME;
            n->name = t->s;
        }
        return n;
    case JT_STRING: {
        next(P);
        /* adjacent literals concatenate, as in Python */
        jsb b;
        jsb_init(&b, P->a, 0);
        jsb_addstr(&b, t->s);
        while (peek(P)->k == JT_STRING)
            jsb_addstr(&b, next(P)->s);
        n = node(P, JN_LIT);
        n->lit = jv_str(b.s ? b.s : "", b.n, NULL);
        return n;
    }
    case JT_INT:
        next(P);
        n = node(P, JN_LIT);
        n->lit = jv_int(t->i);
        return n;
    case JT_FLOAT:
        next(P);
        n = node(P, JN_LIT);
        n->lit = jv_float(t->f);
        return n;
    case JT_OP:
        if (accept_op(P, "(")) {
            enter(P);
            if (accept_op(P, ")")) { /* empty tuple */
                n = node(P, JN_LIST);
                P->depth--;
                return n;
            }
            const jnode *e = parse_expr(P);
            if (accept_op(P, ",")) { /* tuple: evaluated as a list */
                kids k = {0};
                kids_push(P, &k, e, (jstr){0});
                while (!tok_is(peek(P), JT_OP, ")")) {
                    kids_push(P, &k, parse_expr(P), (jstr){0});
                    if (!accept_op(P, ","))
                        break;
                }
                n = node(P, JN_LIST);
                n->kids = k.v;
                n->n_kids = k.n;
                e = n;
            }
            expect_op(P, ")");
            P->depth--;
            return e;
        }
        if (accept_op(P, "[")) {
            enter(P);
            kids k = {0};
            while (!accept_op(P, "]")) {
                if (k.n)
                    expect_op(P, ",");
                if (accept_op(P, "]"))
                    break;
                kids_push(P, &k, parse_expr(P), (jstr){0});
            }
            n = node(P, JN_LIST);
            n->kids = k.v;
            n->n_kids = k.n;
            P->depth--;
            return n;
        }
        if (accept_op(P, "{")) {
            enter(P);
            kids k = {0};
            while (!accept_op(P, "}")) {
                if (k.n)
                    expect_op(P, ",");
                if (accept_op(P, "}"))
                    break;
                kids_push(P, &k, parse_expr(P), (jstr){0});
                expect_op(P, ":");
                kids_push(P, &k, parse_expr(P), (jstr){0});
            }
            n = node(P, JN_DICT);
            n->kids = k.v;
            n->n_kids = k.n;
            P->depth--;
            return n;
        }
        break;
    default:
        break;
    }
    fail_at(P, "expected an expression");
}

static const jnode *parse_subscript(parser *P, const jnode *obj)
{
    jnode *n = node(P, JN_INDEX);
    n->a = obj;
    const jnode *parts[3] = {0};
    int colons = 0;
    for (;;) {
        if (accept_op(P, "]"))
            break;
        if (accept_op(P, ":")) {
            if (++colons > 2)
                fail_at(P, "too many ':' in a slice");
            continue;
        }
        if (parts[colons])
            fail_at(P, "expected ']'");
        parts[colons] = parse_expr(P);
    }
    if (colons) {
        n->k = JN_SLICE;
        n->b = parts[0];
        n->c = parts[1];
        n->d = parts[2];
    } else {
        if (!parts[0])
            fail_at(P, "empty subscript");
        n->b = parts[0];
    }
    return n;
}

static const jnode *parse_postfix(parser *P, const jnode *e)
{
    for (;;) {
        if (accept_op(P, ".")) {
            jnode *n = node(P, JN_ATTR);
            n->a = e;
            if (peek(P)->k == JT_INT) { /* x.0 */
                n->k = JN_INDEX;
                jnode *lit = node(P, JN_LIT);
                lit->lit = jv_int(next(P)->i);
                n->b = lit;
            } else {
                n->name = expect_name(P);
                n->member = jmember_find(n->name);
            }
            e = n;
        } else if (accept_op(P, "[")) {
            e = parse_subscript(P, e);
        } else if (accept_op(P, "(")) {
            jnode *n = node(P, JN_CALL);
            n->a = e;
            parse_args(P, n);
            e = n;
        } else {
            return e;
        }
    }
}

static const jnode *parse_filters_tests(parser *P, const jnode *e)
{
    for (;;) {
        if (accept_op(P, "|")) {
            jnode *n = node(P, JN_FILTER);
            n->name = expect_name(P);
            n->filter = jfilter_find(n->name);
            n->a = e;
            if (accept_op(P, "("))
                parse_args(P, n);
            e = n;
        } else if (accept_name(P, "is")) {
            jnode *n = node(P, JN_TEST);
            n->negate = accept_name(P, "not");
            n->name = expect_name(P);
            n->test = jtest_find(n->name);
            n->a = e;
            if (accept_op(P, "(")) {
                parse_args(P, n);
            } else {
                /* `is divisibleby 3`, `is sameas false`: one bare argument */
                const jtok *t = peek(P);
                if (t->k == JT_STRING || t->k == JT_INT || t->k == JT_FLOAT ||
                    (t->k == JT_NAME && !tok_is(t, JT_NAME, "and") && !tok_is(t, JT_NAME, "or") &&
                     !tok_is(t, JT_NAME, "else") && !tok_is(t, JT_NAME, "if") && !tok_is(t, JT_NAME, "is") &&
                     !tok_is(t, JT_NAME, "in") && !tok_is(t, JT_NAME, "not"))) {
                    kids k = {0};
                    kids_push(P, &k, parse_postfix(P, parse_primary(P)), (jstr){0});
                    n->kids = k.v;
                    n->names = k.names;
                    n->n_kids = n->n_names = 1;
                }
            }
            e = n;
        } else {
            return e;
        }
    }
}

static const jnode *parse_unary(parser *P, bool with_filter)
{
    enter(P);
    const jnode *e;
    if (accept_op(P, "-") || (tok_is(peek(P), JT_OP, "+") && next(P))) {
        jnode *n = node(P, JN_UNARY);
        n->op = P->t[P->p - 1].s.s[0];
        n->a = parse_unary(P, false);
        e = n;
    } else {
        e = parse_postfix(P, parse_primary(P));
    }
    if (with_filter)
        e = parse_filters_tests(P, e);
    P->depth--;
    return e;
}

static const jnode *binary(parser *P, int op, const jnode *a, const jnode *b)
{
    jnode *n = node(P, JN_BINARY);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static const jnode *parse_pow(parser *P)
{
    const jnode *e = parse_unary(P, true);
    while (accept_op(P, "**"))
        e = binary(P, JOP_POW, e, parse_unary(P, true));
    return e;
}

static const jnode *parse_mul(parser *P)
{
    const jnode *e = parse_pow(P);
    for (;;) {
        int op = accept_op(P, "*") ? JOP_MUL : accept_op(P, "//") ? JOP_FLOORDIV
               : accept_op(P, "/") ? JOP_DIV : accept_op(P, "%") ? JOP_MOD : 0;
        if (!op)
            return e;
        e = binary(P, op, e, parse_pow(P));
    }
}

static const jnode *parse_add(parser *P)
{
    const jnode *e = parse_mul(P);
    for (;;) {
        int op = accept_op(P, "+") ? JOP_ADD : accept_op(P, "-") ? JOP_SUB : 0;
        if (!op)
            return e;
        e = binary(P, op, e, parse_mul(P));
    }
}

static const jnode *parse_concat(parser *P)
{
    const jnode *e = parse_add(P);
    while (accept_op(P, "~"))
        e = binary(P, JOP_CAT, e, parse_add(P));
    return e;
}

static const jnode *parse_compare(parser *P)
{
    const jnode *e = parse_concat(P);
    for (;;) {
        int op = 0;
        if (accept_op(P, "=="))
            op = JOP_EQ;
        else if (accept_op(P, "!="))
            op = JOP_NE;
        else if (accept_op(P, "<="))
            op = JOP_LE;
        else if (accept_op(P, ">="))
            op = JOP_GE;
        else if (accept_op(P, "<"))
            op = JOP_LT;
        else if (accept_op(P, ">"))
            op = JOP_GT;
        else if (accept_name(P, "in"))
            op = JOP_IN;
        else if (tok_is(peek(P), JT_NAME, "not") && tok_is(&P->t[P->p + 1], JT_NAME, "in")) {
            P->p += 2;
            op = JOP_NOTIN;
        }
        if (!op)
            return e;
        e = binary(P, op, e, parse_concat(P));
    }
}

static const jnode *parse_not(parser *P)
{
    if (accept_name(P, "not")) {
        enter(P);
        jnode *n = node(P, JN_UNARY);
        n->op = 'n';
        n->a = parse_not(P);
        P->depth--;
        return n;
    }
    return parse_compare(P);
}

static const jnode *parse_and(parser *P)
{
    const jnode *e = parse_not(P);
    while (accept_name(P, "and")) {
        jnode *n = node(P, JN_AND);
        n->a = e;
        n->b = parse_not(P);
        e = n;
    }
    return e;
}

static const jnode *parse_or(parser *P)
{
    const jnode *e = parse_and(P);
    while (accept_name(P, "or")) {
        jnode *n = node(P, JN_OR);
        n->a = e;
        n->b = parse_and(P);
        e = n;
    }
    return e;
}

static const jnode *parse_expr(parser *P)
{
    enter(P);
    const jnode *e = parse_or(P);
    while (accept_name(P, "if")) {
        jnode *n = node(P, JN_COND);
        n->a = e;
        n->b = parse_or(P);
        n->c = accept_name(P, "else") ? parse_or(P) : NULL;
        e = n;
    }
    P->depth--;
    return e;
}

/* ---- statements ---------------------------------------------------------- */

static const jnode *parse_body(parser *P, const char *const *ends, const char **ended);

static void expect_close(parser *P)
{
    if (!tok_is(peek(P), JT_STMT_CLOSE, NULL))
        fail_at(P, "expected '%}'");
    next(P);
}

/* A for/set target: a name or a tuple of names. */
static void parse_targets(parser *P, jnode *n)
{
    kids k = {0};
    bool paren = accept_op(P, "(");
    do {
        kids_push(P, &k, NULL, expect_name(P));
    } while (accept_op(P, ","));
    if (paren)
        expect_op(P, ")");
    n->names = k.names;
    n->n_names = k.n;
}

/* A statement's node, at its keyword's line. */
static jnode *stmt_node(parser *P, jnode_kind k, const jtok *kw)
{
    jnode *n = node(P, k);
    n->line = kw->line;
    return n;
}

/* The else branch when a body ended at "else" (NULL otherwise), up to
 * the keyword in end; the caller closes that tag. */
static const jnode *else_body(parser *P, const char *ended, const char *const *end)
{
    if (strcmp(ended, "else") != 0)
        return NULL;
    expect_close(P);
    return parse_body(P, end, &ended);
}

/* {% if %} ... {% elif %} ... {% else %} ... {% endif %} */
static const jnode *parse_if(parser *P, const jtok *kw)
{
    jnode *n = stmt_node(P, JN_IF, kw);
    const char *ended;
    n->c = parse_expr(P);
    expect_close(P);
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    n->a = parse_body(P, ends, &ended);
    jnode *cur = n;
    while (strcmp(ended, "elif") == 0) {
        jnode *e = node(P, JN_IF);
        e->c = parse_expr(P);
        expect_close(P);
        e->a = parse_body(P, ends, &ended);
        cur->b = e;
        cur = e;
    }
    static const char *const endif[] = {"endif", NULL};
    cur->b = else_body(P, ended, endif);
    expect_close(P);
    return n;
}

/* {% for targets in iter [if cond] %} ... [{% else %} ...] {% endfor %} */
static const jnode *parse_for(parser *P, const jtok *kw)
{
    jnode *n = stmt_node(P, JN_FOR, kw);
    const char *ended;
    parse_targets(P, n);
    if (!accept_name(P, "in"))
        fail_at(P, "expected 'in'");
    n->a = parse_or(P); /* not parse_expr: `if` filters the loop */
    if (accept_name(P, "if"))
        n->d = parse_or(P);
    accept_name(P, "recursive");
    expect_close(P);
    static const char *const ends[] = {"else", "endfor", NULL};
    n->b = parse_body(P, ends, &ended);
    static const char *const endfor[] = {"endfor", NULL};
    n->c = else_body(P, ended, endfor);
    expect_close(P);
    return n;
}

/* {% set x = v %}, {% set a, b = 1, 2 %}, {% set ns.x = v %} and the block form */
static const jnode *parse_set(parser *P, const jtok *kw)
{
    jnode *n = stmt_node(P, JN_SET, kw);
    const char *ended;
    jstr first = expect_name(P);
    if (accept_op(P, ".")) {
        n->k = JN_SET_ATTR;
        jnode *obj = node(P, JN_NAME);
        obj->name = first;
        n->a = obj;
        n->name = expect_name(P);
        expect_op(P, "=");
        n->b = parse_expr(P);
        expect_close(P);
        return n;
    }
    kids k = {0};
    kids_push(P, &k, NULL, first);
    while (accept_op(P, ","))
        kids_push(P, &k, NULL, expect_name(P));
    n->names = k.names;
    n->n_names = k.n;
    if (accept_op(P, "=")) {
        n->a = parse_expr(P);
        if (tok_is(peek(P), JT_OP, ",")) { /* set a, b = 1, 2 */
            kids v = {0};
            kids_push(P, &v, n->a, (jstr){0});
            while (accept_op(P, ","))
                kids_push(P, &v, parse_expr(P), (jstr){0});
            jnode *l = node(P, JN_LIST);
            l->kids = v.v;
            l->n_kids = v.n;
            n->a = l;
        }
        expect_close(P);
        return n;
    }
    if (k.n != 1)
        fail_at(P, "expected '='");
    expect_close(P);
    n->k = JN_SET_BLOCK;
    static const char *const ends[] = {"endset", NULL};
    n->a = parse_body(P, ends, &ended);
    expect_close(P);
    return n;
}

/* {% macro name(params) %} ... {% endmacro %} */
static const jnode *parse_macro(parser *P, const jtok *kw)
{
    jnode *n = stmt_node(P, JN_MACRO, kw);
    const char *ended;
    n->name = expect_name(P);
    expect_op(P, "(");
    kids k = {0};
    while (!accept_op(P, ")")) {
        if (k.n)
            expect_op(P, ",");
        jstr pname = expect_name(P);
        const jnode *def = NULL;
        if (accept_op(P, "="))
            def = parse_expr(P);
        kids_push(P, &k, def, pname);
    }
    n->kids = k.v;
    n->names = k.names;
    n->n_kids = n->n_names = k.n;
    expect_close(P);
    static const char *const ends[] = {"endmacro", NULL};
    n->a = parse_body(P, ends, &ended);
    if (peek(P)->k == JT_NAME) /* {% endmacro name %} */
        next(P);
    expect_close(P);
    return n;
}

static const jnode *parse_stmt(parser *P)
{
    const jtok *kw = peek(P);
    if (kw->k != JT_NAME)
        fail_at(P, "expected a statement");
    next(P);
    jnode *n;
    const char *ended;
    if (tok_is(kw, JT_NAME, "if"))
        return parse_if(P, kw);
    if (tok_is(kw, JT_NAME, "for"))
        return parse_for(P, kw);
    if (tok_is(kw, JT_NAME, "set"))
        return parse_set(P, kw);
    if (tok_is(kw, JT_NAME, "macro"))
        return parse_macro(P, kw);
    if (tok_is(kw, JT_NAME, "break") || tok_is(kw, JT_NAME, "continue")) {
        n = node(P, tok_is(kw, JT_NAME, "break") ? JN_BREAK : JN_CONTINUE);
        expect_close(P);
        return n;
    }
    if (tok_is(kw, JT_NAME, "generation")) {
        /* transformers' assistant-mask marker: renders its body as is */
        expect_close(P);
        static const char *const ends[] = {"endgeneration", NULL};
        const jnode *b = parse_body(P, ends, &ended);
        expect_close(P);
        return b;
    }
    if (tok_is(kw, JT_NAME, "do")) {
        n = node(P, JN_OUTPUT);
        n->negate = true; /* evaluate, discard */
        n->a = parse_expr(P);
        expect_close(P);
        return n;
    }
    P->p--;
    fail_at(P, "unknown statement");
}

/* Statements until one of `ends` (or EOF when ends is NULL); *ended names
 * the end keyword, whose tag is left open after it. */
static const jnode *parse_body(parser *P, const char *const *ends, const char **ended)
{
    enter(P);
    jnode *body = node(P, JN_BODY);
    kids k = {0};
    for (;;) {
        const jtok *t = peek(P);
        if (t->k == JT_EOF) {
            if (ends) {
                size_t last = 0;
                while (ends[last + 1])
                    last++;
                jfail(P->a, "template ended inside a block (expected %s)", ends[last]);
            }
            break;
        }
        if (t->k == JT_TEXT) {
            jnode *n = node(P, JN_TEXT);
            n->name = next(P)->s;
            kids_push(P, &k, n, (jstr){0});
        } else if (t->k == JT_EXPR_OPEN) {
            next(P);
            jnode *n = node(P, JN_OUTPUT);
            n->a = parse_expr(P);
            if (!tok_is(peek(P), JT_EXPR_CLOSE, NULL))
                fail_at(P, "expected '}}'");
            next(P);
            kids_push(P, &k, n, (jstr){0});
        } else if (t->k == JT_STMT_OPEN) {
            next(P);
            const jtok *kw = peek(P);
            const char *hit = NULL;
            for (size_t i = 0; ends && ends[i] && !hit; i++)
                if (tok_is(kw, JT_NAME, ends[i]))
                    hit = ends[i];
            if (hit) {
                next(P);
                *ended = hit;
                break;
            }
            kids_push(P, &k, parse_stmt(P), (jstr){0});
        } else {
            fail_at(P, "unexpected token");
        }
    }
    body->kids = k.v;
    body->n_kids = k.n;
    P->depth--;
    return body;
}

const jnode *jparse(jarena *a, const jtoks *toks)
{
    parser P = {.a = a, .t = toks->v, .n = toks->n};
    return parse_body(&P, NULL, NULL);
}
