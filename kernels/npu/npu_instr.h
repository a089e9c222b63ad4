/* A kernel group's runtime sequence, generated on the host for every run:
 * the runtime parameters the cores read (the shape) and the DMA buffer
 * descriptors that move argument bytes between DDR and the tiles. Cores
 * cannot change a transfer's offset or length; only these words can, so
 * the host writes them per call (the position, the rows of a chunk, the
 * KV length) and the device moves exactly what they say.
 *
 * Words (little-endian u32; docs/npu.md, "Instruction streams"):
 *   [0] NPL_NPU_INSTR_MAGIC   [1] number of operations
 *   RTP  (1 << 24) | n, then n words: the shape (npl_npu_shape_pack)
 *   DMA  (2 << 24) | (out << 16) | arg, then offset and length in bytes,
 *        relative to where the argument is bound (its sub-buffer) */
#ifndef NPL_NPU_INSTR_H
#define NPL_NPU_INSTR_H

#include <stddef.h>
#include <stdint.h>

#include "npl_error.h"
#include "npu_manifest.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NPL_NPU_INSTR_MAGIC 0x3149504eu /* "NPI1" */
#define NPL_NPU_INSTR_OP_RTP 1u
#define NPL_NPU_INSTR_OP_DMA 2u
/* Header, the RTP block and every transfer of a group at most. */
#define NPL_NPU_INSTR_MAX_WORDS (2 + 1 + NPL_NPU_SHAPE_WORDS + 3 * NPL_NPU_MAX_DMA)

/* Builds the stream of one run. present[i] says whether argument i is
 * bound (transfers of absent optional arguments are left out). Fails
 * when an expression cannot be evaluated or a value needs more than 32
 * bits. *n_patched gets how many words depend on the run's position and
 * row count (rewritten between submissions of a reused run list). */
npl_status npl_npu_instr_build(const npl_npu_group_spec *g, const npl_npu_shape *shape,
                               const bool *present, uint32_t words[NPL_NPU_INSTR_MAX_WORDS],
                               uint32_t *n_words, uint32_t *n_patched, npl_error *err);

/* The stream of one run of a group that ships its own instruction file:
 * the file's n words with every patch of the group written (the values
 * of its expressions for this shape). Fails for a word index past the
 * file or a value beyond 32 bits. *n_patched gets how many patched words
 * depend on the position and rows. */
npl_status npl_npu_instr_patch(const npl_npu_group_spec *g, const uint32_t *tmpl, uint32_t n,
                               const npl_npu_shape *shape, uint32_t *words, uint32_t *n_patched,
                               npl_error *err);

/* One decoded transfer. */
typedef struct npl_npu_instr_dma {
    uint32_t arg;
    bool out;
    uint32_t offset, length;
} npl_npu_instr_dma;

/* Decodes a stream as the device does: checks the magic, every opcode,
 * the operation count against the words given, and that each transfer
 * names an argument below n_args. Gives the shape (when the stream
 * carries one; *has_shape says) and the transfers. */
npl_status npl_npu_instr_parse(const uint32_t *words, uint32_t n_words, uint32_t n_args,
                               npl_npu_shape *shape, bool *has_shape,
                               npl_npu_instr_dma dma[NPL_NPU_MAX_DMA], uint32_t *n_dma,
                               npl_error *err);

#ifdef __cplusplus
}
#endif

#endif
