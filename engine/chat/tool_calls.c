/* Streaming tool-call parser: model output in, plain text and complete
 * calls out, driven by the family's npl_tool_spec (tool_format.c).
 *
 * Bytes are held in one buffer from `mark` (where undecided output
 * starts: a trigger seen, a call begun) to the end; `pos` is how far the
 * state machine has read. Whatever turns out not to be a well-formed call
 * is handed on as text from `mark`, so no output is lost and nothing is
 * ever emitted twice. JSON values are delimited by a scanner that keeps
 * its state across feeds (linear in the output), then parsed with the
 * Jinja engine's JSON reader. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"
#include "npl_error.h"
#include "tool_format.h"

#define MAX_NAME 256  /* bytes of a function name */
#define MAX_DEPTH 128 /* JSON nesting of a call */

typedef enum pstate {
    ST_START,      /* nothing decided yet (json_at_start / name_line_at_start families) */
    ST_TEXT,       /* plain text: looking for a trigger */
    ST_WHOLE,      /* one JSON value of calls from the start of the output */
    ST_ARRAY_OPEN, /* after the trigger: '[' (or one lone object) */
    ST_CALL,       /* a call object, or a name up to name_end */
    ST_ARGS,       /* the arguments object after a name */
    ST_CALL_CLOSE, /* after a call: optional fence and close */
    ST_ARRAY_SEP,  /* ',' or ']' */
    ST_NEXT,       /* DeepSeek: another call's open, or the section's end */
    ST_END,        /* optional section end */
    ST_PYTHON,     /* <|python_tag|>: the rest of the output */
} pstate;

typedef struct jscan {
    size_t off; /* bytes scanned, from pos */
    int depth;
    bool in_str, esc;
} jscan;

struct npl_tool_parser {
    const npl_tool_spec *sp;
    npl_tool_text_fn on_text;
    npl_tool_call_fn on_call;
    void *ctx;
    char id_prefix[65];
    char *buf;
    size_t len, cap, pos, mark;
    pstate st;
    jscan js;
    bool in_array, lone_object;
    char name[MAX_NAME + 1]; /* NAME_ARGS layout: the current call's name */
    size_t n_calls;
};

enum { WAIT, GO };

npl_tool_parser *npl_tool_parser_new(npl_tool_family f, const char *id_prefix, npl_tool_text_fn on_text,
                                     npl_tool_call_fn on_call, void *ctx)
{
    const npl_tool_spec *sp = npl_tool_spec_of(f);
    if (!sp)
        return NULL;
    npl_tool_parser *p = calloc(1, sizeof *p);
    if (p) {
        p->cap = 256;
        p->buf = calloc(1, p->cap);
    }
    if (!p || !p->buf) {
        free(p);
        return NULL;
    }
    p->sp = sp;
    p->on_text = on_text;
    p->on_call = on_call;
    p->ctx = ctx;
    snprintf(p->id_prefix, sizeof p->id_prefix, "%s", id_prefix ? id_prefix : "call_");
    p->st = sp->json_at_start || sp->name_line_at_start ? ST_START : ST_TEXT;
    return p;
}

void npl_tool_parser_free(npl_tool_parser *p)
{
    if (!p)
        return;
    free(p->buf);
    free(p);
}

size_t npl_tool_parser_calls(const npl_tool_parser *p)
{
    return p ? p->n_calls : 0;
}

static void text_out(npl_tool_parser *p, size_t from, size_t to)
{
    if (to > from && p->on_text)
        p->on_text(p->buf + from, to - from, p->ctx);
}

/* Not a call after all: everything undecided is text, and reading goes on as text. */
static int degrade(npl_tool_parser *p)
{
    text_out(p, p->mark, p->pos);
    p->mark = p->pos;
    p->st = ST_TEXT;
    return GO;
}

