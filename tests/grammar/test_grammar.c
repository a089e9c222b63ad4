/* The grammar engine: text format parser errors, matching, JSON Schema
 * compilation (accepted and refused outputs, errors naming the schema
 * path), and the token mask against token-by-token checks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "npl_test.h"
#include "npullm.h"

static npl_vocab_index *ascii_vocab(void)
{
    /* every printable ASCII character, some multi-character pieces, two
     * UTF-8 characters split across tokens, and an end token */
    static const char *const pieces[] = {
        "{\"", "\":", "\",", "\"}", "true", "false", "null", "ab", "abc", "\"a", "12", "-1", ".5", "é", "\xc3", "\xa9",
        "日本", "  ", "\\n", "\\u00e9", "\"]", "[{", "}]", "},{", "2024", "-01-", "T12:", "00:00Z", "\"\"", "e+1",
        /* characters of a string, then its end or an escape; tokens ending inside a character after whole ones */
        "ab\"", "abc\",", "日本\"", "é\"}", "ab\\n", "日\xe6", "日\xe6\x9d", "\xe6\x97",
    };
    size_t n_ascii = 126 - 32 + 1, n = n_ascii + sizeof pieces / sizeof pieces[0] + 1;
    const char **texts = calloc(n, sizeof *texts);
    size_t *lens = calloc(n, sizeof *lens);
    static char chars[128][2];
    size_t k = 0;
    for (int c = 32; c <= 126; c++, k++) {
        chars[c][0] = (char)c;
        texts[k] = chars[c];
        lens[k] = 1;
    }
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++, k++) {
        texts[k] = pieces[i];
        lens[k] = strlen(pieces[i]);
    }
    texts[k] = "</s>";
    lens[k] = 4;
    int32_t eog = (int32_t)k;
    npl_error err = {0};
    npl_vocab_index *vi = npl_vocab_index_from_texts(texts, lens, (uint32_t)n, &eog, 1, &err);
    free(texts);
    free(lens);
    return vi;
}

static npl_vocab_index *g_vi;

static npl_vocab_index *vocab(void)
{
    if (!g_vi)
        g_vi = ascii_vocab();
    return g_vi;
}

/* Does the grammar accept s as a complete output? */
static bool accepts(const npl_grammar *g, const char *s)
{
    npl_error err = {0};
    npl_grammar_matcher *m = npl_grammar_matcher_create(g, vocab(), &err);
    if (!m)
        return false;
    bool ok = npl_grammar_matcher_accept_bytes(m, s, strlen(s)) && npl_grammar_matcher_is_complete(m);
    npl_grammar_matcher_free(m);
    return ok;
}

static npl_grammar *text(const char *t)
{
    npl_error err = {0};
    npl_grammar *g = npl_grammar_compile_text(t, strlen(t), &err);
    if (!g)
        nt_note("grammar refused: %s", err.message);
    return g;
}

static npl_grammar *schema(const char *s)
{
    npl_error err = {0};
    npl_grammar *g = npl_grammar_compile_schema(s, strlen(s), &err);
    if (!g)
        nt_note("schema refused: %s", err.message);
    return g;
}

static void expect_text_error(const char *t, const char *needle)
{
    npl_error err = {0};
    npl_grammar *g = npl_grammar_compile_text(t, strlen(t), &err);
    CHECKF(!g && strstr(err.message, needle), "grammar %s: got '%s', expected '%s'", t, g ? "(compiled)" : err.message,
           needle);
    npl_grammar_free(g);
}

static void expect_schema_error(const char *s, const char *needle)
{
    npl_error err = {0};
    npl_grammar *g = npl_grammar_compile_schema(s, strlen(s), &err);
    CHECKF(!g && strstr(err.message, needle), "schema %s: got '%s', expected '%s'", s, g ? "(compiled)" : err.message,
           needle);
    npl_grammar_free(g);
}

