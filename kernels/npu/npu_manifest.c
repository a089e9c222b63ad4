#include "npu_manifest.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "q4nx.h"

#define MANIFEST_MAX_BYTES (1u << 20)
#define MANIFEST_MAGIC "npullm-npu-manifest"

const char *npl_npu_target_name(npl_npu_target target)
{
    switch (target) {
    case NPL_NPU_TARGET_EMU: return "emu";
    case NPL_NPU_TARGET_XDNA1: return "xdna1";
    case NPL_NPU_TARGET_XDNA2: return "xdna2";
    }
    return "unknown";
}

/* Parser state: the text being read and where errors point. */
typedef struct parser {
    const char *origin;
    unsigned line;
    npl_error *err;
} parser;

static npl_status fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static npl_status fail(parser *p, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return npl_error_set(p->err, NPL_ERR_FORMAT, "%s:%u: %s", p->origin, p->line, what);
}

static bool valid_name(const char *s, size_t len)
{
    if (len == 0 || len >= NPL_NPU_NAME_MAX || !(islower((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '_'))
            return false;
    return true;
}

static int symbol_index(const char *s, size_t len)
{
    for (int i = 0; npl_npu_shape_symbol_names[i]; i++)
        if (strlen(npl_npu_shape_symbol_names[i]) == len
            && memcmp(npl_npu_shape_symbol_names[i], s, len) == 0)
            return i;
    return -1;
}

/* ---- shape expressions: recursive descent straight into postfix ---- */

typedef struct expr_parser {
    const char *s;
    size_t pos, len;
    npl_npu_expr *out;
    const char *error;
} expr_parser;

static void skip_spaces(expr_parser *e)
{
    while (e->pos < e->len && (e->s[e->pos] == ' ' || e->s[e->pos] == '\t'))
        e->pos++;
}

static bool emit(expr_parser *e, uint8_t kind, uint8_t op, uint32_t value)
{
    if (e->out->n >= NPL_NPU_EXPR_MAX_TOKENS) {
        e->error = "expression is too long";
        return false;
    }
    e->out->tok[e->out->n].kind = kind;
    e->out->tok[e->out->n].op = op;
    e->out->tok[e->out->n].value = value;
    e->out->n++;
    return true;
}

static bool parse_sum(expr_parser *e, int depth);

static bool parse_factor(expr_parser *e, int depth)
{
    skip_spaces(e);
    if (e->pos >= e->len) {
        e->error = "expression ends early";
        return false;
    }
    char c = e->s[e->pos];
    if (c == '(') {
        if (depth > 8) {
            e->error = "parentheses nest too deep";
            return false;
        }
        e->pos++;
        if (!parse_sum(e, depth + 1))
            return false;
        skip_spaces(e);
        if (e->pos >= e->len || e->s[e->pos] != ')') {
            e->error = "missing ')'";
            return false;
        }
        e->pos++;
        return true;
    }
    if (isdigit((unsigned char)c)) {
        uint64_t v = 0;
        while (e->pos < e->len && isdigit((unsigned char)e->s[e->pos])) {
            v = v * 10 + (uint64_t)(e->s[e->pos++] - '0');
            if (v > UINT32_MAX) {
                e->error = "number too large";
                return false;
            }
        }
        return emit(e, 0, 0, (uint32_t)v);
    }
    if (islower((unsigned char)c) || c == '_') {
        size_t start = e->pos;
        while (e->pos < e->len && (islower((unsigned char)e->s[e->pos])
                                   || isdigit((unsigned char)e->s[e->pos]) || e->s[e->pos] == '_'))
            e->pos++;
        int sym = symbol_index(e->s + start, e->pos - start);
        if (sym < 0) {
            e->error = "unknown shape symbol";
            return false;
        }
        return emit(e, 1, 0, (uint32_t)sym);
    }
    e->error = "unexpected character in expression";
    return false;
}

static bool parse_product(expr_parser *e, int depth)
{
    if (!parse_factor(e, depth))
        return false;
    for (;;) {
        skip_spaces(e);
        if (e->pos >= e->len || (e->s[e->pos] != '*' && e->s[e->pos] != '/'))
            return true;
        char op = e->s[e->pos++];
        if (!parse_factor(e, depth) || !emit(e, 2, (uint8_t)op, 0))
            return false;
    }
}

static bool parse_sum(expr_parser *e, int depth)
{
    if (!parse_product(e, depth))
        return false;
    for (;;) {
        skip_spaces(e);
        if (e->pos >= e->len || (e->s[e->pos] != '+' && e->s[e->pos] != '-'))
            return true;
        char op = e->s[e->pos++];
        if (!parse_product(e, depth) || !emit(e, 2, (uint8_t)op, 0))
            return false;
    }
}

static npl_status parse_expr(parser *p, const char *s, size_t len, npl_npu_expr *out)
{
    memset(out, 0, sizeof *out);
    expr_parser e = { s, 0, len, out, NULL };
    if (parse_sum(&e, 0)) {
        skip_spaces(&e);
        if (e.pos == e.len)
            return NPL_OK;
        e.error = "unexpected text after expression";
    }
    char what[160];
    snprintf(what, sizeof what, "%s in '%.*s'", e.error, (int)(len > 100 ? 100 : len), s);
    return fail(p, "bad shape: %s", what);
}

npl_status npl_npu_expr_eval(const npl_npu_expr *e, const npl_npu_shape *shape, uint64_t *value,
                             npl_error *err)
{
    uint64_t stack[NPL_NPU_EXPR_MAX_TOKENS];
    int sp = 0;
    for (int i = 0; i < e->n; i++) {
        if (e->tok[i].kind == 0) {
            stack[sp++] = e->tok[i].value;
        } else if (e->tok[i].kind == 1) {
            uint32_t v = 0;
            npl_npu_shape_symbol(shape, npl_npu_shape_symbol_names[e->tok[i].value], &v);
            stack[sp++] = v;
        } else {
            if (sp < 2)
                return npl_error_set(err, NPL_ERR_INTERNAL, "manifest: malformed expression");
            uint64_t b = stack[--sp], a = stack[--sp], r = 0;
            bool bad = false;
            switch (e->tok[i].op) {
            case '+': bad = __builtin_add_overflow(a, b, &r); break;
            case '-': bad = a < b; r = a - b; break;
            case '*': bad = __builtin_mul_overflow(a, b, &r); break;
            case '/': bad = b == 0 || a % b != 0; r = b ? a / b : 0; break;
            default: bad = true; break;
            }
            if (bad || r > (1ull << 48))
                return npl_error_set(err, NPL_ERR_INVALID_ARG,
                                     "shape expression: %llu %c %llu is negative, inexact, "
                                     "or out of range",
                                     (unsigned long long)a, e->tok[i].op, (unsigned long long)b);
            stack[sp++] = r;
        }
    }
    if (sp != 1)
        return npl_error_set(err, NPL_ERR_INTERNAL, "manifest: malformed expression");
    *value = stack[0];
    return NPL_OK;
}

bool npl_npu_expr_is_runtime(const npl_npu_expr *e)
{
    for (int i = 0; i < e->n; i++)
        if (e->tok[i].kind == 1) {
            const char *sym = npl_npu_shape_symbol_names[e->tok[i].value];
            if (!strcmp(sym, "pos") || !strcmp(sym, "n_tokens"))
                return true;
        }
    return false;
}

npl_status npl_npu_arg_bytes(const npl_npu_arg_spec *a, const npl_npu_shape *shape,
                             size_t *bytes, npl_error *err)
{
    if (a->type == NPL_NPU_ELEM_PACK)
        return npl_error_set(err, NPL_ERR_INTERNAL,
                             "packed argument %s: its size comes from its group's parts", a->name);
    uint64_t dims[NPL_NPU_MAX_DIMS];
    for (uint32_t i = 0; i < a->n_dims; i++) {
        npl_status st = npl_npu_expr_eval(&a->dims[i], shape, &dims[i], err);
        if (st != NPL_OK)
            return st;
    }
    if (a->type == NPL_NPU_ELEM_Q4NX) {
        npl_q4nx_layout l;
        npl_status st = npl_q4nx_layout_init(&l, (int64_t)dims[0], (int64_t)dims[1], err);
        if (st != NPL_OK)
            return st;
        *bytes = l.bytes;
        return NPL_OK;
    }
    uint64_t n = 1;
    for (uint32_t i = 0; i < a->n_dims; i++)
        if (__builtin_mul_overflow(n, dims[i], &n))
            return npl_error_set(err, NPL_ERR_INVALID_ARG, "argument %s is too large", a->name);
    uint64_t elem = a->type == NPL_NPU_ELEM_BF16 ? 2 : a->type == NPL_NPU_ELEM_U8 ? 1 : 4;
    if (__builtin_mul_overflow(n, elem, &n) || n > SIZE_MAX)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "argument %s is too large", a->name);
    *bytes = (size_t)n;
    return NPL_OK;
}

/* Offsets of the parts of packed argument `arg` up to and including part
 * `upto` (every part when upto is n_parts); *end gets the end of the
 * last one placed (the argument's size when every part is). */
static npl_status place_parts(const npl_npu_group_spec *g, uint32_t arg, uint32_t upto,
                              const npl_npu_shape *shape, size_t *offset, size_t *bytes,
                              size_t *end, npl_error *err)
{
    size_t cursor = 0;
    *offset = *bytes = 0;
    for (uint32_t i = 0; i < g->n_parts && i <= upto; i++) {
        if (g->parts[i].arg != arg)
            continue;
        size_t n = 0;
        npl_status st = npl_npu_arg_bytes(&g->parts[i].elem, shape, &n, err);
        if (st != NPL_OK)
            return st;
        size_t start = (cursor + NPL_NPU_PART_ALIGN - 1) / NPL_NPU_PART_ALIGN * NPL_NPU_PART_ALIGN;
        if (start < cursor || start + n < start)
            return npl_error_set(err, NPL_ERR_INVALID_ARG, "packed argument %s is too large",
                                 g->args[arg].name);
        *offset = start;
        *bytes = n;
        cursor = start + n;
    }
    *end = cursor;
    return NPL_OK;
}

npl_status npl_npu_group_arg_bytes(const npl_npu_group_spec *g, uint32_t arg,
                                   const npl_npu_shape *shape, size_t *bytes, npl_error *err)
{
    if (arg >= g->n_args)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "group %s has no argument %u", g->name, arg);
    if (g->args[arg].type != NPL_NPU_ELEM_PACK)
        return npl_npu_arg_bytes(&g->args[arg], shape, bytes, err);
    size_t off, n;
    return place_parts(g, arg, g->n_parts, shape, &off, &n, bytes, err);
}

