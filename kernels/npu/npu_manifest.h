/* The kernel-directory manifest: which binaries make up each kernel group,
 * and the exact argument contract (name, residency class, element type,
 * shape) every call of the group must honour. The format is line based
 * and documented in docs/npu.md; parsing is strict and every error names
 * the line. */
#ifndef NPL_NPU_MANIFEST_H
#define NPL_NPU_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "npl_error.h"
#include "npu_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NPL_NPU_MANIFEST_FILE "manifest.txt"   /* name inside a kernel directory */
#define NPL_NPU_MANIFEST_VERSION 1
#define NPL_NPU_NAME_MAX 48       /* group and argument names, with the NUL */
/* The amdxdna driver copies a command's arguments after the instruction
 * buffer into a firmware slot of 26 u32 words (MAX_NPU_ARGS_SIZE in
 * drivers/accel/amdxdna/aie2_msg_priv.h): 13 buffer addresses of 64 bits.
 * No group can take more; a manifest may set a lower max_args. */
#define NPL_NPU_CMD_ARG_BYTES 104
#define NPL_NPU_MAX_ARGS (NPL_NPU_CMD_ARG_BYTES / 8)
/* Stock aiecc kernels declare 5 buffer arguments (after the opcode, the
 * instruction buffer and its size): a manifest's max_args unless it says
 * otherwise. */
#define NPL_NPU_DEFAULT_MAX_ARGS 5
#define NPL_NPU_MAX_PARTS 16      /* parts of packed arguments, per group */
#define NPL_NPU_PART_ALIGN 64     /* each part of a packed argument starts at a multiple */
#define NPL_NPU_MAX_DMA 24        /* transfers a group's instruction stream describes */
#define NPL_NPU_MAX_DIMS 4
#define NPL_NPU_MAX_FIXED 16
#define NPL_NPU_EXPR_MAX_TOKENS 32

/* Which device the binaries are for. */
typedef enum npl_npu_target {
    NPL_NPU_TARGET_EMU = 0,
    NPL_NPU_TARGET_XDNA1 = 1,
    NPL_NPU_TARGET_XDNA2 = 2,
} npl_npu_target;

const char *npl_npu_target_name(npl_npu_target target);

/* A compiled shape expression (integers, shape symbols, + - * / and
 * parentheses) in postfix form. */
typedef struct npl_npu_expr {
    uint8_t n;
    struct {
        uint8_t kind;   /* 0 number, 1 symbol, 2 operator */
        uint8_t op;     /* '+', '-', '*', '/' */
        uint32_t value; /* number, or index into npl_npu_shape_symbol_names */
    } tok[NPL_NPU_EXPR_MAX_TOKENS];
} npl_npu_expr;

typedef struct npl_npu_arg_spec {
    char name[NPL_NPU_NAME_MAX];
    npl_npu_buf_class cls;
    npl_npu_elem_type type; /* NPL_NPU_ELEM_PACK: its parts say the layout */
    bool optional;        /* the call may pass no buffer */
    uint32_t n_dims;
    npl_npu_expr dims[NPL_NPU_MAX_DIMS];
} npl_npu_arg_spec;

/* One part of a packed argument: its name, type and shape (class and
 * optional unused). Parts follow each other in declaration order, each
 * at the next multiple of NPL_NPU_PART_ALIGN; a part whose shape has no
 * elements for a call (e.g. [qk_norm*head_dim] with qk_norm = 0) takes
 * no bytes and is absent. */
typedef struct npl_npu_part_spec {
    uint32_t arg;         /* index of the packed argument it lives in */
    npl_npu_arg_spec elem;
} npl_npu_part_spec;

/* One DMA transfer of a group's runtime sequence: bytes [offset,
 * offset+length) of an argument move into the tiles (in) or back out
 * (out). Expressions are in bytes over the shape symbols; whole means the
 * argument's contract size. */
typedef struct npl_npu_dma_spec {
    uint32_t arg;         /* index into args */
    bool out;
    bool whole;
    npl_npu_expr offset;
    npl_npu_expr length;
} npl_npu_dma_spec;

