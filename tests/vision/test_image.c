/* Image decoding: every committed test image against its reference pixels,
 * the limits (checked on the header, before decoding), and bad input
 * (truncated at every length, corrupted bytes, unknown formats) failing
 * cleanly with the right status.
 *
 *   test-image CASE IMAGES_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npl_test.h"
#include "vision.h"

typedef struct blob {
    unsigned char *data;
    size_t size;
} blob;

/* An image of the directory named after the case. */
static blob load(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", nt_arg(0) ? nt_arg(0) : "(no images directory given)", name);
    blob b;
    b.data = nt_read_file(path, &b.size);
    if (!b.data)
        nt_fatal("test-image needs %s", path);
    return b;
}

/* A binary PPM (P6) or PGM (P5, grey replicated to RGB) reference. */
static npl_image load_pnm(const char *name)
{
    blob b = load(name);
    npl_image img = {0};
    int w = 0, h = 0, maxv = 0, off = 0;
    char magic[3] = {0};
    if (sscanf((const char *)b.data, "%2s %d %d %d%n", magic, &w, &h, &maxv, &off) != 4 || maxv != 255) {
        nt_fatal("%s: not a simple PNM", name);
    }
    off++; /* the single whitespace after maxval */
    bool grey = !strcmp(magic, "P5");
    img.width = (uint32_t)w;
    img.height = (uint32_t)h;
    img.rgb = malloc((size_t)w * h * 3);
    for (size_t i = 0; i < (size_t)w * h; i++)
        for (int c = 0; c < 3; c++)
            img.rgb[3 * i + c] = b.data[off + (grey ? i : 3 * i + c)];
    free(b.data);
    return img;
}

static npl_status decode_file(const char *name, npl_image *img, npl_error *err)
{
    blob b = load(name);
    npl_status st = npl_image_decode(b.data, b.size, NULL, img, err);
    free(b.data);
    return st;
}

/* Mean and max absolute difference over the reference's pixels; the
 * reference may be a top-left crop of the image. */
static void compare(const char *name, const char *ref_name, uint32_t crop_w, uint32_t crop_h, double max_mean,
                    int max_abs)
{
    npl_image img, ref = load_pnm(ref_name);
    npl_error err;
    npl_status st = decode_file(name, &img, &err);
    CHECKF(st == NPL_OK, "%s: %s", name, err.message);
    if (st) {
        npl_image_free(&ref);
        return;
    }
    uint32_t w = crop_w ? crop_w : ref.width, h = crop_h ? crop_h : ref.height;
    CHECKF(img.width == w && img.height == h, "%s: %ux%u, expected %ux%u", name, img.width, img.height, w, h);
    if (img.width == w && img.height == h) {
        double sum = 0;
        int worst = 0;
        for (uint32_t y = 0; y < h; y++)
            for (uint32_t x = 0; x < w * 3; x++) {
                int d = abs((int)img.rgb[(size_t)y * w * 3 + x] - (int)ref.rgb[(size_t)y * ref.width * 3 + x]);
                sum += d;
                if (d > worst)
                    worst = d;
            }
        double mean = sum / ((double)w * h * 3);
        CHECKF(mean <= max_mean && worst <= max_abs, "%s vs %s: mean %.3f (limit %.3f), max %d (limit %d)", name,
              ref_name, mean, max_mean, worst, max_abs);
        printf("%-22s vs %-18s mean %.3f max %d\n", name, ref_name, mean, worst);
    }
    npl_image_free(&img);
    npl_image_free(&ref);
}

