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
 * Invariant: a caller's ROWS split always cuts the rows of the caller's C,
 * whichever layout or orientation T has (tests/test_gemm.c pins it). */
#include "plan.h"

#include "coded_call.h"
#include "error.h"
#include "hash.h"
#include "log.h"
#include "profiled_plan.h"

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
    plan->over_budget = 0;
    plan->predicted_ms = -1.0;
    plan->local_faster = 0;
    int rc = cdc__context_data_shards(context, plan->r, &plan->n);
    if (rc == CDC_OK)
        rc = cdc__context_code(context, plan->n, plan->r, &plan->code);
    if (rc == CDC_OK)
        plan->r = plan->code ? cdc_code_r(plan->code) : 0;
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

void cdc__plan_equal_lengths(int n, int64_t rows, int64_t *len)
{
    for (int i = 0; i < n; i++)
        len[i] = rows / n + (i < rows % n);
}

/* What a cache entry costs beyond its floats (the entry record, the
   allocator's rounding, the index's share): generous, so that a shard
   planned to fit does fit. */
#define PLAN_BUDGET_ENTRY_SLACK 65536.0

double cdc__plan_budget_rows(uint64_t max_memory, const cdc_block_cost_t *cost)
{
    if (max_memory == 0 || cost->held_per_row <= 0.0)
        return 0.0;
    double room = (double) max_memory - cost->held_fixed - PLAN_BUDGET_ENTRY_SLACK;
    double rows = floor(room / cost->held_per_row);
    return rows >= 1.0 ? rows : 0.5;
}

/* Warn once per operand shape (a model's layers each get their own). */
static void warn_over_budget(cdc_context_t *context, const cdc_call_plan_t *plan,
                             const cdc_block_cost_t *cost, int64_t rows, int slot,
                             uint64_t max_memory)
{
    uint64_t key = (uint64_t) rows * 1000003u + (uint64_t) cost->held_per_row;
    for (int i = 0; i < CDC_BUDGET_WARNED; i++)
        if (context->budget_warned[i] == key)
            return;
    context->budget_warned[context->budget_warned_next] = key;
    context->budget_warned_next = (context->budget_warned_next + 1) % CDC_BUDGET_WARNED;
    double shard = (double) plan->block_len[slot < plan->n ? slot : 0] * cost->held_per_row +
                   cost->held_fixed;
    CDC_LOG_WARNF("weights of %lld rows x %.0f bytes: shard %d of %d data + %d parity "
                  "(%.1f MiB) does not fit its worker's --max-memory (%.1f MiB); computed "
                  "on the coordinator instead (budget_fallbacks)",
                  (long long) rows, cost->held_per_row, slot, plan->n, plan->r,
                  shard / 1048576.0, (double) max_memory / 1048576.0);
}

/* Whether every slot's home can hold its shard's cached weights within its
   --max-memory as it reports it (unknown: yes). A parity shard holds as many
   rows as the longest data block. */
static int fits_budgets(cdc_context_t *context, const cdc_call_plan_t *plan,
                        const cdc_block_cost_t *cost, int64_t rows)
{
    if (cost->held_per_row <= 0.0 && cost->held_fixed <= 0.0)
        return 1;
    cdc_worker_profile_t profile[CDC_MAX_WORKERS];
    int workers = cdc__context_profile(context, profile, CDC_MAX_WORKERS);
    const cdc_profiled_state_t *st = &context->profiled;
    int64_t longest = 0;
    for (int i = 0; i < plan->n; i++)
        longest = plan->block_len[i] > longest ? plan->block_len[i] : longest;
    for (int s = 0; s < plan->n + plan->r; s++) {
        int home = st->slots == plan->n + plan->r ? st->home_of_slot[s] : s;
        if (home >= workers || profile[home].max_memory == 0)
            continue;
        double held = (double) (s < plan->n ? plan->block_len[s] : longest) * cost->held_per_row +
                      cost->held_fixed + PLAN_BUDGET_ENTRY_SLACK;
        if (held > (double) profile[home].max_memory) {
            warn_over_budget(context, plan, cost, rows, s, profile[home].max_memory);
            return 0;
        }
    }
    return 1;
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
    const cdc_profiled_state_t *st = &context->profiled;
    for (int s = 0; s < plan->n + plan->r; s++)
        record.home[s] = st->slots == plan->n + plan->r ? st->home_of_slot[s] : s;
    if (plan->over_budget || cdc__profiled_plan_predict_lengths(
                                 context, plan->n, plan->r, cost, rows, plan->block_len,
                                 record.home, &record.expected_ms, &record.worst_ms) != 1)
        record.expected_ms = record.worst_ms = -1.0;
    pthread_mutex_lock(&context->lock);
    context->last_plan = record;
    pthread_mutex_unlock(&context->lock);
    plan->predicted_ms = record.expected_ms;
}