int npl_npu_group_part_index(const npl_npu_group_spec *g, const char *name)
{
    if (!g || !name)
        return -1;
    for (uint32_t i = 0; i < g->n_parts; i++)
        if (strcmp(g->parts[i].elem.name, name) == 0)
            return (int)i;
    return -1;
}

npl_status npl_npu_part_place(const npl_npu_group_spec *g, uint32_t part,
                              const npl_npu_shape *shape, size_t *offset, size_t *bytes,
                              npl_error *err)
{
    if (part >= g->n_parts)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "group %s has no part %u", g->name, part);
    size_t end;
    return place_parts(g, g->parts[part].arg, part, shape, offset, bytes, &end, err);
}

npl_status npl_npu_group_check_fixed(const npl_npu_group_spec *g, const npl_npu_shape *shape,
                                     npl_error *err)
{
    for (uint32_t i = 0; i < g->n_fixed; i++) {
        const char *sym = npl_npu_shape_symbol_names[g->fixed[i].symbol];
        uint32_t v = 0;
        npl_npu_shape_symbol(shape, sym, &v);
        if (v != g->fixed[i].value)
            return npl_error_set(err, NPL_ERR_INVALID_ARG,
                                 "group %s was built for %s=%u, the call has %u",
                                 g->name, sym, g->fixed[i].value, v);
    }
    return NPL_OK;
}

