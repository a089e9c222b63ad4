/* Python str operations of the Jinja built-ins (filters and methods
 * alike): strip with Python's white space, ASCII case changes, affixes,
 * replace, split and find, each charged to the render's budget. */
#include <string.h>

#include "jinja_builtins.h"

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
jv jstr_strip(jrender *r, jstr s, const jv *chars, bool left, bool right, uint32_t line)
{
    size_t b = 0, e = s.n, len;
    bool custom = chars && chars->k != JV_NONE && chars->k != JV_UNDEF;
    jstr cs = custom ? jneed_str(r, chars, "strip", line) : (jstr){0};
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

jv jstr_case(jrender *r, jstr s, char mode)
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

bool jstr_affix(jrender *r, jstr s, const jv *a, bool end, uint32_t line)
{
    if (a && a->k == JV_LIST) {
        for (size_t i = 0; i < a->u.l->n; i++)
            if (jstr_affix(r, s, &a->u.l->v[i], end, line))
                return true;
        return false;
    }
    jstr p = jneed_str(r, a, end ? "endswith" : "startswith", line);
    return end ? ends_with(r, s, p) : starts_with(r, s, p);
}

/* Python str.replace; a non-empty `old` is searched for (linear), an
 * empty one matches between every character. */
jv jstr_replace(jrender *r, jstr s, jstr old, jstr new, int64_t count)
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
            return jstr_v(jsb_done(&b));
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
    return jstr_v(jsb_done(&b));
}

jv jstr_split(jrender *r, jstr s, const jv *sep, int64_t maxsplit, uint32_t line)
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
    jstr p = jneed_str(r, sep, "split", line);
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

int64_t jstr_find(jrender *r, jstr s, jstr p, bool last)
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
