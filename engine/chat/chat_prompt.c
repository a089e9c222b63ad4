/* Chat prompts from the model's own template (see chat_prompt.h). */
#include "chat_prompt.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"
#include "npl_buf.h"

npl_status npl_json_append_str(npl_buf *b, const char *s, npl_error *err)
{
    npl_status st = npl_buf_append(b, "\"", 1, err);
    for (const unsigned char *p = (const unsigned char *)s; st == NPL_OK && *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            st = npl_buf_append(b, e, 2, err);
        } else if (*p < 0x20) {
            st = npl_buf_appendf(b, err, "\\u%04x", *p);
        } else {
            st = npl_buf_append(b, p, 1, err);
        }
    }
    return st ? st : npl_buf_append(b, "\"", 1, err);
}

char *npl_chat_turn_json(const char *system, const char *user_text, bool image_first)
{
    npl_buf b = {0};
    npl_status st = npl_buf_append(&b, "[", 1, NULL);
    if (!st && system) {
        st = npl_buf_appendf(&b, NULL, "{\"role\": \"system\", \"content\": ");
        if (!st)
            st = npl_json_append_str(&b, system, NULL);
        if (!st)
            st = npl_buf_append(&b, "}, ", 3, NULL);
    }
    if (!st)
        st = npl_buf_appendf(&b, NULL, "{\"role\": \"user\", \"content\": %s",
                             image_first ? "[{\"type\": \"image\"}, {\"type\": \"text\", \"text\": " : "");
    if (!st)
        st = npl_json_append_str(&b, user_text, NULL);
    if (!st)
        st = npl_buf_appendf(&b, NULL, "%s}]", image_first ? "}]" : "");
    if (st) {
        npl_buf_free(&b);
        return NULL;
    }
    return b.data;
}

void npl_chat_now(struct tm *out)
{
    const char *fixed = getenv("NPULLM_CHAT_DATE");
    int y, mo, d;
    char tail;
    if (fixed && sscanf(fixed, "%d-%d-%d%c", &y, &mo, &d, &tail) == 3 && y >= 1900 && y <= 9999 && mo >= 1 &&
        mo <= 12 && d >= 1 && d <= 31) {
        struct tm t = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = 12};
        time_t tt = timegm(&t); /* normalises and fills the weekday */
        gmtime_r(&tt, out);
        out->tm_hour = out->tm_min = out->tm_sec = 0;
        return;
    }
    time_t now = time(NULL);
    localtime_r(&now, out);
}

/* A string holding a JSON object, parsed; else the value as it is. */
static jv object_from_string(jarena *a, jv v)
{
    if (v.k != JV_STR)
        return v;
    jmp_buf jb, *outer = a->on_fail;
    a->on_fail = &jb;
    if (setjmp(jb)) { /* not JSON */
        a->on_fail = outer;
        return v;
    }
    jv obj = jv_from_json(a, v.u.s.s, v.u.s.n, false);
    a->on_fail = outer;
    return obj.k == JV_DICT ? obj : v;
}

/* The conversation as llama.cpp hands it to templates. OpenAI clients send
 * tool-call arguments as a JSON string, templates expect the object
 * (transformers' convention; llama.cpp turns such strings into objects
 * too). With empty_null_content, a null "content" (what OpenAI clients send
 * beside tool_calls) becomes "", for the templates that cannot take null.
 * The messages changed (malloc'd), or NULL when nothing changes or the JSON
 * does not parse. */
enum { NORM_NULL_CONTENT = 1, NORM_STRING_ARGUMENTS = 2, NORM_MERGE_SYSTEM = 4 };

/* A leading system message merged into the next user message ("SYSTEM\nUSER"),
 * for templates that refuse the system role (Gemma 2). */
