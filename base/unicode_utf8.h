/* UTF-8 helpers for the tokenizers and the streaming detokenizer.
 *
 * Two decoders on purpose: a lenient one that reproduces how the reference
 * tokenizer (llama.cpp) reads text, so token ids match it on broken input,
 * and a strict one (RFC 3629, "maximal subpart" error recovery) for text we
 * hand to users. */
#ifndef NPL_UNICODE_UTF8_H
#define NPL_UNICODE_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define NPL_UTF8_REPLACEMENT 0xFFFDu

/* Sequence length announced by a lead byte, judged by its top four bits
 * only: ASCII and stray continuation bytes count as 1, 0xC0-0xDF as 2,
 * 0xE0-0xEF as 3, 0xF0-0xFF as 4 (no validation at all). */
size_t npl_utf8_lead_len(unsigned char lead);

/* Lenient decode of the sequence at s[0..n) (n >= 1), as the reference
 * does: the lead byte fixes the length and the continuation bytes are only
 * checked for their 10xxxxxx pattern, so overlong forms and surrogates
 * decode to their (non-canonical) value. Anything else, including values
 * above U+10FFFF, is one bad byte: returns U+FFFD with *used = 1. */
uint32_t npl_utf8_decode_lenient(const unsigned char *s, size_t n, size_t *used);

/* Encodes cp (<= 0x10FFFF; surrogates are encoded as plain 3-byte forms)
 * into out, returns the byte count (1..4); 0 for larger values. */
size_t npl_utf8_encode(uint32_t cp, unsigned char out[4]);

/* Strict decode for output. Returns:
 *   > 0  a valid sequence of that many bytes; *cp set;
 *   0    s[0..n) is a valid but unfinished prefix (need more bytes);
 *   < 0  ill-formed: -k bytes form the maximal subpart to replace with one
 *        U+FFFD (k >= 1). */
int npl_utf8_decode_strict(const unsigned char *s, size_t n, uint32_t *cp);

#endif
