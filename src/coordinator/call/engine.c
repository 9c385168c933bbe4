/* engine.c - the coordinator's core: tasks out, results in, check, decode,
 * fall back, whatever the parity layout.
 *
 * The problem. The blocks of one product go to workers as tasks; some never
 * answer, some answer late, one may answer wrong. The caller must still get
 * the exact product, as soon as what came allows.
 *
 * The data. A layout (layout.h) cuts the product into stripes of n data and
 * r parity blocks and says which task each slot runs; a call_run_t carries
 * one run through its steps: the tasks sent, and per stripe a bit mask of
 * its blocks that are usable (present).
 *
 * The steps. dispatch (every slot not erased nor left out, with a goal:
 * every stripe whole or decodable within cdc__decode_limit and, in a call
 * the check samples, checkable) -> collect (which blocks came) -> verify
 * (parity check of every stripe with more than n blocks: drop a located
 * bad block, or the whole stripe) -> decode (lost data blocks from parity;
 * the BLAS accuracy guard may refuse a rebuilt block) -> fall back
 * (compute what is still missing here) -> account (report, counters).
 *
 * Invariant: on CDC_OK every data block is a product computed by a worker
 * whose stripe passed the check (when it ran), rebuilt from such, or
 * computed here; a failure of any worker costs time, never the result. */
#include "engine.h"

#include "bits.h"
#include "clock.h"
#include "error.h"
#include "executor.h"
#include "faults.h"
#include "log.h"
#include "share_thread.h"
#include "task_run.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SLOTS 64

/* One run of a call, as its steps hand it on. */
typedef struct {
    cdc_call_layout_t *layout;
    cdc_shard_task_t sent[MAX_SLOTS]; /* what went to the executor          */
    int slot_of[MAX_SLOTS];           /* sent[t] is slot slot_of[t]'s task  */
    int count;
    uint64_t erased;        /* slots cdc_context_erase_next named            */
    uint64_t corrupted;     /* slots cdc_context_corrupt_next named          */
    uint64_t zero;          /* slots whose blocks are zero: none sent        */
    uint64_t left_out;      /* slots the plan left out (CDC_SLOT_OUT)        */
    int released;           /* on-demand tasks (task.h) the executor sent    */
    uint32_t parts[MAX_SLOTS]; /* per slot: its task's parts in              */
    uint64_t present[MAX_SLOTS]; /* per stripe: its usable blocks            */
    double decode_limit;    /* cdc__decode_limit of the call's k             */
    int verify;             /* CDC_CHECK_*: every stripe waits for a block to
                               check with                                   */
    cdc_check_wait_t check_wait;
    int checked;            /* some stripe was checked                        */
    int refused;            /* stripes decodable by count, not by accuracy   */
    float *scratch;         /* one stripe's blocks, when the layout copies   */
    uint64_t out_bytes, in_bytes;
    double send_ms;         /* dispatch until the last task was sent         */
    double executor_done_ms; /* when the executor returned (cdc__clock_ms)   */
    cdc_call_report_t report;
} call_run_t;

/* An on-demand task (task.h) the call never needed: not sent, not lost,
   still there to be sent (redundancy). */
static int task_held(const cdc_shard_task_t *task)
{
    return task->on_demand && !task->released;
}

static uint64_t data_mask(const cdc_call_layout_t *layout)
{
    return cdc__low_bits(layout->n);
}

/* Whether a stripe with these blocks is whole, or decodable with an error
   amplification within the call's limit (a parity block that would amplify
   errors too much is not enough: the goal waits for a better one). The
   code's amplification says both: 0 for a whole stripe, infinite for one
   that too few parity blocks cannot rebuild. */
static int stripe_decodable(const call_run_t *run, uint64_t present)
{
    const cdc_call_layout_t *layout = run->layout;
    if (!layout->code)
        return (present & data_mask(layout)) == data_mask(layout);
    return cdc__code_decode_amplification(layout->code, present) <= run->decode_limit;
}

/* Whether a stripe can be checked: it has more blocks than its n. */
static int stripe_checkable(const call_run_t *run, uint64_t present)
{
    return run->layout->code && cdc__popcount64(present) > run->layout->n;
}

