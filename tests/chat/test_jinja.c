/* The Jinja engine on its own: each supported construct against the text
 * Jinja2 (as transformers configures it) renders, errors with line
 * numbers, every limit, and the caller-data mask. With a model
 * (argv[1], a tiny Llama whose template raises): the fallback to the
 * built-in format.
 *
 *   test_jinja [BROKEN_TEMPLATE_MODEL.gguf] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_prompt.h"
#include "chat_template.h"
#include "jinja.h"
#include "npl_test.h"

static const struct tm FIXED_DAY = {.tm_year = 124, .tm_mon = 6, .tm_mday = 26, .tm_wday = 5};

/* Renders src with vars (JSON object) and data (JSON object, caller data). */
static npl_status render(const char *src, const char *vars, const char *data, const npl_jinja_limits *lim,
                         npl_jinja_output *out, npl_error *err)
{
    npl_jinja_template *t = npl_jinja_parse(src, strlen(src), lim, err);
    if (!t) {
        memset(out, 0, sizeof *out);
        return err->code;
    }
    npl_status st = npl_jinja_render(t, vars, data, &FIXED_DAY, out, err);
    npl_jinja_free(t);
    return st;
}

static void expect(const char *src, const char *vars, const char *want)
{
    npl_jinja_output o;
    npl_error err = {0};
    npl_status st = render(src, vars, NULL, NULL, &o, &err);
    CHECKF(st == NPL_OK && strcmp(o.text, want) == 0, "%s\n  got %s (%s)\n  want %s", src,
          st ? "error" : o.text, err.message, want);
    npl_jinja_output_free(&o);
}

static void expect_error(const char *src, const char *vars, const char *msg_part)
{
    npl_jinja_output o;
    npl_error err = {0};
    npl_status st = render(src, vars, NULL, NULL, &o, &err);
    CHECKF(st == NPL_ERR_FORMAT && strstr(err.message, msg_part), "%s: got %d '%s', want error with '%s'", src, st,
          err.message, msg_part);
    npl_jinja_output_free(&o);
}