/* ---- lines ---- */

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

/* Trims a [s, s+len) span in place. */
static void trim(const char **s, size_t *len)
{
    while (*len && is_blank(**s)) {
        (*s)++;
        (*len)--;
    }
    while (*len && is_blank((*s)[*len - 1]))
        (*len)--;
}

/* Next whitespace-separated word of [*s, end). */
static bool next_word(const char **s, const char *end, const char **w, size_t *wlen)
{
    while (*s < end && is_blank(**s))
        (*s)++;
    if (*s >= end)
        return false;
    *w = *s;
    while (*s < end && !is_blank(**s))
        (*s)++;
    *wlen = (size_t)(*s - *w);
    return true;
}

static bool word_is(const char *w, size_t len, const char *lit)
{
    return strlen(lit) == len && memcmp(w, lit, len) == 0;
}

static npl_status copy_path(parser *p, const char *v, size_t len, char **dst, const char *key)
{
    if (*dst)
        return fail(p, "'%s' given twice", key);
    if (len == 0 || len >= PATH_MAX)
        return fail(p, "'%s' needs a file name", key);
    if (v[0] == '/' || memchr(v, ' ', len) || memchr(v, '\t', len))
        return fail(p, "'%s' must be a relative path without spaces", key);
    for (size_t i = 0; i + 1 < len; i++)
        if (v[i] == '.' && v[i + 1] == '.' && (i == 0 || v[i - 1] == '/'))
            return fail(p, "'%s' must stay inside the kernel directory", key);
    *dst = strndup(v, len);
    if (!*dst)
        return npl_error_set(p->err, NPL_ERR_NOMEM, "manifest: no memory");
    return NPL_OK;
}

static npl_status parse_fixed(parser *p, npl_npu_group_spec *g, const char *v, size_t len)
{
    if (g->n_fixed)
        return fail(p, "'fixed' given twice");
    const char *s = v, *end = v + len, *w;
    size_t wlen;
    while (next_word(&s, end, &w, &wlen)) {
        const char *eq = memchr(w, '=', wlen);
        if (!eq)
            return fail(p, "'fixed' entries are symbol=value");
        int sym = symbol_index(w, (size_t)(eq - w));
        if (sym < 0)
            return fail(p, "unknown shape symbol in 'fixed'");
        uint64_t val = 0;
        const char *d = eq + 1;
        if (d == w + wlen)
            return fail(p, "'fixed' value missing");
        for (; d < w + wlen; d++) {
            if (!isdigit((unsigned char)*d) || (val = val * 10 + (uint64_t)(*d - '0')) > UINT32_MAX)
                return fail(p, "'fixed' value is not a 32-bit number");
        }
        for (uint32_t i = 0; i < g->n_fixed; i++)
            if (g->fixed[i].symbol == (uint32_t)sym)
                return fail(p, "symbol %s fixed twice", npl_npu_shape_symbol_names[sym]);
        if (g->n_fixed == NPL_NPU_MAX_FIXED)
            return fail(p, "too many fixed symbols");
        g->fixed[g->n_fixed].symbol = (uint32_t)sym;
        g->fixed[g->n_fixed].value = (uint32_t)val;
        g->n_fixed++;
    }
    if (!g->n_fixed)
        return fail(p, "'fixed' is empty");
    return NPL_OK;
}

/* TYPE [DIMS] [optional] of an argument or a part, from s; `pack` (only
 * when allowed) takes neither a shape nor 'optional'. */
