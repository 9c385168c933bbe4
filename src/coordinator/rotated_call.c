/* rotated_call.c - a coded product in the rotated parity layout.
 *
 * The problem. The dedicated layout keeps r workers busy with parity on
 * every call, so a call that loses nothing waits for n of W workers each
 * computing 1/n of the rows: (n + r)/n the work of an uncoded call on W.
 * Here each of the W workers holds n data blocks and r parity blocks of
 * W stripes (rotated_set.h) and computes its data rows first (1/W of them)
 * and streams them; its parity blocks follow only while the call still
 * wants them. A call that loses nothing ends with the data, costing what
 * an uncoded call on W workers costs.
 *
 * The steps. dispatch one streamed task per worker not erased (task.h:
 * lead_rows = its data rows, parts of B rows after them) with a goal that
 * says when every stripe is whole or decodable -> the executor cancels the
 * parts still due -> (a checked call: every stripe waited for a parity
 * block too, and is checked against it; a stripe that fails is computed
 * here) -> each stripe that lost data blocks is decoded from the parity
 * blocks that came (zero-padded to B), where the decode is accurate enough
 * (cdc__decode_limit) -> blocks still missing are computed here -> account.
 *
 * Fault-free the layout computes no parity, so nothing is checked unless
 * the call asks: cdc__verify_this_call samples calls (and every call once
 * a check failed), and such a call costs each worker its parity blocks,
 * r/n more work.
 *
 * Invariant: on CDC_OK every row of out is the product computed by its
 * worker, rebuilt from its stripe's parity, or computed here; a checked
 * stripe's rows passed the check or were computed here. */
#include "rotated_call.h"

#include "bits.h"
#include "clock.h"
#include "coded_call.h"
#include "error.h"
#include "executor.h"
#include "hash.h"
#include "log.h"
#include "norms.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int cdc__rotated_wanted(cdc_context_t *context, const cdc_call_plan_t *plan, int64_t rows)
{
    if (context->config.parity_layout != CDC_LAYOUT_ROTATED || !plan->code ||
        context->config.plan != CDC_PLAN_EQUAL || context->config.replicate ||
        plan->here_rows > 0 || cdc__coded_call_here(plan) || plan->unfit_slots ||
        !cdc__rotated_fits(rows, plan->n + plan->r, plan->r))
        return 0;
    pthread_mutex_lock(&context->lock);
    int plain = context->corrupt_next == 0 && context->block_weights_n == 0;
    pthread_mutex_unlock(&context->lock);
    return plain;
}

/* One run: the tasks sent (task t is worker worker_of[t]'s) and what came. */
typedef struct {
    const cdc_rotated_call_t *call;
    cdc_shard_task_t sent[CDC_STRIPES_MAX_WORKERS];
    int worker_of[CDC_STRIPES_MAX_WORKERS];
    int count;
    float *tails;           /* worker w's parity results: W x r·B x cols */
    uint64_t erased;        /* workers cdc_context_erase_next took out   */
    uint32_t parts_in[CDC_STRIPES_MAX_WORKERS]; /* per worker            */
    double decode_limit;    /* cdc__decode_limit of the call's k           */
    int verify;             /* every stripe waits for a parity block (within
                               check_wait) and is checked against it      */
    cdc_check_wait_t check_wait;
    int checked;            /* some stripe was checked                     */
    uint64_t failed;        /* stripes whose check failed: computed here   */
    int refused;            /* stripes decodable by count, not by accuracy */
    cdc_call_report_t report;
    uint64_t out_bytes, in_bytes;
} rotated_run_t;

static float *worker_tail(const rotated_run_t *run, int w)
{
    const cdc_rotated_set_t *set = run->call->set;
    size_t per_worker = (size_t) set->layout.r * (size_t) set->block_rows *
                        (size_t) run->call->proto.cols;
    return run->tails + (size_t) w * per_worker;
}