static void commit(npl_tool_parser *p, pstate next)
{
    p->mark = p->pos;
    p->st = next;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void skip_ws(npl_tool_parser *p)
{
    while (p->pos < p->len && is_ws(p->buf[p->pos]))
        p->pos++;
}

/* 1: the input at pos starts with lit; 0: it is a proper prefix of lit
 * (undecided); -1: neither. */
static int lit_at(const npl_tool_parser *p, size_t at, const char *lit)
{
    size_t n = strlen(lit), have = p->len - at;
    if (have >= n)
        return memcmp(p->buf + at, lit, n) == 0 ? 1 : -1;
    return memcmp(p->buf + at, lit, have) == 0 ? 0 : -1;
}

/* Scans a JSON object or array starting at pos: 1 complete (*end set),
 * 0 more input needed, -1 not one. */
static int scan_json(npl_tool_parser *p, size_t *end)
{
    jscan *s = &p->js;
    if (s->off == 0) {
        if (p->pos >= p->len)
            return 0;
        char c = p->buf[p->pos];
        if (c != '{' && c != '[')
            return -1;
    }
    for (; p->pos + s->off < p->len; s->off++) {
        char c = p->buf[p->pos + s->off];
        if (s->in_str) {
            if (s->esc)
                s->esc = false;
            else if (c == '\\')
                s->esc = true;
            else if (c == '"')
                s->in_str = false;
        } else if (c == '"') {
            s->in_str = true;
        } else if (c == '{' || c == '[') {
            if (++s->depth > MAX_DEPTH)
                return -1;
        } else if (c == '}' || c == ']') {
            if (--s->depth == 0) {
                *end = p->pos + s->off + 1;
                memset(s, 0, sizeof *s);
                return 1;
            }
        }
    }
    if (s->off > NPL_TOOL_CALL_MAX)
        return -1;
    return 0;
}

static void reset_scan(npl_tool_parser *p)
{
    memset(&p->js, 0, sizeof p->js);
}

/* ---- turning JSON into calls ---------------------------------------------------------- */

typedef struct pcall {
    const char *id, *name, *args;
} pcall;

typedef struct pcalls {
    pcall v[64];
    size_t n;
} pcalls;

static const char *cstr(jarena *a, jstr s)
{
    return jarena_strdup(a, s.s, s.n);
}

static const jv *key(const jv *obj, const char *k)
{
    return k && obj->k == JV_DICT ? jdict_get(obj->u.d, k, strlen(k)) : NULL;
}

static bool name_ok(const char *s, size_t n)
{
    if (n == 0 || n > MAX_NAME)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c == '"' || c == '<' || c == '>' || c == '\\' || c == 127)
            return false;
    }
    return true;
}

/* The arguments as a JSON object's text: an object, or a string holding one. */
static const char *args_text(jarena *a, const jv *v)
{
    jv obj = v ? *v : jv_dict(a);
    if (obj.k == JV_STR)
        obj = jv_from_json(a, obj.u.s.s, obj.u.s.n, false);
    if (obj.k == JV_NONE || obj.k == JV_UNDEF)
        obj = jv_dict(a);
    if (obj.k != JV_DICT)
        jfail(a, "arguments are not an object");
    jsb b;
    jsb_init(&b, a, 0);
    jjson_opts o = {.indent = -1};
    jv_to_json(&b, &obj, &o, 0);
    return cstr(a, jsb_done(&b));
}

static void add_call(jarena *a, pcalls *out, const char *id, const char *name, size_t name_len, const char *args)
{
    if (!name_ok(name, name_len))
        jfail(a, "no valid function name");
    if (out->n == sizeof out->v / sizeof out->v[0])
        jfail(a, "too many calls");
    out->v[out->n++] = (pcall){id, jarena_strdup(a, name, name_len), args};
}

/* A call object: {"name"|"tool_name": .., "arguments"|"parameters": .., "id"|"tool_call_id": ..},
 * or OpenAI's {"type": "function", "function": {...}, "id": ..}. */