static npl_status parse_type_shape(parser *p, npl_npu_arg_spec *a, const char *s,
                                   const char *end, bool pack_allowed)
{
    const char *what = pack_allowed ? "argument" : "part";
    const char *w;
    size_t wlen;
    if (!next_word(&s, end, &w, &wlen))
        return fail(p, "%s '%s' has no element type", what, a->name);
    if (word_is(w, wlen, "f32")) a->type = NPL_NPU_ELEM_F32;
    else if (word_is(w, wlen, "bf16")) a->type = NPL_NPU_ELEM_BF16;
    else if (word_is(w, wlen, "q4nx")) a->type = NPL_NPU_ELEM_Q4NX;
    else if (word_is(w, wlen, "i32")) a->type = NPL_NPU_ELEM_I32;
    else if (word_is(w, wlen, "u8")) a->type = NPL_NPU_ELEM_U8;
    else if (pack_allowed && word_is(w, wlen, "pack")) {
        a->type = NPL_NPU_ELEM_PACK;
        if (next_word(&s, end, &w, &wlen))
            return fail(p, "packed argument '%s' takes no shape: its parts have them", a->name);
        return NPL_OK;
    } else
        return fail(p, "unknown element type for '%s' (expected f32, bf16, q4nx, i32, u8%s)",
                    a->name, pack_allowed ? " or pack" : "");
    while (s < end && is_blank(*s))
        s++;
    if (s >= end || *s != '[')
        return fail(p, "%s '%s' needs a shape in [ ]", what, a->name);
    const char *close = memchr(s, ']', (size_t)(end - s));
    if (!close)
        return fail(p, "shape of '%s' is missing ']'", a->name);
    const char *d = s + 1;
    while (d <= close) {
        const char *comma = memchr(d, ',', (size_t)(close - d));
        const char *dim_end = comma ? comma : close;
        if (a->n_dims == NPL_NPU_MAX_DIMS)
            return fail(p, "shape of '%s' has more than 4 dimensions", a->name);
        const char *ds = d;
        size_t dlen = (size_t)(dim_end - d);
        trim(&ds, &dlen);
        if (dlen == 0)
            return fail(p, "shape of '%s' has an empty dimension", a->name);
        npl_status st = parse_expr(p, ds, dlen, &a->dims[a->n_dims]);
        if (st != NPL_OK)
            return st;
        a->n_dims++;
        d = dim_end + 1;
    }
    if (a->type == NPL_NPU_ELEM_Q4NX && a->n_dims != 2)
        return fail(p, "q4nx %s '%s' needs a [rows, cols] shape", what, a->name);
    s = close + 1;
    if (next_word(&s, end, &w, &wlen)) {
        if (!word_is(w, wlen, "optional") || !pack_allowed)
            return fail(p, "unexpected text after the shape of '%s'", a->name);
        a->optional = true;
        if (next_word(&s, end, &w, &wlen))
            return fail(p, "unexpected text after 'optional' on '%s'", a->name);
    }
    return NPL_OK;
}

/* A name for an argument or a part: unused so far in the group. */
static npl_status take_name(parser *p, const npl_npu_group_spec *g, const char **s,
                            const char *end, char name[NPL_NPU_NAME_MAX], const char *what)
{
    const char *w;
    size_t wlen;
    if (!next_word(s, end, &w, &wlen) || !valid_name(w, wlen))
        return fail(p, "%s needs a name of lowercase letters, digits and '_'", what);
    memcpy(name, w, wlen);
    name[wlen] = '\0';
    if (npl_npu_group_arg_index(g, name) >= 0 || npl_npu_group_part_index(g, name) >= 0)
        return fail(p, "%s '%s' declared twice", what, name);
    return NPL_OK;
}

static npl_status parse_arg(parser *p, npl_npu_group_spec *g, const char *v, size_t len)
{
    if (g->n_args == NPL_NPU_MAX_ARGS)
        return fail(p, "a group takes at most %d buffer arguments (the driver's command "
                       "argument area holds %d bytes)", NPL_NPU_MAX_ARGS, NPL_NPU_CMD_ARG_BYTES);
    npl_npu_arg_spec *a = &g->args[g->n_args];
    memset(a, 0, sizeof *a);
    const char *s = v, *end = v + len, *w;
    size_t wlen;
    npl_status st = take_name(p, g, &s, end, a->name, "argument");
    if (st != NPL_OK)
        return st;
    if (!next_word(&s, end, &w, &wlen))
        return fail(p, "argument '%s' has no class", a->name);
    if (word_is(w, wlen, "static")) a->cls = NPL_NPU_BUF_STATIC;
    else if (word_is(w, wlen, "intermediate")) a->cls = NPL_NPU_BUF_INTERMEDIATE;
    else if (word_is(w, wlen, "output")) a->cls = NPL_NPU_BUF_OUTPUT;
    else if (word_is(w, wlen, "io")) a->cls = NPL_NPU_BUF_IO;
    else
        return fail(p, "unknown class for '%s' (expected static, intermediate, output or io)",
                    a->name);
    if ((st = parse_type_shape(p, a, s, end, true)) != NPL_OK)
        return st;
    g->n_args++;
    return NPL_OK;
}

/* The argument the next word of [*s, end) names: its index, or -1 (also
 * for no word, or one too long); name gets the word for messages. */