/* Local must be predicted this much faster than distributed. */
#define PLAN_HERE_GAIN 0.9

void cdc__plan_prefer_here(cdc_context_t *context, cdc_call_plan_t *plan, double local_ms,
                           const char *what)
{
    if (context->config.plan != CDC_PLAN_PROFILED || plan->over_budget ||
        !(plan->predicted_ms > 0.0))
        return;
    plan->local_faster = local_ms < PLAN_HERE_GAIN * plan->predicted_ms;
    uint64_t key = cdc__hash_mix(cdc__hash_bytes(what, strlen(what), 0), (uint64_t) plan->n);
    int slot = -1;
    for (int i = 0; i < CDC_HERE_CHOICES && slot < 0; i++)
        if (context->here_choice[i].key == key)
            slot = i;
    if (slot >= 0 && context->here_choice[slot].local == plan->local_faster)
        return;
    if (slot < 0) {
        slot = context->here_choice_next;
        context->here_choice_next = (slot + 1) % CDC_HERE_CHOICES;
    }
    context->here_choice[slot].key = key;
    context->here_choice[slot].local = plan->local_faster;
    CDC_LOG_INFOF("plan: %s %s (predicted %.2f ms here, %.2f ms on %d + %d workers)", what,
                  plan->local_faster ? "computed here" : "distributed", local_ms,
                  plan->predicted_ms, plan->n, plan->r);
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
    if (forced) {
        lengths_by_weights(weights, n, rows, plan->block_len);
    } else if (context->config.plan == CDC_PLAN_PROFILED &&
               (rc = cdc__profiled_plan_size(context, plan, cost, rows, NULL)) != 0) {
        if (rc < 0)
            return rc;
    } else {
        cdc__plan_equal_lengths(n, rows, plan->block_len);
    }
    plan->sized = 1;
    plan->over_budget = !fits_budgets(context, plan, cost, rows);
    record_plan(context, plan, cost, rows);
    return CDC_OK;
}

void cdc__plan_last(cdc_context_t *context, cdc_plan_record_t *record)
{
    pthread_mutex_lock(&context->lock);
    *record = context->last_plan;
    pthread_mutex_unlock(&context->lock);
}

/* A change of split must be predicted this much faster than keeping it. */
#define PLAN_SPLIT_SWITCH_GAIN 0.9

cdc_split_t cdc__plan_split_by_latency(cdc_context_t *context, const cdc_call_plan_t *plan,
                                       const cdc_block_cost_t cost[2], const int64_t rows[2],
                                       cdc_split_t previous, cdc_split_t by_bytes)
{
    if (context->config.plan != CDC_PLAN_PROFILED)
        return by_bytes;
    const cdc_split_t splits[2] = {CDC_SPLIT_ROWS, CDC_SPLIT_COLUMNS};
    double t[2];
    for (int i = 0; i < 2; i++)
        if (cdc__profiled_plan_predict(context, plan->n, plan->r, &cost[i], rows[i], &t[i]) != 1)
            return by_bytes;
    int best = t[1] < t[0];
    int kept = previous == splits[!best] && !(t[best] < PLAN_SPLIT_SWITCH_GAIN * t[!best]);
    cdc_split_t chosen = kept ? previous : splits[best];
    if (chosen != previous)
        CDC_LOG_INFOF("profiled plan: %s split (predicted %.2f ms; %s %.2f ms)",
                      chosen == CDC_SPLIT_ROWS ? "rows" : "columns", t[chosen != CDC_SPLIT_ROWS],
                      chosen == CDC_SPLIT_ROWS ? "columns" : "rows", t[chosen == CDC_SPLIT_ROWS]);
    return chosen;
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