static void object_call(jarena *a, const jv *o, const npl_tool_spec *sp, pcalls *out)
{
    if (o->k != JV_DICT)
        jfail(a, "a call is not an object");
    const jv *fn = key(o, "function");
    const jv *src = fn && fn->k == JV_DICT ? fn : o;
    const jv *name = key(src, sp->shape.name_key);
    if (!name)
        name = key(src, "name");
    if (!name)
        name = key(src, "tool_name");
    if (!name && fn && fn->k == JV_STR)
        name = fn;
    const jv *args = key(src, sp->shape.args_key);
    if (!args)
        args = key(src, "arguments");
    if (!args)
        args = key(src, "parameters");
    const jv *id = key(o, sp->shape.id_key);
    if (!id)
        id = key(o, "id");
    if (!id)
        id = key(o, "tool_call_id");
    if (!name || name->k != JV_STR)
        jfail(a, "a call without a name");
    const char *ids = NULL;
    if (id && id->k == JV_STR && id->u.s.n > 0 && id->u.s.n <= 64) {
        ids = cstr(a, id->u.s);
    } else if (id && id->k == JV_INT) {
        jsb b;
        jsb_init(&b, a, 0);
        jsb_addf(&b, "%lld", (long long)id->u.i);
        ids = cstr(a, jsb_done(&b));
    }
    add_call(a, out, ids, name->u.s.s, name->u.s.n, args_text(a, args));
}

typedef enum jmode { J_CALL, J_ARGS, J_WHOLE } jmode;

/* Parses buf[pos..end) into calls (J_WHOLE: the generic and Llama 3
 * forms; *response receives the generic form's plain answer). False when
 * it is not what the format expects. */
static bool parse_calls(npl_tool_parser *p, jarena *a, size_t end, jmode mode, pcalls *out, const char **response)
{
    jmp_buf jb;
    char msg[160];
    jarena_init(a, 16u * NPL_TOOL_CALL_MAX, &jb, msg, sizeof msg);
    if (setjmp(jb))
        return false;
    jv v = jv_from_json(a, p->buf + p->pos, end - p->pos, false);
    if (mode == J_ARGS) {
        add_call(a, out, NULL, p->name, strlen(p->name), args_text(a, &v));
    } else if (mode == J_CALL) {
        object_call(a, &v, p->sp, out);
    } else {
        const jv *calls = key(&v, "tool_calls"), *call = key(&v, "tool_call"), *resp = key(&v, "response");
        if (p->sp->shape.name_key && strcmp(p->sp->shape.name_key, "name") == 0 && key(&v, "name") &&
            !calls && !call) {
            object_call(a, &v, p->sp, out); /* Llama 3: the object is the call */
        } else if (calls && calls->k == JV_LIST) {
            for (size_t i = 0; i < calls->u.l->n; i++)
                object_call(a, &calls->u.l->v[i], p->sp, out);
        } else if (call) {
            object_call(a, call, p->sp, out);
        } else if (resp && resp->k == JV_STR && p->sp->json_at_start && !p->sp->python_tag) {
            *response = cstr(a, resp->u.s);
        } else {
            jfail(a, "not calls");
        }
    }
    return true;
}

static void emit_calls(npl_tool_parser *p, const pcalls *c)
{
    for (size_t i = 0; i < c->n; i++) {
        char idbuf[96];
        const char *id = c->v[i].id;
        if (!id) {
            snprintf(idbuf, sizeof idbuf, "%s%zu", p->id_prefix, p->n_calls);
            id = idbuf;
        }
        npl_tool_call call = {id, c->v[i].name, c->v[i].args};
        p->n_calls++;
        if (p->on_call)
            p->on_call(&call, p->ctx);
    }
}

/* Parses and emits the JSON value at pos..end; false (nothing emitted) when it is no call. */
static bool take_json(npl_tool_parser *p, size_t end, jmode mode)
{
    jarena a;
    pcalls *c = calloc(1, sizeof *c);
    if (!c)
        return false;
    const char *response = NULL;
    bool ok = parse_calls(p, &a, end, mode, c, &response);
    if (ok && response && p->on_text)
        p->on_text(response, strlen(response), p->ctx);
    if (ok)
        emit_calls(p, c);
    jarena_free(&a);
    free(c);
    return ok;
}

