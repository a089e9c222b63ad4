#include "unicode_utf8.h"

#include <stdbool.h>

size_t npl_utf8_lead_len(unsigned char lead)
{
    static const unsigned char by_top_nibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return by_top_nibble[lead >> 4];
}

static bool is_cont(unsigned char b)
{
    return (b & 0xC0u) == 0x80u;
}

uint32_t npl_utf8_decode_lenient(const unsigned char *s, size_t n, size_t *used)
{
    unsigned char b0 = s[0];
    *used = 1;
    if (b0 < 0x80u)
        return b0;
    if ((b0 & 0x40u) == 0) /* stray continuation byte */
        return NPL_UTF8_REPLACEMENT;
    if ((b0 & 0x20u) == 0) {
        if (n < 2 || !is_cont(s[1]))
            return NPL_UTF8_REPLACEMENT;
        *used = 2;
        return ((uint32_t)(b0 & 0x1Fu) << 6) | (s[1] & 0x3Fu);
    }
    if ((b0 & 0x10u) == 0) {
        if (n < 3 || !is_cont(s[1]) || !is_cont(s[2]))
            return NPL_UTF8_REPLACEMENT;
        *used = 3;
        return ((uint32_t)(b0 & 0x0Fu) << 12) | ((uint32_t)(s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
    }
    if ((b0 & 0x08u) == 0) {
        if (n < 4 || !is_cont(s[1]) || !is_cont(s[2]) || !is_cont(s[3]))
            return NPL_UTF8_REPLACEMENT;
        uint32_t cp = ((uint32_t)(b0 & 0x07u) << 18) | ((uint32_t)(s[1] & 0x3Fu) << 12) |
                      ((uint32_t)(s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
        /* The reference cannot re-encode these and fails the whole call;
         * treating the lead as one bad byte keeps us total. */
        if (cp > 0x10FFFFu)
            return NPL_UTF8_REPLACEMENT;
        *used = 4;
        return cp;
    }
    return NPL_UTF8_REPLACEMENT;
}

size_t npl_utf8_encode(uint32_t cp, unsigned char out[4])
{
    if (cp < 0x80u) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800u) {
        out[0] = (unsigned char)(0xC0u | (cp >> 6));
        out[1] = (unsigned char)(0x80u | (cp & 0x3Fu));
        return 2;
    }
    if (cp < 0x10000u) {
        out[0] = (unsigned char)(0xE0u | (cp >> 12));
        out[1] = (unsigned char)(0x80u | ((cp >> 6) & 0x3Fu));
        out[2] = (unsigned char)(0x80u | (cp & 0x3Fu));
        return 3;
    }
    if (cp <= 0x10FFFFu) {
        out[0] = (unsigned char)(0xF0u | (cp >> 18));
        out[1] = (unsigned char)(0x80u | ((cp >> 12) & 0x3Fu));
        out[2] = (unsigned char)(0x80u | ((cp >> 6) & 0x3Fu));
        out[3] = (unsigned char)(0x80u | (cp & 0x3Fu));
        return 4;
    }
    return 0;
}

int npl_utf8_decode_strict(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char b0 = s[0];
    size_t need;
    uint32_t value;
    /* Allowed range of the second byte (Unicode table 3-7): excludes
     * overlongs, surrogates and values above U+10FFFF. */
    unsigned char lo = 0x80, hi = 0xBF;

    if (b0 < 0x80u) {
        *cp = b0;
        return 1;
    }
    if (b0 >= 0xC2u && b0 <= 0xDFu) {
        need = 2;
        value = b0 & 0x1Fu;
    } else if (b0 >= 0xE0u && b0 <= 0xEFu) {
        need = 3;
        value = b0 & 0x0Fu;
        if (b0 == 0xE0u)
            lo = 0xA0;
        else if (b0 == 0xEDu)
            hi = 0x9F;
    } else if (b0 >= 0xF0u && b0 <= 0xF4u) {
        need = 4;
        value = b0 & 0x07u;
        if (b0 == 0xF0u)
            lo = 0x90;
        else if (b0 == 0xF4u)
            hi = 0x8F;
    } else {
        return -1;
    }

    for (size_t i = 1; i < need; i++) {
        if (i >= n)
            return 0;
        unsigned char b = s[i];
        unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (b < l || b > h)
            return -(int)i;
        value = (value << 6) | (b & 0x3Fu);
    }
    *cp = value;
    return (int)need;
}