/* Whether stripe s's data block b / parity block j came back. */
static int data_in(const rotated_run_t *run, const uint32_t *parts, int s, int b)
{
    return parts[cdc__stripes_worker(&run->call->set->layout, s, b)] & 1;
}

static int parity_in(const rotated_run_t *run, const uint32_t *parts, int s, int j)
{
    const cdc_rotated_set_t *set = run->call->set;
    int w = cdc__stripes_worker(&set->layout, s, set->layout.n + j);
    return (parts[w] >> (1 + cdc__rotated_parity_index(set, w, s, j))) & 1;
}

/* Stripe s: its present mask for the code (bit b: block b is in). */
static uint64_t stripe_present(const rotated_run_t *run, const uint32_t *parts, int s)
{
    const cdc_stripes_t *layout = &run->call->set->layout;
    uint64_t present = 0;
    for (int b = 0; b < layout->n; b++)
        present |= (uint64_t) data_in(run, parts, s, b) << b;
    for (int j = 0; j < layout->r; j++)
        present |= (uint64_t) parity_in(run, parts, s, j) << (layout->n + j);
    return present;
}

/* Whether a stripe with this present mask is whole, or decodable with an
   error amplification within the call's limit (a parity block that would
   amplify errors too much is not enough: the goal waits for a better one).
   The code's amplification says both: 0 for a whole stripe, infinite for
   one that too few parity blocks cannot rebuild. */
static int stripe_decodable(const rotated_run_t *run, uint64_t present)
{
    return cdc__code_decode_amplification(run->call->set->code, present) <= run->decode_limit;
}

/* Whether a stripe can be checked: it has more blocks than its n. */
static int stripe_checkable(const rotated_run_t *run, uint64_t present)
{
    return cdc__popcount64(present) > run->call->set->layout.n;
}

/* The executor's goal (task.h): every stripe whole or decodable; in a
   checked call, every whole stripe checkable too, or past the check's wait
   (a stripe that lost data blocks is decoded: checking it as well would
   take more parity blocks than it has lost). */
static int goal_enough(void *ctx, const cdc_shard_task_t *tasks, int count)
{
    rotated_run_t *run = ctx;
    uint32_t parts[CDC_STRIPES_MAX_WORKERS] = {0};
    for (int t = 0; t < count; t++)
        parts[run->worker_of[t]] = tasks[t].parts_in;
    const cdc_stripes_t *layout = &run->call->set->layout;
    uint64_t data = cdc__low_bits(layout->n);
    int checkable = run->verify;
    for (int s = 0; s < layout->workers; s++) {
        uint64_t present = stripe_present(run, parts, s);
        if (!stripe_decodable(run, present))
            return 0;
        checkable = checkable && ((present & data) != data || stripe_checkable(run, present));
    }
    return !run->verify || cdc__check_wait_over(&run->check_wait, 1, checkable);
}

/* Worker w's task: its operand, data rows first into their rows of out,
   then its parity blocks into its tail. */
static cdc_shard_task_t worker_task(const rotated_run_t *run, int w)
{
    const cdc_rotated_call_t *call = run->call;
    const cdc_rotated_set_t *set = call->set;
    cdc_shard_task_t task = call->proto;
    task.shard = w;
    task.cover = -1;
    task.a = set->operand[w];
    task.a_rows = set->data_rows[w] + (int64_t) set->layout.r * set->block_rows;
    task.a_key = cdc__hash_mix(call->a_key, set->key_mix) | 1;
    task.a_hold = cdc__rotated_set_hold(set);
    task.lead_rows = set->data_rows[w];
    task.part_rows = set->block_rows;
    task.result = call->out + set->data_first[w] * call->proto.cols;
    task.tail = worker_tail(run, w);
    return task;
}

/* Every worker not erased gets its task; the executor returns once the goal
   holds (or nothing more will come). */
