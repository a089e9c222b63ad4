/* JPEG through libjpeg(-turbo). Like libpng it reports errors by
 * longjmp'ing out of its calls: the decompressor and the pixels live in
 * one job struct that the landing site frees, and no local is written
 * between setjmp and a possible longjmp.
 *
 * Strictness: libjpeg only warns about data it could not decode (and then
 * fills the rest of the image with grey); here those warnings are errors,
 * so a truncated or corrupt file fails instead of yielding a half image.
 * Limits: dimensions checked from the frame header before decompressing,
 * a cap on the decoder's working memory (progressive files keep every
 * coefficient), on the number of scans and on scans times pixels (a file
 * of hundreds of tiny progressive scans is a CPU bomb). */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* jpeglib.h first: jerror.h depends on its configuration */
#include <jpeglib.h>
#include <jerror.h>

#include "vision_image_internal.h"

/* Ordinary progressive files have about ten scans; hundreds only serve
 * to multiply the work. */
#define JPEG_MAX_SCANS 100
/* Scans times pixels: each scan walks the whole coefficient set, so this
 * bounds the decode time (26 scans of a 40-megapixel image). */
#define JPEG_MAX_WORK (1ull << 30)
/* The decoder's own memory (a progressive file keeps every coefficient:
 * 2 bytes per sample, 240 MB at 40 megapixels in 4:4:4). */
#define JPEG_MAX_MEMORY (320L << 20)

typedef struct jpeg_job {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr jerr;
    struct jpeg_progress_mgr progress;
    jmp_buf landing;
    bool created;
    uint8_t *cmyk_row;
    npl_image img;
    char message[JMSG_LENGTH_MAX];
} jpeg_job;

static void on_error(j_common_ptr cinfo)
{
    jpeg_job *j = (jpeg_job *)cinfo->client_data;
    cinfo->err->format_message(cinfo, j->message);
    longjmp(j->landing, 1);
}

/* Warnings that mean pixels were lost or invented are errors; the rest
 * (an unusual JFIF version, stray bytes between markers) are ignored.
 * Trace messages (level >= 1) are never shown. */
static void on_message(j_common_ptr cinfo, int level)
{
    if (level >= 0)
        return;
    switch (cinfo->err->msg_code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_ARITH_BAD_CODE:
    case JWRN_MUST_RESYNC:
    case JWRN_NOT_SEQUENTIAL:
    case JWRN_BOGUS_PROGRESSION:
    case JWRN_TOO_MUCH_DATA:
        on_error(cinfo);
        break;
    default:
        break;
    }
}

static void on_progress(j_common_ptr cinfo)
{
    if (!cinfo->is_decompressor)
        return;
    j_decompress_ptr ci = (j_decompress_ptr)cinfo;
    jpeg_job *j = (jpeg_job *)cinfo->client_data;
    uint64_t scans = (uint64_t)(ci->input_scan_number > 0 ? ci->input_scan_number : 0);
    if (scans > JPEG_MAX_SCANS) {
        snprintf(j->message, sizeof j->message, "more than %d scans", JPEG_MAX_SCANS);
        longjmp(j->landing, 1);
    }
    if (scans * ci->image_width * ci->image_height > JPEG_MAX_WORK) {
        snprintf(j->message, sizeof j->message, "%llu scans of %u x %u pixels are too much work",
                 (unsigned long long)scans, ci->image_width, ci->image_height);
        longjmp(j->landing, 1);
    }
}

/* Adobe CMYK/YCCK files store inverted ink values: with 255 meaning no
 * ink, red is C * K / 255 and so on. */
static void cmyk_to_rgb(const uint8_t *src, uint8_t *dst, uint32_t width)
{
    for (uint32_t x = 0; x < width; x++) {
        unsigned k = src[4 * x + 3];
        for (int c = 0; c < 3; c++)
            dst[3 * x + c] = (uint8_t)((src[4 * x + c] * k + 127) / 255);
    }
}

/* Runs libjpeg; returns 1 on a libjpeg error (j->message set) or 2 with
 * *st set when the dimensions break a limit (checked after the header,
 * before decompression) or memory runs out. */