static void case_syntax(void)
{
    /* output, literals, operators */
    expect("a{{ 1 + 2 * 3 }}b", NULL, "a7b");
    expect("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }}", NULL, "3 -4 1 2 3.5 1024");
    expect("{{ 'a' ~ 1 ~ none ~ true }}|{{ 'x' + \"y\" }}|{{ 'ab' * 3 }}", NULL, "a1NoneTrue|xy|ababab");
    expect("{{ 0.1 }} {{ 1.0 }} {{ 1e16 }} {{ 0.0001 }} {{ 1e-5 }} {{ 2.5e-3 }}", NULL, "0.1 1.0 1e+16 0.0001 1e-05 0.0025");
    expect("{{ [1, 'a', none] }} {{ {'k': 'v', 'n': 1} }} {{ (1, 2) }}", NULL, "[1, 'a', None] {'k': 'v', 'n': 1} [1, 2]");
    expect("{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ 2 in [1, 2] }} {{ 'b' in 'abc' }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }}",
           NULL, "True True True True True True");
    expect("{{ not true or false and true }} {{ 1 if false }}|{{ 'y' if 1 else 'n' }}", NULL, "False |y");
    expect("{{ x.y }}{{ x['y'] }}{{ x.z is defined }}", "{\"x\": {\"y\": 5}}", "55False");
    /* slicing, by characters */
    expect("{{ 'héllo'[::-1] }} {{ 'abcdef'[1:4] }} {{ 'abcdef'[-2:] }} {{ [1,2,3,4][::2] }} {{ 'abc'[1] }}", NULL,
           "olléh bcd ef [1, 3] b");
    /* whitespace control, trim_blocks, lstrip_blocks */
    expect("a  {%- if true -%}  b  {%- endif -%}  c", NULL, "abc");
    expect("{% if true %}\nyes\n{% endif %}\nend", NULL, "yes\nend");
    expect("x\n    {% if true %}\n    y\n    {% endif %}\nz", NULL, "x\n    y\nz");
    expect("x {%+ if true %}y{% endif %}", NULL, "x y");
    expect("{# a comment #}\nA{{ 'B' }}{# another -#}   C", NULL, "ABC");
    expect("{% raw %}{{ not rendered }}{% endraw %}", NULL, "{{ not rendered }}");
    expect("one trailing newline is dropped\n\n", NULL, "one trailing newline is dropped\n");
    /* if / elif / else */
    expect("{% for i in [1, 2, 3] %}{% if i == 1 %}one{% elif i == 2 %}two{% else %}many{% endif %},{% endfor %}",
           NULL, "one,two,many,");
    /* for: loop variables, else, filter, unpacking, break/continue */
    expect("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
           "{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}", NULL,
           "1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|");
    expect("{% for x in [] %}x{% else %}empty{% endfor %}", NULL, "empty");
    expect("{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.last }}{% endfor %}", NULL, "2False4True");
    expect("{% for k, v in {'a': 1, 'b': 2} | items %}{{ k }}={{ v }};{% endfor %}", NULL, "a=1;b=2;");
    expect("{% for k, v in {'a': 1}.items() %}{{ k }}{{ v }}{% endfor %}", NULL, "a1");
    expect("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}"
           "{{ x }}{% endfor %}", NULL, "013");
    expect("{% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }}|{{ loop.cycle('a', 'b') }}|{% endfor %}",
           NULL, "-2|a|1-3|b|2-|a|");
    /* set, scoping and namespace */
    expect("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", NULL, "1");
    expect("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}", NULL,
           "4");
    expect("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set blk %}in{{ a }}{% endset %}[{{ blk }}]", NULL, "12[in1]");
    expect("{% if true %}{% set y = 'leaks' %}{% endif %}{{ y }}", NULL, "leaks");
    /* macros */
    expect("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} "
           "{{ greet('B', '?') }} {{ greet(name='C', punct='.') }}", NULL, "Hi A! Hi B? Hi C.");
    expect("{% set g = 'global' %}{% macro m() %}{{ g }}{% endmacro %}{{ m() }}", NULL, "global");
    /* tests */
    expect("{{ none is none }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is mapping }}{{ x is defined }}"
           "{{ 3 is odd }}{{ 1 is number }}{{ [] is iterable }}{{ true is boolean }}{{ 6 is divisibleby 3 }}"
           "{{ 'a' is not none }}", NULL, "TrueTrueTrueFalseFalseTrueTrueTrueTrueTrueTrue");
    /* string methods */
    expect("[{{ '  a b  '.strip() }}][{{ 'xxaxx'.strip('x') }}][{{ '  a'.lstrip() }}][{{ 'a  '.rstrip() }}]", NULL,
           "[a b][a][a][a]");
    expect("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }}", NULL,
           "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c']");
    expect("{{ 'Hello'.startswith('He') }}{{ 'Hello'.endswith(('x', 'lo')) }}{{ 'aBc'.upper() }}{{ 'aBc'.lower() }}"
           "{{ 'hello wORLD'.title() }}{{ 'a-a'.replace('a', 'b') }}{{ 'hello'.capitalize() }}", NULL,
           "TrueTrueABCabcHello Worldb-bHello");
    /* the searching methods, as Python: overlaps, empty needles, counts */
    expect("{{ 'a-b-c'.replace('-', '+', 1) }} {{ 'ab'.replace('', '-') }} {{ 'aaa'.replace('a', 'b', 0) }} "
           "{{ 'abcabc'.rfind('bc') }} {{ 'abc'.rfind('') }} {{ 'abc'.find('') }} {{ 'abc'.find('x') }} "
           "{{ 'aaaa'.count('aa') }} {{ 'ab'.count('') }} {{ 'a,b,,c'.split(',', 2) }} {{ 'xaxbx'.split('x') }} "
           "{{ 'bc' in 'abcd' }} {{ '' in 'a' }} {{ 'ca' in 'abc' }} {{ 'b' is in 'abc' }}", NULL,
           "a+b-c -a-b- aaa 4 3 0 -1 2 3 ['a', 'b', ',c'] ['', 'a', 'b', ''] True True False True");
    /* filters */
    expect("{{ {'b': [1, {'c': 'é\"\\n'}], 'a': none, 't': true, 'f': 1.5} | tojson }}", NULL,
           "{\"b\": [1, {\"c\": \"é\\\"\\n\"}], \"a\": null, \"t\": true, \"f\": 1.5}");
    expect("{{ {'a': [1, 2], 'e': {}} | tojson(indent=2) }}", NULL, "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"e\": {}\n}");
    expect("{{ {'b': 'é😀', 'a': 1} | tojson(ensure_ascii=true, sort_keys=true) }}", NULL,
           "{\"a\": 1, \"b\": \"\\u00e9\\ud83d\\ude00\"}");
    expect("{{ '  x \\n' | trim }}|{{ [1, 2] | length }}|{{ 'héllo' | length }}|{{ u | default('d') }}|"
           "{{ '' | default('d', true) }}|{{ [1, 2] | join('-') }}|{{ 'ab' | list }}|{{ [1, 2] | first }}"
           "{{ [1, 2] | last }}|{{ 5 | string }}{{ '7' | int + 1 }}", NULL, "x|2|5|d|d|1-2|['a', 'b']|12|58");
    expect("{% set ms = [{'role': 'system', 'c': 1}, {'role': 'user', 'c': 2}, {'role': 'user', 'c': 3}] %}"
           "{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='c') | list }}"
           "{{ ms | rejectattr('role', 'equalto', 'user') | map(attribute='c') | list }}"
           "{{ ms | map(attribute='role') | unique | list }}", NULL, "[2, 3][1]['system', 'user']");
    expect("{{ 'a\\nb' | indent(2) }}|{{ [3, 1] | reverse | list }}|{{ 'ab' | upper }}", NULL, "a\n  b|[1, 3]|AB");
    /* dict methods and strftime_now */
    expect("{{ d.get('a') }}{{ d.get('z', 0) }}{{ d.keys() | list }}{{ d.values() | list }}", "{\"d\": {\"a\": 1}}",
           "10['a'][1]");
    expect("{{ strftime_now('%d %b %Y') }}", NULL, "26 Jul 2024");
    /* unicode escapes in literals */
    expect("{{ '\\u00e9\\x41\\t' }}", NULL, "éA\t");
    /* generation blocks are transparent */
    expect("{% generation %}gen{% endgeneration %}", NULL, "gen");
}