static bool merge_system(jarena *a, jv *l)
{
    if (l->k != JV_LIST || l->u.l->n < 2)
        return false;
    const jv *m0 = &l->u.l->v[0], *m1 = &l->u.l->v[1];
    if (m0->k != JV_DICT || m1->k != JV_DICT)
        return false;
    const jv *r0 = jdict_get(m0->u.d, "role", 4), *c0 = jdict_get(m0->u.d, "content", 7);
    const jv *r1 = jdict_get(m1->u.d, "role", 4), *c1 = jdict_get(m1->u.d, "content", 7);
    if (!r0 || !jv_is_str(r0, "system") || !r1 || !jv_is_str(r1, "user") || !c0 || c0->k != JV_STR || !c1 ||
        c1->k != JV_STR)
        return false;
    jsb b;
    jsb_init(&b, a, 0);
    jsb_addstr(&b, c0->u.s);
    jsb_addc(&b, "\n");
    jsb_addstr(&b, c1->u.s);
    jdict_set(a, m1->u.d, (jstr){.s = "content", .n = 7}, (jv){.k = JV_STR, .u.s = jsb_done(&b)});
    l->u.l->v++;
    l->u.l->n--;
    return true;
}

/* json.dumps(v, separators=(",", ":")) as a string value. */
static jv compact_json(jarena *a, const jv *v)
{
    jsb b, c;
    jsb_init(&b, a, 0);
    jsb_init(&c, a, 0);
    jjson_opts o = {.indent = -1};
    jv_to_json(&b, v, &o, 0);
    jstr t = jsb_done(&b);
    bool in_str = false, esc = false;
    for (size_t i = 0; i < t.n; i++) {
        char ch = t.s[i];
        if (in_str) {
            if (esc)
                esc = false;
            else if (ch == '\\')
                esc = true;
            else if (ch == '"')
                in_str = false;
        } else if (ch == '"') {
            in_str = true;
        } else if (ch == ' ' && i > 0 && (t.s[i - 1] == ',' || t.s[i - 1] == ':')) {
            continue;
        }
        jsb_add(&c, t.s + i, 1, NULL);
    }
    return (jv){.k = JV_STR, .u.s = jsb_done(&c)};
}

static char *normalize_messages(const char *messages_json, int mode)
{
    if (!messages_json || (!strstr(messages_json, "\"arguments\"") && !mode))
        return NULL;
    bool empty_null_content = mode & NORM_NULL_CONTENT;
    jarena a;
    jmp_buf jb;
    char msg[128];
    char *volatile out = NULL;
    jarena_init(&a, 64u << 20, &jb, msg, sizeof msg);
    if (!setjmp(jb)) {
        jv l = jv_from_json(&a, messages_json, strlen(messages_json), false);
        bool changed = (mode & NORM_MERGE_SYSTEM) && merge_system(&a, &l);
        for (size_t i = 0; l.k == JV_LIST && i < l.u.l->n; i++) {
            const jv *m = &l.u.l->v[i];
            const jv *content = m->k == JV_DICT ? jdict_get(m->u.d, "content", 7) : NULL;
            if (empty_null_content && content && content->k == JV_NONE) {
                jdict_set(&a, m->u.d, (jstr){.s = "content", .n = 7}, jv_cstr(""));
                changed = true;
            }
            const jv *calls = m->k == JV_DICT ? jdict_get(m->u.d, "tool_calls", 10) : NULL;
            for (size_t k = 0; calls && calls->k == JV_LIST && k < calls->u.l->n; k++) {
                const jv *c = &calls->u.l->v[k];
                const jv *fn = c->k == JV_DICT ? jdict_get(c->u.d, "function", 8) : NULL;
                const jv *args = fn && fn->k == JV_DICT ? jdict_get(fn->u.d, "arguments", 9) : NULL;
                if (!args)
                    continue;
                if (mode & NORM_STRING_ARGUMENTS) { /* a string stays as the caller wrote it */
                    if (args->k == JV_DICT) {
                        jdict_set(&a, fn->u.d, (jstr){.s = "arguments", .n = 9}, compact_json(&a, args));
                        changed = true;
                    }
                    continue;
                }
                jv obj = object_from_string(&a, *args);
                if (args->k == JV_STR && obj.k == JV_DICT) {
                    jdict_set(&a, fn->u.d, (jstr){.s = "arguments", .n = 9}, obj);
                    changed = true;
                }
            }
        }
        if (changed) {
            jsb b;
            jsb_init(&b, &a, 0);
            jjson_opts o = {.indent = -1};
            jv_to_json(&b, &l, &o, 0);
            jstr t = jsb_done(&b);
            out = malloc(t.n + 1);
            if (out) {
                memcpy(out, t.s, t.n);
                out[t.n] = 0;
            }
        }
    }
    jarena_free(&a);
    return out;
}