static int arg_word(const npl_npu_group_spec *g, const char **s, const char *end,
                    char name[NPL_NPU_NAME_MAX])
{
    const char *w;
    size_t wlen;
    name[0] = '\0';
    if (!next_word(s, end, &w, &wlen))
        return -1;
    snprintf(name, NPL_NPU_NAME_MAX, "%.*s",
             (int)(wlen < NPL_NPU_NAME_MAX ? wlen : NPL_NPU_NAME_MAX - 1), w);
    return wlen < NPL_NPU_NAME_MAX ? npl_npu_group_arg_index(g, name) : -1;
}

/* part = ARG NAME TYPE [DIMS]: the next part of packed argument ARG. */
static npl_status parse_part(parser *p, npl_npu_group_spec *g, const char *v, size_t len)
{
    if (g->n_parts == NPL_NPU_MAX_PARTS)
        return fail(p, "a group has at most %d parts of packed arguments", NPL_NPU_MAX_PARTS);
    npl_npu_part_spec *part = &g->parts[g->n_parts];
    memset(part, 0, sizeof *part);
    const char *s = v, *end = v + len;
    char arg[NPL_NPU_NAME_MAX];
    int a = arg_word(g, &s, end, arg);
    if (a < 0 || g->args[a].type != NPL_NPU_ELEM_PACK)
        return fail(p, "'part' names '%s', which is not a packed argument declared above", arg);
    part->arg = (uint32_t)a;
    part->elem.cls = g->args[a].cls;
    npl_status st = take_name(p, g, &s, end, part->elem.name, "part");
    if (st == NPL_OK)
        st = parse_type_shape(p, &part->elem, s, end, false);
    if (st == NPL_OK)
        g->n_parts++;
    return st;
}

/* dma = in|out ARG OFFSET LENGTH, expressions in bytes ('*' as LENGTH: the
 * whole argument); the argument must be declared above. */
static npl_status parse_dma(parser *p, npl_npu_group_spec *g, const char *v, size_t len)
{
    if (g->n_dma == NPL_NPU_MAX_DMA)
        return fail(p, "a group describes at most %d transfers", NPL_NPU_MAX_DMA);
    npl_npu_dma_spec *d = &g->dma[g->n_dma];
    memset(d, 0, sizeof *d);
    const char *s = v, *end = v + len, *w;
    size_t wlen;
    if (!next_word(&s, end, &w, &wlen) || !(word_is(w, wlen, "in") || word_is(w, wlen, "out")))
        return fail(p, "'dma' starts with in or out");
    d->out = word_is(w, wlen, "out");
    char name[NPL_NPU_NAME_MAX];
    int a = arg_word(g, &s, end, name);
    if (a < 0 && !name[0])
        return fail(p, "'dma' needs an argument name");
    if (a < 0)
        return fail(p, "'dma' names '%s', which is not an argument declared above", name);
    d->arg = (uint32_t)a;
    const npl_npu_buf_class cls = g->args[a].cls;
    if (d->out && cls == NPL_NPU_BUF_STATIC)
        return fail(p, "'dma out' to '%s': static buffers are never written", name);
    if (!d->out && cls == NPL_NPU_BUF_OUTPUT)
        return fail(p, "'dma in' from '%s': output buffers are written only", name);
    if (!next_word(&s, end, &w, &wlen))
        return fail(p, "'dma' of '%s' needs an offset", name);
    npl_status st = parse_expr(p, w, wlen, &d->offset);
    if (st != NPL_OK)
        return st;
    if (!next_word(&s, end, &w, &wlen))
        return fail(p, "'dma' of '%s' needs a length", name);
    if (word_is(w, wlen, "*"))
        d->whole = true;
    else if ((st = parse_expr(p, w, wlen, &d->length)) != NPL_OK)
        return st;
    if (next_word(&s, end, &w, &wlen))
        return fail(p, "unexpected text after the 'dma' of '%s' (no spaces inside an expression)",
                    name);
    g->n_dma++;
    return NPL_OK;
}

/* patch = WORD VALUE: word WORD of the group's instruction file gets the
 * value of the expression for every run. */
static npl_status parse_patch(parser *p, npl_npu_group_spec *g, const char *v, size_t len)
{
    if (g->n_patch == NPL_NPU_MAX_DMA)
        return fail(p, "a group patches at most %d words", NPL_NPU_MAX_DMA);
    const char *s = v, *end = v + len, *w;
    size_t wlen;
    uint64_t word = 0;
    if (!next_word(&s, end, &w, &wlen) || wlen > 9)
        return fail(p, "'patch' needs a word index and a value");
    for (size_t i = 0; i < wlen; i++) {
        if (!isdigit((unsigned char)w[i]))
            return fail(p, "'patch' word index must be a number");
        word = word * 10 + (uint64_t)(w[i] - '0');
    }
    if (!next_word(&s, end, &w, &wlen))
        return fail(p, "'patch' of word %llu needs a value", (unsigned long long)word);
    npl_status st = parse_expr(p, w, wlen, &g->patch[g->n_patch].value);
    if (st != NPL_OK)
        return st;
    if (next_word(&s, end, &w, &wlen))
        return fail(p, "unexpected text after the 'patch' of word %llu (no spaces inside an "
                       "expression)", (unsigned long long)word);
    for (uint32_t i = 0; i < g->n_patch; i++)
        if (g->patch[i].word == word)
            return fail(p, "word %llu patched twice", (unsigned long long)word);
    g->patch[g->n_patch++].word = (uint32_t)word;
    return NPL_OK;
}

