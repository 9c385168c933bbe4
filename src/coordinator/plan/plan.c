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
 * Block sizes. Once the split is resolved the front end knows how many rows
 * the cut operand has and what a row costs (cdc_block_cost_t) and asks
 * cdc__plan_size_blocks for the data blocks' lengths: the one place they
 * are decided: forced by a test hook, sized to the devices by the
 * profiled plan (CDCGEMM_PLAN=profiled, profiled_plan.c), else equal within
 * one row of each other. Blocks need not be equal: parity blocks are as large
 * as the largest and the rest is zero padding (shard_set.c).
 *
 * Around the sizing, under the profiled plan: the workers' memory budgets
 * (plan_budget.c) and the choices of split and of here-or-workers by
 * predicted latency (plan_choice.c). Each sized call is recorded with the
 * model's prediction for it (cdc__plan_last, `cdcgemm-bench plan`).
 *
 * Invariant: a caller's ROWS split always cuts the rows of the caller's C,
 * whichever layout or orientation T has (tests/test_gemm.c pins it). */
#include "plan.h"

#include "bits.h"
#include "error.h"
#include "log.h"
#include "profiled_plan.h"
#include "rotated_set.h"

#include <math.h>
#include <string.h>

int cdc__plan_resolve(cdc_context_t *context, int parity_override,
                      cdc_split_t split_override, cdc_call_plan_t *plan)
{
    plan->r = cdc__context_parity(context, parity_override);
    plan->wanted_r = plan->r;
    plan->code = NULL;
    plan->split = split_override != CDC_SPLIT_AUTO ? split_override : context->config.split;
    plan->cut = CDC_SHARD_A;
    plan->sized = 0;
    plan->rotated = 0;
    plan->here_rows = 0;
    plan->stage_here_rows = 0;
    plan->unfit_slots = 0;
    plan->on_demand = 0;
    plan->over_budget = 0;
    plan->predicted_ms = -1.0;
    plan->local_faster = 0;
    plan->stage_token = 0;
    int rc = cdc__context_data_shards(context, plan->r, &plan->n);
    if (rc == CDC_OK)
        rc = cdc__context_code(context, plan->n, plan->r, &plan->code);
    if (rc == CDC_OK)
        plan->r = plan->code ? cdc__code_r(plan->code) : 0;
    return rc;
}

/* rows split in proportion to weights[0..n-1]: floors, then the largest
   remainders (the lower index on ties); a block left empty takes a row from
   the largest (rows >= n). */
static void lengths_by_weights(const double *weights, int n, int64_t rows, int64_t *len)
{
    double total = 0.0, remainder[CDC_CODE_MAX_N];
    for (int i = 0; i < n; i++)
        total += weights[i];
    int64_t given = 0;
    for (int i = 0; i < n; i++) {
        double quota = (double) rows * weights[i] / total;
        len[i] = (int64_t) quota;
        len[i] = len[i] < rows - given ? len[i] : rows - given;
        remainder[i] = quota - (double) len[i];
        given += len[i];
    }
    for (; given < rows; given++) {
        int best = 0;
        for (int i = 1; i < n; i++)
            best = remainder[i] > remainder[best] ? i : best;
        len[best]++;
        remainder[best] = -1.0;
    }
    for (int i = 0; i < n && rows >= n; i++)
        while (len[i] < 1) {
            int largest = 0;
            for (int j = 1; j < n; j++)
                largest = len[j] > len[largest] ? j : largest;
            len[largest]--;
            len[i]++;
        }
}

/* The plan as the context's last_plan, with the model's prediction for it
   (any plan: the equal one too, once the profile can predict), which also
   goes to plan->predicted_ms. */
static void record_plan(cdc_context_t *context, cdc_call_plan_t *plan,
                        const cdc_block_cost_t *cost, int64_t rows)
{
    cdc_plan_record_t record;
    memset(&record, 0, sizeof record);
    record.split = plan->split;
    record.n = plan->n;
    record.r = plan->r;
    record.over_budget = plan->over_budget;
    memcpy(record.block_len, plan->block_len, (size_t) plan->n * sizeof *plan->block_len);
    int sized_r = cdc__plan_sized_r(plan);
    for (int s = 0; s < plan->n + sized_r; s++)
        record.home[s] = cdc__profiled_plan_home(context, plan->n, sized_r, s);
    record.here_rows = plan->here_rows;
    record.on_demand = plan->on_demand;
    if (plan->over_budget ||
        cdc__profiled_plan_predict_lengths(context, plan->n, sized_r, cost, rows, plan->here_rows,
                                           plan->block_len, record.home, &record.expected_ms,
                                           &record.worst_ms) != 1)
        record.expected_ms = record.worst_ms = -1.0;
    pthread_mutex_lock(&context->lock);
    context->last_plan = record;
    pthread_mutex_unlock(&context->lock);
    plan->predicted_ms = record.expected_ms;
}