static void test_text_format(void)
{
    npl_grammar *g = text("root ::= \"a\" b* (\"x\" | \"yz\")? [0-9]{2,3} .\n"
                          "b ::= [b-d] # comment\n");
    REQUIRE(g);
    CHECK(accepts(g, "a12!"));
    CHECK(accepts(g, "abcdx123é"));
    CHECK(accepts(g, "ayz99 "));
    CHECK(!accepts(g, "a1!"));     /* too few digits */
    CHECK(!accepts(g, "a1234!"));  /* too many */
    CHECK(!accepts(g, "ae12!"));   /* e not in [b-d] */
    CHECK(!accepts(g, "a12"));     /* incomplete */
    npl_grammar_free(g);

    g = text("root ::= [^a-z\\n]+ \"\\u00e9\\x41\\\"\"");
    REQUIRE(g);
    CHECK(accepts(g, "ÀB\xc3\xa9" "A\""));
    CHECK(!accepts(g, "ab\xc3\xa9" "A\""));
    npl_grammar_free(g);

    /* a right-recursive list stays flat and accepts long inputs */
    g = text("root ::= item (\",\" item)*\nitem ::= [a-z]+");
    REQUIRE(g);
    char big[4001];
    for (int i = 0; i < 4000; i++)
        big[i] = i % 2 ? ',' : 'q';
    big[3999] = 'q';
    big[4000] = 0;
    CHECK(accepts(g, big));
    npl_grammar_free(g);
}

static void test_text_errors(void)
{
    expect_text_error("root ::= \"a", "line 1, column 10: unterminated string literal");
    expect_text_error("root ::= a\n", "line 1, column 10: rule 'a' is used but not defined");
    expect_text_error("start ::= \"a\"", "no rule named 'root'");
    expect_text_error("root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice");
    expect_text_error("root ::= [b-a]", "range is backwards");
    expect_text_error("root ::= \"a\"{3,2}", "max below min");
    expect_text_error("root ::= \"a\"{1000}", "above 256 (the limit)");
    expect_text_error("root ::= root \"a\" | \"b\"", "left-recursive");
    expect_text_error("root ::= (\"a\"?)* \"b\"", "left-recursive");
    expect_text_error("root ::= (\"a\"", "'(' is not closed");
    expect_text_error("root ::= \"a\" )", "')' without '('");
    expect_text_error("root ::= \"\\q\"", "unknown escape");
    expect_text_error("root ::= \"a\" $", "unexpected character '$'");
    expect_text_error("= \"a\"", "expected a rule definition");
    /* nesting beyond the limit */
    char deep[300];
    strcpy(deep, "root ::= ");
    for (int i = 0; i < 70; i++)
        strcat(deep, "(");
    expect_text_error(deep, "nested deeper than 64 (the limit)");
}

