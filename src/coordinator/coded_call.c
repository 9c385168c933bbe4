/* coded_call.c - the coordinator's core: tasks out, results in, decode, fallback.
 *
 * The problem. n data shards and r parity shards of one product go to
 * workers; some never answer, some answer late, one may answer wrong. The
 * caller must still get the exact product, as soon as any n results allow.
 *
 * The data. A cdc_coded_call_t holds the n + r tasks and their result
 * blocks (one padded shape for all: parity results are the same linear
 * combinations of data results that the parity operands are of data
 * operands). Data blocks may be unequal (sized to their workers): a data
 * task computes only its real rows (or columns, or column groups), and its
 * result is padded with zeros into the common shape as it comes in, before
 * anything reads it as a block of the code; a data task of no rows is not
 * sent at all, its result is zero. A call_run_t carries one run through its
 * steps, with bit masks over shards: erased/corrupted (injected), empty,
 * present (usable results).
 *
 * The steps. dispatch (every shard not erased, plus replicas under 2-modular
 * redundancy) -> collect (which results are in) -> verify (parity check,
 * when more than n arrived: drop a located bad shard, or all data shards)
 * -> decode (missing data shards from parity, if few enough are missing;
 * the BLAS accuracy guard may refuse a rebuilt shard) -> fall back (compute
 * what is still missing locally) -> account (report, counters).
 *
 * Invariant: on CDC_OK every data result block is a product computed by a
 * shard that passed the check (when it could run), rebuilt from such, or
 * computed locally; a failure of any worker costs time, never the result. */
#include "coded_call.h"

#include "bits.h"
#include "clock.h"
#include "error.h"
#include "log.h"
#include "scratch.h"
#include "share_thread.h"
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

void cdc__coded_call_release(cdc_coded_call_t *call)
{
    call->storage = NULL; /* the thread's scratch buffer, kept for the next call */
    free(call->scale_storage);
    call->scale_storage = NULL;
}

/* Data shard s's result, computed compactly as its task's a_rows x cols
   (col_groups groups of cols / col_groups columns each), into the call's
   padded rows x cols layout in place, zeros in the padding. Every compact
   element moves to an offset at least its own, so walking from the last
   group back never overwrites one not yet moved. */
static void result_pad(const cdc_coded_call_t *call, int s)
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

