/* npullm engine: images and the vision tower (no GLib).
 *
 * Images: PNG, JPEG and WebP from memory to 8-bit RGB, with the size,
 * dimension and pixel-count limits checked on the header, before any pixel
 * is decoded. A malformed, truncated or over-limit image is an error
 * (NPL_ERR_FORMAT, NPL_ERR_UNSUPPORTED or NPL_ERR_INVALID_ARG), never a
 * crash or a partial image.
 *
 * Vision tower: the SigLIP encoder and Gemma 3 projector of a separate
 * "mmproj" GGUF file (clip.projector_type = gemma3), or Gemma 4's tower
 * (gemma4v: images at their own aspect ratio, so the number of embeddings
 * depends on the image). It turns one image into embeddings of the text
 * model's width, which the text model reads in place of token embeddings
 * between <start_of_image> and <end_of_image> (Gemma 4: <|image> and
 * <image|>). Encoding runs in stages (one encoder block per stage) so
 * a scheduler can interleave it with other work.
 *
 * Threading: like npl_model, one thread at a time per npl_vision; the
 * encoder parallelises internally. No global mutable state. */
#ifndef NPULLM_VISION_H
#define NPULLM_VISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npl_error.h"
#include "npullm.h"
#include "tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- images ------------------------------------------------------------ */

typedef enum npl_image_format {
    NPL_IMAGE_UNKNOWN = 0,
    NPL_IMAGE_PNG = 1,
    NPL_IMAGE_JPEG = 2,
    NPL_IMAGE_WEBP = 3,
} npl_image_format;

/* Decoded pixels: width * height RGB triplets, rows top to bottom. */
typedef struct npl_image {
    uint32_t width;
    uint32_t height;
    uint8_t *rgb;
} npl_image;

typedef struct npl_image_limits {
    size_t max_bytes;    /* encoded size */
    uint32_t max_width;  /* each dimension, from the header */
    uint32_t max_height;
    uint64_t max_pixels; /* width * height: bounds memory and decode time */
} npl_image_limits;

#define NPL_IMAGE_MAX_BYTES_DEFAULT ((size_t)32 << 20)
#define NPL_IMAGE_MAX_SIDE_DEFAULT 8192u
#define NPL_IMAGE_MAX_PIXELS_DEFAULT 40000000u

/* 32 MiB, 8192 x 8192, 40 M pixels. */
void npl_image_limits_default(npl_image_limits *lim);

/* The format by its magic bytes (no decoding). */
npl_image_format npl_image_sniff(const void *data, size_t size);
const char *npl_image_format_name(npl_image_format f); /* "png", "jpeg", "webp", "unknown" */

/* Decodes data[0..size) to RGB8 into *out (which the caller frees with
 * npl_image_free; it is left empty on failure). lim NULL = defaults.
 * Alpha is dropped (the colour values are kept as stored, as llama.cpp
 * does); grey, palette and 16-bit images become 8-bit RGB; CMYK JPEGs are
 * converted. Animated WebP is refused. Errors: NPL_ERR_INVALID_ARG for an
 * image over a limit, NPL_ERR_UNSUPPORTED for an unknown or unsupported
 * format, NPL_ERR_FORMAT for corrupt or truncated data (libjpeg's
 * corrupt-data warnings count as errors), NPL_ERR_NOMEM. */
npl_status npl_image_decode(const void *data, size_t size, const npl_image_limits *lim, npl_image *out,
                            npl_error *err);
void npl_image_free(npl_image *img);

/* What decoding an image will take, from its header alone (cheap, bounded
 * work): so that a caller can account for the memory before it decodes.
 * decode_bytes is an upper estimate of the decoder's peak allocation
 * (pixels, plus what the format's decoder keeps: a progressive JPEG's
 * coefficients, a lossless WebP's ARGB plane). Same errors as
 * npl_image_decode for an unknown format, a damaged header or (lim not
 * NULL) dimensions over a limit. */
typedef struct npl_image_info {
    npl_image_format format;
    uint32_t width;
    uint32_t height;
    uint64_t decode_bytes;
} npl_image_info;

npl_status npl_image_probe(const void *data, size_t size, const npl_image_limits *lim, npl_image_info *out,
                           npl_error *err);

/* ---- the vision tower ---------------------------------------------------- */

typedef struct npl_vision npl_vision;

typedef struct npl_vision_params {
    int n_threads; /* 0 = number of online CPUs */
    /* false (default): the fast paths (docs/vision.md): attention over
     * F16 keys and values with the online-softmax kernel, activations
     * with the fast exp. true: the attention in float with expf/tanhf
     * (slower; the reference tests use it). */
    bool exact;
    /* F16 weight matrices multiplied as BF16 (weights and activations
     * rounded to BF16) where the CPU has VDPBF16PS: about twice the
     * speed of those products, at a cost in accuracy larger than
     * llama.cpp's F16 path (docs/vision.md); default false. Ignored
     * with exact. */
    bool bf16_weights;
    /* F16 weight matrices whose rows are whole 32-blocks quantized to
     * Q8_0 at load and multiplied by the integer kernels, as from a Q8_0
     * file (docs/vision.md gives the accuracy cost); takes precedence
     * over bf16_weights for those matrices. Default false; ignored with
     * exact. */
    bool q8_weights;
} npl_vision_params;

