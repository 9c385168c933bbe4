/* bench_plan.c - `cdcgemm-bench plan`: the plan of each layer and the latency
   model's prediction against the measured time (bench_plan.h). The model
   (src/coordinator/profile/planner.h) counts each shard's round trip, bytes over its
   link and flops at its device's rate, as the live profile measured them;
   it leaves out the coordinator's own work (packing, encoding and decoding,
   assembling results), which the measured time includes. */
#include "bench_plan.h"

#include "bench_run.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

/* The median of the count values of v that are >= 0 (NAN: none). */
static double median_of(const double *v, int count)
{
    double *sorted = malloc((size_t) (count > 0 ? count : 1) * sizeof *sorted);
    int kept = 0;
    for (int i = 0; sorted && i < count; i++)
        if (v[i] >= 0.0)
            sorted[kept++] = v[i];
    double median = NAN;
    if (kept > 0) {
        qsort(sorted, (size_t) kept, sizeof *sorted, compare_doubles);
        median = kept % 2 ? sorted[kept / 2] : 0.5 * (sorted[kept / 2 - 1] + sorted[kept / 2]);
    }
    free(sorted);
    return median;
}

static const char *split_name(cdc_split_t split)
{
    return split == CDC_SPLIT_ROWS ? "rows" : split == CDC_SPLIT_COLUMNS ? "columns" : "auto";
}

/* "c:400 w0:1200 w1:1180 ... p@w3:1200": the coordinator's share (when it
   takes one), each data block's rows on its worker, then each parity's (as
   long as the longest), or "p:on demand" for a parity sent only after a
   loss (a spatial band's); "rotated: c:300 w0:820 w1:819 ...": the
   coordinator's share and each worker's data rows in the rotated layout
   (sized stripes: on the slots' homes). */
static void blocks_text(const cdc_testing_plan_t *p, char *out, size_t size)
{
    size_t used = 0;
    int64_t longest = 0;
    out[0] = '\0';
    if (p->rotated) { /* each worker's data rows; its parity only on demand */
        used += (size_t) snprintf(out, size, "rotated:");
        if (p->here_rows > 0)
            used += (size_t) snprintf(out + used, size - used, " c:%lld",
                                      (long long) p->here_rows);
        for (int w = 0; w < p->n + p->r && used < size; w++)
            used += (size_t) snprintf(out + used, size - used, " w%d:%lld", p->home[w],
                                      (long long) p->block_len[w]);
        return;
    }
    if (p->here_rows > 0)
        used += (size_t) snprintf(out, size, "c:%lld ", (long long) p->here_rows);
    for (int s = 0; s < p->n + (p->on_demand ? 0 : p->r) && used < size; s++) {
        if (s < p->n)
            longest = p->block_len[s] > longest ? p->block_len[s] : longest;
        int64_t rows = s < p->n ? p->block_len[s] : longest;
        used += (size_t) snprintf(out + used, size - used, "%s%sw%d:%lld", s ? " " : "",
                                  s < p->n ? "" : "p@", p->home[s], (long long) rows);
    }
    if (p->on_demand && used < size)
        snprintf(out + used, size - used, " p:on demand");
}

void cdc_bench_plan_print(FILE *out, const cdc_run_t *run)
{
    double errors[CDC_BENCH_MAX_LAYERS];
    int judged = 0;
    fprintf(out, "%-10s %-8s %2s %2s %12s %12s %7s  %s\n", "layer", "split", "n", "r",
            "predicted_ms", "measured_ms", "ratio",
            "blocks (rows on worker; c: the coordinator's; p@: parity)");
    for (int i = 0; i < run->layer_count; i++) {
        const cdc_layer_plan_t *l = &run->layer_plans[i];
        double predicted = median_of(l->expected_ms, l->count);
        double measured = median_of(l->measured_ms, l->count);
        char blocks[1024];
        blocks_text(&l->last, blocks, sizeof blocks);
        double ratio = predicted / measured;
        fprintf(out, "%-10s %-8s %2d %2d %12.2f %12.2f %7.3f  %s%s\n", l->name,
                split_name(l->last.split), l->last.n, l->last.r, predicted, measured, ratio,
                l->last.over_budget ? "on the coordinator (over budget)"
                : l->last.here      ? "on the coordinator (predicted faster)"
                                    : blocks,
                l->last.expected_ms < 0 && !l->last.over_budget ? " (no prediction yet)" : "");
        if (isfinite(ratio) && judged < CDC_BENCH_MAX_LAYERS)
            errors[judged++] = fabs(ratio - 1.0);
    }
    fprintf(out, "median |predicted / measured - 1| over %d layers: %.3f\n", judged,
            median_of(errors, judged));
}

void cdc_bench_plan_write_json(FILE *out, const cdc_run_t *run)
{
    if (!run->layer_plans)
        return;
    fputs(",\n  \"layers\": [", out);
    for (int i = 0; i < run->layer_count; i++) {
        const cdc_layer_plan_t *l = &run->layer_plans[i];
        fprintf(out, "%s\n    {\"name\": \"%s\", \"split\": \"%s\", \"n\": %d, \"r\": %d, "
                     "\"over_budget\": %s, \"here\": %s, \"rotated\": %s, "
                     "\"coordinator_rows\": %lld, \"blocks\": [",
                i ? "," : "", l->name, split_name(l->last.split), l->last.n, l->last.r,
                l->last.over_budget ? "true" : "false", l->last.here ? "true" : "false",
                l->last.rotated ? "true" : "false",
                (long long) l->last.here_rows);
        int64_t longest = 0;
        for (int s = 0; s < l->last.n + l->last.r; s++) {
            if (s < l->last.n)
                longest = l->last.block_len[s] > longest ? l->last.block_len[s] : longest;
            fprintf(out, "%s{\"worker\": %d, \"parity\": %s, \"rows\": %lld}", s ? ", " : "",
                    l->last.home[s], s < l->last.n ? "false" : "true",
                    (long long) (s < l->last.n ? l->last.block_len[s] : longest));
        }
        double predicted = median_of(l->expected_ms, l->count);
        fprintf(out, "], \"predicted_ms\": %.3f, \"measured_ms\": %.3f}",
                isfinite(predicted) ? predicted : -1.0, median_of(l->measured_ms, l->count));
    }
    fputs("\n  ]", out);
}

int cdc_bench_plan(int argc, char **argv)
{
    return cdc_bench_run_mode(argc, argv, 1);
}