static void test_json_any(void)
{
    npl_error err = {0};
    npl_grammar *g = npl_grammar_json_any(&err);
    REQUIRE(g);
    const char *good[] = {"{}", "[]", "1", "-0.5e+10", "\"a\\n\\u00e9 é\"", "{\"a\": [1, {\"b\": null}], \"c\": true}",
                          "[false, \"x\", 3.25]"};
    const char *bad[] = {"{", "[1,]", "01", "\"a", "{a: 1}", "tru", "\"\x01\"", "1.", "{\"a\" 1}"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECKF(accepts(g, good[i]), "json should accept %s", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECKF(!accepts(g, bad[i]), "json should refuse %s", bad[i]);
    npl_grammar_free(g);
}

static void test_schema_object(void)
{
    npl_grammar *g = schema("{\"type\":\"object\",\"properties\":{"
                            "\"name\":{\"type\":\"string\",\"maxLength\":5},"
                            "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":130},"
                            "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",1]},\"minItems\":1,\"maxItems\":2},"
                            "\"nick\":{\"type\":[\"string\",\"null\"]}},"
                            "\"required\":[\"name\",\"age\",\"tags\"],\"additionalProperties\":false}");
    REQUIRE(g);
    CHECK(accepts(g, "{\"name\":\"Ann\",\"age\":42,\"tags\":[\"a\"]}"));
    CHECK(accepts(g, "{\"name\": \"Ann\", \"age\": 130, \"tags\": [\"b\", 1], \"nick\": null}"));
    CHECK(accepts(g, "{\"name\":\"\",\"age\":0,\"tags\":[1],\"nick\":\"x\"}"));
    CHECK(!accepts(g, "{\"name\":\"Ann\",\"age\":131,\"tags\":[\"a\"]}"));
    CHECK(!accepts(g, "{\"name\":\"Ann\",\"age\":-1,\"tags\":[\"a\"]}"));
    CHECK(!accepts(g, "{\"name\":\"Annabel\",\"age\":4,\"tags\":[\"a\"]}"));
    CHECK(!accepts(g, "{\"name\":\"Ann\",\"age\":4,\"tags\":[]}"));
    CHECK(!accepts(g, "{\"name\":\"Ann\",\"age\":4,\"tags\":[\"a\",\"b\",1]}"));
    CHECK(!accepts(g, "{\"name\":\"Ann\",\"age\":4}"));
    CHECK(!accepts(g, "{\"age\":4,\"name\":\"Ann\",\"tags\":[1]}"));
    CHECK(!accepts(g, "{\"name\":\"Ann\",\"age\":4,\"tags\":[1],\"x\":1}"));
    npl_grammar_free(g);
}

static void test_schema_numbers(void)
{
    npl_grammar *g = schema("{\"type\":\"integer\",\"minimum\":-15,\"exclusiveMaximum\":1234}");
    REQUIRE(g);
    for (int v = -40; v < 1300; v++) {
        char b[16];
        snprintf(b, sizeof b, "%d", v);
        bool in = v >= -15 && v < 1234;
        CHECKF(accepts(g, b) == in, "integer %d: expected %s", v, in ? "accept" : "refuse");
        if (nt_failures())
            break;
    }
    CHECK(!accepts(g, "007"));
    CHECK(!accepts(g, "-0"));
    npl_grammar_free(g);

    g = schema("{\"type\":\"number\",\"minimum\":-2,\"maximum\":3}");
    REQUIRE(g);
    CHECK(accepts(g, "3"));
    CHECK(accepts(g, "2.999"));
    CHECK(accepts(g, "-1.5"));
    CHECK(accepts(g, "-2"));
    CHECK(accepts(g, "0.25"));
    CHECK(!accepts(g, "3.5"));
    CHECK(!accepts(g, "-2.5"));
    CHECK(!accepts(g, "4"));
    npl_grammar_free(g);

    g = schema("{\"type\":\"number\"}");
    REQUIRE(g);
    CHECK(accepts(g, "-12.5e-3"));
    CHECK(!accepts(g, "1e"));
    npl_grammar_free(g);
}

