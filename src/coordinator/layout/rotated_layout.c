/* rotated_layout.c - the rotated parity layout's operations (layout.h).
 *
 * The problem. The dedicated layout keeps r workers busy with parity on
 * every call, so a call that loses nothing waits for n of W workers each
 * computing 1/n of the rows: (n + r)/n the work of an uncoded call on W.
 * Here each of the W workers holds n data blocks and r parity blocks of
 * W stripes (rotated_set.h) and computes its data rows first (1/W of them)
 * and streams them; its parity blocks follow only while the call still
 * wants them (the engine's goal: every stripe whole or decodable), and the
 * executor cancels the parts still due. A call that loses nothing ends
 * with the data, costing what an uncoded call on W workers costs.
 *
 * Fault-free the layout computes no parity, so nothing is checked unless
 * the call asks: cdc__verify_this_call samples calls (and every call once
 * a check failed), and such a call costs each worker its parity blocks,
 * r/n more work.
 *
 * A stripe's blocks are scattered over its workers' results: the engine
 * gets copies, zero-padded to B rows, and a rebuilt data block is copied
 * back into its rows of out. */
#include "rotated_layout.h"

#include "bits.h"
#include "engine.h"
#include "error.h"
#include "norms.h"

#include <stdlib.h>
#include <string.h>

int cdc__rotated_wanted(cdc_context_t *context, const cdc_call_plan_t *plan, int64_t rows)
{
    if (!cdc__plan_rotated_eligible(context, plan, rows) ||
        (plan->here_rows > 0 && !plan->rotated) || cdc__plan_here(plan) || plan->unfit_slots)
        return 0;
    return context->config.plan == CDC_PLAN_EQUAL || plan->rotated;
}

/* Sized stripes cut the operand's last rows, as many as worker_rows sum
   to: the first are the coordinator's share (plan.h here_rows). */
static int64_t stripes_rows(const cdc_code_t *code, int64_t rows, const int64_t *worker_rows)
{
    int64_t sum = 0;
    for (int w = 0; worker_rows && w < cdc__code_n(code) + cdc__code_r(code); w++)
        sum += worker_rows[w];
    return worker_rows ? sum : rows;
}

static int encoding_new(const cdc_code_t *code, cdc_row_parts_t *src, int64_t rows,
                        int64_t k, const int64_t *worker_rows, void **encoding)
{
    cdc_rotated_set_t *set;
    int64_t cut = stripes_rows(code, rows, worker_rows);
    int rc = cut <= rows ? cdc__rotated_set_new_sized(code, src, rows - cut, cut, k,
                                                      worker_rows, &set)
                         : cdc__fail(CDC_EINVAL, "rotated layout: %lld rows sized for %lld",
                                     (long long) cut, (long long) rows);
    *encoding = rc == CDC_OK ? set : NULL;
    return rc;
}

static int encoding_matches(const void *encoding, const cdc_code_t *code, int64_t rows,
                            int64_t k, const int64_t *worker_rows)
{
    return cdc__rotated_set_matches(encoding, code, stripes_rows(code, rows, worker_rows), k,
                                    worker_rows);
}

/* What the set keeps: every operand row's norm and the block table (the
   operands themselves are built when they are sent, rotated_set.h). */
static size_t encoding_bytes(const void *encoding)
{
    const cdc_rotated_set_t *set = encoding;
    if (!set)
        return 0;
    size_t blocks = (size_t) set->layout.workers * (size_t) set->layout.n;
    return (size_t) (set->rows + set->layout.workers * set->layout.r * set->block_rows) *
               sizeof(double) +
           2 * blocks * sizeof(int64_t);
}

static void encoding_retire(void *encoding)
{
    cdc_rotated_set_t *set = encoding;
    cdc__rotated_set_retire(&set);
}

const cdc_layout_encoding_t cdc__rotated_encoding = {
    .encode = encoding_new,
    .matches = encoding_matches,
    .bytes = encoding_bytes,
    .retire = encoding_retire,
};

static cdc_rotated_call_t *rotated(const cdc_call_layout_t *layout)
{
    return (cdc_rotated_call_t *) layout; /* its first member */
}

static float *worker_tail(const cdc_rotated_call_t *call, int w)
{
    const cdc_rotated_set_t *set = call->set;
    size_t per_worker = (size_t) set->layout.r * (size_t) set->block_rows *
                        (size_t) call->proto.cols;
    return call->tails + (size_t) w * per_worker;
}

/* Worker w's task: its operand, data rows first into their rows of out,
   then its parity blocks into its tail. */