typedef struct npl_npu_group_spec {
    char name[NPL_NPU_NAME_MAX];
    char *xclbin;         /* paths relative to the kernel directory; NULL for emu */
    char *kernel;         /* kernel name inside the xclbin */
    /* NPU targets may instead give the kernel build's own runtime
     * sequence (raw little-endian u32 words) and the words the host
     * patches per run: word index and the value's expression. */
    char *instr;
    uint32_t n_patch;
    struct {
        uint32_t word;
        npl_npu_expr value;
    } patch[NPL_NPU_MAX_DMA];
    bool params_shape;    /* the instruction stream writes the shape into the
                             cores' runtime parameters */
    uint32_t n_fixed;     /* shape symbols the binary was built for */
    struct {
        uint32_t symbol;  /* index into npl_npu_shape_symbol_names */
        uint32_t value;
    } fixed[NPL_NPU_MAX_FIXED];
    uint32_t n_args;
    npl_npu_arg_spec args[NPL_NPU_MAX_ARGS];
    uint32_t n_parts;
    npl_npu_part_spec parts[NPL_NPU_MAX_PARTS];
    uint32_t n_dma;
    npl_npu_dma_spec dma[NPL_NPU_MAX_DMA];
    unsigned line;        /* where the group starts, for messages */
} npl_npu_group_spec;

typedef struct npl_npu_manifest {
    npl_npu_target target;
    uint32_t max_args;    /* buffer arguments a kernel declares, <= NPL_NPU_MAX_ARGS
                             (NPL_NPU_DEFAULT_MAX_ARGS unless the manifest says) */
    size_t n_groups;
    npl_npu_group_spec *groups;
} npl_npu_manifest;

/* Parses manifest text; origin names it in messages ("manifest.txt"). */
npl_status npl_npu_manifest_parse(const char *text, size_t len, const char *origin,
                                  npl_npu_manifest **out, npl_error *err);

/* Reads and parses dir/manifest.txt. */
npl_status npl_npu_manifest_load(const char *kernel_dir, npl_npu_manifest **out,
                                 npl_error *err);

/* Checks that every xclbin and instruction file the manifest names is a
 * readable regular file under kernel_dir. */
npl_status npl_npu_manifest_check_files(const npl_npu_manifest *m, const char *kernel_dir,
                                        npl_error *err);

void npl_npu_manifest_free(npl_npu_manifest *m);

const npl_npu_group_spec *npl_npu_manifest_find(const npl_npu_manifest *m, const char *name);

/* Position of an argument in the group's contract, or -1. */
int npl_npu_group_arg_index(const npl_npu_group_spec *g, const char *name);

/* Evaluates an expression; fails on unknown values, overflow, negative
 * results or inexact division. */
npl_status npl_npu_expr_eval(const npl_npu_expr *e, const npl_npu_shape *shape, uint64_t *value,
                             npl_error *err);

/* Bytes the argument needs for this shape (Q4NX uses the padded layout).
 * Not for packed arguments, whose size comes from their group's parts:
 * npl_npu_group_arg_bytes. */
npl_status npl_npu_arg_bytes(const npl_npu_arg_spec *a, const npl_npu_shape *shape,
                             size_t *bytes, npl_error *err);

/* Bytes argument `arg` of the group needs for this shape, packed or not. */
npl_status npl_npu_group_arg_bytes(const npl_npu_group_spec *g, uint32_t arg,
                                   const npl_npu_shape *shape, size_t *bytes, npl_error *err);

/* Position of a part in the group's parts, or -1. */
int npl_npu_group_part_index(const npl_npu_group_spec *g, const char *name);

/* Where part `part` sits in its packed argument for this shape: byte
 * offset from the argument's start and its bytes (0: absent). */
npl_status npl_npu_part_place(const npl_npu_group_spec *g, uint32_t part,
                              const npl_npu_shape *shape, size_t *offset, size_t *bytes,
                              npl_error *err);

/* True when the expression uses a symbol that changes from call to call
 * of one run (pos, n_tokens, causal): the words it yields are patched. */
bool npl_npu_expr_is_runtime(const npl_npu_expr *e);

/* Checks a call's shape against the symbols the binary was built for. */
npl_status npl_npu_group_check_fixed(const npl_npu_group_spec *g, const npl_npu_shape *shape,
                                     npl_error *err);

#ifdef __cplusplus
}
#endif

#endif