/* The executor's goal (task.h): every stripe whole or decodable; in a
   checked call, every stripe checkable too (a block more than its n: a
   stripe that lost a data block is rebuilt from parity, and a rebuild
   from a bad block would be wrong too), or past the check's wait. */
static int goal_enough(void *ctx, const cdc_shard_task_t *tasks, int count)
{
    call_run_t *run = ctx;
    const cdc_call_layout_t *layout = run->layout;
    uint32_t parts[MAX_SLOTS] = {0};
    for (int t = 0; t < count; t++)
        parts[run->slot_of[t]] = tasks[t].parts_in;
    int checkable = run->verify != CDC_CHECK_NONE;
    for (int s = 0; s < layout->stripes; s++) {
        uint64_t present = layout->ops->present(layout, parts, s);
        if (!stripe_decodable(run, present))
            return 0;
        checkable = checkable && stripe_checkable(run, present);
    }
    return run->verify == CDC_CHECK_NONE || cdc__check_wait_over(&run->check_wait, 1, checkable);
}

/* The injections for this call, taken from the context (they apply once). */
static void run_start(cdc_context_t *context, cdc_call_layout_t *layout, call_run_t *run)
{
    memset(run, 0, sizeof *run);
    run->layout = layout;
    run->decode_limit = cdc__decode_limit(layout->k);
    pthread_mutex_lock(&context->lock);
    run->erased = context->erase_next & layout->erasable;
    run->corrupted = context->corrupt_next & cdc__low_bits(layout->slots);
    context->erase_next = 0;
    context->corrupt_next = 0;
    pthread_mutex_unlock(&context->lock);
    run->verify = layout->code ? cdc__verify_this_call(context) : CDC_CHECK_NONE;
}

/* When the deferrable slots' tasks (layout.h) are wanted in this run
   (CDC_ON_DEMAND_*): late or lost, unless the call checks (a parity to
   check with) or a data slot is lost already (erased, left out); then as
   soon as a worker is free. */
static int run_defer_mode(const call_run_t *run)
{
    const cdc_call_layout_t *layout = run->layout;
    if (run->verify != CDC_CHECK_NONE || ((run->erased | run->left_out) & layout->data_slots))
        return CDC_ON_DEMAND_FREE;
    return CDC_ON_DEMAND_LATE;
}

/* Every slot not erased gets its task (on demand where deferred); the
   executor returns once the goal (or, without one, its needed rule) holds,
   or nothing more will come. */
static int call_dispatch(cdc_context_t *context, call_run_t *run)
{
    cdc_call_layout_t *layout = run->layout;
    cdc_shard_task_t tasks[MAX_SLOTS];
    int send[MAX_SLOTS];
    for (int slot = 0; slot < layout->slots; slot++) {
        send[slot] = layout->ops->task(layout, slot, &tasks[slot]);
        uint64_t bit = UINT64_C(1) << slot;
        run->zero |= send[slot] == CDC_SLOT_ZERO ? bit : 0;
        run->left_out |= send[slot] == CDC_SLOT_OUT && !(run->erased & bit) ? bit : 0;
    }
    int mode = run_defer_mode(run);
    for (int slot = 0; slot < layout->slots; slot++) {
        cdc_shard_task_t task = tasks[slot];
        uint64_t bit = UINT64_C(1) << slot;
        if (send[slot] != CDC_SLOT_SEND || (run->erased & bit))
            continue;
        task.on_demand = layout->deferrable & bit ? mode : CDC_ON_DEMAND_NO;
        task.released = 0;
        run->slot_of[run->count] = slot;
        run->sent[run->count] = task;
        run->out_bytes += cdc__task_bytes_out(&task);
        run->count++;
    }
    int needed = layout->needed - cdc__popcount64(run->zero);
    cdc__check_wait_start(&run->check_wait, run->verify, layout->deferrable != 0);
    /* Without a goal the executor stops once every data task is in, or
       needed results are: right unless a data slot is out or the call
       checks, both of which want parity. */
    cdc_call_goal_t goal = {goal_enough, run};
    int ruled = layout->streamed || run->verify ||
                ((run->erased | run->left_out) & layout->data_slots);
    uint64_t arrived = 0;
    double started = cdc__clock_ms();
    int rc = run->count ? context->executor->ops->run(context->executor, run->sent, run->count,
                                                      layout->executor_n, needed,
                                                      ruled ? &goal : NULL, &arrived)
                        : CDC_OK;
    run->executor_done_ms = cdc__clock_ms();
    run->report.executor_ms = run->executor_done_ms - started;
    for (int t = 0; t < run->count; t++)
        run->send_ms = run->sent[t].sent_ms > run->send_ms ? run->sent[t].sent_ms : run->send_ms;
    return rc;
}