static int rotated_task(cdc_call_layout_t *layout, int w, cdc_shard_task_t *task)
{
    const cdc_rotated_call_t *call = rotated(layout);
    const cdc_rotated_set_t *set = call->set;
    *task = call->proto;
    task->shard = w;
    task->cover = -1;
    task->a = NULL; /* built when it must be sent: its source */
    task->a_source = &set->source[w];
    task->a_rows = cdc__rotated_operand_rows(set, w);
    task->a_key = cdc__rotated_operand_key(set, call->a_key);
    task->a_hold = cdc__rotated_set_hold(set);
    task->lead_rows = set->data_rows[w];
    task->part_rows = set->block_rows;
    task->result = call->out + set->data_first[w] * call->proto.cols;
    task->tail = worker_tail(call, w);
    return CDC_SLOT_SEND;
}

/* Stripe s: bit b when data block b's worker sent its lead (part 0), bit
   n + j when parity block j's worker sent the part that holds it. */
static uint64_t rotated_present(const cdc_call_layout_t *layout, const uint32_t *parts, int s)
{
    const cdc_rotated_set_t *set = rotated(layout)->set;
    const cdc_stripes_t *stripes = &set->layout;
    uint64_t present = 0;
    for (int b = 0; b < stripes->n; b++)
        present |= (uint64_t) (parts[cdc__stripes_worker(stripes, s, b)] & 1) << b;
    for (int j = 0; j < stripes->r; j++) {
        int w = cdc__stripes_worker(stripes, s, stripes->n + j);
        int part = 1 + cdc__rotated_parity_index(set, w, s, j);
        present |= (uint64_t) ((parts[w] >> part) & 1) << (stripes->n + j);
    }
    return present;
}

/* The oracle: a data-only finish, when every worker's data came. */
static void rotated_collected(cdc_call_layout_t *layout, const uint32_t *parts,
                              uint64_t corrupted, cdc_call_report_t *report)
{
    (void) parts;
    (void) corrupted; /* never injected here (cdc__rotated_wanted) */
    report->oracle_ms = 0.0;
    for (int w = 0; w < layout->slots; w++)
        report->oracle_ms = report->shard_ms[w] > report->oracle_ms ? report->shard_ms[w]
                                                                    : report->oracle_ms;
    if (report->arrived < layout->slots)
        report->oracle_ms = -1.0;
}

/* Data block b of stripe s as a task here: its rows of out (a, its rows
   of the source, is the caller's to fill: cdc__rotated_block_rows). */
static cdc_shard_task_t block_task(const cdc_rotated_call_t *call, int s, int b)
{
    const cdc_rotated_set_t *set = call->set;
    size_t i = (size_t) s * (size_t) set->layout.n + (size_t) b;
    cdc_shard_task_t task = call->proto;
    task.a = NULL;
    task.a_rows = set->block_len[i];
    task.result = call->out + set->block_first[i] * call->proto.cols;
    return task;
}

/* Stripe s's blocks in present, copied into scratch ((n + r) blocks of
   B x cols, zero-padded; the others zero). */
static void rotated_gather(const cdc_call_layout_t *layout, int s, uint64_t present,
                           float *scratch, float **blocks)
{
    const cdc_rotated_call_t *call = rotated(layout);
    const cdc_rotated_set_t *set = call->set;
    const cdc_stripes_t *stripes = &set->layout;
    int64_t cols = call->proto.cols;
    size_t block = (size_t) set->block_rows * (size_t) cols;
    for (int b = 0; b < stripes->n + stripes->r; b++) {
        blocks[b] = scratch + (size_t) b * block;
        memset(blocks[b], 0, block * sizeof(float)); /* the padding rows */
        if (!(present & (UINT64_C(1) << b)))
            continue;
        if (b < stripes->n) {
            cdc_shard_task_t data = block_task(call, s, b);
            memcpy(blocks[b], data.result, (size_t) (data.a_rows * cols) * sizeof(float));
        } else {
            int j = b - stripes->n, w = cdc__stripes_worker(stripes, s, b);
            memcpy(blocks[b], worker_tail(call, w) +
                                  (size_t) cdc__rotated_parity_index(set, w, s, j) * block,
                   block * sizeof(float));
        }
    }
}

static void rotated_scatter(const cdc_call_layout_t *layout, int s, int b, const float *block)
{
    const cdc_rotated_call_t *call = rotated(layout);
    cdc_shard_task_t data = block_task(call, s, b);
    memcpy(data.result, block, (size_t) (data.a_rows * call->proto.cols) * sizeof(float));
}

/* The 2-norms of the product's columns' operand: bt's rows (GEMM) or the
   input patches (conv), computed once a call. */
static int column_norms(cdc_rotated_call_t *call)
{
    const cdc_shard_task_t *proto = &call->proto;
    if (call->col_norms)
        return CDC_OK;
    call->col_norms = malloc((size_t) proto->cols * sizeof(double));
    if (!call->col_norms)
        return cdc__fail(CDC_ENOMEM, "%lld column norms", (long long) proto->cols);
    if (proto->kind == CDC_TASK_GEMM)
        cdc__row_norms(proto->bt, proto->cols, proto->k, call->col_norms);
    else
        cdc__patch_norms(proto->geometry, proto->batch, proto->input, call->col_norms);
    return CDC_OK;
}

