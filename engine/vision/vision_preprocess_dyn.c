/* gemma4v's input size: the image keeps its proportions, its sides
 * become multiples of align (patch size times pooling) and its area is
 * brought within [min_pixels, max_pixels], as llama.cpp computes it for
 * this projector ("smart resize", in float where it uses float):
 *
 *   w, h = max(align, round(w / align) * align), the same for h
 *   area > max: beta = sqrt(W * H / max), sides floor(W / beta) to align (at least align)
 *   area < min: beta = sqrt(min / (W * H)), sides ceil(W * beta) to align
 *
 * The image is then letterboxed into that size exactly as Gemma 3's
 * square (vision_preprocess.c: bilinear on the corner-aligned grid,
 * centred on black) and normalised with the file's mean and std. The
 * tensor starts with the width and height (two floats), then the planes.
 * Sizes of more than NPL_VISION_MAX_DYN_TOKENS tokens (images longer than
 * about 1:30 on the default limits) are refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vision_internal.h"

static int64_t round_by(float x, uint32_t f)
{
    return (int64_t)roundf(x / (float)f) * f;
}

static int64_t floor_by(float x, uint32_t f)
{
    return (int64_t)floorf(x / (float)f) * f;
}

static int64_t ceil_by(double x, uint32_t f)
{
    return (int64_t)ceil(x / (double)f) * f;
}

bool npl_vision_dyn_size(const npl_vision_pixel_params *p, uint32_t width, uint32_t height, uint32_t *out_w,
                         uint32_t *out_h)
{
    uint32_t a = p->align;
    if (a == 0 || width == 0 || height == 0)
        return false;
    int64_t w = round_by((float)width, a), h = round_by((float)height, a);
    w = w > a ? w : a;
    h = h > a ? h : a;
    if (p->max_pixels && w * h > p->max_pixels) {
        float beta = sqrtf((float)height * (float)width / (float)p->max_pixels);
        w = floor_by((float)width / beta, a);
        h = floor_by((float)height / beta, a);
        w = w > a ? w : a;
        h = h > a ? h : a;
    } else if (p->min_pixels && w * h < p->min_pixels) {
        float beta = sqrtf((float)p->min_pixels / ((float)height * (float)width));
        w = ceil_by((double)((float)width * beta), a);
        h = ceil_by((double)((float)height * beta), a);
    }
    /* very elongated images come out larger (the short side stays at
     * align): bounded so the activations stay bounded */
    if (w <= 0 || h <= 0 || (uint64_t)(w / a) * (uint64_t)(h / a) > NPL_VISION_MAX_DYN_TOKENS)
        return false;
    *out_w = (uint32_t)w;
    *out_h = (uint32_t)h;
    return true;
}

npl_status npl_vision_dyn_preprocess(const npl_vision_pixel_params *p, const npl_image *img, float *out, npl_error *err)
{
    uint32_t w, h;
    if (!npl_vision_dyn_size(p, img->width, img->height, &w, &h))
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "vision: a %u x %u image is too elongated for this projector",
                             img->width, img->height);
    size_t plane = (size_t)w * h;
    uint8_t *rgb = calloc(plane, 3); /* black background */
    if (!rgb)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for a %u x %u image", w, h);
    npl_vision_letterbox(img, rgb, w, h);
    out[0] = (float)w;
    out[1] = (float)h;
    npl_vision_normalize(p, rgb, plane, out + 2);
    free(rgb);
    return NPL_OK;
}