/* The report's fields every call has: its shape, no shard's time yet. */
static void report_start(const cdc_call_layout_t *layout, cdc_call_report_t *report)
{
    report->n = layout->n;
    report->r = layout->r;
    report->split = layout->split;
    for (int w = 0; w < CDC_MAX_WORKERS; w++)
        report->shard_ms[w] = -1.0;
}

/* What came back: per slot, per stripe; the report's first fields. */
static void call_collect(call_run_t *run)
{
    cdc_call_layout_t *layout = run->layout;
    cdc_call_report_t *report = &run->report;
    report_start(layout, report);
    report->erased = cdc__popcount64(run->erased);
    /* Redundancy: the losses the call could still take. */
    int dispatched = cdc__popcount64(run->zero);
    for (int t = 0; t < run->count; t++) {
        const cdc_shard_task_t *task = &run->sent[t];
        int slot = run->slot_of[t];
        dispatched += task->dispatched || task_held(task);
        run->released += task->on_demand && task->released;
        run->parts[slot] = task->parts_in;
        for (int p = 0; p < cdc_task_parts(task); p++) {
            int64_t first;
            cdc_shard_task_t piece = cdc__task_part(task, p, &first);
            if (task->parts_in & (UINT32_C(1) << p))
                run->in_bytes += (uint64_t) (piece.a_rows * piece.cols) * sizeof(float);
        }
        if (!(task->parts_in & 1))
            continue;
        report->arrived++;
        report->shard_ms[slot] = task->elapsed_ms;
    }
    for (int slot = 0; slot < layout->slots; slot++)
        if (run->zero & (UINT64_C(1) << slot))
            report->shard_ms[slot] = 0.0;
    report->redundancy = dispatched > layout->n ? dispatched - layout->n : 0;
    report->degraded = report->redundancy < layout->wanted_r;
    layout->ops->collected(layout, run->parts, run->corrupted & ~run->zero, report);
    for (int s = 0; s < layout->stripes; s++)
        run->present[s] = layout->ops->present(layout, run->parts, s);
}

/* Stripe s's blocks: pointers, or copies into the run's scratch. */
static int stripe_blocks(call_run_t *run, int s, uint64_t present, float **blocks)
{
    const cdc_call_layout_t *layout = run->layout;
    if (layout->copies_blocks && !run->scratch) {
        size_t floats = (size_t) (layout->n + layout->r) * (size_t) layout->block_rows *
                        (size_t) layout->cols;
        run->scratch = malloc(floats * sizeof(float));
        if (!run->scratch)
            return cdc__fail(CDC_ENOMEM, "a stripe's %zu floats", floats);
    }
    layout->ops->gather(layout, s, present, run->scratch, blocks);
    return CDC_OK;
}

/* Failed stripes warned about one by one, then one in this many: a device
   that corrupts every result must not fill the log. */
#define CDC_CHECK_WARN_FIRST 8
#define CDC_CHECK_WARN_EVERY 1000

static void warn_failed_stripe(cdc_context_t *context, int s, int bad)
{
    uint64_t count = ++context->stripes_failed;
    if (count > CDC_CHECK_WARN_FIRST && count % CDC_CHECK_WARN_EVERY != 0)
        return;
    CDC_LOG_WARNF("stripe %d fails the parity check (block %d%s); %s (%llu stripes so far)", s,
                  bad, bad >= 0 ? "" : ": not located",
                  bad >= 0 ? "rebuilding it" : "computing its data here",
                  (unsigned long long) count);
    if (count == CDC_CHECK_WARN_FIRST)
        CDC_LOG_WARNF("from now on, 1 failed stripe in %d is logged", CDC_CHECK_WARN_EVERY);
}