static int rotated_dispatch(cdc_context_t *context, rotated_run_t *run)
{
    const cdc_stripes_t *layout = &run->call->set->layout;
    pthread_mutex_lock(&context->lock);
    run->erased = context->erase_next & cdc__low_bits(layout->workers);
    context->erase_next = 0;
    pthread_mutex_unlock(&context->lock);
    for (int w = 0; w < layout->workers; w++) {
        if (run->erased & (UINT64_C(1) << w))
            continue;
        run->worker_of[run->count] = w;
        run->sent[run->count] = worker_task(run, w);
        run->out_bytes += cdc__task_bytes_out(&run->sent[run->count]);
        run->count++;
    }
    cdc_call_goal_t goal = {goal_enough, run};
    uint64_t arrived = 0;
    double started = cdc__clock_ms();
    int rc = run->count ? context->executor->ops->run(context->executor, run->sent,
                                                      run->count, layout->workers,
                                                      layout->n, &goal, &arrived)
                        : CDC_OK;
    run->report.executor_ms = cdc__clock_ms() - started;
    return rc;
}

/* What came back, per worker, and the report's first fields. */
static void rotated_collect(rotated_run_t *run)
{
    const cdc_rotated_call_t *call = run->call;
    const cdc_rotated_set_t *set = call->set;
    cdc_call_report_t *report = &run->report;
    report->n = set->layout.n;
    report->r = set->layout.r;
    report->split = call->split;
    report->erased = cdc__popcount64(run->erased);
    report->oracle_ms = 0.0;
    for (int w = 0; w < CDC_MAX_WORKERS; w++)
        report->shard_ms[w] = -1.0;
    int dispatched = 0;
    for (int t = 0; t < run->count; t++) {
        const cdc_shard_task_t *task = &run->sent[t];
        int w = run->worker_of[t];
        dispatched += task->dispatched;
        run->parts_in[w] = task->parts_in;
        for (int p = 0; p < cdc_task_parts(task); p++) {
            int64_t first;
            cdc_shard_task_t piece = cdc__task_part(task, p, &first);
            if (task->parts_in & (UINT32_C(1) << p))
                run->in_bytes += (uint64_t) (piece.a_rows * task->cols) * sizeof(float);
        }
        if (!(task->parts_in & 1))
            continue;
        report->arrived++;
        report->shard_ms[w] = task->elapsed_ms;
        report->oracle_ms = task->elapsed_ms > report->oracle_ms ? task->elapsed_ms
                                                                 : report->oracle_ms;
    }
    if (report->arrived < set->layout.workers)
        report->oracle_ms = -1.0; /* no data-only finish to compare with */
    /* The losses it could still take: workers beyond the n a stripe needs. */
    report->redundancy = dispatched > set->layout.n ? dispatched - set->layout.n : 0;
    report->degraded = report->redundancy < call->wanted_r;
}

/* Data block b of stripe s as a task here: its rows of its worker's
   operand, into its rows of out. */
static cdc_shard_task_t block_task(const rotated_run_t *run, int s, int b)
{
    const cdc_rotated_call_t *call = run->call;
    const cdc_rotated_set_t *set = call->set;
    size_t i = (size_t) s * (size_t) set->layout.n + (size_t) b;
    int w = cdc__stripes_worker(&set->layout, s, b);
    cdc_shard_task_t task = call->proto;
    task.a = set->operand[w] + (set->block_first[i] - set->data_first[w]) * set->k;
    task.a_rows = set->block_len[i];
    task.result = call->out + set->block_first[i] * call->proto.cols;
    return task;
}

/* Stripe s's blocks that came (present) as the code's blocks, in scratch
   ((n + r) blocks of B x cols, zero-padded; the others zero). */
