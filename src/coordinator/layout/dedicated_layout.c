/* dedicated_layout.c - the dedicated parity layout's operations (layout.h):
 * one stripe, slot b computing block b.
 *
 * Data blocks may be unequal (sized to their workers): a data task
 * computes only its real rows (or columns, or column groups), and its
 * result is padded with zeros into the common shape as it comes in, before
 * anything reads it as a block of the code; a data task of no rows is not
 * sent at all, its result is zero. Under 2-modular redundancy slot n + s
 * is data shard s's replica, standing in for it when it is lost. The
 * injected corruption of cdc_context_corrupt_next names this layout's
 * shards. */
#include "dedicated_layout.h"

#include "bits.h"
#include "engine.h"
#include "error.h"
#include "log.h"
#include "scratch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int cdc__dedicated_call_init(cdc_dedicated_call_t *call, const cdc_code_t *code, int n,
                             int64_t rows, int64_t cols)
{
    memset(call, 0, sizeof *call);
    call->code = code;
    call->n = n;
    call->r = code ? cdc__code_r(code) : 0;
    call->wanted_r = call->r;
    call->rows = rows;
    call->cols = cols;
    call->col_groups = 1;
    size_t block = (size_t) rows * (size_t) cols;
    int shards = n + call->r;
    call->storage = cdc__scratch(CDC_SCRATCH_RESULTS, (size_t) shards * block);
    if (!call->storage)
        return cdc__fail(CDC_ENOMEM, "%d shard results of %lld x %lld floats", shards,
                         (long long) rows, (long long) cols);
    for (int s = 0; s < shards; s++) {
        call->results[s] = call->storage + (size_t) s * block;
        call->tasks[s].shard = s;
        call->tasks[s].cover = s < n ? s : -1;
        call->tasks[s].result = call->results[s];
        call->tasks[s].cols = cols;
    }
    return CDC_OK;
}

void cdc__dedicated_call_release(cdc_dedicated_call_t *call)
{
    call->storage = NULL; /* the thread's scratch buffer, kept for the next call */
    free(call->scale_storage);
    call->scale_storage = NULL;
}

void cdc__dedicated_call_follow(cdc_dedicated_call_t *call, const cdc_call_plan_t *plan)
{
    call->split = plan->split;
    call->wanted_r = plan->wanted_r;
    call->here = cdc__plan_here(plan);
    call->unfit = plan->unfit_slots;
    call->on_demand = plan->on_demand;
}

static cdc_dedicated_call_t *dedicated(const cdc_call_layout_t *layout)
{
    return (cdc_dedicated_call_t *) layout; /* its first member */
}

static int task_empty(const cdc_shard_task_t *task)
{
    return task->a_rows == 0 || task->cols == 0;
}

/* Data shard s's result, computed compactly as its task's a_rows x cols
   (col_groups groups of cols / col_groups columns each), into the call's
   padded rows x cols layout in place, zeros in the padding. Every compact
   element moves to an offset at least its own, so walking from the last
   group back never overwrites one not yet moved. */
static void result_pad(const cdc_dedicated_call_t *call, int s)
{
    const cdc_shard_task_t *task = &call->tasks[s];
    if (task->cols == call->cols) { /* only rows short: already in place */
        memset(call->results[s] + task->a_rows * call->cols, 0,
               (size_t) ((call->rows - task->a_rows) * call->cols) * sizeof(float));
        return;
    }
    int64_t groups = call->col_groups;
    size_t from_w = (size_t) (task->cols / groups), to_w = (size_t) (call->cols / groups);
    float *block = call->results[s];
    for (int64_t p = call->rows - 1; p >= 0; p--)
        for (int64_t g = groups - 1; g >= 0; g--) {
            float *to = block + p * call->cols + g * (int64_t) to_w;
            if (p >= task->a_rows) {
                memset(to, 0, to_w * sizeof(float));
                continue;
            }
            memmove(to, block + p * task->cols + g * (int64_t) from_w, from_w * sizeof(float));
            memset(to + from_w, 0, (to_w - from_w) * sizeof(float));
        }
}

