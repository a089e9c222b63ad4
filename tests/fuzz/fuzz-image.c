/* Fuzz target for image decoding: any buffer through npl_image_decode
 * with limits small enough to keep each input fast. A decoded image must
 * respect the limits and own width * height * 3 readable bytes; a refused
 * one must leave the output empty and explain itself. Any violated
 * invariant aborts, which libFuzzer reports as a crash. */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_target.h"
#include "vision.h"

static void require(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz-image: invariant violated: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    npl_image_limits lim;
    npl_image_limits_default(&lim);
    lim.max_width = 4096;
    lim.max_height = 4096;
    lim.max_pixels = 1u << 20;
    npl_image img;
    npl_error err;
    npl_status st = npl_image_decode(data, size, &lim, &img, &err);
    if (st == NPL_OK) {
        require(img.rgb != NULL, "pixels");
        require(img.width >= 1 && img.height >= 1 && img.width <= lim.max_width && img.height <= lim.max_height,
                "dimensions within the limits");
        require((uint64_t)img.width * img.height <= lim.max_pixels, "pixel count within the limit");
        size_t n = (size_t)img.width * img.height * 3;
        volatile unsigned sink = img.rgb[0] + img.rgb[n - 1];
        (void)sink;
        require(npl_image_sniff(data, size) != NPL_IMAGE_UNKNOWN, "only known formats decode");
    } else {
        require(img.rgb == NULL && img.width == 0 && img.height == 0, "output empty on error");
        require(err.code == st && err.message[0] != '\0', "error explained");
        require(st == NPL_ERR_FORMAT || st == NPL_ERR_UNSUPPORTED || st == NPL_ERR_INVALID_ARG ||
                    st == NPL_ERR_NOMEM,
                "status of a bad image");
    }
    npl_image_free(&img);
    return 0;
}