static void stripe_gather(const rotated_run_t *run, int s, uint64_t present, float *scratch,
                          float **blocks)
{
    const cdc_rotated_set_t *set = run->call->set;
    const cdc_stripes_t *layout = &set->layout;
    int64_t cols = run->call->proto.cols, B = set->block_rows;
    size_t block = (size_t) B * (size_t) cols;
    for (int b = 0; b < layout->n + layout->r; b++) {
        blocks[b] = scratch + (size_t) b * block;
        memset(blocks[b], 0, block * sizeof(float)); /* the padding rows */
        if (!(present & (UINT64_C(1) << b)))
            continue;
        if (b < layout->n) {
            cdc_shard_task_t data = block_task(run, s, b);
            memcpy(blocks[b], data.result, (size_t) (data.a_rows * cols) * sizeof(float));
        } else {
            int j = b - layout->n, w = cdc__stripes_worker(layout, s, b);
            memcpy(blocks[b], worker_tail(run, w) +
                                  (size_t) cdc__rotated_parity_index(set, w, s, j) * block,
                   block * sizeof(float));
        }
    }
}


/* The 2-norms of the product's columns' operand: bt's rows (GEMM) or the
   input patches (conv), the check's rounding scale with the rows'. */
static void column_norms(const cdc_shard_task_t *proto, double *out)
{
    if (proto->kind == CDC_TASK_GEMM)
        cdc__row_norms(proto->bt, proto->cols, proto->k, out);
    else
        cdc__patch_norms(proto->geometry, proto->batch, proto->input, out);
}

/* Stripe s's row scales (code.h): each block's operand row norms,
   zero-padded to B, in rows ((n + r) x B doubles). */
static void stripe_scales(const rotated_run_t *run, int s, double *rows, const double *cols,
                          cdc_shard_scale_t *scales)
{
    const cdc_rotated_set_t *set = run->call->set;
    const cdc_stripes_t *layout = &set->layout;
    int64_t B = set->block_rows;
    for (int b = 0; b < layout->n + layout->r; b++) {
        double *row = rows + (size_t) b * (size_t) B;
        int w = cdc__stripes_worker(layout, s, b);
        int64_t first, len = B;
        if (b < layout->n) {
            size_t i = (size_t) s * (size_t) layout->n + (size_t) b;
            first = set->block_first[i] - set->data_first[w];
            len = set->block_len[i];
        } else {
            first = set->data_rows[w] +
                    (int64_t) cdc__rotated_parity_index(set, w, s, b - layout->n) * B;
        }
        memcpy(row, set->operand_norms[w] + first, (size_t) len * sizeof(double));
        memset(row + len, 0, (size_t) (B - len) * sizeof(double));
        scales[b].row = row;
        scales[b].col = cols;
    }
}

/* The BLAS accuracy guard (context decode_guard, as coded_call.c's for the
   dedicated layout): a rebuilt block whose error amplification, the used
   blocks' operand row norms over its own, passes guard·sqrt(k) is not used.
   The input's column norms are the same for every block of a stripe and
   cancel. Rows whose own operand is zero are exactly zero: set so. Returns
   the rebuilt blocks that pass. */
static uint64_t stripe_guard(const rotated_run_t *run, int s, uint64_t present,
                             uint64_t rebuilt, float *const *blocks, double limit)
{
    const cdc_rotated_set_t *set = run->call->set;
    int shards = set->layout.n + set->layout.r;
    int64_t B = set->block_rows, cols = run->call->proto.cols;
    double *rows = malloc((size_t) shards * (size_t) B * sizeof(double));
    cdc_shard_scale_t scales[CDC_CODE_MAX_N + CDC_CODE_MAX_R];
    if (!rows)
        return 0; /* cannot tell: computed here */
    stripe_scales(run, s, rows, NULL, scales);
    for (int b = 0; b < set->layout.n; b++) {
        if (!(rebuilt & (UINT64_C(1) << b)))
            continue;
        double worst = 0.0;
        for (int64_t p = 0; p < B; p++) {
            double mine = scales[b].row[p], sum = 0.0;
            if (mine == 0.0) {
                memset(blocks[b] + p * cols, 0, (size_t) cols * sizeof(float));
                continue;
            }
            for (int u = 0; u < shards; u++)
                if (present & (UINT64_C(1) << u))
                    sum += scales[u].row[p];
            worst = sum / mine > worst ? sum / mine : worst;
        }
        if (worst > limit)
            rebuilt &= ~(UINT64_C(1) << b);
    }
    free(rows);
    return rebuilt;
}