static int run_libjpeg(jpeg_job *j, const uint8_t *data, size_t size, const npl_image_limits *lim, npl_status *st,
                       npl_error *err)
{
    j_decompress_ptr ci = &j->cinfo;
    if (setjmp(j->landing))
        return 1;
    jpeg_create_decompress(ci);
    j->created = true;
    ci->client_data = j;
    ci->progress = &j->progress;
    ci->mem->max_memory_to_use = JPEG_MAX_MEMORY;
    jpeg_mem_src(ci, data, (unsigned long)size);
    jpeg_read_header(ci, TRUE);
    if (lim == NULL) /* probing: the header is all we wanted */
        return 0;
    *st = npl_image_check_dims("jpeg", ci->image_width, ci->image_height, lim, err);
    if (*st != NPL_OK)
        return 2;

    bool cmyk = ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK;
    ci->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    jpeg_start_decompress(ci);
    unsigned comps = cmyk ? 4 : 3;
    if (ci->output_width != ci->image_width || ci->output_height != ci->image_height ||
        (unsigned)ci->output_components != comps) {
        snprintf(j->message, sizeof j->message, "unexpected output layout");
        return 1;
    }
    *st = npl_image_alloc(&j->img, ci->output_width, ci->output_height, err);
    if (*st != NPL_OK)
        return 2;
    if (cmyk) {
        j->cmyk_row = malloc((size_t)ci->output_width * 4);
        if (!j->cmyk_row) {
            *st = npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
            return 2;
        }
    }
    while (ci->output_scanline < ci->output_height) {
        uint8_t *row = j->img.rgb + (size_t)ci->output_scanline * ci->output_width * 3;
        JSAMPROW dst = cmyk ? j->cmyk_row : row;
        if (jpeg_read_scanlines(ci, &dst, 1) != 1) {
            snprintf(j->message, sizeof j->message, "decoder stopped at row %u", ci->output_scanline);
            return 1;
        }
        if (cmyk)
            cmyk_to_rgb(j->cmyk_row, row, ci->output_width);
    }
    jpeg_finish_decompress(ci);
    return 0;
}

/* Decodes into out, or with lim NULL only reads the header into info. */
static npl_status jpeg_run(const uint8_t *data, size_t size, const npl_image_limits *lim, npl_image *out,
                           npl_image_info *info, npl_error *err)
{
    jpeg_job *j = calloc(1, sizeof *j);
    if (!j)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
    j->cinfo.err = jpeg_std_error(&j->jerr);
    j->jerr.error_exit = on_error;
    j->jerr.emit_message = on_message;
    j->progress.progress_monitor = on_progress;
    j->cinfo.client_data = j;

    npl_status st = NPL_OK;
    if (run_libjpeg(j, data, size, lim, &st, err) == 1)
        st = npl_error_set(err, NPL_ERR_FORMAT, "jpeg: %s", j->message);
    if (st == NPL_OK && info != NULL) {
        const struct jpeg_decompress_struct *ci = &j->cinfo;
        uint64_t px = (uint64_t)ci->image_width * ci->image_height;
        uint64_t coefs = ci->progressive_mode ? px * 2 * (uint64_t)ci->num_components : 0;
        info->width = ci->image_width;
        info->height = ci->image_height;
        /* RGB pixels, the coefficients a progressive file keeps (the
         * decoder stops at JPEG_MAX_MEMORY), a few rows of buffers */
        info->decode_bytes = px * 3 + (coefs < (uint64_t)JPEG_MAX_MEMORY ? coefs : (uint64_t)JPEG_MAX_MEMORY) +
                             (uint64_t)ci->image_width * 64 * (uint64_t)ci->num_components;
    }
    if (j->created)
        jpeg_destroy_decompress(&j->cinfo);
    free(j->cmyk_row);
    if (st == NPL_OK && out != NULL)
        *out = j->img;
    else
        npl_image_free(&j->img);
    free(j);
    return st;
}

npl_status npl_jpeg_decode(const uint8_t *data, size_t size, const npl_image_limits *lim, npl_image *out,
                           npl_error *err)
{
    return jpeg_run(data, size, lim, out, NULL, err);
}

npl_status npl_jpeg_probe(const uint8_t *data, size_t size, npl_image_info *out, npl_error *err)
{
    return jpeg_run(data, size, NULL, NULL, out, err);
}