/* A group without dma lines moves every argument whole: in unless it is
 * an output, back out unless it holds weights. */
static void default_dma(npl_npu_group_spec *g)
{
    for (uint32_t a = 0; a < g->n_args; a++) {
        if (g->args[a].cls != NPL_NPU_BUF_OUTPUT)
            g->dma[g->n_dma++] = (npl_npu_dma_spec){.arg = a, .out = false, .whole = true,
                                                    .offset = {.n = 1}};
        if (g->args[a].cls != NPL_NPU_BUF_STATIC)
            g->dma[g->n_dma++] = (npl_npu_dma_spec){.arg = a, .out = true, .whole = true,
                                                    .offset = {.n = 1}};
    }
}

static npl_status finish_group(parser *p, const npl_npu_manifest *m, npl_npu_group_spec *g)
{
    unsigned saved = p->line;
    p->line = g->line;
    npl_status st = NPL_OK;
    if (g->n_args == 0)
        st = fail(p, "group '%s' declares no arguments", g->name);
    else if (m->target == NPL_NPU_TARGET_EMU && (g->xclbin || g->kernel || g->instr))
        st = fail(p, "group '%s' names binaries, but emu groups run on the host", g->name);
    else if (m->target != NPL_NPU_TARGET_EMU && (!g->xclbin || !g->kernel))
        st = fail(p, "group '%s' needs xclbin and kernel", g->name);
    else if (g->n_patch && !g->instr)
        st = fail(p, "group '%s' patches words but names no 'instr' file", g->name);
    else if (g->instr && g->n_dma)
        st = fail(p, "group '%s' has both an 'instr' file and 'dma' lines: the stream comes "
                     "from one or the other", g->name);
    else if (g->n_args > m->max_args)
        st = fail(p, "group '%s' takes %u buffer arguments, more than max_args = %u",
                  g->name, g->n_args, m->max_args);
    /* One hardware context per xclbin, and a run list waits on one
     * context: every group must live in the first group's xclbin. */
    else if (g->xclbin && strcmp(g->xclbin, m->groups[0].xclbin) != 0)
        st = fail(p, "group '%s' is in %s, but every group must be in one xclbin (%s): "
                     "one hardware context runs a whole run list",
                  g->name, g->xclbin, m->groups[0].xclbin);
    for (uint32_t a = 0; st == NPL_OK && a < g->n_args; a++) {
        bool has_parts = false;
        for (uint32_t i = 0; i < g->n_parts; i++)
            has_parts = has_parts || g->parts[i].arg == a;
        if (g->args[a].type == NPL_NPU_ELEM_PACK && !has_parts)
            st = fail(p, "group '%s': packed argument '%s' has no parts", g->name,
                      g->args[a].name);
    }
    for (uint32_t a = 0; st == NPL_OK && g->n_dma && a < g->n_args; a++) {
        bool moved = false;
        for (uint32_t d = 0; d < g->n_dma; d++)
            moved = moved || g->dma[d].arg == a;
        if (!moved)
            st = fail(p, "group '%s': no transfer moves argument '%s'", g->name, g->args[a].name);
    }
    if (st == NPL_OK && g->n_dma == 0 && !g->instr) {
        if (2 * g->n_args > NPL_NPU_MAX_DMA)
            st = fail(p, "group '%s' needs 'dma' lines: too many arguments to move each whole",
                      g->name);
        else
            default_dma(g);
    }
    p->line = saved;
    return st;
}

static void free_group(npl_npu_group_spec *g)
{
    free(g->xclbin);
    free(g->kernel);
    free(g->instr);
}

void npl_npu_manifest_free(npl_npu_manifest *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_groups; i++)
        free_group(&m->groups[i]);
    free(m->groups);
    free(m);
}

static npl_status parse_group_key(parser *p, npl_npu_group_spec *g, const char *key,
                                  size_t klen, const char *v, size_t vlen)
{
    if (word_is(key, klen, "xclbin"))
        return copy_path(p, v, vlen, &g->xclbin, "xclbin");
    if (word_is(key, klen, "instr"))
        return copy_path(p, v, vlen, &g->instr, "instr");
    if (word_is(key, klen, "patch"))
        return parse_patch(p, g, v, vlen);
    if (word_is(key, klen, "kernel")) {
        if (g->kernel)
            return fail(p, "'kernel' given twice");
        if (vlen == 0 || vlen >= 256 || memchr(v, ' ', vlen) || memchr(v, '\t', vlen))
            return fail(p, "'kernel' needs one name");
        g->kernel = strndup(v, vlen);
        return g->kernel ? NPL_OK : npl_error_set(p->err, NPL_ERR_NOMEM, "manifest: no memory");
    }
    if (word_is(key, klen, "fixed"))
        return parse_fixed(p, g, v, vlen);
    if (word_is(key, klen, "params")) {
        if (word_is(v, vlen, "shape"))
            g->params_shape = true;
        else if (!word_is(v, vlen, "none"))
            return fail(p, "'params' is 'shape' or 'none'");
        return NPL_OK;
    }
    if (word_is(key, klen, "arg")) {
        if (g->n_dma)
            return fail(p, "arguments come before the transfers ('dma')");
        return parse_arg(p, g, v, vlen);
    }
    if (word_is(key, klen, "part")) {
        if (g->n_dma)
            return fail(p, "parts come before the transfers ('dma')");
        return parse_part(p, g, v, vlen);
    }
    if (word_is(key, klen, "dma"))
        return parse_dma(p, g, v, vlen);
    char k[64];
    snprintf(k, sizeof k, "%.*s", (int)(klen > 60 ? 60 : klen), key);
    return fail(p, "unknown key '%s' in a group", k);
}