/* <|python_tag|>: JSON call, a built-in tool's `name.call(key="value", ...)`, or Python code. */
static void builtin_call_args(jarena *a, jsb *b, const char *s, size_t n)
{
    jsb_addc(b, "{");
    size_t i = 0, k = 0;
    while (i < n && s[i] != ')') {
        while (i < n && (s[i] == ' ' || s[i] == ','))
            i++;
        size_t ks = i;
        while (i < n && (s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                         (i > ks && s[i] >= '0' && s[i] <= '9')))
            i++;
        if (i == ks || i >= n || s[i] != '=')
            jfail(a, "not a keyword argument");
        jsb_addf(b, "%s\"%.*s\": ", k++ ? ", " : "", (int)(i - ks), s + ks);
        i++;
        if (i < n && (s[i] == '"' || s[i] == '\'')) {
            char q = s[i++];
            jsb_addc(b, "\"");
            for (; i < n && s[i] != q; i++) {
                if (s[i] == '\\' && i + 1 < n)
                    i++;
                if (s[i] == '"' || s[i] == '\\')
                    jsb_addc(b, "\\");
                if ((unsigned char)s[i] < 0x20)
                    jsb_addf(b, "\\u%04x", (unsigned char)s[i]);
                else
                    jsb_add(b, s + i, 1, NULL);
            }
            if (i >= n)
                jfail(a, "unterminated string");
            i++;
            jsb_addc(b, "\"");
        } else {
            size_t vs = i;
            while (i < n && s[i] != ',' && s[i] != ')')
                i++;
            size_t vn = i - vs;
            while (vn && s[vs + vn - 1] == ' ')
                vn--;
            const char *py[] = {"True", "true", "False", "false", "None", "null"};
            const char *lit = s + vs;
            for (int k2 = 0; k2 < 6; k2 += 2)
                if (vn == strlen(py[k2]) && memcmp(lit, py[k2], vn) == 0) {
                    lit = py[k2 + 1];
                    vn = strlen(lit);
                }
            jv num = jv_from_json(a, lit, vn, false); /* numbers, true/false/null */
            jjson_opts o = {.indent = -1};
            jv_to_json(b, &num, &o, 0);
        }
    }
    if (i + 1 != n)
        jfail(a, "not a call");
    jsb_addc(b, "}");
}

/* One reading of the <|python_tag|> text s..e: as a built-in tool's call or as code. */
static bool python_call(npl_tool_parser *p, size_t s, size_t e, bool builtin)
{
    jarena a;
    jmp_buf jb;
    char msg[160];
    pcalls *c = calloc(1, sizeof *c);
    if (!c)
        return false;
    jarena_init(&a, 16u * NPL_TOOL_CALL_MAX, &jb, msg, sizeof msg);
    bool ok = false;
    if (!setjmp(jb)) {
        const char *t = p->buf + s, *dot = memmem(t, e - s, ".call(", 6);
        jsb b;
        jsb_init(&b, &a, 0);
        if (builtin) {
            if (!dot)
                jfail(&a, "not a built-in call");
            builtin_call_args(&a, &b, dot + 6, (size_t)(p->buf + e - dot - 6));
            add_call(&a, c, NULL, t, (size_t)(dot - t), cstr(&a, jsb_done(&b)));
        } else {
            jsb_addc(&b, "{\"code\": ");
            jv code = jv_str(t, e - s, NULL);
            jjson_opts o = {.indent = -1};
            jv_to_json(&b, &code, &o, 0);
            jsb_addc(&b, "}");
            add_call(&a, c, NULL, "python", 6, cstr(&a, jsb_done(&b)));
        }
        ok = true;
    }
    if (ok)
        emit_calls(p, c);
    jarena_free(&a);
    free(c);
    return ok;
}