/* Renders with the conversation normalized (tool-call arguments as objects),
 * or as given in `normalized` when not NULL. */
static npl_status render_messages(const npl_jinja_template *t, const char *vars, const char *messages_json,
                                  const char *normalized, const npl_chat_options *o, const struct tm *now,
                                  npl_jinja_output *out, npl_error *err)
{
    char *own = normalized ? NULL : normalize_messages(messages_json, 0);
    const char *messages = normalized ? normalized : own ? own : messages_json ? messages_json : "[]";
    npl_buf data = {0};
    npl_status st = npl_buf_appendf(&data, err, "{\"messages\": %s", messages);
    free(own);
    if (!st && o->tools_json)
        st = npl_buf_appendf(&data, err, ", \"tools\": %s", o->tools_json);
    if (!st)
        st = npl_buf_append(&data, "}", 1, err);
    if (!st)
        st = npl_jinja_render(t, vars, data.data, now, out, err);
    npl_buf_free(&data);
    return st;
}

/* The conversation opens with a system message that the template drops
 * without a word (Mistral 7B v0.3): probed as llama.cpp probes a
 * template's system role, with a marker it must print, as a string or
 * (templates that read content[0].text, Gemma 3 1B) as typed content. */
static bool system_ignored(const npl_jinja_template *t, const char *vars, const char *messages_json,
                           const struct tm *now)
{
    static const char *const probes[] = {
        "[{\"role\": \"system\", \"content\": \"<npl-system-probe>\"}, {\"role\": \"user\", \"content\": \"Hey\"}]",
        "[{\"role\": \"system\", \"content\": [{\"type\": \"text\", \"text\": \"<npl-system-probe>\"}]}, "
        "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hey\"}]}]",
    };
    if (!messages_json || !strstr(messages_json, "system"))
        return false;
    jarena a;
    jmp_buf jb;
    char msg[128];
    volatile bool leading = false;
    jarena_init(&a, 64u << 20, &jb, msg, sizeof msg);
    if (!setjmp(jb)) {
        jv l = jv_from_json(&a, messages_json, strlen(messages_json), false);
        const jv *m0 = l.k == JV_LIST && l.u.l->n > 1 ? &l.u.l->v[0] : NULL;
        const jv *r0 = m0 && m0->k == JV_DICT ? jdict_get(m0->u.d, "role", 4) : NULL;
        leading = r0 && jv_is_str(r0, "system");
    }
    jarena_free(&a);
    if (!leading)
        return false;
    npl_chat_options plain = {.add_generation_prompt = true, .enable_thinking = -1, .tools_in_user_message = -1};
    /* a probe the template refuses says nothing; one that prints the marker, that it is used */
    bool rendered = false, shown = false;
    for (size_t i = 0; i < sizeof probes / sizeof probes[0] && !shown; i++) {
        npl_jinja_output o;
        memset(&o, 0, sizeof o);
        if (render_messages(t, vars, probes[i], probes[i], &plain, now, &o, NULL) == NPL_OK && o.text) {
            rendered = true;
            shown = strstr(o.text, "<npl-system-probe>") != NULL;
        }
        npl_jinja_output_free(&o);
    }
    return rendered && !shown;
}