/* Rebuild stripe s's lost data blocks from its parity (present: what came)
   in scratch ((n + r) blocks of B x cols), then copy them into out. */
static int stripe_decode(cdc_context_t *context, rotated_run_t *run, int s, uint64_t present,
                         float *scratch, uint64_t *filled)
{
    const cdc_rotated_set_t *set = run->call->set;
    const cdc_stripes_t *layout = &set->layout;
    int64_t cols = run->call->proto.cols, B = set->block_rows;
    float *blocks[CDC_CODE_MAX_N + CDC_CODE_MAX_R];
    stripe_gather(run, s, present, scratch, blocks);
    int rc = cdc__code_decode(set->code, B, cols, blocks, cols, present);
    if (rc != CDC_OK)
        return rc;
    uint64_t rebuilt = cdc__low_bits(layout->n) & ~present;
    if (context->decode_guard > 0.0)
        rebuilt = stripe_guard(run, s, present, rebuilt, blocks,
                               context->decode_guard * sqrt((double) run->call->proto.k));
    for (int b = 0; b < layout->n; b++)
        if (rebuilt & (UINT64_C(1) << b)) {
            cdc_shard_task_t data = block_task(run, s, b);
            memcpy(data.result, blocks[b], (size_t) (data.a_rows * cols) * sizeof(float));
            run->report.decoded++;
        }
    *filled = rebuilt;
    return CDC_OK;
}

/* A checked call: every stripe with more blocks than its n data blocks is
   checked against the parity equations (code.h: a rounding-aware
   tolerance); one that fails is computed here (run->failed), whichever
   block was wrong. */
static int rotated_verify(rotated_run_t *run)
{
    const cdc_rotated_call_t *call = run->call;
    const cdc_rotated_set_t *set = call->set;
    const cdc_stripes_t *layout = &set->layout;
    int64_t cols = call->proto.cols, B = set->block_rows;
    int shards = layout->n + layout->r;
    size_t floats = (size_t) shards * (size_t) B * (size_t) cols;
    float *scratch = malloc(floats * sizeof(float));
    double *col_norms = malloc((size_t) cols * sizeof(double));
    double *row_norms = malloc((size_t) shards * (size_t) B * sizeof(double));
    if (!scratch || !col_norms || !row_norms) {
        free(scratch);
        free(col_norms);
        free(row_norms);
        return cdc__fail(CDC_ENOMEM, "rotated check: %zu floats", floats);
    }
    column_norms(&call->proto, col_norms);
    for (int s = 0; s < layout->workers; s++) {
        uint64_t present = stripe_present(run, run->parts_in, s);
        if (!stripe_checkable(run, present))
            continue; /* nothing to check with (came too late) */
        float *blocks[CDC_CODE_MAX_N + CDC_CODE_MAX_R];
        cdc_shard_scale_t scales[CDC_CODE_MAX_N + CDC_CODE_MAX_R];
        stripe_gather(run, s, present, scratch, blocks);
        stripe_scales(run, s, row_norms, col_norms, scales);
        int bad = -1;
        run->checked = 1;
        if (cdc__code_check(set->code, B, cols, (const float *const *) blocks, cols, present,
                            scales, call->proto.k, &bad) == CDC_ECORRUPT) {
            run->failed |= UINT64_C(1) << s;
            run->report.corrupt = 1;
            CDC_LOG_WARNF("stripe %d fails the parity check (block %d%s); computing it here",
                          s, bad, bad >= 0 ? "" : ": not located");
        }
    }
    free(scratch);
    free(col_norms);
    free(row_norms);
    return CDC_OK;
}

/* Every stripe whole: decoded where it can be, its lost blocks computed
   here where it cannot (too few parity blocks came, or the decode failed);
   a stripe that failed its check computed here whole. */