/* A checked call: every stripe with more blocks than its n is checked
   against the parity equations (code.h: a rounding-aware tolerance). A
   block that fails and is located is dropped (and rebuilt); a stripe whose
   bad block cannot be located keeps only its zero blocks (computed here
   whole), so a corrupted result never reaches the caller. Under a strict
   check, so does a stripe with nothing to check with. */
static void call_verify(cdc_context_t *context, call_run_t *run)
{
    cdc_call_layout_t *layout = run->layout;
    static const uint32_t nothing_came[MAX_SLOTS];
    if (run->verify == CDC_CHECK_NONE)
        return;
    for (int s = 0; s < layout->stripes; s++) {
        uint64_t present = run->present[s];
        float *blocks[CDC_CODE_MAX_N + CDC_CODE_MAX_R];
        cdc_shard_scale_t scales[CDC_CODE_MAX_N + CDC_CODE_MAX_R];
        if (!stripe_checkable(run, present)) { /* nothing to check with in time */
            if (run->verify == CDC_CHECK_STRICT) {
                run->present[s] = layout->ops->present(layout, nothing_came, s);
                run->checked = 1; /* no block of it unchecked: computed here */
            }
            continue;
        }
        if (stripe_blocks(run, s, present, blocks) != CDC_OK ||
            layout->ops->scales(layout, s, scales) != CDC_OK) {
            CDC_LOG_WARNF("parity check unavailable (%s); %s", cdc_last_error(),
                          run->verify == CDC_CHECK_STRICT ? "computing the stripes here"
                                                          : "not checking");
            for (int t = s; t < layout->stripes && run->verify == CDC_CHECK_STRICT; t++)
                run->present[t] = layout->ops->present(layout, nothing_came, t);
            return;
        }
        run->checked = 1;
        int bad = -1;
        if (cdc__code_check(layout->code, layout->block_rows, layout->cols,
                            (const float *const *) blocks, layout->cols, present, scales,
                            layout->k, &bad) != CDC_ECORRUPT)
            continue;
        run->report.corrupt = 1;
        run->present[s] &= bad >= 0 ? ~(UINT64_C(1) << bad)
                                    : layout->ops->present(layout, nothing_came, s);
        warn_failed_stripe(context, s, bad);
    }
}

/* How much larger the rounding error of rebuilt block `lost` can be than
   that of computing it directly: the largest ratio, over its elements, of
   the sum of the used blocks' operand-norm products to its own (a NULL
   col counts 1). Elements whose own operands are zero are exactly zero:
   they are set so, not counted. */
static double guard_amplification(const cdc_call_layout_t *layout, const cdc_shard_scale_t *scales,
                                  uint64_t used, int lost, float *block)
{
    const cdc_shard_scale_t *own = &scales[lost];
    double worst = 0.0;
    for (int64_t p = 0; p < layout->block_rows; p++)
        for (int64_t q = 0; q < layout->cols; q++) {
            double mine = own->row[p] * (own->col ? own->col[q] : 1.0);
            if (mine == 0.0) {
                block[p * layout->cols + q] = 0.0f;
                continue;
            }
            double sum = 0.0;
            for (int u = 0; u < layout->n + layout->r; u++)
                if (used & (UINT64_C(1) << u))
                    sum += scales[u].row[p] * (scales[u].col ? scales[u].col[q] : 1.0);
            worst = sum / mine > worst ? sum / mine : worst;
        }
    return worst;
}

/* The BLAS accuracy guard (context decode_guard): a rebuilt block carries
   the rounding errors of every block it came from, ~sqrt(k) eps each;
   where their sum could exceed the standard GEMM error bound, ~k eps |a||b|,
   of its own elements, it is computed here instead. Returns the rebuilt
   blocks kept. */
static uint64_t stripe_guard(const cdc_context_t *context, call_run_t *run, int s,
                             uint64_t present, uint64_t rebuilt, float **blocks)
{
    cdc_call_layout_t *layout = run->layout;
    cdc_shard_scale_t scales[CDC_CODE_MAX_N + CDC_CODE_MAX_R];
    if (context->decode_guard <= 0.0)
        return rebuilt;
    if (layout->ops->scales(layout, s, scales) != CDC_OK)
        return 0; /* cannot tell: computed here */
    double limit = context->decode_guard * sqrt((double) layout->k);
    for (int b = 0; b < layout->n; b++)
        if ((rebuilt & (UINT64_C(1) << b)) &&
            guard_amplification(layout, scales, present, b, blocks[b]) > limit)
            rebuilt &= ~(UINT64_C(1) << b);
    return rebuilt;
}