npl_status npl_chat_render(const npl_chat_render_in *in, npl_jinja_output *out, npl_error *err)
{
    memset(out, 0, sizeof *out);
    npl_chat_options def = {.add_generation_prompt = true, .enable_thinking = -1, .tools_in_user_message = -1};
    const npl_chat_options *o = in->opts ? in->opts : &def;
    struct tm now_local;
    const struct tm *now = in->now;
    if (!now) {
        npl_chat_now(&now_local);
        now = &now_local;
    }
    /* date_string: what Llama 3.1+ templates print as "Today Date" (llama.cpp passes it too) */
    char date[32];
    if (!strftime(date, sizeof date, "%d %b %Y", now))
        date[0] = 0;
    npl_buf vars = {0};
    npl_status st = npl_buf_appendf(&vars, err, "{\"date_string\": \"%s\", \"bos_token\": ", date);
    if (!st)
        st = npl_json_append_str(&vars, in->bos_text ? in->bos_text : "", err);
    if (!st)
        st = npl_buf_append(&vars, ", \"eos_token\": ", 15, err);
    if (!st)
        st = npl_json_append_str(&vars, in->eos_text ? in->eos_text : "", err);
    if (!st)
        st = npl_buf_appendf(&vars, err, ", \"add_generation_prompt\": %s", o->add_generation_prompt ? "true" : "false");
    if (!st && o->enable_thinking >= 0)
        st = npl_buf_appendf(&vars, err, ", \"enable_thinking\": %s", o->enable_thinking ? "true" : "false");
    if (!st && o->reasoning_effort) {
        st = npl_buf_append(&vars, ", \"reasoning_effort\": ", 22, err);
        if (!st)
            st = npl_json_append_str(&vars, o->reasoning_effort, err);
    }
    if (!st && o->tools_in_user_message >= 0)
        st = npl_buf_appendf(&vars, err, ", \"tools_in_user_message\": %s", o->tools_in_user_message ? "true" : "false");
    if (!st)
        st = npl_buf_append(&vars, "}", 1, err);
    npl_jinja_template *t = NULL;
    if (!st)
        t = npl_jinja_parse(in->template_src, strlen(in->template_src), NULL, err);
    if (!st && !t)
        st = err ? err->code : NPL_ERR_FORMAT;
    char *merged = !st && system_ignored(t, vars.data, in->messages_json, now)
                       ? normalize_messages(in->messages_json, NORM_MERGE_SYSTEM)
                       : NULL;
    if (!st)
        st = render_messages(t, vars.data, in->messages_json, merged, o, now, out, err);
    free(merged);
    /* A template that fails on null content gets "", then also the arguments as
     * JSON strings (functionary concatenates them), then also the system message
     * merged into the first user turn (Gemma 2), as llama.cpp gives them. */
    npl_error first = err ? *err : (npl_error){0};
    for (int mode = NORM_NULL_CONTENT; st == NPL_ERR_FORMAT && t && mode <= 7; mode += 2) {
        char *retry = normalize_messages(in->messages_json, mode);
        if (retry)
            st = render_messages(t, vars.data, in->messages_json, retry, o, now, out, err);
        free(retry);
    }
    if (st == NPL_ERR_FORMAT && err)
        *err = first; /* the error of the conversation as given */
    npl_jinja_free(t);
    npl_buf_free(&vars);
    return st;
}

void npl_chat_special_text(const npl_tokenizer *tok, int32_t id, char *buf, size_t cap)
{
    buf[0] = 0;
    if (id < 0 || cap == 0)
        return;
    size_t n = npl_token_to_bytes(tok, id, true, buf, cap - 1);
    buf[n < cap - 1 ? n : cap - 1] = 0;
}