static void test_schema_strings(void)
{
    npl_grammar *g = schema("{\"type\":\"object\",\"properties\":{"
                            "\"d\":{\"type\":\"string\",\"format\":\"date\"},"
                            "\"t\":{\"type\":\"string\",\"format\":\"date-time\"},"
                            "\"u\":{\"type\":\"string\",\"format\":\"uuid\"},"
                            "\"p\":{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}(x|yz)?$\"},"
                            "\"q\":{\"type\":\"string\",\"pattern\":\"ab\"},"
                            "\"c\":{\"const\":{\"k\":[1,2]}}},"
                            "\"required\":[\"d\",\"t\",\"u\",\"p\",\"q\",\"c\"]}");
    REQUIRE(g);
    const char *ok = "{\"d\":\"2024-02-28\",\"t\":\"2024-12-31T23:59:59.5+01:00\","
                     "\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"p\":\"AB-123yz\",\"q\":\"xxabyy\",\"c\":{\"k\": [1, 2]}}";
    CHECK(accepts(g, ok));
    const char *bad[] = {
        "{\"d\":\"2024-02-30\",\"t\":\"2024-12-31T23:59:59Z\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"p\":\"AB-123\",\"q\":\"ab\",\"c\":{\"k\": [1, 2]}}",
        "{\"d\":\"2024-02-28\",\"t\":\"2024-12-31T24:00:00Z\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"p\":\"AB-123\",\"q\":\"ab\",\"c\":{\"k\": [1, 2]}}",
        "{\"d\":\"2024-02-28\",\"t\":\"2024-12-31T23:59:59Z\",\"u\":\"123e4567-e89b-12d3-a456-42661417400\",\"p\":\"AB-123\",\"q\":\"ab\",\"c\":{\"k\": [1, 2]}}",
        "{\"d\":\"2024-02-28\",\"t\":\"2024-12-31T23:59:59Z\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"p\":\"Ab-123\",\"q\":\"ab\",\"c\":{\"k\": [1, 2]}}",
        "{\"d\":\"2024-02-28\",\"t\":\"2024-12-31T23:59:59Z\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"p\":\"AB-123\",\"q\":\"a b\",\"c\":{\"k\": [1, 2]}}",
        "{\"d\":\"2024-02-28\",\"t\":\"2024-12-31T23:59:59Z\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"p\":\"AB-123\",\"q\":\"ab\",\"c\":{\"k\":[1,2]}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECKF(!accepts(g, bad[i]), "should refuse #%zu", i);
    npl_grammar_free(g);
}

static void test_schema_refs(void)
{
    npl_grammar *g = schema("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{"
                            "\"v\":{\"type\":\"boolean\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},"
                            "\"required\":[\"v\"],\"additionalProperties\":false}},"
                            "\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}");
    REQUIRE(g);
    CHECK(accepts(g, "null"));
    CHECK(accepts(g, "{\"v\":true,\"kids\":[{\"v\":false},{\"v\":true,\"kids\":[]}]}"));
    CHECK(!accepts(g, "{\"kids\":[]}"));
    npl_grammar_free(g);
}

static void test_schema_errors(void)
{
    expect_schema_error("{\"type\":\"object\",\"properties\":{\"age\":{\"type\":\"int\"}}}",
                        "/properties/age/type: unknown type 'int'");
    expect_schema_error("{\"properties\":{\"a\":{\"allOf\":[{}]}}}", "/properties/a/allOf: 'allOf' is not supported");
    expect_schema_error("{\"type\":\"string\",\"format\":\"email\"}", "/format: format 'email' is not supported");
    expect_schema_error("{\"type\":\"string\",\"pattern\":\"a(b\"}", "/pattern: pattern: '(' is not closed");
    expect_schema_error("{\"type\":\"array\",\"maxItems\":1000}", "above 256");
    expect_schema_error("{\"$ref\":\"#/$defs/missing\"}", "/$ref: reference '#/$defs/missing' does not resolve");
    expect_schema_error("{\"type\":\"object\",\"properties\":{},\"required\":[\"x\"]}", "/required: required property #0");
    expect_schema_error("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "no integer lies within");
    expect_schema_error("{\"type\":", "not valid JSON");
    expect_schema_error("false", "allows no value");
    char deep[600] = "";
    for (int i = 0; i < 40; i++)
        strcat(deep, "{\"items\":");
    strcat(deep, "{}");
    for (int i = 0; i < 40; i++)
        strcat(deep, "}");
    expect_schema_error(deep, "nested deeper than 32 (the limit)");
}

/* A matcher of g on vocab() and a mask buffer for it. */
static npl_grammar_matcher *mask_matcher(const npl_grammar *g, uint32_t **mask)
{
    npl_error err = {0};
    *mask = calloc((npl_vocab_index_n_vocab(vocab()) + 31) / 32, sizeof **mask);
    return npl_grammar_matcher_create(g, vocab(), &err);
}

/* The mask at m's state equals, token by token, what accept_token
 * allows; returns the number allowed. */
static size_t check_mask_here(npl_grammar_matcher *m, uint32_t *mask, size_t step)
{
    uint32_t n = npl_vocab_index_n_vocab(vocab());
    size_t allowed = npl_grammar_matcher_mask(m, mask), count = 0;
    for (uint32_t id = 0; id < n && !nt_failures(); id++) {
        npl_grammar_matcher *c = npl_grammar_matcher_clone(m, NULL);
        bool ok = npl_grammar_matcher_accept_token(c, (int32_t)id);
        bool bit = (mask[id >> 5] >> (id & 31)) & 1;
        CHECKF(ok == bit, "step %zu token %u: mask %d, accept %d", step, id, bit, ok);
        count += bit;
        npl_grammar_matcher_free(c);
    }
    CHECK(nt_failures() || count == allowed);
    return allowed;
}

/* The mask equals, token by token, what accept_token allows, along a
 * pseudo-random path of allowed tokens. */
static void check_mask_walk(const npl_grammar *g, uint64_t seed, int steps)
{
    uint32_t n = npl_vocab_index_n_vocab(vocab()), *mask;
    npl_grammar_matcher *m = mask_matcher(g, &mask);
    REQUIRE(m && mask);
    nt_rng rng = {seed};
    for (int s = 0; s < steps && !nt_failures(); s++) {
        size_t allowed = check_mask_here(m, mask, (size_t)s);
        if (!allowed || nt_failures())
            break;
        uint64_t pick = nt_rng_next(&rng) % allowed;
        for (uint32_t id = 0; id < n; id++) {
            if (((mask[id >> 5] >> (id & 31)) & 1) && pick-- == 0) {
                CHECK(npl_grammar_matcher_accept_token(m, (int32_t)id));
                break;
            }
        }
        if (npl_grammar_matcher_is_finished(m))
            break;
    }
    npl_grammar_matcher_free(m);
    free(mask);
}

/* check_mask_walk from seeds 1..seeds, then frees g. */
static void check_mask_walks(npl_grammar *g, uint64_t seeds, int steps)
{
    REQUIRE(g);
    for (uint64_t seed = 1; seed <= seeds; seed++)
        check_mask_walk(g, seed, steps);
    npl_grammar_free(g);
}

static void test_mask_matches_accept(void)
{
    npl_error err = {0};
    check_mask_walks(npl_grammar_json_any(&err), 3, 30);
    check_mask_walks(schema("{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\"},"
                            "\"d\":{\"type\":\"string\",\"format\":\"date-time\"},\"n\":{\"type\":\"number\"},"
                            "\"b\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":5}},"
                            "\"required\":[\"s\",\"d\",\"b\"]}"),
                     3, 30);
}