static void case_errors(void)
{
    expect_error("{% if true %}never closed", NULL, "expected endif");
    expect_error("line1\n{{ 1 + }}", NULL, "line 2");
    expect_error("{% unknown %}", NULL, "unknown statement");
    expect_error("{{ raise_exception('no way') }}", NULL, "raised: no way");
    expect_error("{{ 1 / 0 }}", NULL, "division by zero");
    expect_error("{{ x.y.z }}", NULL, "undefined");
    expect_error("{{ 'a' | nosuchfilter }}", NULL, "unknown filter");
    expect_error("{{ 9223372036854775807 + 1 }}", NULL, "overflow");
    expect_error("{{ 'abc' ", NULL, "not closed");
    expect_error("{% set x = 1 %}{% set x.y = 2 %}", NULL, "namespace");
    /* Methods called with too few arguments fail with a message (fuzz-found: join). */
    expect_error("{{ ','.join() }}", NULL, "needs an iterable");
    expect_error("{{ 'a'.startswith() }}", NULL, "needs a string");
    expect_error("{{ 'a'.replace('a') }}", NULL, "needs a string");
    expect_error("{{ 'a'.find() }}", NULL, "needs a string");
    expect_error("{{ {}.get() }}", NULL, "needs a string");
    /* bad template variables are errors too, not crashes */
    npl_jinja_output o;
    npl_error err = {0};
    CHECKF(render("x", "{\"a\": [1, }", NULL, NULL, &o, &err) == NPL_ERR_FORMAT, "bad JSON: %s", err.message);
}