void npl_vision_params_default(npl_vision_params *p);

typedef struct npl_vision_info {
    const char *projector;  /* "gemma3" or "gemma4v" */
    uint32_t image_size;    /* input side in pixels (896 for Gemma 3) */
    uint32_t patch_size;    /* 14 */
    uint32_t n_embd;        /* encoder width (1152) */
    uint32_t n_ff;
    uint32_t n_head;
    uint32_t n_layer;       /* encoder blocks (27) */
    uint32_t pool;          /* patches per side averaged into one token (4) */
    uint32_t n_tokens;      /* image embeddings produced (256); gemma4v: the most an image of ordinary
                             * proportions gives (its max_tokens), each image's own count is
                             * npl_vision_image_n_tokens */
    uint32_t max_tokens;    /* the most any image it accepts gives (gemma3: n_tokens; gemma4v: a very
                             * elongated one, NPL_VISION_MAX_DYN_TOKENS): a paired model is loaded
                             * with npl_model_params.block_rows of at least this, since an image's
                             * rows go through the model in one step */
    uint32_t n_embd_out;    /* their width: the text model's n_embd */
    float image_mean[3];
    float image_std[3];
    bool ffn_swapped;       /* older file: ffn_up/ffn_down names exchanged */
} npl_vision_info;

/* Loads an mmproj GGUF (mapped, 2-D weights read in place). Checks the
 * projector type, every hyper-parameter and every tensor's presence,
 * shape and type: NPL_ERR_FORMAT / NPL_ERR_UNSUPPORTED naming what is
 * wrong. */
npl_vision *npl_vision_load(const char *path, const npl_vision_params *params, npl_error *err);
void npl_vision_free(npl_vision *v);
const npl_vision_info *npl_vision_get_info(const npl_vision *v);

/* The image as the encoder sees it: scaled to fit image_size x image_size
 * keeping its aspect ratio (bilinear, sampling grid aligned on the corner
 * pixels), centred on black, then normalised per channel with the file's
 * mean and std. out: 3 planes of image_size^2 floats (R, G, B), rows top
 * to bottom. This is llama.cpp's preprocessing for this projector.
 * gemma4v: the target is the image's own proportions (sides multiples of
 * align, area within [min_pixels, max_pixels], llama.cpp's "smart
 * resize"), the image letterboxed into it the same way; out holds
 * npl_vision_pixel_count_for floats (a two-float header, then the planes). */
npl_status npl_vision_preprocess(const npl_vision *v, const npl_image *img, float *out, npl_error *err);

/* What preprocessing needs of a projector, and nothing else: so that a
 * caller can decode and preprocess an image on a thread of its own, before
 * the tower is even loaded, and hand the encoder only the result. */
typedef struct npl_vision_pixel_params {
    uint32_t image_size;
    float image_mean[3];
    float image_std[3];
    /* gemma4v (0 otherwise): the image keeps its aspect ratio, its sides
     * multiples of align (patch size times pooling), its area between
     * min_pixels and max_pixels where the proportions allow. */
    uint32_t align;
    uint32_t min_pixels;
    uint32_t max_pixels;
} npl_vision_pixel_params;

/* From an mmproj file's metadata alone (the same checks as
 * npl_vision_load makes of these keys; no weight is read). */
npl_status npl_vision_read_pixel_params(const char *mmproj_path, npl_vision_pixel_params *out, npl_error *err);
void npl_vision_get_pixel_params(const npl_vision *v, npl_vision_pixel_params *out);
/* Floats in a preprocessed image of a fixed-size projector: 3 *
 * image_size^2; 0 for gemma4v, whose tensor depends on the image (the
 * functions below serve both). */
size_t npl_vision_pixel_count(const npl_vision_pixel_params *p);
/* Floats of the preprocessed tensor of a width x height image; 0 when the
 * image cannot be fitted (gemma4v: more than 65536 patches). gemma4v's
 * tensor starts with two floats, its width and height in pixels, then
 * the 3 planes. */
size_t npl_vision_pixel_count_for(const npl_vision_pixel_params *p, uint32_t width, uint32_t height);
/* Floats of a preprocessed tensor (p's layout). */
size_t npl_vision_pixels_len(const npl_vision_pixel_params *p, const float *pixels);
/* npl_vision_preprocess with the parameters given instead of a tower. */
npl_status npl_image_preprocess(const npl_vision_pixel_params *p, const npl_image *img, float *out, npl_error *err);

/* One encoding in progress. Owns its activations (a few hundred MB for a
 * real Gemma 3 tower), freed with npl_vision_encoding_free. */
typedef struct npl_vision_encoding npl_vision_encoding;

npl_vision_encoding *npl_vision_encoding_create(npl_vision *v, const npl_image *img, npl_error *err);
/* The same from an image already preprocessed with p (npl_vision_pixel_count
 * floats, copied): NPL_ERR_INVALID_ARG when p is not this tower's (the
 * projector file changed in between). */
