/* npullm-bench --image: the vision tower on one image (bench_image.c). */
#ifndef NPULLM_BENCH_IMAGE_H
#define NPULLM_BENCH_IMAGE_H

#include <stdbool.h>

typedef struct bench_image_opts {
    const char *image, *mmproj;
    const char *model; /* optional: time the prompt's prefill too */
    int n_threads;
    long reps;
    bool exact, bf16, q8, json;
} bench_image_opts;

/* Prints the figures; 0 on success, 1 on an error (message on stderr). */
int bench_image(const bench_image_opts *o);

#endif