/* Bounded repetitions: a token is taken by its length in characters only
 * when nothing else at that point can take the class's characters. */
static void test_mask_bounded(void)
{
    static const char *const texts[] = {
        "root ::= \"\\\"\" [a-z]{0,3} \"\\\"\"",            /* the string's quote cannot take [a-z] */
        "root ::= [a-z]{0,3} [a-c]+ \".\"",                        /* what follows takes some of them */
        "root ::= ( [a-z]{1,2} | \"abc\" ) [e-z]{2,5} \"!\"",     /* two stacks take them */
        "root ::= [a-z]{2,4} ( \"x\" | [0-9]{1,3} )? \"\\n\"", /* optional continuation */
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        check_mask_walks(text(texts[i]), 4, 12);
    check_mask_walks(schema("{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"maxLength\":6},"
                            "\"u\":{\"type\":\"string\",\"format\":\"uuid\"},"
                            "\"e\":{\"type\":\"string\",\"pattern\":\"^[a-z]+@[a-z]{2,4}$\"}},"
                            "\"required\":[\"s\",\"u\",\"e\"]}"),
                     4, 40);
}

/* The mask equals accepting each token on its own at every prefix of
 * out (fed byte by byte, up to the first refused byte). */
static void check_mask_along(const npl_grammar *g, const char *out)
{
    uint32_t *mask;
    npl_grammar_matcher *m = mask_matcher(g, &mask);
    REQUIRE(m && mask);
    for (size_t at = 0; !nt_failures(); at++) {
        check_mask_here(m, mask, at);
        if (!out[at] || !npl_grammar_matcher_accept_bytes(m, out + at, 1))
            break;
    }
    npl_grammar_matcher_free(m);
    free(mask);
}

/* An ambiguous grammar whose parse stacks multiply with each character
 * until a limit refuses the output: a string's characters cannot be
 * taken wholesale by a repetition while other stacks take them too (the
 * libFuzzer input of tests/fuzz/corpus-grammar/crash-stack-growth). */
static void test_mask_limits(void)
{
    npl_grammar *g = text("root ::= item (\",\" item)*\nitem ::= [\"in amimmu\"-z]+ root |");
    REQUIRE(g);
    check_mask_along(g, "ite");
    npl_grammar_free(g);
    g = text("root ::= item (\",\" item)*\nitem ::= [a-z]+ root |");
    REQUIRE(g);
    check_mask_along(g, "abc,d");
    npl_grammar_free(g);
}

static void test_end_token(void)
{
    npl_vocab_index *vi = vocab();
    int32_t eog = (int32_t)npl_vocab_index_n_vocab(vi) - 1;
    npl_grammar *g = text("root ::= \"ab\" \"c\"?");
    REQUIRE(g);
    npl_error err = {0};
    npl_grammar_matcher *m = npl_grammar_matcher_create(g, vi, &err);
    REQUIRE(m);
    uint32_t mask[8];
    npl_grammar_matcher_mask(m, mask);
    CHECK(!((mask[eog >> 5] >> (eog & 31)) & 1));
    CHECK(!npl_grammar_matcher_accept_token(m, eog));
    CHECK(npl_grammar_matcher_accept_bytes(m, "ab", 2));
    npl_grammar_matcher_mask(m, mask);
    CHECK((mask[eog >> 5] >> (eog & 31)) & 1);
    CHECK(npl_grammar_matcher_can_continue(m));
    npl_grammar_matcher *c = npl_grammar_matcher_clone(m, &err);
    CHECK(npl_grammar_matcher_accept_token(m, eog));
    CHECK(npl_grammar_matcher_is_finished(m));
    CHECK(npl_grammar_matcher_mask(m, mask) == 0);
    CHECK(npl_grammar_matcher_accept_bytes(c, "c", 1));
    CHECK(!npl_grammar_matcher_can_continue(c));
    npl_grammar_matcher_reset(c);
    CHECK(!npl_grammar_matcher_is_complete(c));
    CHECK(npl_grammar_matcher_accept_bytes(c, "abc", 3));
    npl_grammar_matcher_free(c);
    npl_grammar_matcher_free(m);
    npl_grammar_free(g);
}

/* Random logits through a sampler with a grammar: the output completes
 * the grammar before the end token, and greedy runs repeat exactly. */
static void sample_run(const npl_grammar *g, float temperature, uint64_t seed, char *out, size_t cap)
{
    npl_vocab_index *vi = vocab();
    uint32_t n = npl_vocab_index_n_vocab(vi);
    int32_t eog = (int32_t)n - 1;
    npl_sampler_params p;
    npl_sampler_params_default(&p);
    p.temperature = temperature;
    p.seed = seed;
    npl_error err = {0};
    npl_sampler *s = npl_sampler_create(&p, n, &err);
    npl_grammar_matcher *m = npl_grammar_matcher_create(g, vi, &err);
    npl_grammar_matcher *check = npl_grammar_matcher_create(g, vi, &err);
    float *logits = malloc(n * sizeof *logits);
    REQUIRE(s && m && check && logits);
    CHECK(npl_sampler_set_grammar(s, m, &err) == NPL_OK);
    nt_rng rng = {seed * 7 + 1};
    for (int step = 0; step < 400; step++) {
        for (uint32_t i = 0; i < n; i++)
            logits[i] = (float)(nt_rng_next(&rng) % 1000) / 100.0f;
        logits[eog] = 5.0f; /* the end is tempting whenever it is allowed */
        int32_t id = npl_sampler_sample(s, logits);
        REQUIRE(id >= 0);
        CHECK(npl_grammar_matcher_accept_token(check, id));
        if (id == eog)
            break;
    }
    CHECK(npl_grammar_matcher_is_finished(check));
    CHECK(npl_grammar_matcher_is_finished(m));
    snprintf(out, cap, "%s", npl_grammar_matcher_is_finished(m) ? "finished" : "open");
    free(logits);
    npl_grammar_matcher_free(check);
    npl_grammar_matcher_free(m);
    npl_sampler_free(s);
}

static void test_sampler_grammar(void)
{
    npl_grammar *g = schema("{\"type\":\"object\",\"properties\":{\"a\":{\"enum\":[\"x\",\"yy\"]},"
                            "\"b\":{\"type\":\"integer\",\"minimum\":-5,\"maximum\":5}},\"required\":[\"a\",\"b\"]}");
    REQUIRE(g);
    char out[64];
    for (uint64_t seed = 1; seed <= 3; seed++)
        sample_run(g, 0.9f, seed, out, sizeof out);
    sample_run(g, 0.0f, 5, out, sizeof out);
    npl_grammar_free(g);
}

static void test_sampler_greedy_repeats(void)
{
    /* two greedy runs over the same logits pick the same tokens */
    npl_vocab_index *vi = vocab();
    uint32_t n = npl_vocab_index_n_vocab(vi);
    npl_grammar *g = schema("{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"maxItems\":4}");
    REQUIRE(g);
    float *logits = malloc(n * sizeof *logits);
    int32_t picks[2][64];
    for (int run = 0; run < 2; run++) {
        npl_sampler_params p;
        npl_sampler_params_default(&p);
        p.temperature = 0;
        npl_error err = {0};
        npl_sampler *s = npl_sampler_create(&p, n, &err);
        npl_grammar_matcher *m = npl_grammar_matcher_create(g, vi, &err);
        REQUIRE(s && m && logits);
        npl_sampler_set_grammar(s, m, &err);
        nt_rng rng = {99};
        for (int k = 0; k < 64; k++) {
            for (uint32_t i = 0; i < n; i++)
                logits[i] = (float)(nt_rng_next(&rng) % 7); /* many ties */
            picks[run][k] = npl_sampler_sample(s, logits);
        }
        npl_grammar_matcher_free(m);
        npl_sampler_free(s);
    }
    CHECK(!memcmp(picks[0], picks[1], sizeof picks[0]));
    free(logits);
    npl_grammar_free(g);
}

/* Greedy sampling takes the best token when the grammar allows it and
 * masks only otherwise: the picks equal the best allowed token by the
 * mask at every step (ties to the lowest id). */
static void test_sampler_greedy_mask(void)
{
    npl_vocab_index *vi = vocab();
    uint32_t n = npl_vocab_index_n_vocab(vi);
    npl_grammar *g = schema("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"maxLength\":5},"
                            "\"b\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}},\"required\":[\"a\",\"b\"]}");
    REQUIRE(g);
    float *logits = malloc(n * sizeof *logits);
    uint32_t *mask = malloc((n + 31) / 32 * sizeof *mask);
    npl_sampler_params p;
    npl_sampler_params_default(&p);
    p.temperature = 0;
    p.repeat_penalty = 1.3f;
    npl_error err = {0};
    npl_sampler *s = npl_sampler_create(&p, n, &err);
    npl_grammar_matcher *m = npl_grammar_matcher_create(g, vi, &err);
    npl_grammar_matcher *ref = npl_grammar_matcher_create(g, vi, &err);
    REQUIRE(s && m && ref && logits && mask);
    npl_sampler_set_grammar(s, m, &err);
    int32_t recent[64];
    nt_rng rng = {7};
    for (int k = 0; k < 64 && !nt_failures(); k++) {
        for (uint32_t i = 0; i < n; i++)
            logits[i] = (float)(nt_rng_next(&rng) % 9) - 2.0f; /* ties, and negatives for the penalty */
        /* the reference: the penalty as the sampler applies it, then the mask */
        float *v = malloc(n * sizeof *v);
        REQUIRE(v);
        memcpy(v, logits, n * sizeof *v);
        for (int j = 0; j < k; j++) {
            bool seen = false;
            for (int q = 0; q < j; q++)
                seen |= recent[q] == recent[j];
            if (!seen)
                v[recent[j]] = v[recent[j]] > 0 ? v[recent[j]] / 1.3f : v[recent[j]] * 1.3f;
        }
        int32_t want = -1;
        if (npl_grammar_matcher_mask(ref, mask))
            for (uint32_t i = 0; i < n; i++)
                if (((mask[i >> 5] >> (i & 31)) & 1) && (want < 0 || v[i] > v[want]))
                    want = (int32_t)i;
        free(v);
        int32_t got = npl_sampler_sample(s, logits);
        CHECKF(got == want, "step %d: picked %d, the mask's best is %d", k, got, want);
        if (got < 0 || !npl_grammar_matcher_accept_token(ref, got) || npl_grammar_matcher_is_finished(ref))
            break;
        recent[k] = got;
    }
    npl_grammar_matcher_free(ref);
    npl_grammar_matcher_free(m);
    npl_sampler_free(s);
    free(mask);
    free(logits);
    npl_grammar_free(g);
}

static void cleanup(void)
{
    npl_vocab_index_free(g_vi);
    g_vi = NULL;
}

static void test_text_format_c(void) { test_text_format(); cleanup(); }
static void test_json_any_c(void) { test_json_any(); cleanup(); }
static void test_schema_object_c(void) { test_schema_object(); cleanup(); }
static void test_schema_numbers_c(void) { test_schema_numbers(); cleanup(); }
static void test_schema_strings_c(void) { test_schema_strings(); cleanup(); }
static void test_schema_refs_c(void) { test_schema_refs(); cleanup(); }
static void test_mask_c(void) { test_mask_matches_accept(); cleanup(); }
static void test_end_token_c(void) { test_end_token(); cleanup(); }
static void test_sampler_c(void) { test_sampler_grammar(); cleanup(); }
static void test_sampler_greedy_c(void) { test_sampler_greedy_repeats(); cleanup(); }
static void test_mask_bounded_c(void) { test_mask_bounded(); cleanup(); }
static void test_mask_limits_c(void) { test_mask_limits(); cleanup(); }
static void test_sampler_greedy_mask_c(void) { test_sampler_greedy_mask(); cleanup(); }

NT_MAIN({"text_format", test_text_format_c}, {"text_errors", test_text_errors}, {"json_any", test_json_any_c},
        {"schema_object", test_schema_object_c}, {"schema_numbers", test_schema_numbers_c},
        {"schema_strings", test_schema_strings_c}, {"schema_refs", test_schema_refs_c},
        {"schema_errors", test_schema_errors}, {"mask_matches_accept", test_mask_c},
        {"end_token", test_end_token_c}, {"sampler", test_sampler_c}, {"sampler_greedy_repeats", test_sampler_greedy_c},
        {"mask_bounded", test_mask_bounded_c}, {"sampler_greedy_mask", test_sampler_greedy_mask_c},
        {"mask_limits", test_mask_limits_c})
