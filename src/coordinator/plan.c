/* plan.c - what a coded call does: n, r, the code, and which operand is cut.
 *
 * The problem. Every coded product cuts one operand of T = A·Btᵀ into n row
 * blocks and r parity blocks; the other operand goes whole to every shard.
 * Which one to cut is a trade: the cut operand travels once in total (plus
 * parity), the whole one n + r times, and results come back either way. Each
 * front end (cdc_sgemm, the BLAS entry points, FC and conv layers) states
 * its split in its caller's terms (rows of C, output/channel; columns of C,
 * batch/spatial), so one resolution (cdc__plan_resolve) and one mapping to
 * T's operands (cdc__plan_cut_side) serve them all.
 *
 * The data. cdc_call_plan_t: n and r from the workers in the plan now (r is
 * lowered so n + r fit them and r <= n), the code built once per (n, r) on
 * the context, the split and the operand it cuts.
 *
 * The auto rule. Count the bytes each split moves per call: inputs out to
 * each of the n + r shards plus results back, padding included; operands
 * cached on workers (weights) travel once and are not counted. Take the
 * cheaper one, but never a cut whose last data shards would be all padding.
 *
 * Invariant: a caller's ROWS split always cuts the rows of the caller's C,
 * whichever layout or orientation T has (tests/test_gemm.c pins it). */
#include "plan.h"

#include "coded_call.h"

int cdc__plan_resolve(cdc_context_t *context, int parity_override,
                      cdc_split_t split_override, cdc_call_plan_t *plan)
{
    plan->r = cdc__context_parity(context, parity_override);
    plan->wanted_r = plan->r;
    plan->code = NULL;
    plan->split = split_override != CDC_SPLIT_AUTO ? split_override : context->config.split;
    plan->cut = CDC_SHARD_A;
    int rc = cdc__context_data_shards(context, plan->r, &plan->n);
    if (rc == CDC_OK)
        rc = cdc__context_code(context, plan->n, plan->r, &plan->code);
    if (rc == CDC_OK)
        plan->r = plan->code ? cdc_code_r(plan->code) : 0;
    return rc;
}

cdc_shard_side_t cdc__plan_cut_side(cdc_split_t split, int transposed)
{
    return (split == CDC_SPLIT_COLUMNS) != (transposed != 0) ? CDC_SHARD_BT : CDC_SHARD_A;
}

cdc_split_t cdc__plan_side_split(cdc_shard_side_t side, int transposed)
{
    return (side == CDC_SHARD_BT) != (transposed != 0) ? CDC_SPLIT_COLUMNS : CDC_SPLIT_ROWS;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

double cdc__plan_matmul_bytes(cdc_split_t split, int64_t m, int64_t ncols, int64_t k,
                              int n, int r, int a_cached, int bt_cached)
{
    double shards = n + r;
    double out, in;
    if (split == CDC_SPLIT_COLUMNS) {
        int64_t block = ceil_div(ncols, n);
        out = (a_cached ? 0.0 : (double) m * k) + (bt_cached ? 0.0 : (double) block * k);
        in = (double) m * block;
    } else {
        int64_t block = ceil_div(m, n);
        out = (a_cached ? 0.0 : (double) block * k) + (bt_cached ? 0.0 : (double) ncols * k);
        in = (double) block * ncols;
    }
    return shards * (out + in) * sizeof(float);
}

cdc_split_t cdc__plan_matmul_split(int64_t m, int64_t ncols, int64_t k, int n, int r,
                                   int a_cached, int bt_cached)
{
    /* A column split whose last data shards would be all padding wastes workers. */
    if (ceil_div(ncols, n) * (n - 1) >= ncols)
        return CDC_SPLIT_ROWS;
    double rows = cdc__plan_matmul_bytes(CDC_SPLIT_ROWS, m, ncols, k, n, r, a_cached,
                                         bt_cached);
    double cols = cdc__plan_matmul_bytes(CDC_SPLIT_COLUMNS, m, ncols, k, n, r, a_cached,
                                         bt_cached);
    return cols < rows ? CDC_SPLIT_COLUMNS : CDC_SPLIT_ROWS;
}

int64_t cdc__plan_band_height(const cdc_conv_geometry_t *g, int64_t out_rows)
{
    return (out_rows - 1) * g->stride_h + g->dilation_h * (g->kernel_h - 1) + 1;
}

double cdc__plan_conv_bytes(cdc_split_t split, const cdc_conv_geometry_t *g,
                            int64_t out_channels, int64_t batch, int n, int r)
{
    double shards = n + r;
    double out, in;
    if (split == CDC_SPLIT_COLUMNS) {
        int64_t band_rows = ceil_div(g->out_h, n);
        out = (double) batch * g->channels * cdc__plan_band_height(g, band_rows) * g->w;
        in = (double) out_channels * batch * band_rows * g->out_w;
    } else {
        out = (double) batch * g->channels * g->h * g->w;
        in = (double) ceil_div(out_channels, n) * batch * g->out_h * g->out_w;
    }
    return shards * (out + in) * sizeof(float);
}

cdc_split_t cdc__plan_conv_split(const cdc_conv_geometry_t *g, int64_t out_channels,
                                 int64_t batch, int n, int r)
{
    if (ceil_div(g->out_h, n) * (n - 1) >= g->out_h)
        return CDC_SPLIT_ROWS;
    double rows = cdc__plan_conv_bytes(CDC_SPLIT_ROWS, g, out_channels, batch, n, r);
    double cols = cdc__plan_conv_bytes(CDC_SPLIT_COLUMNS, g, out_channels, batch, n, r);
    return cols < rows ? CDC_SPLIT_COLUMNS : CDC_SPLIT_ROWS;
}
