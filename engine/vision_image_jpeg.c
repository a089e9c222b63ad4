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
 * coefficient) and on the number of scans (a file of thousands of tiny
 * progressive scans is a CPU bomb). */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* jpeglib.h first: jerror.h depends on its configuration */
#include <jpeglib.h>
#include <jerror.h>

#include "vision_image_internal.h"

#define JPEG_MAX_SCANS 1000
#define JPEG_MAX_MEMORY (768L << 20)

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
    if (cinfo->is_decompressor && ((j_decompress_ptr)cinfo)->input_scan_number > JPEG_MAX_SCANS) {
        jpeg_job *j = (jpeg_job *)cinfo->client_data;
        snprintf(j->message, sizeof j->message, "more than %d scans", JPEG_MAX_SCANS);
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

npl_status npl_jpeg_decode(const uint8_t *data, size_t size, const npl_image_limits *lim, npl_image *out,
                           npl_error *err)
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
    if (j->created)
        jpeg_destroy_decompress(&j->cinfo);
    free(j->cmyk_row);
    if (st == NPL_OK)
        *out = j->img;
    else
        npl_image_free(&j->img);
    free(j);
    return st;
}