/* The first line: the magic word and the version this build reads. */
static npl_status parse_magic(parser *p, const char *line, size_t llen)
{
    const char *s = line, *w;
    size_t wlen;
    next_word(&s, line + llen, &w, &wlen);
    if (!word_is(w, wlen, MANIFEST_MAGIC))
        return fail(p, "first line must be '" MANIFEST_MAGIC " %s'", "1");
    if (!next_word(&s, line + llen, &w, &wlen) || !word_is(w, wlen, "1")
        || next_word(&s, line + llen, &w, &wlen))
        return fail(p, "unsupported manifest version (this build reads %s)", "1");
    return NPL_OK;
}

/* A section header "[group NAME]": ends the group before it and opens
 * NAME's (m->groups grows by doubling, *cap entries). */
static npl_status open_group(parser *p, npl_npu_manifest *m, size_t *cap, bool have_device,
                             const char *line, size_t llen)
{
    if (line[llen - 1] != ']')
        return fail(p, "section header needs a closing ']'");
    const char *s = line + 1, *e = line + llen - 1, *w, *name;
    size_t wlen, nlen;
    if (!next_word(&s, e, &w, &wlen) || !word_is(w, wlen, "group")
        || !next_word(&s, e, &name, &nlen) || next_word(&s, e, &w, &wlen))
        return fail(p, "section header must be [group NAME]");
    if (!have_device)
        return fail(p, "'device = ...' must come before the first group");
    if (!valid_name(name, nlen))
        return fail(p, "group name must be lowercase letters, digits and '_'");
    if (m->n_groups) {
        npl_status st = finish_group(p, m, &m->groups[m->n_groups - 1]);
        if (st != NPL_OK)
            return st;
    }
    for (size_t i = 0; i < m->n_groups; i++)
        if (strlen(m->groups[i].name) == nlen && memcmp(m->groups[i].name, name, nlen) == 0)
            return fail(p, "group '%s' declared twice", m->groups[i].name);
    if (m->n_groups == *cap) {
        size_t ncap = *cap ? *cap * 2 : 8;
        npl_npu_group_spec *g = realloc(m->groups, ncap * sizeof *g);
        if (!g)
            return npl_error_set(p->err, NPL_ERR_NOMEM, "manifest: no memory");
        m->groups = g;
        *cap = ncap;
    }
    npl_npu_group_spec *g = &m->groups[m->n_groups++];
    memset(g, 0, sizeof *g);
    memcpy(g->name, name, nlen);
    g->line = p->line;
    return NPL_OK;
}

npl_status npl_npu_manifest_parse(const char *text, size_t len, const char *origin,
                                  npl_npu_manifest **out, npl_error *err)
{
    if (!out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "manifest: no output pointer");
    *out = NULL;
    parser p = { origin ? origin : "manifest", 0, err };
    if (!text)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "manifest: no text");
    if (memchr(text, '\0', len))
        return npl_error_set(err, NPL_ERR_FORMAT, "%s: contains a NUL byte", p.origin);
    npl_npu_manifest *m = calloc(1, sizeof *m);
    if (!m)
        return npl_error_set(err, NPL_ERR_NOMEM, "manifest: no memory");
    m->max_args = NPL_NPU_DEFAULT_MAX_ARGS;
    bool have_max_args = false;
    size_t cap = 0;
    bool have_magic = false, have_device = false;
    npl_status st = NPL_OK;
    const char *cur = text, *end = text + len;
    while (cur < end && st == NPL_OK) {
        const char *nl = memchr(cur, '\n', (size_t)(end - cur));
        const char *line = cur;
        size_t llen = (size_t)((nl ? nl : end) - cur);
        cur = nl ? nl + 1 : end;
        p.line++;
        if (llen && line[llen - 1] == '\r')
            llen--;
        /* '#' starts a comment at line start or after a blank. */
        for (size_t i = 0; i < llen; i++)
            if (line[i] == '#' && (i == 0 || is_blank(line[i - 1]))) {
                llen = i;
                break;
            }
        trim(&line, &llen);
        if (llen == 0)
            continue;
        if (!have_magic) {
            st = parse_magic(&p, line, llen);
            have_magic = true;
            continue;
        }
        if (line[0] == '[') {
            st = open_group(&p, m, &cap, have_device, line, llen);
            continue;
        }
        const char *eq = memchr(line, '=', llen);
        if (!eq) {
            st = fail(&p, "expected 'key = value'");
            break;
        }
        const char *key = line, *val = eq + 1;
        size_t klen = (size_t)(eq - line), vlen = llen - klen - 1;
        trim(&key, &klen);
        trim(&val, &vlen);
        if (m->n_groups) {
            st = parse_group_key(&p, &m->groups[m->n_groups - 1], key, klen, val, vlen);
        } else if (word_is(key, klen, "device")) {
            if (have_device)
                st = fail(&p, "'device' given twice");
            else if (word_is(val, vlen, "emu"))
                m->target = NPL_NPU_TARGET_EMU;
            else if (word_is(val, vlen, "xdna1"))
                m->target = NPL_NPU_TARGET_XDNA1;
            else if (word_is(val, vlen, "xdna2"))
                m->target = NPL_NPU_TARGET_XDNA2;
            else
                st = fail(&p, "unknown device (expected emu, xdna1 or xdna2)");
            have_device = true;
        } else if (word_is(key, klen, "max_args")) {
            unsigned long n = 0;
            char num[16];
            snprintf(num, sizeof num, "%.*s", (int)(vlen < 15 ? vlen : 15), val);
            char *endp = NULL;
            n = strtoul(num, &endp, 10);
            if (have_max_args)
                st = fail(&p, "'max_args' given twice");
            else if (vlen == 0 || vlen > 3 || *endp || !isdigit((unsigned char)num[0]) || n < 1
                     || n > NPL_NPU_MAX_ARGS)
                st = fail(&p, "'max_args' must be 1..%d: the driver's command argument area "
                              "holds %d bytes of 64-bit buffer addresses",
                          NPL_NPU_MAX_ARGS, NPL_NPU_CMD_ARG_BYTES);
            else
                m->max_args = (uint32_t)n;
            have_max_args = true;
        } else {
            st = fail(&p, "unknown top-level key (only 'device' and 'max_args' come before groups)");
        }
    }
    if (st == NPL_OK && !have_magic)
        st = npl_error_set(err, NPL_ERR_FORMAT, "%s: empty manifest", p.origin);
    else if (st == NPL_OK && !m->n_groups)
        st = npl_error_set(err, NPL_ERR_FORMAT, "%s: declares no groups", p.origin);
    else if (st == NPL_OK)
        st = finish_group(&p, m, &m->groups[m->n_groups - 1]);
    if (st != NPL_OK) {
        npl_npu_manifest_free(m);
        return st;
    }
    *out = m;
    return NPL_OK;
}

