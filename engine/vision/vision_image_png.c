/* PNG through libpng. libpng reports errors by longjmp'ing out of its own
 * calls; everything the decode allocates hangs off one job struct, so the
 * landing site frees it all whatever was in progress, and no local
 * variable is written between setjmp and a possible longjmp.
 *
 * Limits: the dimensions are read from the IHDR chunk (which the format
 * requires to come first) and checked before libpng is even set up;
 * ancillary chunks are skipped without being decompressed or kept, and
 * libpng's own user limits and chunk-memory cap guard the rest. libpng sizes some reads by a chunk's
 * declared length before reading it (a 75-byte file made it allocate
 * 233 MB), so every chunk up to IEND must first fit in the bytes given. Conversions follow llama.cpp's loader:
 * palette and grey expanded to RGB, 16-bit samples keep their high byte,
 * alpha dropped, no gamma correction. */
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vision_image_internal.h"

/* Memory libpng may spend on one ancillary chunk (decompressed). */
#define PNG_CHUNK_MEMORY_MAX (8u << 20)
/* Ancillary chunks libpng keeps before refusing more. */
#define PNG_CHUNK_CACHE_MAX 256u

typedef struct png_job {
    const uint8_t *data;
    size_t size;
    size_t pos;
    png_structp png;
    png_infop info;
    png_bytep *rows;
    npl_image img;
    char message[200];
} png_job;

static void on_error(png_structp png, png_const_charp msg)
{
    png_job *j = png_get_error_ptr(png);
    snprintf(j->message, sizeof j->message, "%s", msg ? msg : "libpng error");
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg; /* a library never prints; warnings are benign */
}

static void read_bytes(png_structp png, png_bytep out, size_t n)
{
    png_job *j = png_get_io_ptr(png);
    if (n > j->size - j->pos)
        png_error(png, "file is truncated");
    memcpy(out, j->data + j->pos, n);
    j->pos += n;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Runs libpng; on any libpng error returns 1 with j->message set. */
static int run_libpng(png_job *j)
{
    if (setjmp(png_jmpbuf(j->png)))
        return 1;
    png_set_read_fn(j->png, j, read_bytes);
    png_read_info(j->png, j->info);

    png_set_expand(j->png);
    png_set_strip_16(j->png);
    png_set_strip_alpha(j->png);
    png_set_gray_to_rgb(j->png);
    png_set_interlace_handling(j->png);
    png_read_update_info(j->png, j->info);

    uint32_t w = png_get_image_width(j->png, j->info);
    uint32_t h = png_get_image_height(j->png, j->info);
    if (w != j->img.width || h != j->img.height || png_get_rowbytes(j->png, j->info) != (size_t)w * 3 ||
        png_get_bit_depth(j->png, j->info) != 8 || png_get_channels(j->png, j->info) != 3)
        png_error(j->png, "unexpected layout after conversion to 8-bit RGB");
    for (uint32_t y = 0; y < h; y++)
        j->rows[y] = j->img.rgb + (size_t)y * w * 3;
    png_read_image(j->png, j->rows);
    png_read_end(j->png, NULL);
    return 0;
}

/* Walks the chunks from the signature to IEND: each chunk whose length
 * and type are there must fit whole in what is left of the file (length,
 * type, data and CRC). Fewer than 8 bytes at the end are left to libpng,
 * which fails to read a header there. */
static npl_status check_chunk_lengths(const uint8_t *data, size_t size, npl_error *err)
{
    size_t off = 8;
    while (size - off >= 8) {
        uint32_t len = be32(data + off);
        if (size - off < 12 || len > size - off - 12)
            return npl_error_set(err, NPL_ERR_FORMAT,
                                 "png: truncated or damaged: the chunk at offset %zu declares %u bytes, only %zu "
                                 "follow",
                                 off, len, size - off < 12 ? (size_t)0 : size - off - 12);
        if (memcmp(data + off + 4, "IEND", 4) == 0)
            break;
        off += 12 + (size_t)len;
    }
    return NPL_OK;
}

npl_status npl_png_probe(const uint8_t *data, size_t size, npl_image_info *out, npl_error *err)
{
    if (size < 8 + 8 + 13 + 4 || be32(data + 8) != 13 || memcmp(data + 12, "IHDR", 4) != 0)
        return npl_error_set(err, NPL_ERR_FORMAT, "png: no IHDR chunk after the signature");
    out->width = be32(data + 16);
    out->height = be32(data + 20);
    /* the RGB pixels, a row pointer each, libpng's two row buffers (up
     * to 8 bytes a pixel) */
    uint64_t w = out->width, h = out->height;
    out->decode_bytes = w * h * 3 + h * sizeof(png_bytep) + 2 * (w * 8 + 1);
    return NPL_OK;
}

npl_status npl_png_decode(const uint8_t *data, size_t size, const npl_image_limits *lim, npl_image *out,
                          npl_error *err)
{
    /* signature, then IHDR: length 13, type, width, height, ... */
    if (size < 8 + 8 + 13 + 4 || be32(data + 8) != 13 || memcmp(data + 12, "IHDR", 4) != 0)
        return npl_error_set(err, NPL_ERR_FORMAT, "png: no IHDR chunk after the signature");
    uint32_t w = be32(data + 16), h = be32(data + 20);
    npl_status st = npl_image_check_dims("png", w, h, lim, err);
    if (st || (st = check_chunk_lengths(data, size, err)))
        return st;

    png_job *j = calloc(1, sizeof *j);
    if (!j)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
    j->data = data;
    j->size = size;
    st = npl_image_alloc(&j->img, w, h, err);
    if (!st) {
        j->rows = malloc((size_t)h * sizeof *j->rows);
        j->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, j, on_error, on_warning);
        j->info = j->png ? png_create_info_struct(j->png) : NULL;
        if (!j->rows || !j->png || !j->info)
            st = npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the PNG decoder");
    }
    if (!st) {
        png_set_user_limits(j->png, lim->max_width, lim->max_height);
        png_set_chunk_malloc_max(j->png, PNG_CHUNK_MEMORY_MAX);
        png_set_chunk_cache_max(j->png, PNG_CHUNK_CACHE_MAX);
        /* Only the pixels matter: text, ICC profiles and every other
         * ancillary chunk (known or not) are skipped unread, never
         * decompressed or kept (hundreds of large zTXt chunks once made a
         * 2 MB file cost gigabytes). tRNS, which libpng needs to expand a
         * palette, is not among the chunks this drops. */
        png_set_keep_unknown_chunks(j->png, PNG_HANDLE_CHUNK_NEVER, NULL, -1);
        if (run_libpng(j))
            st = npl_error_set(err, NPL_ERR_FORMAT, "png: %s", j->message);
    }
    if (j->png)
        png_destroy_read_struct(&j->png, j->info ? &j->info : NULL, NULL);
    free(j->rows);
    if (!st)
        *out = j->img;
    else
        npl_image_free(&j->img);
    free(j);
    return st;
}
