/* coded_call.c - the coordinator's core: tasks out, results in, decode, fallback. */
#include "coded_call.h"

#include "bits.h"
#include "clock.h"
#include "error.h"
#include "log.h"
#include "scratch.h"
#include "task_run.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int cdc__coded_call_init(cdc_coded_call_t *call, const cdc_code_t *code, int n,
                         int64_t rows, int64_t cols)
{
    memset(call, 0, sizeof *call);
    call->code = code;
    call->n = n;
    call->r = code ? cdc_code_r(code) : 0;
    call->rows = rows;
    call->cols = cols;
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

void cdc__coded_call_release(cdc_coded_call_t *call)
{
    call->storage = NULL; /* the thread's scratch buffer, kept for the next call */
    free(call->scale_storage);
    call->scale_storage = NULL;
}

/* Whether scales[] and inner are there, computing them now if they are lazy. */
static int call_scales_ready(cdc_coded_call_t *call)
{
    if (call->inner > 0)
        return 1;
    if (call->scales_fill && call->scales_fill(call) != CDC_OK)
        CDC_LOG_WARNF("parity-check scales unavailable (%s); not checking", cdc_last_error());
    call->scales_fill = NULL;
    return call->inner > 0;
}

static uint64_t task_bytes_out(const cdc_shard_task_t *task)
{
    if (task->kind == CDC_TASK_GEMM)
        return (uint64_t) task->cols * (uint64_t) task->k * sizeof(float);
    const cdc_conv_geometry_t *g = task->geometry;
    return (uint64_t) task->batch * (uint64_t) (g->channels * g->h * g->w) * sizeof(float);
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

/* How much larger the rounding error of rebuilt shard `lost` can be than that
   of computing it directly: the largest ratio, over its elements, of the sum
   of the used shards' operand-norm products to its own. Elements whose own
   operands are zero are exactly zero: they are set so, not counted. */
static double decode_amplification(const cdc_coded_call_t *call, uint64_t used, int lost)
{
    const int shards = call->n + call->r;
    const cdc_shard_scale_t *own = &call->scales[lost];
    float *block = call->results[lost];
    double worst = 0.0;
    for (int64_t p = 0; p < call->rows; p++)
        for (int64_t q = 0; q < call->cols; q++) {
            double mine = own->row[p] * own->col[q];
            if (mine == 0.0) {
                block[p * call->cols + q] = 0.0f;
                continue;
            }
            double sum = 0.0;
            for (int s = 0; s < shards; s++)
                if (used & (UINT64_C(1) << s))
                    sum += call->scales[s].row[p] * call->scales[s].col[q];
            worst = sum / mine > worst ? sum / mine : worst;
        }
    return worst;
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

int cdc__coded_call_run(cdc_context_t *context, cdc_coded_call_t *call)
{
    int n = call->n, shards = call->n + call->r;
    uint64_t all = (shards == 64) ? ~UINT64_C(0) : (UINT64_C(1) << shards) - 1;
    uint64_t data_mask = (UINT64_C(1) << n) - 1;

    int replicate = context->config.replicate && call->r == 0;
    /* Erasure injection may also name replicas (shards n..2n-1). */
    uint64_t erasable = replicate && 2 * n < 64 ? (UINT64_C(1) << (2 * n)) - 1 : all;
    pthread_mutex_lock(&context->lock);
    uint64_t erased = context->erase_next & erasable;
    uint64_t corrupted = context->corrupt_next & all;
    context->erase_next = 0;
    context->corrupt_next = 0;
    pthread_mutex_unlock(&context->lock);

    /* Dispatch every shard not erased; remember which task is which shard. */
    cdc_shard_task_t sent[CDC_MAX_SHARDS];
    int count = 0;
    uint64_t out_bytes = 0;
    for (int s = 0; s < shards; s++) {
        if (erased & (UINT64_C(1) << s))
            continue;
        sent[count++] = call->tasks[s];
        out_bytes += task_bytes_out(&call->tasks[s]);
    }
    /* 2-modular redundancy (the baseline coding is measured against): every
       data shard also goes to a second worker, shard n + s; first copy wins. */
    float *replicas = NULL;
    if (replicate) {
        size_t block = (size_t) call->rows * (size_t) call->cols;
        replicas = malloc((size_t) n * block * sizeof(float));
        if (!replicas)
            return cdc__fail(CDC_ENOMEM, "%d replica results", n);
        for (int s = 0; s < n; s++) {
            if (erased & (UINT64_C(1) << (n + s)))
                continue;
            cdc_shard_task_t *copy = &sent[count++];
            *copy = call->tasks[s];
            copy->shard = n + s;
            copy->result = replicas + (size_t) s * block;
            out_bytes += task_bytes_out(copy);
        }
    }
    uint64_t arrived_tasks = 0;
    double started = cdc__clock_ms();
    int rc = count ? context->executor->ops->run(context->executor, sent, count,
                                                 replicate ? 2 * n : n, &arrived_tasks)
                   : CDC_OK;
    if (rc != CDC_OK) {
        free(replicas);
        return rc;
    }
    cdc_call_report_t report;
    memset(&report, 0, sizeof report);
    report.n = n;
    report.r = call->r;
    report.executor_ms = cdc__clock_ms() - started;
    report.erased = cdc__popcount64(erased);
    for (int s = 0; s < CDC_MAX_WORKERS; s++)
        report.shard_ms[s] = -1.0;
    uint64_t present = 0;
    int arrived = 0;
    for (int t = 0; t < count; t++)
        if (arrived_tasks & (UINT64_C(1) << t)) {
            int s = sent[t].shard;
            arrived++;
            if (s < CDC_MAX_WORKERS)
                report.shard_ms[s] = sent[t].elapsed_ms;
            if (s < shards) {
                present |= UINT64_C(1) << s;
            } else if (!(present & (UINT64_C(1) << sent[t].cover))) {
                /* A replica stands in for a data shard that did not arrive. */
                memcpy(call->results[sent[t].cover], sent[t].result,
                       (size_t) call->rows * (size_t) call->cols * sizeof(float));
                present |= UINT64_C(1) << sent[t].cover;
            }
        }
    free(replicas);
    report.arrived = arrived;
    for (int s = 0; s < shards; s++)
        if (corrupted & present & (UINT64_C(1) << s))
            corrupt_one_element(call->results[s], (size_t) call->rows * (size_t) call->cols);
    report.oracle_ms = replicate ? replicated_oracle(report.shard_ms, n)
                                 : nth_fastest(report.shard_ms, shards, n);

    /* Parity check of what arrived: a shard that fails it is dropped and
       rebuilt (r >= 2 locates it); when it cannot be located every data shard
       is recomputed here, so a corrupted result never reaches the caller. */
    int corrupt = 0;
    if (call->code && context->config.verify && cdc__popcount64(present) > n &&
        call_scales_ready(call)) {
        int bad = -1;
        int check = cdc_code_check(call->code, call->rows, call->cols,
                                   (const float *const *) call->results, call->cols, present,
                                   call->scales, call->inner, &bad);
        if (check == CDC_ECORRUPT) {
            corrupt = 1;
            present &= bad >= 0 ? ~(UINT64_C(1) << bad) : ~data_mask;
            CDC_LOG_WARNF("shard results fail the parity check (%s shard %d); %s",
                          bad >= 0 ? "located" : "unlocated", bad,
                          bad >= 0 ? "rebuilding it" : "recomputing the data shards");
        }
    }
    uint64_t missing_data = data_mask & ~present;
    int decoded = 0, fallback = 0;
    int parities = cdc__popcount64(present & ~data_mask);
    if (missing_data && call->code && cdc__popcount64(missing_data) <= parities) {
        rc = cdc_code_decode(call->code, call->rows, call->cols, call->results,
                             call->cols, present);
        if (rc == CDC_OK) {
            decoded = cdc__popcount64(missing_data);
            /* Accuracy guard (BLAS callers): a rebuilt shard carries the
               rounding errors of every shard it came from, ~sqrt(k) eps each;
               where their sum could exceed the standard GEMM error bound,
               ~k eps |a||b|, of its own elements, compute it here instead. */
            uint64_t rebuilt = missing_data;
            missing_data = 0;
            if (context->decode_guard > 0.0 && call_scales_ready(call)) {
                double limit = context->decode_guard * sqrt((double) call->inner);
                for (int s = 0; s < n; s++)
                    if ((rebuilt & (UINT64_C(1) << s)) &&
                        decode_amplification(call, present, s) > limit) {
                        missing_data |= UINT64_C(1) << s;
                        decoded--;
                    }
            }
        } else {
            CDC_LOG_WARNF("decode failed (%s); computing missing shards locally",
                          cdc_last_error());
        }
    }
    /* Too few results to decode: compute the missing data shards here. The
       call is slower but never lost and never wrong. */
    for (int s = 0; s < n && missing_data; s++) {
        if (!(missing_data & (UINT64_C(1) << s)))
            continue;
        rc = cdc__task_run_local(&call->tasks[s]);
        if (rc != CDC_OK)
            return rc;
        fallback++;
    }

    report.decoded = decoded;
    report.fallback = fallback;
    report.corrupt = corrupt;
    pthread_mutex_lock(&context->lock);
    context->last_call = report;
    context->stats.coded_calls += call->r > 0;
    context->stats.shards_sent += (uint64_t) count;
    context->stats.shards_erased += (uint64_t) (replicate ? cdc__popcount64(erased)
                                                          : cdc__popcount64(all & ~present));
    context->stats.results_decoded += (uint64_t) decoded;
    context->stats.corrupt_detected += (uint64_t) corrupt;
    context->stats.fallbacks += fallback > 0;
    context->stats.bytes_out += out_bytes;
    context->stats.bytes_in += (uint64_t) cdc__popcount64(present) * (uint64_t) call->rows *
                               (uint64_t) call->cols * sizeof(float);
    pthread_mutex_unlock(&context->lock);
    return CDC_OK;
}

int cdc__context_code(cdc_context_t *context, int n, int r, const cdc_code_t **code)
{
    *code = NULL;
    /* The plan over the workers in it: n came from cdc__context_data_shards;
       lower r so that the n + r shards fit them (r <= n). With none the
       call is local anyway: keep r. */
    int live = cdc__context_plan_workers(context, NULL);
    if (live > 0 && n + r > live)
        r = live - n > 0 ? live - n : 0;
    if (r > n)
        r = n;
    if (r == 0)
        return CDC_OK;
    pthread_mutex_lock(&context->lock);
    cdc_code_t **slot = &context->codes[r][n];
    int rc = CDC_OK;
    if (!*slot) {
        const cdc_code_ops_t *ops = context->config.code[0]
                                        ? cdc_code_find_ops(context->config.code)
                                        : NULL;
        if (ops && ops->max_parity < r)
            ops = NULL; /* the named scheme cannot do r: use the default */
        rc = cdc_code_new(ops, n, r, slot);
    }
    *code = *slot;
    pthread_mutex_unlock(&context->lock);
    return rc;
}