npl_status npl_npu_manifest_load(const char *kernel_dir, npl_npu_manifest **out, npl_error *err)
{
    if (!out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "manifest: no output pointer");
    *out = NULL;
    char path[PATH_MAX];
    if (!kernel_dir
        || snprintf(path, sizeof path, "%s/%s", kernel_dir, NPL_NPU_MANIFEST_FILE) >= (int)sizeof path)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "manifest: bad kernel directory");
    FILE *f = fopen(path, "rb");
    if (!f)
        return npl_error_set(err, NPL_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    char *text = malloc(MANIFEST_MAX_BYTES + 1);
    if (!text) {
        fclose(f);
        return npl_error_set(err, NPL_ERR_NOMEM, "manifest: no memory");
    }
    size_t n = fread(text, 1, MANIFEST_MAX_BYTES + 1, f);
    bool read_error = ferror(f);
    fclose(f);
    npl_status st;
    if (read_error)
        st = npl_error_set(err, NPL_ERR_IO, "cannot read %s", path);
    else if (n > MANIFEST_MAX_BYTES)
        st = npl_error_set(err, NPL_ERR_FORMAT, "%s is larger than %u bytes", path,
                           MANIFEST_MAX_BYTES);
    else
        st = npl_npu_manifest_parse(text, n, path, out, err);
    free(text);
    return st;
}

static npl_status check_file(const char *dir, const char *rel, const char *group, npl_error *err)
{
    char path[PATH_MAX];
    struct stat st;
    if (snprintf(path, sizeof path, "%s/%s", dir, rel) >= (int)sizeof path)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "kernel path too long");
    if (stat(path, &st) != 0)
        return npl_error_set(err, NPL_ERR_IO, "kernel binary %s of group %s is missing: %s",
                             path, group, strerror(errno));
    if (!S_ISREG(st.st_mode) || access(path, R_OK) != 0)
        return npl_error_set(err, NPL_ERR_IO,
                             "kernel binary %s of group %s is not a readable file", path, group);
    return NPL_OK;
}

npl_status npl_npu_manifest_check_files(const npl_npu_manifest *m, const char *kernel_dir,
                                        npl_error *err)
{
    if (!m || !kernel_dir)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "manifest: nothing to check");
    for (size_t i = 0; i < m->n_groups; i++) {
        const npl_npu_group_spec *g = &m->groups[i];
        npl_status st = NPL_OK;
        if (g->xclbin)
            st = check_file(kernel_dir, g->xclbin, g->name, err);
        if (st == NPL_OK && g->instr)
            st = check_file(kernel_dir, g->instr, g->name, err);
        if (st != NPL_OK)
            return st;
    }
    return NPL_OK;
}

const npl_npu_group_spec *npl_npu_manifest_find(const npl_npu_manifest *m, const char *name)
{
    if (!m || !name)
        return NULL;
    for (size_t i = 0; i < m->n_groups; i++)
        if (strcmp(m->groups[i].name, name) == 0)
            return &m->groups[i];
    return NULL;
}

int npl_npu_group_arg_index(const npl_npu_group_spec *g, const char *name)
{
    if (!g || !name)
        return -1;
    for (uint32_t i = 0; i < g->n_args; i++)
        if (strcmp(g->args[i].name, name) == 0)
            return (int)i;
    return -1;
}
