/* The vocabulary trie behind token masks (grammar_vocab.c), shared by the
 * grammar matcher. */
#ifndef NPL_GRAMMAR_VOCAB_H
#define NPL_GRAMMAR_VOCAB_H

#include <stdint.h>

#include "grammar.h"

enum { TN_BOUNDARY = 0, TN_MID, TN_INVALID };

/* Tokens longer than this are left out of the trie (and refused by the
 * matcher, so a mask and accepting a token agree). */
#define NPL_VOCAB_MAX_TOKEN_BYTES 1024u

/* tnode.sub: what the characters completed in a node's subtree include
 * besides the ASCII ones of npl_vocab_index.sub_ascii. */
enum {
    TS_NONASCII = 1, /* a code point >= 0x80 */
    TS_BROKEN = 2,   /* invalid UTF-8, or a token ending inside a character */
};

/* A trie node in preorder: its subtree is nodes [this, end), the tokens
 * spelled by paths through it are order[tok_lo .. nodes[end].tok_lo or
 * n_order), those ending exactly here order[tok_lo .. own_end). */
typedef struct tnode {
    uint32_t end;
    uint32_t tok_lo;
    uint32_t own_end;
    uint32_t cp;      /* code point completed here (TN_BOUNDARY) */
    uint16_t chars;   /* whole characters on the path from the root */
    uint16_t maxc;    /* the most whole characters of a token in the subtree */
    uint16_t depth;
    uint8_t byte;
    uint8_t cp_state; /* UTF-8 decoding of the path from the root */
    uint8_t sub;      /* TS_* of the subtree */
} tnode;

struct npl_vocab_index {
    uint32_t n_vocab;
    uint32_t *order; /* token ids sorted by bytes (empty and end tokens left out) */
    uint32_t n_order;
    tnode *nodes;    /* nodes[0] is the root */
    uint32_t n_nodes;
    uint32_t max_depth;
    uint32_t max_chars;        /* the most whole characters of a token */
    uint32_t (*sub_ascii)[4];  /* per node: ASCII characters completed in its subtree */
    uint16_t *tok_chars;       /* per order[] entry: the token's whole characters */
    uint32_t *tok_off; /* token id's bytes: blob[tok_off[id] .. tok_off[id + 1]) */
    char *blob;
    int32_t *eog;
    uint32_t n_eog;
};

static inline uint32_t tnode_tok_hi(const npl_vocab_index *vi, uint32_t i)
{
    uint32_t e = vi->nodes[i].end;
    return e < vi->n_nodes ? vi->nodes[e].tok_lo : vi->n_order;
}

#endif