static void take_python(npl_tool_parser *p)
{
    size_t s = p->pos, e = p->len;
    while (s < e && is_ws(p->buf[s]))
        s++;
    while (e > s && is_ws(p->buf[e - 1]))
        e--;
    if (s == e)
        return;
    p->pos = s;
    if (p->buf[s] == '{' && take_json(p, e, J_CALL))
        return;
    if (!python_call(p, s, e, true) && !python_call(p, s, e, false))
        text_out(p, s, e);
}

/* ---- the state machine --------------------------------------------------------------- */

static int st_text(npl_tool_parser *p, bool final)
{
    const npl_tool_spec *sp = p->sp;
    size_t best = p->len, best_n = 0;
    int which = -1;
    for (int t = 0; t < 2; t++) {
        const char *trig = sp->triggers[t];
        if (!trig)
            continue;
        const char *hit = memmem(p->buf + p->pos, p->len - p->pos, trig, strlen(trig));
        if (hit && (size_t)(hit - p->buf) < best) {
            best = (size_t)(hit - p->buf);
            best_n = strlen(trig);
            which = t;
        }
    }
    if (which >= 0) {
        text_out(p, p->mark, best);
        p->mark = best;
        p->pos = best + best_n;
        reset_scan(p);
        if (which == 1 && sp->python_tag)
            p->st = ST_PYTHON;
        else if (sp->array)
            p->st = ST_ARRAY_OPEN;
        else if (sp->open)
            p->st = ST_NEXT;
        else
            p->st = ST_CALL;
        p->in_array = p->lone_object = false;
        return GO;
    }
    /* hold a tail that may be the start of a trigger */
    size_t hold = 0;
    for (int t = 0; t < 2 && !final; t++) {
        const char *trig = sp->triggers[t];
        if (!trig)
            continue;
        size_t tn = strlen(trig);
        for (size_t k = tn - 1; k > hold; k--)
            if (k <= p->len - p->pos && memcmp(p->buf + p->len - k, trig, k) == 0) {
                hold = k;
                break;
            }
    }
    p->pos = p->len - hold;
    text_out(p, p->mark, p->pos);
    p->mark = p->pos;
    return WAIT;
}

static int st_start(npl_tool_parser *p, bool final)
{
    size_t i = p->pos;
    if (p->sp->name_line_at_start) { /* functionary v3.2: "name\n" */
        if (!memchr(p->buf + i, '\n', p->len - i)) {
            if (final || p->len - i > MAX_NAME)
                p->st = ST_TEXT;
            return final || p->len - i > MAX_NAME ? GO : WAIT;
        }
        p->st = ST_CALL; /* reads the name up to name_end */
        return GO;
    }
    while (i < p->len && (is_ws(p->buf[i]) || (p->n_calls && p->buf[i] == ';')))
        i++;
    if (i == p->len) {
        if (final && p->n_calls) /* whitespace after calls */
            p->mark = p->pos = p->len;
        if (final)
            p->st = ST_TEXT;
        return final ? GO : WAIT;
    }
    if (p->buf[i] == '{') {
        p->pos = i;
        reset_scan(p);
        p->st = ST_WHOLE;
    } else {
        p->st = ST_TEXT;
    }
    return GO;
}

static int st_whole(npl_tool_parser *p, bool final)
{
    size_t end;
    int r = scan_json(p, &end);
    if (r == 0 && !final)
        return WAIT;
    if (r != 1 || !take_json(p, end, J_WHOLE)) {
        reset_scan(p);
        return degrade(p);
    }
    p->pos = end;
    commit(p, ST_START); /* Llama 3 may write more call objects (after ';' or whitespace) */
    return GO;
}

static int st_array_open(npl_tool_parser *p, bool final)
{
    skip_ws(p);
    if (p->pos == p->len)
        return final ? degrade(p) : WAIT;
    char c = p->buf[p->pos];
    if (c == '[') {
        p->pos++;
        p->in_array = true;
        p->st = ST_CALL;
        return GO;
    }
    if (c == '{') { /* one call without the brackets */
        p->lone_object = true;
        p->st = ST_CALL;
        return GO;
    }
    return degrade(p);
}