static void case_references(void)
{
    /* lossless: exact */
    compare("rose.png", "rose.ppm", 0, 0, 0, 0);
    compare("rose-alpha.png", "rose.ppm", 0, 0, 0, 0);
    compare("rose-interlaced.png", "rose.ppm", 0, 0, 0, 0);
    compare("rose-16.png", "rose.ppm", 35, 23, 0, 0);
    compare("rose-palette.png", "rose-palette.ppm", 0, 0, 0, 0);
    compare("rose-gray.png", "rose-gray.pgm", 0, 0, 0, 0);
    compare("rose-lossless.webp", "rose.ppm", 0, 0, 0, 0);
    /* libjpeg's own decoding of the same file (ImageMagick's, through the
     * same library): identical */
    compare("rose.jpg", "rose.jpg.ppm", 0, 0, 0, 0);
    /* lossy re-encodings of the photograph */
    compare("rose-progressive.jpg", "rose.jpg.ppm", 0, 0, 7.0, 64);
    compare("rose-gray.jpg", "rose-gray.pgm", 0, 0, 4.0, 40);
    compare("rose-cmyk.jpg", "rose.ppm", 0, 0, 4.0, 48);
    compare("rose-lossy.webp", "rose.ppm", 0, 0, 8.0, 96);
    const char *others[] = {"wizard.jpg", "logo.png", "checker-224.png", "tall.png"};
    for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
        npl_image img;
        npl_error err;
        CHECKF(decode_file(others[i], &img, &err) == NPL_OK, "%s: %s", others[i], err.message);
        npl_image_free(&img);
    }
}

static const char *all_images[] = {
    "rose.png", "rose-alpha.png", "rose-16.png", "rose-interlaced.png", "rose-palette.png", "rose-gray.png",
    "rose.jpg", "rose-progressive.jpg", "rose-gray.jpg", "rose-cmyk.jpg", "rose-lossless.webp", "rose-lossy.webp",
    "logo.png", "tall.png",
};

/* Every proper prefix of every image is refused (never a partial image),
 * with NPL_ERR_FORMAT (or UNSUPPORTED when too short to recognise). */
static void case_truncated(void)
{
    for (size_t i = 0; i < sizeof all_images / sizeof *all_images; i++) {
        blob b = load(all_images[i]);
        size_t accepted = 0;
        for (size_t n = 0; n < b.size; n++) {
            unsigned char *copy = malloc(n ? n : 1); /* exact size: ASan sees overreads */
            memcpy(copy, b.data, n);
            npl_image img;
            npl_error err;
            npl_status st = npl_image_decode(copy, n, NULL, &img, &err);
            if (st == NPL_OK) {
                accepted++;
                npl_image_free(&img);
            } else {
                CHECKF(st == NPL_ERR_FORMAT || st == NPL_ERR_UNSUPPORTED, "%s[:%zu]: status %s (%s)",
                      all_images[i], n, npl_status_name(st), err.message);
                CHECKF(img.rgb == NULL && img.width == 0, "%s[:%zu]: output not left empty", all_images[i], n);
            }
            free(copy);
        }
        CHECKF(accepted == 0, "%s: %zu truncated prefixes were accepted", all_images[i], accepted);
        free(b.data);
    }
}

/* Flipped bytes: anything but a crash or a leak. Deterministic
 * pseudo-random positions. */
static void case_corrupt(void)
{
    uint32_t rng = 12345;
    size_t outcomes[2] = {0, 0};
    for (size_t i = 0; i < sizeof all_images / sizeof *all_images; i++) {
        blob b = load(all_images[i]);
        for (int round = 0; round < 200; round++) {
            unsigned char *copy = malloc(b.size);
            memcpy(copy, b.data, b.size);
            for (int k = 0; k < 1 + round % 4; k++) {
                rng = rng * 1664525u + 1013904223u;
                size_t at = 8 + (rng >> 8) % (b.size - 8);
                copy[at] ^= (unsigned char)(1u << (rng % 8));
            }
            npl_image img;
            npl_error err;
            npl_status st = npl_image_decode(copy, b.size, NULL, &img, &err);
            outcomes[st == NPL_OK]++;
            if (st == NPL_OK)
                CHECKF(img.rgb && img.width > 0 && img.height > 0, "%s: ok without pixels", all_images[i]);
            else
                CHECKF(st != NPL_ERR_INTERNAL && err.message[0], "%s: status %s", all_images[i], npl_status_name(st));
            npl_image_free(&img);
            free(copy);
        }
        free(b.data);
    }
    printf("corrupted inputs: %zu refused, %zu decoded\n", outcomes[0], outcomes[1]);
    CHECKF(outcomes[0] > 0, "some corruption must be detected");
}

static void expect_limit(const char *what, const unsigned char *data, size_t size, const npl_image_limits *lim,
                         const char *needle)
{
    npl_image img;
    npl_error err;
    npl_status st = npl_image_decode(data, size, lim, &img, &err);
    CHECKF(st == NPL_ERR_INVALID_ARG, "%s: status %s (%s)", what, npl_status_name(st), err.message);
    CHECKF(strstr(err.message, needle) != NULL, "%s: '%s' not in '%s'", what, needle, err.message);
    CHECKF(img.rgb == NULL, "%s: output not empty", what);
}