static void case_limits(void)
{
    npl_jinja_limits lim;
    npl_jinja_limits_default(&lim);
    npl_jinja_output o;
    npl_error err = {0};
    /* time: a loop that would run for ages (the steps stop it, not the
     * clock, on a machine of any speed) */
    lim.max_time_ms = 0;
    npl_status st = render("{% set r = range(2000) %}{% for i in r %}{% for j in r %}{% for k in r %}{% endfor %}"
                           "{% endfor %}{% endfor %}", NULL, NULL, &lim, &o, &err);
    CHECKF(st == NPL_ERR_FORMAT && strstr(err.message, "steps"), "%s", err.message);
    /* output size */
    lim.max_output = 1000;
    st = render("{% for i in range(1000) %}xxxxxxxx{% endfor %}", NULL, NULL, &lim, &o, &err);
    CHECKF(st == NPL_ERR_FORMAT && strstr(err.message, "output"), "%s", err.message);
    st = render("{{ 'x' * 100000 }}", NULL, NULL, &lim, &o, &err);
    CHECKF(st == NPL_ERR_FORMAT, "%s", err.message);
    /* string work is charged by the bytes it touches (issue #34): comparing
     * two 3 MB strings in a loop, or searching one, is stopped by the step
     * budget long before its million iterations'... */
    size_t big = 3u << 20;
    char *data = malloc(2 * big + 64);
    CHECK(data != NULL);
    if (!data)
        return;
    size_t n = (size_t)sprintf(data, "{\"a\": \"");
    memset(data + n, 'x', big);
    n += big;
    n += (size_t)sprintf(data + n, "\", \"b\": \"");
    memset(data + n, 'x', big - 1);
    n += big - 1;
    sprintf(data + n, "y\"}");
    npl_jinja_limits_default(&lim);
    lim.max_time_ms = 0; /* the steps must stop it, whatever the machine's speed */
    lim.max_steps = 2000000; /* a tenth of the default: the test stays quick */
    static const char *const hostile[] = {
        "{% set r = range(1000) %}{% for i in r %}{% for j in r %}{% if a == b %}{% endif %}{% endfor %}{% endfor %}",
        "{% set r = range(1000) %}{% for i in r %}{% for j in r %}{% if b in a %}{% endif %}{% endfor %}{% endfor %}",
        "{% set r = range(1000) %}{% for i in r %}{% for j in r %}{% if a.find(b) > 0 %}{% endif %}{% endfor %}{% endfor %}",
        "{% set r = range(1000) %}{% for i in r %}{% for j in r %}{% if a.startswith(a) %}{% endif %}{% endfor %}{% endfor %}",
    };
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        st = render(hostile[i], NULL, data, &lim, &o, &err);
        CHECKF(st == NPL_ERR_FORMAT && strstr(err.message, "max_steps"), "%s: %s", hostile[i], err.message);
    }
    /* ... and by the wall-clock deadline when the steps are unbounded */
    lim.max_steps = UINT64_MAX;
    lim.max_time_ms = 100;
    st = render(hostile[0], NULL, data, &lim, &o, &err);
    CHECKF(st == NPL_ERR_FORMAT && strstr(err.message, "max_time_ms"), "%s", err.message);
    npl_jinja_limits_default(&lim);
    CHECK(lim.max_time_ms == NPL_JINJA_DEFAULT_TIME_MS);
    free(data);
    /* recursion */
    npl_jinja_limits_default(&lim);
    st = render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, NULL, &lim, &o, &err);
    CHECKF(st == NPL_ERR_FORMAT && strstr(err.message, "deep"), "%s", err.message);
    /* memory */
    lim.max_memory = 1 << 20;
    st = render("{% set ns = namespace(l=[]) %}{% for i in range(1000000) %}{% set ns.l = ns.l + [i] %}{% endfor %}",
                NULL, NULL, &lim, &o, &err);
    CHECKF(st == NPL_ERR_FORMAT && strstr(err.message, "memory"), "%s", err.message);
    /* parse nesting */
    char deep[4000];
    size_t k = 0;
    k += (size_t)sprintf(deep, "{{ ");
    for (int i = 0; i < 1000; i++)
        deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 1000; i++)
        deep[k++] = ')';
    strcpy(deep + k, " }}");
    npl_jinja_limits_default(&lim);
    st = render(deep, NULL, NULL, &lim, &o, &err);
    CHECKF(st == NPL_ERR_FORMAT && strstr(err.message, "nested"), "%s", err.message);
}

