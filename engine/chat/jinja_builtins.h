/* What the built-ins' files (jinja_builtins.c, jinja_strings.c,
 * jinja_filters.c, jinja_tests.c, jinja_members.c) share: reading
 * arguments and the Python string operations behind both filters and
 * methods. */
#ifndef NPL_JINJA_BUILTINS_H
#define NPL_JINJA_BUILTINS_H

#include <string.h>

#include "jinja_internal.h"

static inline bool jname_is(jstr n, const char *lit)
{
    if (n.n == 0)
        return lit[0] == 0;
    /* most names of a table differ in their first byte: no strlen then */
    return n.s[0] == lit[0] && strlen(lit) == n.n && memcmp(n.s, lit, n.n) == 0;
}
/* Keyword `name`, or NULL. */
const jv *jkwarg(const jargs *a, const char *name);
/* Positional argument i, else keyword `name` (may be NULL), else NULL. */
const jv *jarg(const jargs *a, size_t i, const char *name);
jstr jneed_str(jrender *r, const jv *v, const char *what, uint32_t line);
int64_t jneed_int(jrender *r, const jv *v, const char *what, uint32_t line);
jv jstr_v(jstr s);
/* A mapping's [key, value] pairs (undefined: none). */
jv jitems_of(jrender *r, const jv *d, uint32_t line);
/* The items of seq (each seen through .attribute when given) joined by sep. */
jv jjoin(jrender *r, const jv *seq, jstr sep, const jv *attribute, uint32_t line);

/* Python str methods (jinja_strings.c). strip: chars NULL/none = white
 * space; case mode 'u'pper, 'l'ower, 't'itle, 'c'apitalize (ASCII);
 * count < 0 / maxsplit < 0: no limit. */
jv jstr_strip(jrender *r, jstr s, const jv *chars, bool left, bool right, uint32_t line);
jv jstr_case(jrender *r, jstr s, char mode);
bool jstr_affix(jrender *r, jstr s, const jv *a, bool end, uint32_t line);
jv jstr_replace(jrender *r, jstr s, jstr old, jstr new, int64_t count);
jv jstr_split(jrender *r, jstr s, const jv *sep, int64_t maxsplit, uint32_t line);
int64_t jstr_find(jrender *r, jstr s, jstr p, bool last);

#endif