/* Rebuild stripe s's lost data blocks from its parity where enough came
   and the decode is accurate enough. Returns the data blocks still
   missing (to compute here). */
static uint64_t stripe_decode(const cdc_context_t *context, call_run_t *run, int s)
{
    const cdc_call_layout_t *layout = run->layout;
    uint64_t present = run->present[s], missing = data_mask(layout) & ~present;
    if (!missing || !layout->code)
        return missing;
    double amplification = cdc__code_decode_amplification(layout->code, present);
    if (amplification > run->decode_limit) {
        run->refused += isfinite(amplification); /* enough parity, too inexact */
        if (isfinite(amplification))
            CDC_LOG_DEBUGF("stripe %d: a decode would amplify errors %.0fx (k = %lld); "
                           "computing it here", s, amplification, (long long) layout->k);
        return missing;
    }
    float *blocks[CDC_CODE_MAX_N + CDC_CODE_MAX_R];
    if (stripe_blocks(run, s, present, blocks) != CDC_OK ||
        cdc__code_decode(layout->code, layout->block_rows, layout->cols, blocks, layout->cols,
                         present) != CDC_OK) {
        CDC_LOG_WARNF("stripe %d: decode failed (%s); computing it here", s, cdc_last_error());
        return missing;
    }
    uint64_t rebuilt = stripe_guard(context, run, s, present, missing, blocks);
    for (int b = 0; b < layout->n; b++)
        if (rebuilt & (UINT64_C(1) << b)) {
            if (layout->ops->scatter)
                layout->ops->scatter(layout, s, b, blocks[b]);
            run->report.decoded++;
        }
    return missing & ~rebuilt;
}

/* Every stripe whole: decoded where it can be, its missing data blocks
   computed here where not. */
static int call_finish(const cdc_context_t *context, call_run_t *run)
{
    cdc_call_layout_t *layout = run->layout;
    for (int s = 0; s < layout->stripes; s++) {
        uint64_t missing = stripe_decode(context, run, s);
        for (int b = 0; b < layout->n && missing; b++) {
            if (!(missing & (UINT64_C(1) << b)))
                continue;
            int rc = layout->ops->compute_here(layout, context, s, b);
            if (rc != CDC_OK)
                return rc;
            run->report.fallback++;
        }
    }
    return CDC_OK;
}

/* The report and the context's counters. */
static void call_account(cdc_context_t *context, const call_run_t *run)
{
    const cdc_call_layout_t *layout = run->layout;
    const cdc_call_report_t *report = &run->report;
    int lost = cdc__popcount64(run->erased | run->left_out), held = 0;
    for (int t = 0; t < run->count; t++) {
        int never_needed = task_held(&run->sent[t]);
        held += never_needed;
        lost += !never_needed && !(run->sent[t].parts_in & 1);
    }
    pthread_mutex_lock(&context->lock);
    context->last_call = *report;
    context->stats.coded_calls += layout->r > 0;
    context->stats.degraded_calls += report->degraded;
    context->stats.shards_sent += (uint64_t) (run->count - held);
    context->stats.parity_on_demand += run->released > 0;
    context->stats.shards_erased += (uint64_t) lost;
    context->stats.results_decoded += (uint64_t) report->decoded;
    context->stats.decodes_refused += (uint64_t) run->refused;
    context->stats.budget_erasures += (uint64_t) cdc__popcount64(run->left_out);
    context->stats.verified_calls += run->checked;
    if (layout->code)
        cdc__verify_account(context, run->verify, report->executor_ms,
                            cdc__check_wait_past_decodable(&run->check_wait,
                                                           run->executor_done_ms));
    context->stats.corrupt_detected += report->corrupt != 0;
    if (report->corrupt && !context->corruption_seen) {
        context->corruption_seen = 1;
        context->stats.first_corrupt_call = context->stats.coded_calls;
        CDC_LOG_WARNF("coded call %llu: a worker's result failed the parity check; every "
                      "call is checked from now on",
                      (unsigned long long) context->stats.coded_calls);
    }
    context->stats.fallbacks += report->fallback > 0;
    context->stats.bytes_out += run->out_bytes;
    context->stats.bytes_in += run->in_bytes;
    if (layout->ops->account)
        layout->ops->account(layout, context);
    context->steps.send_ms += run->send_ms;
    context->steps.wait_ms += report->executor_ms - run->send_ms;
    context->steps.finish_ms += cdc__clock_ms() - run->executor_done_ms;
    pthread_mutex_unlock(&context->lock);
}

