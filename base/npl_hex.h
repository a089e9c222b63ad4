/* Hexadecimal digits, for every reader of \x, \u and <0xNN> forms. */
#ifndef NPL_HEX_H
#define NPL_HEX_H

/* The value of hex digit c (either case), -1 when c is not one. */
static inline int npl_hex_digit(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#endif