static int st_call(npl_tool_parser *p, bool final)
{
    const npl_tool_spec *sp = p->sp;
    if (!sp->name_end) {
        skip_ws(p);
        size_t end;
        int r = scan_json(p, &end);
        if (r == 0 && !final)
            return WAIT;
        if (r != 1 || !take_json(p, end, J_CALL)) {
            reset_scan(p);
            return degrade(p);
        }
        p->pos = end;
        commit(p, ST_CALL_CLOSE);
        return GO;
    }
    /* name up to name_end */
    size_t ne = strlen(sp->name_end);
    const char *hit = memmem(p->buf + p->pos, p->len - p->pos, sp->name_end, ne);
    if (!hit) {
        if (final || p->len - p->pos > MAX_NAME + 64)
            return degrade(p);
        return WAIT;
    }
    const char *s = p->buf + p->pos, *e = hit;
    if (sp->name_skip) {
        const char *k = memmem(s, (size_t)(e - s), sp->name_skip, strlen(sp->name_skip));
        if (k)
            s = k + strlen(sp->name_skip);
    }
    while (s < e && is_ws(*s))
        s++;
    while (e > s && is_ws(e[-1]))
        e--;
    size_t n = (size_t)(e - s);
    if (sp->name_line_at_start && n == 3 && memcmp(s, "all", 3) == 0) { /* functionary: text follows */
        p->pos = (size_t)(hit - p->buf) + ne;
        commit(p, ST_TEXT);
        return GO;
    }
    if (!name_ok(s, n))
        return degrade(p);
    memcpy(p->name, s, n);
    p->name[n] = 0;
    p->pos = (size_t)(hit - p->buf) + ne;
    reset_scan(p);
    p->st = ST_ARGS;
    return GO;
}

static int st_args(npl_tool_parser *p, bool final)
{
    skip_ws(p);
    if (p->sp->fences && p->js.off == 0) {
        int r = lit_at(p, p->pos, "```json");
        if (r == 0 && !final)
            return WAIT;
        if (r == 1)
            p->pos += 7;
        skip_ws(p);
    }
    size_t end;
    int r = scan_json(p, &end);
    if (r == 0 && !final)
        return WAIT;
    if (r != 1 || p->buf[p->pos] != '{' || !take_json(p, end, J_ARGS)) {
        reset_scan(p);
        return degrade(p);
    }
    p->pos = end;
    commit(p, ST_CALL_CLOSE);
    return GO;
}

/* Consumes an optional literal after whitespace: WAIT while undecided. */
static int optional_lit(npl_tool_parser *p, const char *lit, bool final)
{
    size_t save = p->pos;
    skip_ws(p);
    if (!lit)
        return GO;
    if (p->pos == p->len && !final) {
        p->pos = save;
        return WAIT;
    }
    int r = lit_at(p, p->pos, lit);
    if (r == 0 && !final) {
        p->pos = save;
        return WAIT;
    }
    if (r == 1)
        p->pos += strlen(lit);
    return GO;
}

/* After a call or section: the whitespace that follows is dropped, which
 * needs the next non-space byte (or the end) to have arrived. */
static int settle(npl_tool_parser *p, size_t save, bool final)
{
    skip_ws(p);
    if (p->pos == p->len && !final) {
        p->pos = save;
        return WAIT;
    }
    return GO;
}

static int st_call_close(npl_tool_parser *p, bool final)
{
    const npl_tool_spec *sp = p->sp;
    size_t save = p->pos;
    if (sp->fences && optional_lit(p, "```", final) == WAIT)
        return WAIT;
    if (sp->close && optional_lit(p, sp->close, final) == WAIT) {
        p->pos = save;
        return WAIT;
    }
    if (!p->in_array && !p->lone_object && settle(p, save, final) == WAIT)
        return WAIT;
    commit(p, p->in_array ? ST_ARRAY_SEP : p->lone_object ? ST_END : sp->open ? ST_NEXT : ST_TEXT);
    return GO;
}