static void put_be16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}

static void put_be32(unsigned char *p, uint32_t v)
{
    put_be16(p, v >> 16);
    put_be16(p + 2, v & 0xffff);
}

static void case_limits(void)
{
    npl_image_limits def;
    npl_image_limits_default(&def);
    CHECKF(def.max_bytes == 32u << 20 && def.max_width == 8192 && def.max_height == 8192 && def.max_pixels == 40000000u,
          "defaults");

    /* A header announcing 60000 x 60000 (or 8192 x 8192 = 67 M pixels) is
     * refused before a single row is decoded; the rest of the file is a
     * 70 x 46 image, which would not even match. */
    blob png = load("rose.png");
    put_be32(png.data + 16, 60000);
    put_be32(png.data + 20, 60000);
    expect_limit("png 60000x60000", png.data, png.size, NULL, "exceeds the limit of 8192 x 8192");
    put_be32(png.data + 16, 8192);
    put_be32(png.data + 20, 8192);
    expect_limit("png 8192x8192", png.data, png.size, NULL, "pixels");
    free(png.data);

    blob jpg = load("rose.jpg");
    bool patched = false;
    for (size_t i = 2; i + 9 < jpg.size; i++)
        if (jpg.data[i] == 0xFF && (jpg.data[i + 1] == 0xC0 || jpg.data[i + 1] == 0xC2)) {
            put_be16(jpg.data + i + 5, 60000); /* height */
            put_be16(jpg.data + i + 7, 60000); /* width */
            patched = true;
            break;
        }
    CHECKF(patched, "rose.jpg has a SOF marker");
    expect_limit("jpeg 60000x60000", jpg.data, jpg.size, NULL, "exceeds the limit");
    free(jpg.data);

    /* Custom limits, each format: rose is 70 x 46 = 3220 pixels. */
    npl_image_limits lim = def;
    lim.max_pixels = 3219;
    const char *names[] = {"rose.png", "rose.jpg", "rose-lossless.webp"};
    for (int i = 0; i < 3; i++) {
        blob b = load(names[i]);
        expect_limit(names[i], b.data, b.size, &lim, "3219 pixels");
        npl_image_limits narrow = def;
        narrow.max_width = 69;
        expect_limit(names[i], b.data, b.size, &narrow, "exceeds the limit of 69 x 8192");
        npl_image_limits small = def;
        small.max_bytes = b.size - 1;
        expect_limit(names[i], b.data, b.size, &small, "bytes exceeds the limit");
        npl_image img;
        npl_error err;
        lim.max_pixels = 3220;
        CHECKF(npl_image_decode(b.data, b.size, &lim, &img, &err) == NPL_OK, "%s at exactly the limit: %s", names[i],
              err.message);
        lim.max_pixels = 3219;
        npl_image_free(&img);
        free(b.data);
    }
}