static int rotated_finish(cdc_context_t *context, rotated_run_t *run)
{
    const cdc_rotated_set_t *set = run->call->set;
    const cdc_stripes_t *layout = &set->layout;
    float *scratch = NULL;
    int rc = CDC_OK;
    for (int s = 0; s < layout->workers && rc == CDC_OK; s++) {
        uint64_t present = stripe_present(run, run->parts_in, s);
        uint64_t data = cdc__low_bits(layout->n);
        if (run->failed & (UINT64_C(1) << s))
            present = 0; /* nothing of it trusted */
        if ((present & data) == data)
            continue;
        double amplification = cdc__code_decode_amplification(set->code, present);
        int decodable = amplification <= run->decode_limit;
        run->refused += !decodable && isfinite(amplification); /* enough parity, too inexact */
        if (!scratch && decodable) {
            size_t floats = (size_t) (layout->n + layout->r) * (size_t) set->block_rows *
                            (size_t) run->call->proto.cols;
            scratch = malloc(floats * sizeof(float));
            if (!scratch)
                CDC_LOG_WARNF("rotated decode: %zu floats; computing lost blocks here", floats);
        }
        uint64_t filled = 0; /* blocks the decode rebuilt and the guard kept */
        if (scratch && decodable && stripe_decode(context, run, s, present, scratch, &filled))
            CDC_LOG_WARNF("stripe %d: decode failed (%s); computing it here", s,
                          cdc_last_error());
        for (int b = 0; b < layout->n && rc == CDC_OK; b++) {
            if ((present | filled) & (UINT64_C(1) << b))
                continue;
            cdc_shard_task_t here = block_task(run, s, b);
            rc = cdc__coded_call_run_here(context, &here);
            run->report.fallback++;
        }
    }
    free(scratch);
    return rc;
}

static void rotated_account(cdc_context_t *context, const rotated_run_t *run)
{
    const cdc_call_report_t *report = &run->report;
    int lost = run->call->set->layout.workers - report->arrived;
    pthread_mutex_lock(&context->lock);
    context->last_call = *report;
    context->stats.coded_calls++;
    context->stats.rotated_calls++;
    context->stats.degraded_calls += report->degraded;
    context->stats.shards_sent += (uint64_t) run->count;
    context->stats.shards_erased += (uint64_t) lost;
    context->stats.results_decoded += (uint64_t) report->decoded;
    context->stats.fallbacks += report->fallback > 0;
    context->stats.decodes_refused += (uint64_t) run->refused;
    cdc__verify_account(context, run->checked, report->corrupt);
    context->stats.bytes_out += run->out_bytes;
    context->stats.bytes_in += run->in_bytes;
    context->last_plan.rotated = 1; /* the call sized before this one */
    pthread_mutex_unlock(&context->lock);
}

int cdc__rotated_call_run(cdc_context_t *context, cdc_rotated_call_t *call)
{
    const cdc_rotated_set_t *set = call->set;
    rotated_run_t *run = calloc(1, sizeof *run);
    size_t tail_floats = (size_t) set->layout.workers * (size_t) set->layout.r *
                         (size_t) set->block_rows * (size_t) call->proto.cols;
    float *tails = malloc(tail_floats * sizeof(float));
    if (!run || !tails) {
        free(run);
        free(tails);
        return cdc__fail(CDC_ENOMEM, "rotated call: %zu parity floats", tail_floats);
    }
    run->call = call;
    run->tails = tails;
    run->decode_limit = cdc__decode_limit(call->proto.k);
    run->verify = cdc__verify_this_call(context);
    cdc__check_wait_start(&run->check_wait);
    int rc = rotated_dispatch(context, run);
    if (rc == CDC_OK) {
        rotated_collect(run);
        if (run->verify)
            rc = rotated_verify(run);
    }
    if (rc == CDC_OK)
        rc = rotated_finish(context, run);
    if (rc == CDC_OK)
        rotated_account(context, run);
    free(tails);
    free(run);
    return rc;
}
