/* WebP through libwebp: the bitstream features (size, animation) are read
 * first, the limits checked, then the still image is decoded straight into
 * our RGB buffer. libwebp reports errors by status codes. */
#include <webp/decode.h>

#include "vision_image_internal.h"

static const char *status_text(VP8StatusCode s)
{
    switch (s) {
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "corrupt bitstream";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "decoding suspended";
    case VP8_STATUS_USER_ABORT: return "decoding aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "file is truncated";
    default: return "decoding failed";
    }
}

npl_status npl_webp_decode(const uint8_t *data, size_t size, const npl_image_limits *lim, npl_image *out,
                           npl_error *err)
{
    WebPBitstreamFeatures f;
    VP8StatusCode s = WebPGetFeatures(data, size, &f);
    if (s != VP8_STATUS_OK)
        return npl_error_set(err, s == VP8_STATUS_OUT_OF_MEMORY ? NPL_ERR_NOMEM : NPL_ERR_FORMAT, "webp: %s",
                             status_text(s));
    if (f.has_animation)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "webp: animated images are not supported");
    if (f.width <= 0 || f.height <= 0)
        return npl_error_set(err, NPL_ERR_FORMAT, "webp: bad dimensions %d x %d", f.width, f.height);
    npl_status st = npl_image_check_dims("webp", (uint64_t)f.width, (uint64_t)f.height, lim, err);
    if (st)
        return st;

    WebPDecoderConfig cfg;
    if (!WebPInitDecoderConfig(&cfg))
        return npl_error_set(err, NPL_ERR_INTERNAL, "webp: library version mismatch");
    npl_image img = {0};
    st = npl_image_alloc(&img, (uint32_t)f.width, (uint32_t)f.height, err);
    if (st)
        return st;
    cfg.output.colorspace = MODE_RGB;
    cfg.output.is_external_memory = 1;
    cfg.output.u.RGBA.rgba = img.rgb;
    cfg.output.u.RGBA.stride = f.width * 3;
    cfg.output.u.RGBA.size = (size_t)f.width * f.height * 3;
    s = WebPDecode(data, size, &cfg);
    WebPFreeDecBuffer(&cfg.output);
    if (s != VP8_STATUS_OK) {
        npl_image_free(&img);
        return npl_error_set(err, s == VP8_STATUS_OUT_OF_MEMORY ? NPL_ERR_NOMEM : NPL_ERR_FORMAT, "webp: %s",
                             status_text(s));
    }
    *out = img;
    return NPL_OK;
}

npl_status npl_webp_probe(const uint8_t *data, size_t size, npl_image_info *out, npl_error *err)
{
    WebPBitstreamFeatures f;
    VP8StatusCode s = WebPGetFeatures(data, size, &f);
    if (s != VP8_STATUS_OK)
        return npl_error_set(err, s == VP8_STATUS_OUT_OF_MEMORY ? NPL_ERR_NOMEM : NPL_ERR_FORMAT, "webp: %s",
                             status_text(s));
    if (f.width <= 0 || f.height <= 0)
        return npl_error_set(err, NPL_ERR_FORMAT, "webp: bad dimensions %d x %d", f.width, f.height);
    out->width = (uint32_t)f.width;
    out->height = (uint32_t)f.height;
    /* the RGB pixels plus, for a lossless image, libwebp's ARGB plane */
    out->decode_bytes = (uint64_t)out->width * out->height * (3 + 4);
    return NPL_OK;
}
