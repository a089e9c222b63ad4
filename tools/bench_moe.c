/* Decode bytes per token of a mixture-of-experts model (bench_moe.h): a
 * token reads the dense matrices (attention, routers, output) and, per
 * layer, the k experts its router chose; the engine counts the latter
 * (npl_model_moe_stats). Against the active parameters' bytes (dense plus
 * k / n_expert of the experts) the two agree for one sequence; a batch
 * reads the union of its rows' choices. Times tokens/s it is the memory
 * rate to set beside npullm-bench --matmul's. */
#include "bench_moe.h"

#include <string.h>

bool bench_moe_begin(const npl_model *m, bench_moe *r)
{
    memset(r, 0, sizeof *r);
    r->is_moe = npl_model_moe_stats(m, &r->start);
    return r->is_moe;
}

void bench_moe_end(const npl_model *m, uint64_t tokens, uint64_t step_bytes, bench_moe *r)
{
    npl_moe_stats now;
    if (!r->is_moe || !npl_model_moe_stats(m, &now) || tokens == 0)
        return;
    r->tokens = tokens;
    uint64_t all = now.expert_bytes_all;
    r->dense_bytes = step_bytes > all ? (double)(step_bytes - all) : 0.0;
    r->expert_bytes = (double)(now.expert_bytes_read - r->start.expert_bytes_read) / (double)tokens;
    r->active_bytes = r->dense_bytes + (double)all * now.n_used / (now.n_expert ? now.n_expert : 1);
}

double bench_moe_read_bytes(const bench_moe *r)
{
    return r->dense_bytes + r->expert_bytes;
}

void bench_moe_print_text(FILE *f, const bench_moe *r, double tps)
{
    if (!r->is_moe || !r->tokens)
        return;
    double read = bench_moe_read_bytes(r);
    fprintf(f,
            "experts      per token %.1f MiB read (dense %.1f + experts %.1f), active parameters %.1f MiB "
            "(%.3fx); %.2f GB/s at tg\n",
            read / 1048576.0, r->dense_bytes / 1048576.0, r->expert_bytes / 1048576.0, r->active_bytes / 1048576.0,
            r->active_bytes > 0 ? read / r->active_bytes : 0.0, read * tps * 1e-9);
}

void bench_moe_print_json(FILE *f, const bench_moe *r, double tps)
{
    if (!r->is_moe || !r->tokens)
        return;
    double read = bench_moe_read_bytes(r);
    fprintf(f,
            ", \"moe\": {\"tokens\": %llu, \"read_bytes_per_token\": %.0f, \"dense_bytes\": %.0f, "
            "\"expert_bytes_per_token\": %.0f, \"active_bytes\": %.0f, \"read_gbs\": %.2f}",
            (unsigned long long)r->tokens, read, r->dense_bytes, r->expert_bytes, r->active_bytes, read * tps * 1e-9);
}