npl_status npl_chat_tokenize_rendering(const npl_tokenizer *tok, const npl_jinja_output *r, npl_tokens *out,
                                       npl_error *err)
{
    char bos[128];
    npl_chat_special_text(tok, npl_tokenizer_bos(tok), bos, sizeof bos);
    size_t nb = strlen(bos);
    /* llama.cpp's rule: no second BOS when the template wrote one */
    bool has_bos = nb && r->len >= nb && memcmp(r->text, bos, nb) == 0;
    for (size_t i = 0; has_bos && i < nb; i++)
        has_bos = !r->mask[i];
    unsigned flags = NPL_TOKENIZE_PARSE_SPECIAL | (has_bos ? 0 : NPL_TOKENIZE_ADD_BOS);
    return npl_tokenize_masked(tok, r->text, r->len, r->mask, flags, out, err);
}

/* ---- conversations as JSON -------------------------------------------------- */

void npl_chat_messages_free(npl_chat_messages *cm)
{
    if (!cm)
        return;
    for (size_t i = 0; i < cm->n; i++) {
        free((char *)cm->v[i].role);
        free((char *)cm->v[i].content);
    }
    free(cm->v);
    memset(cm, 0, sizeof *cm);
}

static char *dup_jstr(jstr s)
{
    char *d = malloc(s.n + 1);
    if (d) {
        memcpy(d, s.s, s.n);
        d[s.n] = 0;
    }
    return d;
}

npl_status npl_chat_messages_from_json(const char *messages_json, const char *tools_json, npl_chat_messages *cm,
                                       npl_error *err)
{
    memset(cm, 0, sizeof *cm);
    jarena a;
    jmp_buf jb;
    char msg[256] = "";
    jarena_init(&a, 64u << 20, &jb, msg, sizeof msg);
    if (setjmp(jb)) {
        jarena_free(&a);
        npl_chat_messages_free(cm);
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "messages: %s", msg);
    }
    if (tools_json && jv_from_json(&a, tools_json, strlen(tools_json), false).k != JV_LIST)
        jfail(&a, "tools must be a JSON array");
    jv l = jv_from_json(&a, messages_json ? messages_json : "", messages_json ? strlen(messages_json) : 0, false);
    if (l.k != JV_LIST)
        jfail(&a, "a JSON array of messages is expected");
    cm->v = calloc(l.u.l->n + 1, sizeof *cm->v);
    if (!cm->v)
        jfail(&a, "out of memory");
    for (size_t i = 0; i < l.u.l->n; i++) {
        const jv *m = &l.u.l->v[i];
        if (m->k != JV_DICT)
            jfail(&a, "message %zu is not an object", i);
        const jv *role = jdict_get(m->u.d, "role", 4), *content = jdict_get(m->u.d, "content", 7);
        if (!role || role->k != JV_STR)
            jfail(&a, "message %zu has no \"role\" string", i);
        jsb text;
        jsb_init(&text, &a, 0);
        if (content && content->k == JV_STR) {
            jsb_addstr(&text, content->u.s);
        } else if (content && content->k == JV_LIST) { /* parts: the text ones */
            for (size_t k = 0; k < content->u.l->n; k++) {
                const jv *p = &content->u.l->v[k];
                const jv *t = p->k == JV_DICT ? jdict_get(p->u.d, "text", 4) : NULL;
                if (p->k != JV_DICT)
                    jfail(&a, "message %zu: content parts must be objects", i);
                if (t && t->k == JV_STR)
                    jsb_addstr(&text, t->u.s);
            }
        } else if (content && content->k != JV_NONE) {
            jfail(&a, "message %zu: \"content\" must be a string, a list of parts or null", i);
        }
        cm->v[i].role = dup_jstr(role->u.s);
        cm->v[i].content = dup_jstr(jsb_done(&text));
        cm->n = i + 1;
        if (!cm->v[i].role || !cm->v[i].content)
            jfail(&a, "out of memory");
    }
    jarena_free(&a);
    return NPL_OK;
}