static int task_empty(const cdc_shard_task_t *task)
{
    return task->a_rows == 0 || task->cols == 0;
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

/* One run of a coded call, as its steps hand it on. */
typedef struct {
    int replicate;          /* 2-modular redundancy: data shards sent twice  */
    uint64_t all, data_mask;
    uint64_t erased, corrupted; /* injected by cdc_context_erase/corrupt_next */
    uint64_t unfit;         /* not sent: their homes' budgets (plan.h)      */
    uint64_t empty;         /* data shards of no rows: zero, never sent      */
    cdc_shard_task_t sent[CDC_MAX_SHARDS]; /* what went to the executor      */
    int count;
    float *replicas;        /* the replicas' result blocks                   */
    uint64_t out_bytes;
    uint64_t arrived_tasks; /* bit t: sent[t] came back                      */
    uint64_t present;       /* bit s: shard s's result is usable             */
    int verify;             /* this call waits for a parity to check with    */
    int checked;            /* the parity check ran                          */
    int refused;            /* a decode past cdc__decode_limit, not used     */
    cdc_call_report_t report;
} call_run_t;

/* The injections for this call, taken from the context (they apply once). */
static void run_start(cdc_context_t *context, const cdc_coded_call_t *call, call_run_t *run)
{
    int n = call->n, shards = call->n + call->r;
    memset(run, 0, sizeof *run);
    run->all = cdc__low_bits(shards);
    run->data_mask = cdc__low_bits(n);
    run->replicate = context->config.replicate && call->r == 0;
    /* Erasure injection may also name replicas (shards n..2n-1). */
    uint64_t erasable = run->replicate ? cdc__low_bits(2 * n) : run->all;
    pthread_mutex_lock(&context->lock);
    run->erased = context->erase_next & erasable;
    run->corrupted = context->corrupt_next & run->all;
    context->erase_next = 0;
    context->corrupt_next = 0;
    pthread_mutex_unlock(&context->lock);
    for (int s = 0; s < n; s++)
        if (task_empty(&call->tasks[s]))
            run->empty |= UINT64_C(1) << s;
    run->unfit = call->unfit & run->all & ~run->empty;
}

/* A checked call's goal (task.h): the results it needs, and one more to
   check with unless that is past its wait (cdc__check_wait_over). */
typedef struct {
    int needed;
    cdc_check_wait_t wait;
} check_goal_t;

/* The tasks whose result is in. */
static int results_in(const cdc_shard_task_t *tasks, int count)
{
    int in = 0;
    for (int t = 0; t < count; t++)
        in += (int) (tasks[t].parts_in & 1);
    return in;
}

static int goal_checked(void *ctx, const cdc_shard_task_t *tasks, int count)
{
    check_goal_t *goal = ctx;
    int in = results_in(tasks, count);
    return cdc__check_wait_over(&goal->wait, in >= goal->needed, in > goal->needed);
}

/* A call that left a data shard out on purpose (erased, unfit) needs the
   parity that stands in for it: the executor's own rule, to stop once
   every data shard it was sent is in, would return without it. */
static int goal_needed(void *ctx, const cdc_shard_task_t *tasks, int count)
{
    const check_goal_t *goal = ctx;
    return results_in(tasks, count) >= goal->needed;
}

/* Every shard not erased (nor empty) to the executor (and, under 2-modular
   redundancy, every such data shard a second time, as shard n + s: first
   copy wins). */
static int call_dispatch(cdc_context_t *context, const cdc_coded_call_t *call,
                         call_run_t *run)
{
    int n = call->n, shards = call->n + call->r;
    for (int s = 0; s < shards; s++) {
        if ((run->erased | run->empty | run->unfit) & (UINT64_C(1) << s))
            continue;
        run->sent[run->count++] = call->tasks[s];
        run->out_bytes += cdc__task_bytes_out(&call->tasks[s]);
    }
    if (run->replicate) {
        size_t block = (size_t) call->rows * (size_t) call->cols;
        run->replicas = malloc((size_t) n * block * sizeof(float));
        if (!run->replicas)
            return cdc__fail(CDC_ENOMEM, "%d replica results", n);
        for (int s = 0; s < n; s++) {
            if ((run->erased & (UINT64_C(1) << (n + s))) || (run->empty & (UINT64_C(1) << s)))
                continue;
            cdc_shard_task_t *copy = &run->sent[run->count++];
            *copy = call->tasks[s];
            copy->shard = n + s;
            copy->result = run->replicas + (size_t) s * block;
            run->out_bytes += cdc__task_bytes_out(copy);
        }
    }
    /* The empty data shards are in already: the rest need fewer results. */
    int copies = run->replicate ? 2 : 1, split = copies * n;
    int needed = split - copies * cdc__popcount64(run->empty);
    /* A checked call waits for a result beyond the n: a parity to check
       with (a goal: the executor would stop once every data shard is in),
       within its wait. needed stays: it sizes the erasures the placement
       may leave (a dead slot's shard is not moved for a check). */
    check_goal_t check = {.needed = needed};
    cdc__check_wait_start(&check.wait);
    cdc_call_goal_t checked = {goal_checked, &check}, all_needed = {goal_needed, &check};
    cdc_call_goal_t *goal = run->verify && run->count > needed ? &checked
                            : (run->erased | run->unfit) & run->data_mask ? &all_needed
                                                                          : NULL;
    double started = cdc__clock_ms();
    int rc = run->count ? context->executor->ops->run(context->executor, run->sent,
                                                      run->count, split, needed, goal,
                                                      &run->arrived_tasks)
                        : CDC_OK;
    run->report.executor_ms = cdc__clock_ms() - started;
    return rc;
}

/* Which shard results are in (a replica standing in for a lost data shard;
   an empty one, at once), their times, the injected corruption (in what a
   worker computed), data results padded to the call's shape, the report's
   first fields. */
static void call_collect(const cdc_coded_call_t *call, call_run_t *run)
{
    int n = call->n, shards = call->n + call->r;
    cdc_call_report_t *report = &run->report;
    report->n = n;
    report->r = call->r;
    report->split = call->split;
    report->erased = cdc__popcount64(run->erased);
    /* Redundancy: results the call could do without. Under 2-modular
       redundancy each of the n replicas adds one; the call asked for n. */
    int dispatched = cdc__popcount64(run->empty) * (run->replicate ? 2 : 1);
    for (int t = 0; t < run->count; t++)
        dispatched += run->sent[t].dispatched;
    int wanted = run->replicate ? n : call->wanted_r;
    report->redundancy = dispatched > n ? dispatched - n : 0;
    report->degraded = report->redundancy < wanted;
    for (int s = 0; s < CDC_MAX_WORKERS; s++)
        report->shard_ms[s] = -1.0;
    for (int s = 0; s < n && s < CDC_MAX_WORKERS; s++)
        if (run->empty & (UINT64_C(1) << s))
            report->shard_ms[s] = 0.0;
    run->present = run->empty;
    for (int t = 0; t < run->count; t++) {
        if (!(run->arrived_tasks & (UINT64_C(1) << t)))
            continue;
        const cdc_shard_task_t *task = &run->sent[t];
        report->arrived++;
        if (task->shard < CDC_MAX_WORKERS)
            report->shard_ms[task->shard] = task->elapsed_ms;
        if (task->shard < shards) {
            run->present |= UINT64_C(1) << task->shard;
        } else if (!(run->present & (UINT64_C(1) << task->cover))) {
            memcpy(call->results[task->cover], task->result,
                   (size_t) call->rows * (size_t) call->cols * sizeof(float));
            run->present |= UINT64_C(1) << task->cover;
        }
    }
    for (int s = 0; s < shards; s++)
        if (run->corrupted & run->present & ~run->empty & (UINT64_C(1) << s))
            corrupt_one_element(call->results[s], (size_t) call->tasks[s].a_rows *
                                                      (size_t) call->tasks[s].cols);
    for (int s = 0; s < n; s++)
        if (run->present & (UINT64_C(1) << s))
            result_pad(call, s);
    report->oracle_ms = run->replicate ? replicated_oracle(report->shard_ms, n)
                                       : nth_fastest(report->shard_ms, shards, n);
}

/* Parity check of what arrived: a shard that fails it is dropped and rebuilt
   (r >= 2 locates it); when it cannot be located every data shard is
   recomputed here (the parities are dropped too: the bad one may be among
   them), so a corrupted result never reaches the caller. Empty data shards
   were never computed, so they stay. The check can only run with more than
   n results. */
static void call_verify(cdc_context_t *context, cdc_coded_call_t *call, call_run_t *run)
{
    if (!call->code || !context->config.verify || cdc__popcount64(run->present) <= call->n ||
        !call_scales_ready(call))
        return;
    run->checked = 1;
    int bad = -1;
    int check = cdc__code_check(call->code, call->rows, call->cols,
                                (const float *const *) call->results, call->cols,
                                run->present, call->scales, call->inner, &bad);
    if (check != CDC_ECORRUPT)
        return;
    run->report.corrupt = 1;
    run->present &= bad >= 0 ? ~(UINT64_C(1) << bad) : run->empty;
    CDC_LOG_WARNF("shard results fail the parity check (%s shard %d); %s",
                  bad >= 0 ? "located" : "unlocated", bad,
                  bad >= 0 ? "rebuilding it" : "recomputing the data shards");
}

/* Rebuild missing data results from parity when enough parities arrived.
   Returns the data shards still missing (to fall back on). */
static uint64_t call_decode(cdc_context_t *context, cdc_coded_call_t *call, call_run_t *run)
{
    uint64_t missing = run->data_mask & ~run->present;
    int parities = cdc__popcount64(run->present & ~run->data_mask);
    if (!missing || !call->code || cdc__popcount64(missing) > parities)
        return missing;
    double amplification = cdc__code_decode_amplification(call->code, run->present);
    if (amplification > cdc__decode_limit(call->tasks[0].k)) {
        CDC_LOG_DEBUGF("decode of %d shards amplifies errors %.0fx (k = %lld); computing "
                       "them here", cdc__popcount64(missing), amplification,
                       (long long) call->tasks[0].k);
        run->refused = 1;
        return missing;
    }
    if (cdc__code_decode(call->code, call->rows, call->cols, call->results, call->cols,
                         run->present) != CDC_OK) {
        CDC_LOG_WARNF("decode failed (%s); computing missing shards locally",
                      cdc_last_error());
        return missing;
    }
    run->report.decoded = cdc__popcount64(missing);
    /* Accuracy guard (BLAS callers): a rebuilt shard carries the rounding
       errors of every shard it came from, ~sqrt(k) eps each; where their sum
       could exceed the standard GEMM error bound, ~k eps |a||b|, of its own
       elements, compute it here instead. */
    uint64_t rebuilt = missing;
    missing = 0;
    if (context->decode_guard > 0.0 && call_scales_ready(call)) {
        double limit = context->decode_guard * sqrt((double) call->inner);
        for (int s = 0; s < call->n; s++)
            if ((rebuilt & (UINT64_C(1) << s)) &&
                decode_amplification(call, run->present, s) > limit) {
                missing |= UINT64_C(1) << s;
                run->report.decoded--;
            }
    }
    return missing;
}

/* The sample: the first calls (a device that corrupts every result is
   caught at once), then one in 16: each costs a call r/n more work in the
   rotated layout (every worker computes a parity block after its data),
   so under 2% of the calls' time at n >= 4. */
#define CDC_VERIFY_FIRST 4
#define CDC_VERIFY_EVERY 16

int cdc__verify_this_call(cdc_context_t *context)
{
    pthread_mutex_lock(&context->lock);
    uint64_t sequence = context->verify_sequence++;
    int wanted = context->config.verify == 2 ||
                 (context->config.verify == 1 &&
                  (sequence < CDC_VERIFY_FIRST || sequence % CDC_VERIFY_EVERY == 0 ||
                   context->corruption_seen));
    pthread_mutex_unlock(&context->lock);
    return wanted;
}

void cdc__verify_account(cdc_context_t *context, int checked, int corrupt)
{
    context->stats.verified_calls += checked != 0;
    context->stats.corrupt_detected += corrupt != 0;
    if (corrupt && !context->corruption_seen) {
        context->corruption_seen = 1;
        context->stats.first_corrupt_call = context->stats.coded_calls;
        CDC_LOG_WARNF("coded call %llu: a worker's result failed the parity check; every "
                      "call is checked from now on",
                      (unsigned long long) context->stats.coded_calls);
    }
}

void cdc__check_wait_start(cdc_check_wait_t *wait)
{
    wait->started_ms = cdc__clock_ms();
    wait->decodable_ms = -1.0;
}

int cdc__check_wait_over(cdc_check_wait_t *wait, int decodable, int checkable)
{
    if (!decodable || checkable)
        return decodable;
    double now = cdc__clock_ms();
    if (wait->decodable_ms < 0.0)
        wait->decodable_ms = now;
    return now >= wait->decodable_ms + 0.5 * (wait->decodable_ms - wait->started_ms);
}

double cdc__decode_limit(int64_t k)
{
    const double unit_roundoff = 5.9604644775390625e-8, max_predicted_error = 1e-4;
    double limit = max_predicted_error / (unit_roundoff * sqrt((double) (k > 1 ? k : 1)));
    return limit > 8.0 ? limit : 8.0;
}

int cdc__coded_call_run_here(const cdc_context_t *context, const cdc_shard_task_t *task)
{
    double started = cdc__clock_ms();
    int rc = task_empty(task) ? CDC_OK : cdc__task_run_local(task);
    if (rc == CDC_OK && context->local_gflops > 0.0 && !task_empty(task)) {
        double flops = 2.0 * (double) task->a_rows * (double) task->k * (double) task->cols;
        cdc__sleep_ms(started + flops / (context->local_gflops * 1e6) - cdc__clock_ms());
    }
    return rc;
}

/* Too few results to decode: compute the missing data shards here. The call
   is slower but never lost and never wrong. */
static int call_fall_back(const cdc_context_t *context, cdc_coded_call_t *call,
                          uint64_t missing, call_run_t *run)
{
    for (int s = 0; s < call->n && missing; s++) {
        if (!(missing & (UINT64_C(1) << s)))
            continue;
        int rc = cdc__coded_call_run_here(context, &call->tasks[s]);
        if (rc != CDC_OK)
            return rc;
        result_pad(call, s);
        run->report.fallback++;
    }
    return CDC_OK;
}

/* The report and the context's counters. */
static void call_account(cdc_context_t *context, const cdc_coded_call_t *call,
                         const call_run_t *run)
{
    const cdc_call_report_t *report = &run->report;
    /* An erased empty shard counts as lost, though nothing was to be sent. */
    uint64_t lost = run->replicate ? run->erased
                                   : (run->all & ~run->present) | (run->erased & run->empty);
    pthread_mutex_lock(&context->lock);
    context->last_call = *report;
    context->stats.coded_calls += call->r > 0;
    context->stats.degraded_calls += report->degraded;
    context->stats.shards_sent += (uint64_t) run->count;
    context->stats.shards_erased += (uint64_t) cdc__popcount64(lost);
    context->stats.results_decoded += (uint64_t) report->decoded;
    context->stats.decodes_refused += (uint64_t) run->refused;
    context->stats.budget_erasures += (uint64_t) cdc__popcount64(run->unfit);
    cdc__verify_account(context, run->checked, report->corrupt);
    context->stats.fallbacks += report->fallback > 0;
    context->stats.bytes_out += run->out_bytes;
    for (int s = 0; s < call->n + call->r; s++)
        if (run->present & (UINT64_C(1) << s))
            context->stats.bytes_in += (uint64_t) call->tasks[s].a_rows *
                                       (uint64_t) call->tasks[s].cols * sizeof(float);
    pthread_mutex_unlock(&context->lock);
}

/* A call whose shards would not fit their homes' memory, or that is
   predicted faster here: every data task computed here, nothing sent; a
   planned choice, not a fallback (each has its own counter). */
static int call_run_here(cdc_context_t *context, cdc_coded_call_t *call)
{
    cdc_call_report_t report;
    memset(&report, 0, sizeof report);
    report.n = call->n;
    report.r = call->r;
    report.split = call->split;
    report.oracle_ms = -1.0;
    for (int s = 0; s < CDC_MAX_WORKERS; s++)
        report.shard_ms[s] = -1.0;
    for (int s = 0; s < call->n; s++) {
        int rc = cdc__coded_call_run_here(context, &call->tasks[s]);
        if (rc != CDC_OK)
            return rc;
        result_pad(call, s);
    }
    pthread_mutex_lock(&context->lock);
    context->last_call = report;
    context->stats.budget_fallbacks += call->here == CDC_HERE_BUDGET;
    context->stats.planned_local += call->here == CDC_HERE_FASTER;
    pthread_mutex_unlock(&context->lock);
    return CDC_OK;
}

int cdc__coded_call_here(const cdc_call_plan_t *plan)
{
    return plan->over_budget ? CDC_HERE_BUDGET : plan->local_faster ? CDC_HERE_FASTER : 0;
}

void cdc__coded_call_follow(cdc_coded_call_t *call, const cdc_call_plan_t *plan)
{
    call->split = plan->split;
    call->wanted_r = plan->wanted_r;
    call->here = cdc__coded_call_here(plan);
    call->unfit = plan->unfit_slots;
}

/* The coordinator's share on the helper thread. */
typedef struct {
    const cdc_context_t *context;
    const cdc_shard_task_t *task;
} share_job_t;

static int share_run(void *arg)
{
    const share_job_t *job = arg;
    return cdc__coded_call_run_here(job->context, job->task);
}

/* Start the share on the context's helper thread (started now if need be):
   1 when it runs there, 0 when it was computed here already (no helper). */
static int share_start(cdc_context_t *context, share_job_t *job, int *rc)
{
    *rc = CDC_OK;
    if (!context->share_thread && cdc__share_thread_new(&context->share_thread) != CDC_OK)
        CDC_LOG_WARNF("%s: the coordinator's share runs before the call", cdc_last_error());
    if (!context->share_thread) {
        *rc = share_run(job);
        return 0;
    }
    cdc__share_thread_post(context->share_thread, share_run, job);
    return 1;
}

static int call_run_coded(cdc_context_t *context, cdc_coded_call_t *call)
{
    if (call->here)
        return call_run_here(context, call);
    call_run_t run;
    run_start(context, call, &run);
    run.verify = call->code && cdc__verify_this_call(context);
    int rc = call_dispatch(context, call, &run);
    if (rc == CDC_OK)
        call_collect(call, &run);
    free(run.replicas);
    if (rc != CDC_OK)
        return rc;
    call_verify(context, call, &run);
    uint64_t missing = call_decode(context, call, &run);
    rc = call_fall_back(context, call, missing, &run);
    if (rc != CDC_OK)
        return rc;
    call_account(context, call, &run);
    return CDC_OK;
}

int cdc__coded_call_run(cdc_context_t *context, cdc_coded_call_t *call)
{
    if (task_empty(&call->share))
        return call_run_coded(context, call);
    if (call->here) { /* all of it here: the share first, then the rest */
        int rc = cdc__coded_call_run_here(context, &call->share);
        return rc != CDC_OK ? rc : call_run_here(context, call);
    }
    share_job_t job = {context, &call->share};
    int share_rc, threaded = share_start(context, &job, &share_rc);
    int rc = call_run_coded(context, call);
    if (threaded) /* on every path: the share writes into the caller's memory */
        share_rc = cdc__share_thread_wait(context->share_thread);
    return rc != CDC_OK ? rc : share_rc;
}