/* Caller data is marked byte by byte, through filters and concatenation. */
static void case_mask(void)
{
    npl_jinja_output o;
    npl_error err = {0};
    npl_status st = render("<|a|>{{ m[0].content | trim }}<|b|>{{ '[' + m[0].content[1:3] + ']' }}", NULL,
                           "{\"m\": [{\"content\": \" xyz \"}]}", NULL, &o, &err);
    CHECKF(st == NPL_OK && strcmp(o.text, "<|a|>xyz<|b|>[xy]") == 0, "%s", st ? err.message : o.text);
    if (st == NPL_OK) {
        const char *want = "00000111000000110";
        for (size_t i = 0; i < o.len; i++)
            CHECKF(o.mask[i] == (want[i] == '1'), "mask at %zu", i);
    }
    npl_jinja_output_free(&o);
}

/* A model whose template raises gets the built-in format, same ids as
 * npl_chat_build_tokens, and a prompt all the same. */
static void case_fallback(const char *path)
{
    npl_model_params mp;
    npl_model_params_default(&mp);
    npl_error err = {0};
    npl_model *m = npl_model_load(path, &mp, &err);
    CHECKF(m != NULL, "%s: %s", path, err.message);
    if (!m)
        return;
    npl_chat_message msgs[] = {{"system", "S"}, {"user", "Hi"}};
    npl_tokens a = {0}, b = {0};
    for (int round = 0; round < 2; round++) { /* the second time nothing is logged */
        a.n = 0;
        CHECKF(npl_chat_tokenize(m, msgs, 2, true, &a, &err) == NPL_OK, "%s", err.message);
    }
    CHECKF(npl_chat_build_tokens(npl_model_tokenizer(m), npl_model_get_info(m)->chat_format, msgs, 2, true, &b,
                                &err) == NPL_OK, "%s", err.message);
    CHECKF(a.n > 0 && a.n == b.n && memcmp(a.ids, b.ids, a.n * sizeof *a.ids) == 0, "fallback ids");
    char *prompt = NULL;
    a.n = 0;
    npl_chat_options o = {.add_generation_prompt = true, .enable_thinking = -1, .tools_in_user_message = -1};
    CHECKF(npl_chat_tokenize_json(m, "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hi\"}]}]", &o,
                                 &a, &prompt, &err) == NPL_OK, "%s", err.message);
    CHECKF(prompt && strstr(prompt, "Hi<|eot_id|>"), "prompt %s", prompt ? prompt : "(none)");
    free(prompt);
    CHECKF(npl_chat_tokenize_json(m, "{\"role\": \"user\"}", &o, &a, NULL, &err) == NPL_ERR_INVALID_ARG, "not a list");
    CHECKF(npl_chat_tokenize_json(m, "[{\"content\": \"x\"}]", &o, &a, NULL, &err) == NPL_ERR_INVALID_ARG, "no role");
    o.tools_json = "{}";
    CHECKF(npl_chat_tokenize_json(m, "[]", &o, &a, NULL, &err) == NPL_ERR_INVALID_ARG, "tools not a list");
    npl_tokens_free(&a);
    npl_tokens_free(&b);
    npl_model_free(m);
}

int main(int argc, char **argv)
{
    case_syntax();
    case_errors();
    case_limits();
    case_mask();
    if (argc > 1)
        case_fallback(argv[1]);
    return nt_report("test_jinja");
}