/* What the rotated layout's two uses ask alike (sized stripes, a parity
   on demand): the context wants the layout, the call has parity and no
   replication, and nothing pending names the dedicated layout's shards
   (an injected corruption) or forces block weights. */
static int rotated_plain(cdc_context_t *context, const cdc_call_plan_t *plan)
{
    if (context->config.parity_layout != CDC_LAYOUT_ROTATED || !plan->code ||
        context->config.replicate)
        return 0;
    pthread_mutex_lock(&context->lock);
    int plain = context->corrupt_next == 0 && context->block_weights_n == 0;
    pthread_mutex_unlock(&context->lock);
    return plain;
}

int cdc__plan_rotated_eligible(cdc_context_t *context, const cdc_call_plan_t *plan,
                               int64_t rows)
{
    return cdc__rotated_fits(rows, plan->n + plan->r, plan->r) && rotated_plain(context, plan);
}

int cdc__plan_on_demand_n(cdc_context_t *context, const cdc_call_plan_t *plan)
{
    if (context->config.data_shards > 0 || plan->n + 2 * plan->r > CDC_CODE_MAX_N ||
        !rotated_plain(context, plan))
        return 0;
    /* Once a device is known to corrupt, every call is checked: its
       parity is wanted at once, computed beside the data (dedicated). */
    pthread_mutex_lock(&context->lock);
    int corruption_seen = context->corruption_seen;
    pthread_mutex_unlock(&context->lock);
    int free_now = cdc__executor_free_workers(context->executor, NULL);
    if (free_now < 0) /* (in process: every worker, always) */
        free_now = cdc__context_plan_workers(context, NULL);
    int n = plan->n + plan->r < free_now ? plan->n + plan->r : free_now;
    return !corruption_seen && n > plan->n ? n : 0;
}

int cdc__plan_on_demand(cdc_context_t *context, cdc_call_plan_t *plan, int n)
{
    const cdc_code_t *code;
    int rc = cdc__context_code_exact(context, n, plan->r, &code);
    if (rc != CDC_OK)
        return rc;
    plan->n = n;
    plan->code = code;
    plan->on_demand = 1;
    return CDC_OK;
}

void cdc__plan_unrotate(cdc_call_plan_t *plan, int64_t rows)
{
    plan->rotated = 0;
    plan->stage_token = 0;
    plan->here_rows = 0;
    cdc__plan_equal_lengths(plan->n, rows, plan->block_len);
}

/* Sized stripes (cached weights cut, the rotated layout, the profiled
   plan): each worker's data rows, equal until the profile sizes them. The
   budgets as for any plan; a worker that cannot hold its operand sends the
   call to the dedicated layout (its slot an erasure there). */
static int size_stripes(cdc_context_t *context, cdc_call_plan_t *plan,
                        const cdc_block_cost_t *cost, int64_t rows)
{
    int rc = cdc__profiled_plan_size_stripes(context, plan, cost, rows);
    if (rc < 0)
        return rc;
    plan->rotated = 1;
    plan->sized = 1;
    plan->cost = *cost;
    plan->unfit_slots = cdc__plan_unfit_slots(context, plan, cost, rows);
    if (plan->unfit_slots) {
        cdc__plan_unrotate(plan, rows);
        return CDC_OK;
    }
    int workers = plan->n + plan->r;
    plan->predicted_ms = cdc__plan_record_rotated(
        context, plan, rows, plan->block_len,
        (int64_t) plan->r * cdc__rotated_parity_rows(plan->block_len, workers, plan->n));
    return CDC_OK;
}

