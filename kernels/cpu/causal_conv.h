/* One channel of a causal depthwise convolution over time, one input at a
 * time: the window is the channel's last width - 1 inputs (its tail, kept by
 * the caller, oldest first) and the new input; the tail then slides by one.
 * Summed oldest first in float, as llama.cpp's ssm_conv does. Shared by the
 * Gated DeltaNet (qwen35) and the short convolutions (lfm2). */
#ifndef NPL_CAUSAL_CONV_H
#define NPL_CAUSAL_CONV_H

#include <stddef.h>

static inline float npl_causal_conv_step(float *tail, const float *w, size_t width, float in)
{
    float acc = 0.0f;
    for (size_t q = 0; q + 1 < width; q++)
        acc += tail[q] * w[q];
    acc += in * w[width - 1];
    for (size_t q = 0; q + 2 < width; q++)
        tail[q] = tail[q + 1];
    tail[width - 2] = in;
    return acc;
}

#endif