/* Slot s: shard s's task; under 2-modular redundancy slot n + s is data
   shard s's replica, into a block of its own. */
static int dedicated_task(cdc_call_layout_t *layout, int slot, cdc_shard_task_t *task)
{
    cdc_dedicated_call_t *call = dedicated(layout);
    int shard = slot < call->n + call->r ? slot : slot - call->n;
    *task = call->tasks[shard];
    if (call->empty & (UINT64_C(1) << shard))
        return CDC_SLOT_ZERO;
    if (shard != slot) {
        task->shard = slot;
        task->result = call->replicas + (size_t) shard * (size_t) (call->rows * call->cols);
        return CDC_SLOT_SEND;
    }
    return call->unfit & (UINT64_C(1) << slot) ? CDC_SLOT_OUT : CDC_SLOT_SEND;
}

static uint64_t dedicated_present(const cdc_call_layout_t *layout, const uint32_t *parts, int s)
{
    const cdc_dedicated_call_t *call = dedicated(layout);
    (void) s;
    uint64_t present = call->empty;
    for (int b = 0; b < call->n + call->r; b++)
        present |= (uint64_t) (parts[b] & 1) << b;
    for (int b = 0; call->replicate && b < call->n; b++)
        present |= (uint64_t) (parts[call->n + b] & 1) << b;
    return present;
}

/* The k-th smallest non-negative time among count, or -1 if fewer than k. */
static double nth_fastest(const double *ms, int count, int k)
{
    double sorted[CDC_MAX_SHARDS];
    int have = 0;
    for (int i = 0; i < count && i < CDC_MAX_WORKERS; i++)
        if (ms[i] >= 0.0) {
            int at = have++;
            while (at > 0 && sorted[at - 1] > ms[i]) {
                sorted[at] = sorted[at - 1];
                at--;
            }
            sorted[at] = ms[i];
        }
    return have >= k ? sorted[k - 1] : -1.0;
}

/* Under 2-modular redundancy: the slowest data shard's faster copy. */
static double replicated_oracle(const double *ms, int n)
{
    double worst = 0.0;
    for (int s = 0; s < n && s + n < CDC_MAX_WORKERS; s++) {
        double a = ms[s], b = ms[n + s];
        double first = a < 0 ? b : b < 0 ? a : (a < b ? a : b);
        if (first < 0)
            return -1.0;
        worst = first > worst ? first : worst;
    }
    return worst;
}

/* cdc_context_corrupt_next: the middle element moves by 1% of the largest
   magnitude in the block (by 1 in an all-zero block). */
static void corrupt_one_element(float *block, size_t count)
{
    float largest = 0.0f;
    for (size_t i = 0; i < count; i++)
        largest = fabsf(block[i]) > largest ? fabsf(block[i]) : largest;
    if (count > 0)
        block[count / 2] += largest > 0.0f ? 0.01f * largest : 1.0f;
}

/* A replica standing in for a lost data shard, the injected corruption (in
   what a worker computed), data results padded to the call's shape. */
static void dedicated_collected(cdc_call_layout_t *layout, const uint32_t *parts,
                                uint64_t corrupted, cdc_call_report_t *report)
{
    cdc_dedicated_call_t *call = dedicated(layout);
    int n = call->n, shards = n + call->r;
    size_t block = (size_t) call->rows * (size_t) call->cols;
    for (int s = 0; call->replicate && s < n; s++)
        if (!(parts[s] & 1) && (parts[n + s] & 1))
            memcpy(call->results[s], call->replicas + (size_t) s * block,
                   block * sizeof(float));
    for (int s = 0; s < shards; s++)
        if ((corrupted & (UINT64_C(1) << s)) && (parts[s] & 1))
            corrupt_one_element(call->results[s], (size_t) call->tasks[s].a_rows *
                                                      (size_t) call->tasks[s].cols);
    uint64_t present = dedicated_present(layout, parts, 0);
    for (int s = 0; s < n; s++)
        if (present & (UINT64_C(1) << s))
            result_pad(call, s);
    report->oracle_ms = call->replicate ? replicated_oracle(report->shard_ms, n)
                                        : nth_fastest(report->shard_ms, shards, n);
}

