/* Shared by the Jinja engine's files (jinja_*.c): the arena every value
 * and syntax node lives in, values, tokens and the syntax tree.
 *
 * Errors unwind with longjmp to the entry point (parse or render), which
 * is safe because nothing is allocated outside the arena. */
#ifndef NPL_JINJA_INTERNAL_H
#define NPL_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jinja.h"

/* ---- arena ------------------------------------------------------------ */

typedef struct jarena_block jarena_block;

/* A render's work so far against its limits (max_steps, max_time_ms). */
typedef struct jbudget {
    uint64_t steps, max_steps;
    uint64_t next_clock; /* steps at which the clock is read next */
    int64_t deadline_ns; /* CLOCK_MONOTONIC; 0 = none */
    unsigned max_time_ms;
} jbudget;

typedef struct jarena {
    jarena_block *head;
    size_t used_total; /* bytes handed out, checked against limit */
    size_t limit;
    jmp_buf *on_fail; /* where running out of budget unwinds to */
    char *err_msg;    /* filled before unwinding */
    size_t err_cap;
    jbudget *budget; /* while rendering; NULL while parsing */
} jarena;

void jarena_init(jarena *a, size_t limit, jmp_buf *on_fail, char *err_msg, size_t err_cap);
void *jarena_alloc(jarena *a, size_t n); /* zeroed; unwinds when over budget */
char *jarena_strdup(jarena *a, const char *s, size_t n);
void jarena_free(jarena *a);
/* Fills a->err_msg and unwinds. */
_Noreturn void jfail(jarena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Charges work to the render's budget; unwinds past max_steps or the
 * deadline. jcharge_bytes: for bytes a string operation reads or writes,
 * so one step never hides a 3 MB memcmp. */
void jcharge(jarena *a, uint64_t steps);
void jcharge_bytes(jarena *a, size_t bytes);

/* ---- values ------------------------------------------------------------ */

typedef enum jkind {
    JV_UNDEF = 0,
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,
    JV_DICT,
    JV_NS,     /* namespace(): a dict whose attributes can be assigned */
    JV_MACRO,
    JV_FUNC,   /* global function (range, namespace, raise_exception, ...) */
    JV_METHOD, /* bound method: self + name */
    JV_LOOP,   /* the `loop` variable of a for */
} jkind;

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jnode jnode;
typedef struct jloop jloop;
typedef struct jfilter_def jfilter_def;
typedef struct jtest_def jtest_def;
typedef struct jmember_def jmember_def;

/* Strings are immutable byte runs. `mask` (NULL = all zero) marks bytes
 * that came from caller data (message content, tools): they are never
 * parsed as special tokens. */
typedef struct jstr {
    const char *s;
    size_t n;
    const uint8_t *mask;
} jstr;

typedef struct jv {
    jkind k;
    union {
        bool b;
        int64_t i;
        double f;
        jstr s;
        jlist *l;
        jdict *d;
        const jnode *macro;
        int func;
        jloop *loop;
        const jmember_def *member; /* JV_METHOD: which method */
    } u;
    /* JV_METHOD: the receiver */
    struct jv *self;
} jv;

struct jlist {
    jv *v;
    size_t n, cap;
};

struct jdict {
    jstr *keys; /* string keys only (JSON objects, kwargs, namespaces) */
    jv *vals;
    size_t n, cap;
};

struct jloop {
    size_t index0, length;
    const jlist *items;
};

jv jv_undef(void);
jv jv_none(void);
jv jv_bool(bool b);
jv jv_int(int64_t i);
jv jv_float(double f);
jv jv_str(const char *s, size_t n, const uint8_t *mask);
jv jv_cstr(const char *s);
jv jv_list(jarena *a);
jv jv_dict(jarena *a);
void jlist_push(jarena *a, jlist *l, jv v);
void jdict_set(jarena *a, jdict *d, jstr key, jv v);
const jv *jdict_get(const jdict *d, const char *key, size_t n);
/* jdict_get charging the bytes of the keys it compares (template lookups
 * of data-sized keys). */
const jv *jdict_lookup(jarena *a, const jdict *d, const char *key, size_t n);

bool jv_truthy(const jv *v);
bool jv_num(const jv *v, double *out); /* int, float or bool as a double */
bool jv_equal(jarena *arena, const jv *a, const jv *b); /* charges the bytes compared */
/* Offset of needle in hay at or after `from`, or -1 (linear, charged). */
int64_t jfind(jarena *a, jstr hay, jstr needle, size_t from);
bool jv_is_str(const jv *v, const char *lit);
const char *jv_kind_name(jkind k);

/* String building with a mask alongside. */
typedef struct jsb {
    char *s;
    uint8_t *mask;
    size_t n, cap;
    bool any_mask;
    size_t limit; /* 0 = none */
    jarena *a;
} jsb;

void jsb_init(jsb *b, jarena *a, size_t limit);
void jsb_add(jsb *b, const char *s, size_t n, const uint8_t *mask);
void jsb_addc(jsb *b, const char *s);
void jsb_add_utf8(jsb *b, uint32_t cp);
void jsb_addstr(jsb *b, jstr s);
jstr jsb_done(jsb *b);
void jsb_addf(jsb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Python str() of a value (what {{ }} prints), repr() and json.dumps(). */
void jv_to_str(jsb *b, const jv *v);
void jv_repr(jsb *b, const jv *v);
typedef struct jjson_opts {
    int indent; /* -1: none */
    bool ensure_ascii, sort_keys;
} jjson_opts;
void jv_to_json(jsb *b, const jv *v, const jjson_opts *o, int depth);
jstr jv_as_str(jarena *a, const jv *v);

/* JSON text -> value (every string marked as caller data when `mask`). */
jv jv_from_json(jarena *a, const char *text, size_t n, bool mask);

/* ---- tokens and syntax tree ------------------------------------------- */

typedef enum jtok_kind {
    JT_EOF = 0,
    JT_TEXT,      /* template text between tags */
    JT_STMT_OPEN, /* {% */
    JT_STMT_CLOSE,
    JT_EXPR_OPEN, /* {{ */
    JT_EXPR_CLOSE,
    JT_NAME,
    JT_STRING,
    JT_INT,
    JT_FLOAT,
    JT_OP, /* punctuation / operator, text in s */
} jtok_kind;

typedef struct jtok {
    jtok_kind k;
    jstr s; /* text / name / string value / operator */
    int64_t i;
    double f;
    uint32_t line;
} jtok;

typedef struct jtoks {
    jtok *v;
    size_t n, cap;
} jtoks;

/* Lexes with trim_blocks and lstrip_blocks on (as transformers does). */
void jlex(jarena *a, const char *src, size_t n, jtoks *out);

typedef enum jnode_kind {
    /* statements */
    JN_BODY, /* list of statements in kids */
    JN_TEXT,
    JN_OUTPUT,
    JN_IF,    /* kids[0] cond, a = then body, b = else body (or NULL) */
    JN_FOR,   /* names, a = iter, b = body, c = else, d = filter cond */
    JN_SET,   /* names (1+, tuple unpack) or attr target; a = value */
    JN_SET_ATTR, /* a = object expr, name = attribute, b = value */
    JN_SET_BLOCK, /* names[0] = body output */
    JN_MACRO, /* name, params names + defaults in kids, a = body */
    JN_BREAK,
    JN_CONTINUE,
    JN_CALL_BLOCK, /* unsupported placeholder, never produced */
    /* expressions */
    JN_LIT,
    JN_NAME,
    JN_LIST,  /* kids */
    JN_DICT,  /* kids: key, value, key, value ... */
    JN_ATTR,  /* a . name */
    JN_INDEX, /* a [ b ] */
    JN_SLICE, /* a [ b : c : d ] (NULL parts omitted) */
    JN_CALL,  /* a ( kids ), kwarg names in names (NULL for positional) */
    JN_FILTER, /* name, a = input, kids args, names kwargs */
    JN_TEST,  /* name, a = input, kids args; negate */
    JN_UNARY, /* op: '-', '+', 'n'(not) */
    JN_BINARY, /* op, a, b */
    JN_AND,
    JN_OR,
    JN_COND,  /* a if b else c */
} jnode_kind;

struct jnode {
    jnode_kind k;
    uint32_t line;
    int op;
    bool negate;
    jstr name;
    jv lit;
    const jnode *a, *b, *c, *d;
    const jnode **kids;
    jstr *names; /* JN_CALL/JN_FILTER kwarg names; JN_FOR/JN_SET targets; macro params */
    size_t n_kids, n_names;
    /* The built-in `name` resolves to, looked up once by the parser; NULL
     * when there is none (an error only if the node is evaluated). */
    const jfilter_def *filter; /* JN_FILTER */
    const jtest_def *test;     /* JN_TEST */
    const jmember_def *member; /* JN_ATTR: methods and loop attributes of that name */
};

const jnode *jparse(jarena *a, const jtoks *toks);

/* Binary operator codes (op). */
enum {
    JOP_ADD = '+', JOP_SUB = '-', JOP_MUL = '*', JOP_DIV = '/', JOP_MOD = '%', JOP_CAT = '~',
    JOP_FLOORDIV = 256, JOP_POW, JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_IN, JOP_NOTIN,
};

/* ---- evaluation --------------------------------------------------------- */

typedef struct jframe jframe;
struct jframe {
    jframe *parent;
    jdict vars;
};

typedef struct jrender {
    jarena *a;
    const npl_jinja_limits *lim;
    jframe *globals;
    jsb out;
    jbudget budget;
    unsigned depth;
    int loop_ctl; /* 1 break, 2 continue */
    const struct tm *now;
} jrender;

/* The arguments of a call: positional, then keywords. */
typedef struct jargs {
    const jv *v;
    size_t n;
    const jstr *kwn;
    const jv *kwv;
    size_t n_kw;
    uint32_t line;
} jargs;

void jstep(jrender *r);
jv jeval(jrender *r, jframe *f, const jnode *n);
jv jcall_value(jrender *r, const jv *callee, const jargs *a);

/* ---- built-ins ---------------------------------------------------------- */


/* Filters, tests and members (methods and attributes of strings, dicts,
 * lists and `loop`) are tables of {name, function} (jinja_filters.c,
 * jinja_tests.c, jinja_members.c); `mode` tells apart the names one
 * function serves. */
/* JNAME("x"): a table entry's name and its length. */
#define JNAME(lit) lit, sizeof(lit) - 1
struct jfilter_def {
    const char *name;
    size_t len;
    jv (*fn)(jrender *r, jframe *f, const jfilter_def *d, jv in, const jargs *a);
    int mode;
};
struct jtest_def {
    const char *name;
    size_t len;
    bool (*fn)(jrender *r, const jtest_def *d, const jv *in, const jargs *a);
    int mode;
    bool needs_arg;
};
typedef jv (*jmethod_fn)(jrender *r, const jv *self, const jmember_def *d, const jargs *a);
struct jmember_def {
    const char *name;
    size_t len;
    jmethod_fn str, dict, list, loop; /* the method on each kind of receiver, NULL: none */
    jv (*loop_attr)(const jloop *lp); /* loop.NAME */
    int mode;
};
/* The entry of that name, or NULL. */
const jfilter_def *jfilter_find(jstr name);
const jtest_def *jtest_find(jstr name);
const jmember_def *jmember_find(jstr name);

/* Run a filter or test (d as found for name: NULL fails as unknown). */
jv jfilter(jrender *r, jframe *f, const jfilter_def *d, jstr name, jv in, const jargs *a);
bool jtest(jrender *r, const jtest_def *d, jstr name, const jv *in, const jargs *a);
/* obj.name: a dict's key, else the member m (jmember_find(name)). */
jv jattr_member(jrender *r, const jv *obj, jstr name, const jmember_def *m, uint32_t line);
jv jattr(jrender *r, const jv *obj, jstr name, uint32_t line);
jv jcall_method(jrender *r, const jv *self, const jmember_def *m, const jargs *a);
enum { JF_RANGE = 1, JF_NAMESPACE, JF_RAISE, JF_STRFTIME, JF_DICT };
jv jcall_func(jrender *r, int func, const jargs *a);
/* Iteration: lists as they are, dicts by key, strings by character. */
jlist *jv_iterable(jrender *r, const jv *v, uint32_t line);

#endif
