/* Top-k log-probabilities of a logit vector (log-softmax), for reporting
 * the alternatives a model considered. */
#include <math.h>

#include "npullm.h"

size_t npl_top_logprobs(const float *logits, uint32_t n_vocab, size_t k, int32_t *ids, float *logprobs)
{
    if (!logits || n_vocab == 0 || k == 0)
        return 0;
    if (k > n_vocab)
        k = n_vocab;

    /* Insertion into a sorted list of k: the vocabulary is scanned once
     * and most entries fail the first comparison. Ties keep the lower id
     * first. NaN logits never enter. */
    size_t n = 0;
    for (uint32_t id = 0; id < n_vocab; id++) {
        float v = logits[id];
        if (isnan(v))
            continue;
        if (n == k && !(v > logits[ids[n - 1]]))
            continue;
        size_t at = n < k ? n++ : k - 1;
        while (at > 0 && v > logits[ids[at - 1]]) {
            ids[at] = ids[at - 1];
            at--;
        }
        ids[at] = (int32_t)id;
    }
    if (n == 0)
        return 0;

    float max = logits[ids[0]];
    double sum = 0.0;
    for (uint32_t id = 0; id < n_vocab; id++)
        if (!isnan(logits[id]))
            sum += exp((double)logits[id] - (double)max);
    double log_z = (double)max + log(sum);
    for (size_t i = 0; i < n; i++)
        logprobs[i] = (float)((double)logits[ids[i]] - log_z);
    return n;
}
