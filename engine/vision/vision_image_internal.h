/* Shared by the image decoders (vision_image_*.c): limits and the output
 * buffer. Not part of the public API. */
#ifndef NPL_VISION_IMAGE_INTERNAL_H
#define NPL_VISION_IMAGE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "vision.h"

/* NPL_ERR_INVALID_ARG naming the format when width x height breaks a
 * limit (or is zero). Called on header values, before decoding. */
npl_status npl_image_check_dims(const char *format, uint64_t width, uint64_t height, const npl_image_limits *lim,
                                npl_error *err);

/* Allocates img->rgb for width x height pixels (dimensions already
 * checked) and sets the size. */
npl_status npl_image_alloc(npl_image *img, uint32_t width, uint32_t height, npl_error *err);

/* Per format: decode data[0..size) (magic already recognised, size within
 * the limit) into out, which is empty on entry and left empty on error. */
npl_status npl_png_decode(const uint8_t *data, size_t size, const npl_image_limits *lim, npl_image *out,
                          npl_error *err);
npl_status npl_jpeg_decode(const uint8_t *data, size_t size, const npl_image_limits *lim, npl_image *out,
                           npl_error *err);
npl_status npl_webp_decode(const uint8_t *data, size_t size, const npl_image_limits *lim, npl_image *out,
                           npl_error *err);

/* Per format: the header's dimensions and decode_bytes (npl_image_probe). */
npl_status npl_png_probe(const uint8_t *data, size_t size, npl_image_info *out, npl_error *err);
npl_status npl_jpeg_probe(const uint8_t *data, size_t size, npl_image_info *out, npl_error *err);
npl_status npl_webp_probe(const uint8_t *data, size_t size, npl_image_info *out, npl_error *err);

#endif