static int st_array_sep(npl_tool_parser *p, bool final)
{
    skip_ws(p);
    if (p->pos == p->len)
        return final ? degrade(p) : WAIT;
    char c = p->buf[p->pos];
    if (c == ',') {
        p->pos++;
        p->st = ST_CALL;
        return GO;
    }
    if (c == ']') {
        p->pos++;
        commit(p, ST_END);
        return GO;
    }
    return degrade(p);
}

static int st_end(npl_tool_parser *p, bool final)
{
    size_t save = p->pos;
    if (optional_lit(p, p->sp->end, final) == WAIT || settle(p, save, final) == WAIT)
        return WAIT;
    commit(p, ST_TEXT);
    return GO;
}

static int st_next(npl_tool_parser *p, bool final)
{
    skip_ws(p);
    if (p->pos == p->len)
        return final ? degrade(p) : WAIT;
    int o = lit_at(p, p->pos, p->sp->open), e = lit_at(p, p->pos, p->sp->end);
    if (o == 1) {
        p->pos += strlen(p->sp->open);
        p->st = ST_CALL;
        return GO;
    }
    if (e == 1) {
        p->pos += strlen(p->sp->end);
        commit(p, ST_TEXT);
        return GO;
    }
    if ((o == 0 || e == 0) && !final)
        return WAIT;
    return degrade(p);
}

static void run(npl_tool_parser *p, bool final)
{
    for (;;) {
        int r = WAIT;
        switch (p->st) {
        case ST_START: r = st_start(p, final); break;
        case ST_TEXT: r = st_text(p, final); break;
        case ST_WHOLE: r = st_whole(p, final); break;
        case ST_ARRAY_OPEN: r = st_array_open(p, final); break;
        case ST_CALL: r = st_call(p, final); break;
        case ST_ARGS: r = st_args(p, final); break;
        case ST_CALL_CLOSE: r = st_call_close(p, final); break;
        case ST_ARRAY_SEP: r = st_array_sep(p, final); break;
        case ST_NEXT: r = st_next(p, final); break;
        case ST_END: r = st_end(p, final); break;
        case ST_PYTHON:
            if (!final && p->len - p->mark > NPL_TOOL_CALL_MAX) {
                p->pos = p->len;
                r = degrade(p);
            } else if (final) {
                take_python(p);
                p->pos = p->mark = p->len;
                p->st = ST_TEXT;
            }
            break;
        }
        if (r == WAIT)
            return;
        if (final && p->st == ST_TEXT && p->pos == p->len && p->mark == p->len)
            return;
    }
}

npl_status npl_tool_parser_feed(npl_tool_parser *p, const char *text, size_t len, npl_error *err)
{
    if (!p || (!text && len))
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "tool parser: no parser or text");
    if (p->mark > 0) { /* drop what is decided */
        memmove(p->buf, p->buf + p->mark, p->len - p->mark);
        p->len -= p->mark;
        p->pos -= p->mark;
        p->mark = 0;
    }
    if (p->len + len + 1 > p->cap) {
        size_t cap = (p->len + len + 1) * 2;
        char *nb = realloc(p->buf, cap);
        if (!nb)
            return npl_error_set(err, NPL_ERR_NOMEM, "tool parser: out of memory");
        p->buf = nb;
        p->cap = cap;
    }
    if (len)
        memcpy(p->buf + p->len, text, len);
    p->len += len;
    p->buf[p->len] = 0;
    run(p, false);
    return NPL_OK;
}

npl_status npl_tool_parser_finish(npl_tool_parser *p, npl_error *err)
{
    if (!p)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "tool parser: no parser");
    run(p, true);
    text_out(p, p->mark, p->len); /* whatever is left undecided */
    p->pos = p->mark = p->len;
    return NPL_OK;
}