/* Stripe s's scales: each block's operand row norms, zero-padded to B, and
   the columns'. */
static int rotated_scales(cdc_call_layout_t *layout, int s, cdc_shard_scale_t *scales)
{
    cdc_rotated_call_t *call = rotated(layout);
    const cdc_rotated_set_t *set = call->set;
    const cdc_stripes_t *stripes = &set->layout;
    int64_t B = set->block_rows;
    size_t count = (size_t) (stripes->n + stripes->r) * (size_t) B;
    if (!call->row_norms && !(call->row_norms = malloc(count * sizeof(double))))
        return cdc__fail(CDC_ENOMEM, "%zu row norms", count);
    int rc = column_norms(call);
    if (rc != CDC_OK)
        return rc;
    for (int b = 0; b < stripes->n + stripes->r; b++) {
        double *row = call->row_norms + (size_t) b * (size_t) B;
        int w = cdc__stripes_worker(stripes, s, b);
        int64_t first, len = B;
        if (b < stripes->n) {
            size_t i = (size_t) s * (size_t) stripes->n + (size_t) b;
            first = set->block_first[i] - set->data_first[w];
            len = set->block_len[i];
        } else {
            first = set->data_rows[w] +
                    (int64_t) cdc__rotated_parity_index(set, w, s, b - stripes->n) * B;
        }
        memcpy(row, set->operand_norms[w] + first, (size_t) len * sizeof(double));
        memset(row + len, 0, (size_t) (B - len) * sizeof(double));
        scales[b].row = row;
        scales[b].col = call->col_norms;
    }
    return CDC_OK;
}

static int rotated_compute_here(cdc_call_layout_t *layout, const cdc_context_t *context, int s,
                                int b)
{
    const cdc_rotated_set_t *set = rotated(layout)->set;
    cdc_shard_task_t here = block_task(rotated(layout), s, b);
    float *scratch = NULL;
    if (cdc__rotated_block_spans(set, s, b) &&
        !(scratch = malloc((size_t) (set->block_rows * set->k) * sizeof(float))))
        return cdc__fail(CDC_ENOMEM, "a block of %lld rows", (long long) set->block_rows);
    here.a = cdc__rotated_block_rows(set, s, b, scratch, &here.a_rows);
    int rc = cdc__call_compute_here(context, &here);
    /* A block rebuilt here goes back to the map (row_parts.h); a call
       planned here keeps its pages mapped: the next one reads them all. */
    if (!layout->here)
        cdc__rotated_block_done(set, s, b);
    free(scratch);
    return rc;
}

static void rotated_account(const cdc_call_layout_t *layout, cdc_context_t *context)
{
    (void) layout;
    context->stats.rotated_calls++;
}

static const cdc_call_layout_ops_t rotated_ops = {
    .task = rotated_task,
    .present = rotated_present,
    .collected = rotated_collected,
    .gather = rotated_gather,
    .scatter = rotated_scatter,
    .scales = rotated_scales,
    .compute_here = rotated_compute_here,
    .account = rotated_account,
};

int cdc__rotated_call_run(cdc_context_t *context, cdc_rotated_call_t *call)
{
    const cdc_rotated_set_t *set = call->set;
    const cdc_stripes_t *stripes = &set->layout;
    size_t tail_floats = (size_t) stripes->workers * (size_t) stripes->r *
                         (size_t) set->block_rows * (size_t) call->proto.cols;
    call->tails = malloc(tail_floats * sizeof(float));
    if (!call->tails)
        return cdc__fail(CDC_ENOMEM, "rotated call: %zu parity floats", tail_floats);
    call->col_norms = call->row_norms = NULL;
    call->layout = (cdc_call_layout_t){
        .ops = &rotated_ops, .code = set->code, .n = stripes->n, .r = stripes->r,
        .stripes = stripes->workers, .slots = stripes->workers,
        .block_rows = set->block_rows, .cols = call->proto.cols, .k = call->proto.k,
        .copies_blocks = 1, .data_slots = cdc__low_bits(stripes->workers),
        .erasable = cdc__low_bits(stripes->workers), .streamed = 1,
        .executor_n = stripes->workers, .needed = stripes->n,
        .wanted_r = call->wanted_r, .split = call->split, .share = call->share,
        .here = call->here};
    int rc = cdc__call_run(context, &call->layout);
    free(call->tails);
    free(call->col_norms);
    free(call->row_norms);
    call->tails = NULL;
    call->col_norms = call->row_norms = NULL;
    return rc;
}
