/* The image as the Gemma 3 encoder receives it, computed the way llama.cpp
 * does it for this projector (its gate compares against us): the image is
 * scaled to fit an image_size square keeping its aspect ratio, centred on
 * black, and each channel normalised as (v / 255 - mean) / std.
 *
 * The scaling is bilinear with the sampling grid on the corner pixels
 * (output x maps to x * (w - 1) / (w_out - 1)), each result truncated to
 * 8 bits, in float arithmetic as llama.cpp writes it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vision_internal.h"

static float lerp(float s, float e, float t)
{
    return s + (e - s) * t;
}

/* src (sw x sh RGB) scaled to dw x dh RGB written into dst at (ox, oy)
 * of an image dst_w pixels wide. */
static void scale_bilinear(const uint8_t *src, uint32_t sw, uint32_t sh, uint8_t *dst, uint32_t dst_w, uint32_t ox,
                           uint32_t oy, uint32_t dw, uint32_t dh)
{
    float x_ratio = dw > 1 ? (float)(sw - 1) / (float)(dw - 1) : 0.0f;
    float y_ratio = dh > 1 ? (float)(sh - 1) / (float)(dh - 1) : 0.0f;
    for (uint32_t y = 0; y < dh; y++) {
        float py = (float)y * y_ratio;
        uint32_t y0 = (uint32_t)py;
        if (y0 > sh - 1)
            y0 = sh - 1;
        uint32_t y1 = y0 + 1 < sh ? y0 + 1 : sh - 1;
        float yf = py - (float)y0;
        uint8_t *out = dst + ((size_t)(oy + y) * dst_w + ox) * 3;
        for (uint32_t x = 0; x < dw; x++) {
            float px = (float)x * x_ratio;
            uint32_t x0 = (uint32_t)px;
            if (x0 > sw - 1)
                x0 = sw - 1;
            uint32_t x1 = x0 + 1 < sw ? x0 + 1 : sw - 1;
            float xf = px - (float)x0;
            const uint8_t *p00 = src + ((size_t)y0 * sw + x0) * 3;
            const uint8_t *p10 = src + ((size_t)y0 * sw + x1) * 3;
            const uint8_t *p01 = src + ((size_t)y1 * sw + x0) * 3;
            const uint8_t *p11 = src + ((size_t)y1 * sw + x1) * 3;
            for (int c = 0; c < 3; c++) {
                float top = lerp((float)p00[c], (float)p10[c], xf);
                float bottom = lerp((float)p01[c], (float)p11[c], xf);
                out[3 * x + c] = (uint8_t)lerp(top, bottom, yf);
            }
        }
    }
}

/* Size of the scaled image inside a tw x th target: the larger scale that
 * fits, sides rounded up (and capped at the target). */
static void fit_size(uint32_t w, uint32_t h, uint32_t tw, uint32_t th, uint32_t *fw, uint32_t *fh)
{
    float scale_w = (float)tw / (float)w;
    float scale_h = (float)th / (float)h;
    float scale = scale_w < scale_h ? scale_w : scale_h;
    float nw = ceilf((float)w * scale), nh = ceilf((float)h * scale);
    *fw = nw >= (float)tw ? tw : (nw < 1.0f ? 1u : (uint32_t)nw);
    *fh = nh >= (float)th ? th : (nh < 1.0f ? 1u : (uint32_t)nh);
}

size_t npl_vision_pixel_count(const npl_vision_pixel_params *p)
{
    return p->align ? 0 : (size_t)3 * p->image_size * p->image_size;
}

size_t npl_vision_pixel_count_for(const npl_vision_pixel_params *p, uint32_t width, uint32_t height)
{
    uint32_t w, h;
    if (!p->align)
        return npl_vision_pixel_count(p);
    return npl_vision_dyn_size(p, width, height, &w, &h) ? 2 + (size_t)3 * w * h : 0;
}

uint32_t npl_vision_image_n_tokens(const npl_vision *v, uint32_t width, uint32_t height)
{
    npl_vision_pixel_params p;
    uint32_t w, h;
    npl_vision_get_pixel_params(v, &p);
    if (!p.align)
        return v->info.n_tokens;
    return npl_vision_dyn_size(&p, width, height, &w, &h) ? (w / p.align) * (h / p.align) : 0;
}

uint32_t npl_vision_pixels_n_tokens(const npl_vision *v, const npl_vision_pixel_params *p, const float *pixels)
{
    if (!p->align)
        return v->info.n_tokens;
    return ((uint32_t)pixels[0] / p->align) * ((uint32_t)pixels[1] / p->align);
}

size_t npl_vision_pixels_len(const npl_vision_pixel_params *p, const float *pixels)
{
    return p->align ? 2 + (size_t)3 * (size_t)pixels[0] * (size_t)pixels[1] : npl_vision_pixel_count(p);
}

void npl_vision_get_pixel_params(const npl_vision *v, npl_vision_pixel_params *out)
{
    *out = v->pixel;
}

void npl_vision_normalize(const npl_vision_pixel_params *p, const uint8_t *rgb, size_t n, float *out)
{
    const float *mean = p->image_mean, *std = p->image_std;
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++)
            out[(size_t)c * n + i] = ((float)rgb[3 * i + c] / 255.0f - mean[c]) / std[c];
}

void npl_vision_letterbox(const npl_image *img, uint8_t *dst, uint32_t dst_w, uint32_t dst_h)
{
    if (img->width == dst_w && img->height == dst_h) {
        memcpy(dst, img->rgb, (size_t)dst_w * dst_h * 3);
        return;
    }
    uint32_t fw, fh;
    fit_size(img->width, img->height, dst_w, dst_h, &fw, &fh);
    scale_bilinear(img->rgb, img->width, img->height, dst, dst_w, (dst_w - fw) / 2, (dst_h - fh) / 2, fw, fh);
}

npl_status npl_image_preprocess(const npl_vision_pixel_params *p, const npl_image *img, float *out, npl_error *err)
{
    if (!p || p->image_size == 0 || !img || !img->rgb || img->width == 0 || img->height == 0 || !out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "vision: no image to preprocess");
    if (p->align)
        return npl_vision_dyn_preprocess(p, img, out, err);
    uint32_t s = p->image_size;
    size_t plane = (size_t)s * s;
    uint8_t *square = calloc(plane, 3); /* black background */
    if (!square)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for a %u x %u image", s, s);
    npl_vision_letterbox(img, square, s, s);
    npl_vision_normalize(p, square, plane, out);
    free(square);
    return NPL_OK;
}

npl_status npl_vision_preprocess(const npl_vision *v, const npl_image *img, float *out, npl_error *err)
{
    if (!v)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "vision: no tower");
    npl_vision_pixel_params p;
    npl_vision_get_pixel_params(v, &p);
    return npl_image_preprocess(&p, img, out, err);
}
