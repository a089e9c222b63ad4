/* Image decoding front door: recognise the format by its magic bytes,
 * enforce the encoded-size limit, hand over to the format's decoder (which
 * checks the header dimensions before decoding anything). */
#include <stdlib.h>
#include <string.h>

#include "vision_image_internal.h"

void npl_image_limits_default(npl_image_limits *lim)
{
    lim->max_bytes = NPL_IMAGE_MAX_BYTES_DEFAULT;
    lim->max_width = NPL_IMAGE_MAX_SIDE_DEFAULT;
    lim->max_height = NPL_IMAGE_MAX_SIDE_DEFAULT;
    lim->max_pixels = NPL_IMAGE_MAX_PIXELS_DEFAULT;
}

npl_image_format npl_image_sniff(const void *data, size_t size)
{
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    const uint8_t *p = data;
    if (!p)
        return NPL_IMAGE_UNKNOWN;
    if (size >= 8 && memcmp(p, png_sig, 8) == 0)
        return NPL_IMAGE_PNG;
    if (size >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF)
        return NPL_IMAGE_JPEG;
    if (size >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WEBP", 4) == 0)
        return NPL_IMAGE_WEBP;
    return NPL_IMAGE_UNKNOWN;
}

const char *npl_image_format_name(npl_image_format f)
{
    switch (f) {
    case NPL_IMAGE_PNG: return "png";
    case NPL_IMAGE_JPEG: return "jpeg";
    case NPL_IMAGE_WEBP: return "webp";
    default: return "unknown";
    }
}

npl_status npl_image_check_dims(const char *format, uint64_t width, uint64_t height, const npl_image_limits *lim,
                                npl_error *err)
{
    if (width == 0 || height == 0)
        return npl_error_set(err, NPL_ERR_FORMAT, "%s: image of %llu x %llu pixels is empty", format,
                             (unsigned long long)width, (unsigned long long)height);
    if (width > lim->max_width || height > lim->max_height)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "%s: image of %llu x %llu pixels exceeds the limit of %u x %u",
                             format, (unsigned long long)width, (unsigned long long)height, lim->max_width,
                             lim->max_height);
    if (width * height > lim->max_pixels)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "%s: image of %llu x %llu pixels exceeds the limit of %llu pixels",
                             format, (unsigned long long)width, (unsigned long long)height,
                             (unsigned long long)lim->max_pixels);
    return NPL_OK;
}

npl_status npl_image_alloc(npl_image *img, uint32_t width, uint32_t height, npl_error *err)
{
    size_t n = (size_t)width * height * 3;
    img->rgb = malloc(n);
    if (!img->rgb)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for a %u x %u image", width, height);
    img->width = width;
    img->height = height;
    return NPL_OK;
}

void npl_image_free(npl_image *img)
{
    if (!img)
        return;
    free(img->rgb);
    memset(img, 0, sizeof *img);
}

npl_status npl_image_decode(const void *data, size_t size, const npl_image_limits *lim, npl_image *out,
                            npl_error *err)
{
    npl_image_limits defaults;
    if (!lim) {
        npl_image_limits_default(&defaults);
        lim = &defaults;
    }
    if (!out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "image: no output given");
    memset(out, 0, sizeof *out);
    if (!data || size == 0)
        return npl_error_set(err, NPL_ERR_FORMAT, "image: no data");
    if (size > lim->max_bytes)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "image: %zu bytes exceeds the limit of %zu", size,
                             lim->max_bytes);
    npl_status st;
    switch (npl_image_sniff(data, size)) {
    case NPL_IMAGE_PNG: st = npl_png_decode(data, size, lim, out, err); break;
    case NPL_IMAGE_JPEG: st = npl_jpeg_decode(data, size, lim, out, err); break;
    case NPL_IMAGE_WEBP: st = npl_webp_decode(data, size, lim, out, err); break;
    default:
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "image: not a PNG, JPEG or WebP file");
    }
    if (st != NPL_OK)
        npl_image_free(out);
    return st;
}

npl_status npl_image_probe(const void *data, size_t size, const npl_image_limits *lim, npl_image_info *out,
                           npl_error *err)
{
    if (!out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "image: no output given");
    memset(out, 0, sizeof *out);
    if (!data || size == 0)
        return npl_error_set(err, NPL_ERR_FORMAT, "image: no data");
    if (lim && size > lim->max_bytes)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "image: %zu bytes exceeds the limit of %zu", size,
                             lim->max_bytes);
    out->format = npl_image_sniff(data, size);
    npl_status st;
    switch (out->format) {
    case NPL_IMAGE_PNG: st = npl_png_probe(data, size, out, err); break;
    case NPL_IMAGE_JPEG: st = npl_jpeg_probe(data, size, out, err); break;
    case NPL_IMAGE_WEBP: st = npl_webp_probe(data, size, out, err); break;
    default:
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "image: not a PNG, JPEG or WebP file");
    }
    if (st == NPL_OK && lim)
        st = npl_image_check_dims(npl_image_format_name(out->format), out->width, out->height, lim, err);
    return st;
}