int cdc__call_compute_here(const cdc_context_t *context, const cdc_shard_task_t *task)
{
    int empty = task->a_rows == 0 || task->cols == 0;
    double started = cdc__clock_ms();
    int rc = empty ? CDC_OK : cdc__task_run_local(task);
    if (rc == CDC_OK && !empty) { /* an emulated coordinator: its device's time */
        double rows = (double) task->a_rows, cols = (double) task->cols, k = (double) task->k;
        cdc_emulated_device_t device = {context->local_gflops, context->local_gbps};
        double ms = cdc__emulated_ms(device, cdc__gemm_flops(rows, cols, k),
                                     cdc__gemm_streamed_bytes(rows, cols, k));
        if (ms > 0.0)
            cdc__sleep_ms(started + ms - cdc__clock_ms());
    }
    return rc;
}

/* A call whose blocks would not fit their homes' memory, or that is
   predicted faster here: every data block computed here, nothing sent; a
   planned choice, not a fallback (each has its own counter). */
static int call_run_here(cdc_context_t *context, cdc_call_layout_t *layout)
{
    cdc_call_report_t report;
    memset(&report, 0, sizeof report);
    report_start(layout, &report);
    report.oracle_ms = -1.0;
    report.redundancy = layout->wanted_r; /* no worker's loss can reach it */
    for (int s = 0; s < layout->stripes; s++)
        for (int b = 0; b < layout->n; b++) {
            int rc = layout->ops->compute_here(layout, context, s, b);
            if (rc != CDC_OK)
                return rc;
        }
    pthread_mutex_lock(&context->lock);
    context->last_call = report;
    context->stats.budget_fallbacks += layout->here == CDC_HERE_BUDGET;
    context->stats.planned_local += layout->here == CDC_HERE_FASTER;
    pthread_mutex_unlock(&context->lock);
    return CDC_OK;
}

static int call_run_sent(cdc_context_t *context, cdc_call_layout_t *layout)
{
    if (layout->here)
        return call_run_here(context, layout);
    call_run_t *run = malloc(sizeof *run);
    if (!run)
        return cdc__fail(CDC_ENOMEM, "a call's state");
    run_start(context, layout, run);
    int rc = call_dispatch(context, run);
    if (rc == CDC_OK) {
        call_collect(run);
        call_verify(context, run);
        rc = call_finish(context, run);
    }
    if (rc == CDC_OK)
        call_account(context, run);
    free(run->scratch);
    free(run);
    return rc;
}

/* The coordinator's share on the helper thread. */
typedef struct {
    const cdc_context_t *context;
    const cdc_shard_task_t *task;
} share_job_t;

static int share_run(void *arg)
{
    const share_job_t *job = arg;
    return cdc__call_compute_here(job->context, job->task);
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

int cdc__call_run(cdc_context_t *context, cdc_call_layout_t *layout)
{
    const cdc_shard_task_t *share = &layout->share;
    context->call_ran_engine = 1; /* (under the call lock: the steps' total) */
    if (share->a_rows == 0 || share->cols == 0)
        return call_run_sent(context, layout);
    if (layout->here) { /* all of it here: the share first, then the rest */
        int rc = cdc__call_compute_here(context, share);
        return rc != CDC_OK ? rc : call_run_here(context, layout);
    }
    share_job_t job = {context, share};
    int share_rc, threaded = share_start(context, &job, &share_rc);
    int rc = call_run_sent(context, layout);
    if (threaded) /* on every path: the share writes into the caller's memory */
        share_rc = cdc__share_thread_wait(context->share_thread);
    return rc != CDC_OK ? rc : share_rc;
}