int cdc__plan_size_blocks(cdc_context_t *context, cdc_call_plan_t *plan,
                          const cdc_block_cost_t *cost, int64_t rows)
{
    int n = plan->n;
    if (n < 1 || n > CDC_CODE_MAX_N || rows < 1)
        return cdc__fail(CDC_EINVAL, "block sizes: n = %d, rows = %lld", n, (long long) rows);
    double weights[CDC_CODE_MAX_N];
    int rc;
    pthread_mutex_lock(&context->lock);
    int forced = context->block_weights_n == n;
    for (int i = 0; forced && i < n; i++)
        weights[i] = context->block_weights[i];
    pthread_mutex_unlock(&context->lock);
    if (!forced) /* once: the first cached blocks sized */
        cdc__profiled_plan_calibrate(context, cost->held_per_row * (double) rows);
    plan->rotated = 0;
    if (!forced && context->config.plan != CDC_PLAN_EQUAL && cost->held_per_row > 0.0 &&
        cdc__plan_rotated_eligible(context, plan, rows)) {
        rc = size_stripes(context, plan, cost, rows);
        if (rc != CDC_OK || plan->rotated)
            return rc;
    }
    if (forced) {
        lengths_by_weights(weights, n, rows, plan->block_len);
    } else if (context->config.plan != CDC_PLAN_EQUAL &&
               (rc = cdc__profiled_plan_size(context, plan, cost, rows, NULL)) != 0) {
        if (rc < 0)
            return rc;
    } else {
        cdc__plan_equal_lengths(n, rows, plan->block_len);
    }
    plan->sized = 1;
    plan->cost = *cost;
    plan->unfit_slots = cdc__plan_unfit_slots(context, plan, cost, rows);
    plan->over_budget = cdc__popcount64(plan->unfit_slots) > plan->r;
    record_plan(context, plan, cost, rows);
    return CDC_OK;
}

double cdc__plan_record_rotated(cdc_context_t *context, const cdc_call_plan_t *plan,
                                int64_t rows, const int64_t *data_rows, int64_t parity_rows)
{
    int workers = plan->n + plan->r;
    int64_t with_parity[CDC_MAX_WORKERS];
    int home[CDC_MAX_WORKERS];
    for (int w = 0; w < workers; w++) {
        home[w] = cdc__profiled_plan_home(context, plan->n, plan->r, w);
        with_parity[w] = data_rows[w] + parity_rows;
    }
    cdc_plan_record_t record;
    memset(&record, 0, sizeof record);
    record.split = plan->split;
    record.n = plan->n;
    record.r = plan->r;
    record.rotated = 1;
    memcpy(record.block_len, data_rows, (size_t) workers * sizeof *data_rows);
    memcpy(record.home, home, (size_t) workers * sizeof *home);
    double unused;
    record.here_rows = plan->rotated ? plan->here_rows : 0;
    if (cdc__profiled_plan_predict_lengths(context, workers, 0, &plan->cost, rows,
                                           record.here_rows, data_rows, home,
                                           &record.expected_ms, &unused) != 1 ||
        cdc__profiled_plan_predict_lengths(context, workers, 0, &plan->cost, rows,
                                           record.here_rows, with_parity, home, &unused,
                                           &record.worst_ms) != 1)
        record.expected_ms = record.worst_ms = -1.0;
    pthread_mutex_lock(&context->lock);
    context->last_plan = record;
    pthread_mutex_unlock(&context->lock);
    return record.expected_ms;
}

int cdc__plan_here(const cdc_call_plan_t *plan)
{
    return plan->over_budget ? CDC_HERE_BUDGET : plan->local_faster ? CDC_HERE_FASTER : 0;
}

void cdc__plan_last(cdc_context_t *context, cdc_plan_record_t *record)
{
    pthread_mutex_lock(&context->lock);
    *record = context->last_plan;
    pthread_mutex_unlock(&context->lock);
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

int cdc__plan_bands_fill(const cdc_conv_geometry_t *g, int n)
{
    return ceil_div(g->out_h, n) * (n - 1) < g->out_h;
}

cdc_split_t cdc__plan_conv_split(const cdc_conv_geometry_t *g, int64_t out_channels,
                                 int64_t batch, int n, int r)
{
    if (!cdc__plan_bands_fill(g, n))
        return CDC_SPLIT_ROWS;
    double rows = cdc__plan_conv_bytes(CDC_SPLIT_ROWS, g, out_channels, batch, n, r);
    double cols = cdc__plan_conv_bytes(CDC_SPLIT_COLUMNS, g, out_channels, batch, n, r);
    return cols < rows ? CDC_SPLIT_COLUMNS : CDC_SPLIT_ROWS;
}