/* The results are the code's blocks, in place. */
static void dedicated_gather(const cdc_call_layout_t *layout, int s, uint64_t present,
                             float *scratch, float **blocks)
{
    const cdc_dedicated_call_t *call = dedicated(layout);
    (void) s;
    (void) present;
    (void) scratch;
    for (int b = 0; b < call->n + call->r; b++)
        blocks[b] = call->results[b];
}

static int dedicated_scales(cdc_call_layout_t *layout, int s, cdc_shard_scale_t *scales)
{
    cdc_dedicated_call_t *call = dedicated(layout);
    (void) s;
    if (call->inner <= 0 && call->scales_fill) {
        if (call->scales_fill(call) != CDC_OK)
            CDC_LOG_WARNF("parity-check scales unavailable (%s)", cdc_last_error());
        call->scales_fill = NULL; /* once */
    }
    if (call->inner <= 0)
        return cdc__fail(CDC_EINVAL, "no operand norms for this call");
    memcpy(scales, call->scales, (size_t) (call->n + call->r) * sizeof *scales);
    return CDC_OK;
}

static int dedicated_compute_here(cdc_call_layout_t *layout, const cdc_context_t *context, int s,
                                  int b)
{
    cdc_dedicated_call_t *call = dedicated(layout);
    (void) s;
    int rc = cdc__call_compute_here(context, &call->tasks[b]);
    if (rc == CDC_OK)
        result_pad(call, b);
    return rc;
}

static const cdc_call_layout_ops_t dedicated_ops = {
    .task = dedicated_task,
    .present = dedicated_present,
    .collected = dedicated_collected,
    .gather = dedicated_gather,
    .scatter = NULL,
    .scales = dedicated_scales,
    .compute_here = dedicated_compute_here,
    .account = NULL,
};

/* The engine's view of the call. */
static void dedicated_describe(cdc_context_t *context, cdc_dedicated_call_t *call)
{
    int n = call->n;
    call->replicate = context->config.replicate && call->r == 0;
    call->empty = 0;
    for (int s = 0; s < n; s++)
        call->empty |= (uint64_t) task_empty(&call->tasks[s]) << s;
    int copies = call->replicate ? 2 : 1;
    cdc_call_layout_t *layout = &call->layout;
    *layout = (cdc_call_layout_t){
        .ops = &dedicated_ops, .code = call->code, .n = n, .r = call->r,
        .stripes = 1, .slots = copies * n + call->r,
        .block_rows = call->rows, .cols = call->cols, .k = call->tasks[0].k,
        .copies_blocks = 0, .data_slots = cdc__low_bits(copies * n),
        .erasable = cdc__low_bits(copies * n + call->r), .streamed = 0,
        .executor_n = copies * n, .needed = copies * n,
        .wanted_r = call->replicate ? n : call->wanted_r, .split = call->split,
        .share = call->share, .here = call->here,
        .deferrable = call->on_demand && !call->replicate
                          ? cdc__low_bits(n + call->r) & ~cdc__low_bits(n)
                          : 0};
}

int cdc__dedicated_call_run(cdc_context_t *context, cdc_dedicated_call_t *call)
{
    dedicated_describe(context, call);
    call->replicas = NULL;
    if (call->replicate && !call->here) {
        size_t floats = (size_t) call->n * (size_t) (call->rows * call->cols);
        call->replicas = malloc(floats * sizeof(float));
        if (!call->replicas)
            return cdc__fail(CDC_ENOMEM, "%d replica results", call->n);
    }
    int rc = cdc__call_run(context, &call->layout);
    free(call->replicas);
    call->replicas = NULL;
    return rc;
}