static void case_formats(void)
{
    static const unsigned char gif[] = "GIF89a\x01\x00\x01\x00\x00\x00\x00;";
    npl_image img;
    npl_error err;
    CHECKF(npl_image_sniff(gif, sizeof gif - 1) == NPL_IMAGE_UNKNOWN, "gif is unknown");
    CHECKF(npl_image_decode(gif, sizeof gif - 1, NULL, &img, &err) == NPL_ERR_UNSUPPORTED, "gif refused");
    CHECKF(strstr(err.message, "not a PNG, JPEG or WebP") != NULL, "message: %s", err.message);
    CHECKF(npl_image_decode(gif, 0, NULL, &img, &err) == NPL_ERR_FORMAT, "empty input");
    CHECKF(npl_image_decode(NULL, 10, NULL, &img, &err) == NPL_ERR_FORMAT, "no data");
    CHECKF(npl_image_decode(gif, 4, NULL, NULL, &err) == NPL_ERR_INVALID_ARG, "no output");

    blob anim = load("rose-animated.webp");
    CHECKF(npl_image_sniff(anim.data, anim.size) == NPL_IMAGE_WEBP, "animated webp sniffed");
    CHECKF(npl_image_decode(anim.data, anim.size, NULL, &img, &err) == NPL_ERR_UNSUPPORTED, "animation refused: %s",
          err.message);
    free(anim.data);

    const char *names[] = {"rose.png", "rose.jpg", "rose-lossy.webp"};
    npl_image_format want[] = {NPL_IMAGE_PNG, NPL_IMAGE_JPEG, NPL_IMAGE_WEBP};
    const char *fmt_names[] = {"png", "jpeg", "webp"};
    for (int i = 0; i < 3; i++) {
        blob b = load(names[i]);
        CHECKF(npl_image_sniff(b.data, b.size) == want[i], "%s sniffed", names[i]);
        CHECKF(!strcmp(npl_image_format_name(want[i]), fmt_names[i]), "format name");
        free(b.data);
    }

    /* A PNG whose first chunk is not IHDR, and one with a zero width. */
    blob png = load("rose.png");
    memcpy(png.data + 12, "IDAT", 4);
    CHECKF(npl_image_decode(png.data, png.size, NULL, &img, &err) == NPL_ERR_FORMAT, "no IHDR: %s", err.message);
    memcpy(png.data + 12, "IHDR", 4);
    put_be32(png.data + 16, 0);
    CHECKF(npl_image_decode(png.data, png.size, NULL, &img, &err) == NPL_ERR_FORMAT, "zero width: %s", err.message);
    free(png.data);

    /* A chunk declaring more bytes than the file holds is refused before
     * libpng sizes anything by it (the fuzzer's 75-byte input that made
     * libpng allocate 233 MB). */
    png = load("rose.png");
    put_be32(png.data + 33, 0x6f6f6f6fu); /* the chunk after IHDR */
    CHECKF(npl_image_decode(png.data, png.size, NULL, &img, &err) == NPL_ERR_FORMAT &&
              strstr(err.message, "truncated or damaged") != NULL,
          "oversized chunk: %s", err.message);
    free(png.data);
}

/* npl_image_probe: the header's dimensions equal the decoded ones, the
 * estimate covers at least the pixels, the limits are applied, and every
 * prefix either probes or fails cleanly (never reads past the end). */
static void case_probe(void)
{
    for (size_t i = 0; i < sizeof all_images / sizeof *all_images; i++) {
        blob b = load(all_images[i]);
        npl_image_info info;
        npl_image img;
        npl_error err;
        npl_status st = npl_image_probe(b.data, b.size, NULL, &info, &err);
        CHECKF(st == NPL_OK, "%s: %s", all_images[i], err.message);
        if (st == NPL_OK && npl_image_decode(b.data, b.size, NULL, &img, &err) == NPL_OK) {
            CHECKF(info.width == img.width && info.height == img.height, "%s: probe %ux%u, decode %ux%u",
                  all_images[i], info.width, info.height, img.width, img.height);
            CHECKF(info.decode_bytes >= (uint64_t)img.width * img.height * 3, "%s: estimate %llu too small",
                  all_images[i], (unsigned long long)info.decode_bytes);
            CHECKF(info.format == npl_image_sniff(b.data, b.size), "%s: format", all_images[i]);
            npl_image_limits lim;
            npl_image_limits_default(&lim);
            lim.max_pixels = (uint64_t)img.width * img.height - 1;
            CHECKF(npl_image_probe(b.data, b.size, &lim, &info, &err) == NPL_ERR_INVALID_ARG,
                  "%s: pixel limit not applied", all_images[i]);
            npl_image_free(&img);
        }
        for (size_t n = 0; n < b.size && n < 4096; n++) {
            unsigned char *copy = malloc(n ? n : 1); /* exact size: ASan sees overreads */
            memcpy(copy, b.data, n);
            st = npl_image_probe(copy, n, NULL, &info, &err);
            CHECKF(st == NPL_OK || st == NPL_ERR_FORMAT || st == NPL_ERR_UNSUPPORTED, "%s[:%zu]: %s",
                  all_images[i], n, npl_status_name(st));
            free(copy);
        }
        free(b.data);
    }
}

NT_MAIN({"references", case_references}, {"truncated", case_truncated}, {"corrupt", case_corrupt},
        {"limits", case_limits}, {"formats", case_formats}, {"probe", case_probe})