npl_vision_encoding *npl_vision_encoding_create_from_pixels(npl_vision *v, const npl_vision_pixel_params *p,
                                                            const float *pixels, npl_error *err);
void npl_vision_encoding_free(npl_vision_encoding *e);
/* Runs the next stage (patch embedding, one encoder block, or the
 * projector); *done becomes true after the last. */
npl_status npl_vision_encoding_step(npl_vision_encoding *e, bool *done, npl_error *err);
/* Stages in all (n_layer + 2) and already run. */
uint32_t npl_vision_encoding_n_stages(const npl_vision_encoding *e);
uint32_t npl_vision_encoding_stages_done(const npl_vision_encoding *e);
/* Embeddings this encoding produces (gemma4v: depends on the image). */
uint32_t npl_vision_encoding_n_tokens(const npl_vision_encoding *e);
/* Embeddings an image of width x height gives with this tower (0 when it
 * cannot be fitted), and those of an image preprocessed with p. */
uint32_t npl_vision_image_n_tokens(const npl_vision *v, uint32_t width, uint32_t height);
uint32_t npl_vision_pixels_n_tokens(const npl_vision *v, const npl_vision_pixel_params *p, const float *pixels);
/* After the last stage: npl_vision_encoding_n_tokens rows of n_embd_out floats. NULL before. */
const float *npl_vision_encoding_output(const npl_vision_encoding *e);

/* Seconds spent so far in each part of an encoding (benchmarks): patch
 * embedding; in the blocks, the first LayerNorm and the Q, K, V and output
 * projections, the attention itself, the second LayerNorm and the MLP;
 * the pooling and projection. */
typedef struct npl_vision_timings {
    double embed;
    double attn_proj;
    double attention;
    double mlp;
    double project;
} npl_vision_timings;

void npl_vision_encoding_get_timings(const npl_vision_encoding *e, npl_vision_timings *out);

/* Whole encoding in one call: out receives npl_vision_image_n_tokens *
 * n_embd_out floats. */
npl_status npl_vision_encode(npl_vision *v, const npl_image *img, float *out, npl_error *err);

/* ---- prompts with an image ----------------------------------------------- */

/* Whether the tower's embeddings fit the text model: same width, and the
 * model's vocabulary has <start_of_image> and <end_of_image> and uses the
 * Gemma chat format. NPL_ERR_UNSUPPORTED naming the mismatch. */
npl_status npl_vision_check_model(const npl_vision *v, const npl_model *m, npl_error *err);

/* A prompt with one image: before and after are token ids; the image's
 * embedding rows go between them. before ends with <start_of_image>,
 * after starts with <end_of_image>. */
typedef struct npl_image_prompt {
    npl_tokens before;
    npl_tokens after;
} npl_image_prompt;

void npl_image_prompt_free(npl_image_prompt *p);

/* One user turn in the Gemma chat format with the image first, laid out as
 * Gemma 3's own processor does it (the image between blank lines):
 *   <bos><start_of_turn>user\n[SYSTEM\n\n]\n\n<start_of_image>
 *   IMAGE <end_of_image>\n\nTEXT<end_of_turn>\n<start_of_turn>model\n
 * system may be NULL. Text is tokenized without special-token parsing and
 * trimmed like the chat template trims message content. */
npl_status npl_vision_chat_prompt(const npl_model *m, const char *system, const char *text, npl_image_prompt *out,
                                  npl_error *err);

/* A conversation with images (Gemma 3): n_images[i] images in message i
 * (user messages only), shown before its text as in
 * npl_vision_chat_prompt. runs receives the token runs between the images
 * (sum of n_images + 1 runs, zeroed by the caller): image k's embedding
 * rows go after runs[k]; each run but the first starts with
 * <end_of_image>, each but the last ends with <start_of_image>. The
 * model's template renders it (opts may be NULL), else the built-in Gemma
 * format. On error every run is freed. */
npl_status npl_vision_chat_prompt_messages(const npl_model *m, const npl_chat_message *msgs, const uint32_t *n_images,
                                           size_t n_msgs, const npl_chat_options *opts, npl_tokens *runs,
                                           npl_error *err);

/* Keys that stand for an image's n_rows embedding positions in a KV pool
 * (npl_seq_key_positions): derived from a hash of the preprocessed pixels
 * (n_values floats), so that the same image gives the same keys and
 * another one different keys. Every key is negative (never a token id)
 * and not -1 (a position no pool matches). */
void npl_vision_image_keys(const float *pixels, size_t n_values, int32_t *keys, size_t n_rows);

/* Prefills the whole prompt into s: before (causal), the n image rows
 * (bidirectional among themselves), after (causal). Logits of the last
 * position are then available. */
npl_status npl_vision_prefill(npl_model *m, npl_seq *s, const npl_image_prompt *p, const float *image_embd,
                              size_t n_image, npl_error *err);

#ifdef __cplusplus
}
#endif

#endif
