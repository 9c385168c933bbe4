/* driver.c - the one coded-GEMM path under every front end.
 *
 * The problem. cdc_sgemm, the BLAS entry points, the FC and the conv layer
 * all compute a product T = A·Btᵀ (row-major operands, gemm_operands.h;
 * for conv, Bt is the input's im2col patches, built where a task runs) with
 * one operand cut into coded row blocks, then finish it differently:
 * alpha/beta into C, or bias and ReLU into y. Kept as separate copies, the
 * sequences drifted (a column-major cdc_sgemm once cut the wrong side; conv
 * once had its own call paths); so each front end only describes its
 * operands (cdc_gemm_desc_t: views of the caller's memory, cached weights,
 * patches) and its epilogue, and this file runs the steps:
 *
 *   resolve   AUTO split by bytes moved; the caller's split -> the cut side;
 *             the data blocks' lengths (cdc__plan_size_blocks)
 *   encode    pack per-call operands, cut + encode the cut one (or take the
 *             cached weights' blocks), the whole one as contiguous rows
 *   dispatch  through the call engine (engine.h) in the rotated layout when
 *             the plan allows it (cached weights cut), else the dedicated
 *             one: a data task computes only its block's real rows (row
 *             cut) or columns (column cut); parity tasks the largest
 *             block's. A conv's spatial split: driver_spatial.c
 *   assemble  data results into T (row blocks or column blocks, at their
 *             offsets)
 *   finish    the epilogue and the call's count
 *
 * Invariant: on CDC_OK every element of T is the product computed by some
 * shard, rebuilt from parity, or computed locally; never a stale result. */
#include "driver.h"

#include "dedicated_layout.h"
#include "driver_spatial.h"
#include "error.h"
#include "local_cost.h"
#include "log.h"
#include "norms.h"
#include "rotated_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A call's operands once encoded: the cut one as a shard set, the whole one
   as contiguous rows. Also the lazy parity-check scales' job. */
typedef struct {
    cdc_shard_side_t cut;
    const float *cut_rows;        /* the cut operand's rows, contiguous: the
                                     coordinator's share reads its first   */
    int64_t here_rows;            /* the share (plan.h); the blocks follow  */
    const cdc_shard_set_t *set;   /* the cut operand's blocks               */
    cdc_shard_set_t *call_set;    /* owned: cut and encoded for this call   */
    uint64_t set_key, whole_key;  /* nonzero: cached on workers             */
    cdc_hold_t *set_hold;         /* with set_key: the cached set's hold    */
    cdc_hold_t *whole_hold;       /* with whole_key: the weights' hold      */
    const float *whole;           /* whole_rows x k, contiguous             */
    int64_t whole_rows, k;
    cdc_weights_t *whole_weights; /* the whole operand when it is weights   */
    const cdc_patches_t *patches; /* the whole operand when it is a conv's
                                     input (whole is NULL): conv tasks     */
    float *packed;                /* owned: per-call packed copies          */
} driver_operands_t;

static size_t operand_pack_count(const cdc_gemm_operand_t *op)
{
    if (op->weights || op->in_place)
        return 0;
    return (size_t) op->view.rows * (size_t) op->view.k;
}

/* The operand's rows, contiguous: the weights' (cdc__weights_packed: NULL
   when out of memory), the caller's memory, or a copy packed at *next
   (advanced past it). */
static const float *operand_rows(const cdc_gemm_operand_t *op, float **next)
{
    if (op->weights)
        return cdc__weights_packed(op->weights);
    if (op->in_place)
        return op->view.src;
    float *dst = *next;
    cdc__operand_pack(&op->view, dst);
    *next += operand_pack_count(op);
    return dst;
}

/* The coordinator computing c rows of the cut operand's product itself
   (local_cost.h), as a line: fixed + per_row * c. */
static double here_ms(const cdc_context_t *context, const cdc_gemm_desc_t *desc,
                      cdc_shard_side_t cut, int64_t c)
{
    int64_t m = cut == CDC_SHARD_A ? c : desc->a.view.rows;
    int64_t ncols = cut == CDC_SHARD_A ? desc->bt.view.rows : c;
    return cdc__local_gemm_ms(m, ncols, desc->a.view.k, context->local_gflops,
                              context->local_gbps);
}

/* What a row of the cut operand costs (plan.h): its result row (or column)
   against the whole operand; the whole one is sent to every shard unless
   cached, a cut row per row unless cached. Under the profiled plan the
   coordinator's own line too, so that it may take a share. */
static cdc_block_cost_t driver_block_cost(const cdc_context_t *context,
                                          const cdc_gemm_desc_t *desc,
                                          const cdc_call_plan_t *plan)
{
    const cdc_gemm_operand_t *cut = plan->cut == CDC_SHARD_A ? &desc->a : &desc->bt;
    const cdc_gemm_operand_t *whole = plan->cut == CDC_SHARD_A ? &desc->bt : &desc->a;
    double k = (double) desc->a.view.k, other = (double) whole->view.rows;
    cdc_block_cost_t cost = {
        .flops_per_row = 2.0 * k * other,
        .streamed_per_row = k * sizeof(float),
        .streamed_fixed = other * k * sizeof(float),
        .bytes_fixed_out = whole->weights ? 0.0 : other * k * sizeof(float),
        .bytes_per_row_out = cut->weights ? 0.0 : k * sizeof(float),
        .bytes_per_row_in = other * sizeof(float),
        .held_per_row = cut->weights ? k * sizeof(float) : 0.0,
        .held_key = cut->weights ? cut->weights->set_key : 0,
        .held_fixed = whole->weights ? other * k * sizeof(float) : 0.0};
    int64_t rows = cut->view.rows;
    if (context->config.plan != CDC_PLAN_EQUAL && rows > 1)
        cdc__plan_here_line(&cost, here_ms(context, desc, plan->cut, 1),
                            here_ms(context, desc, plan->cut, rows), rows);
    return cost;
}

static int driver_resolve(cdc_context_t *context, const cdc_gemm_desc_t *desc,
                          cdc_call_plan_t *plan)
{
    if (plan->split == CDC_SPLIT_AUTO) {
        cdc_split_t t_split = cdc__plan_matmul_split(
            desc->a.view.rows, desc->bt.view.rows, desc->a.view.k, plan->n, plan->r,
            desc->a.weights != NULL, desc->bt.weights != NULL);
        plan->cut = t_split == CDC_SPLIT_COLUMNS ? CDC_SHARD_BT : CDC_SHARD_A;
        plan->split = cdc__plan_side_split(plan->cut, desc->transposed);
    } else {
        plan->cut = cdc__plan_cut_side(plan->split, desc->transposed);
    }
    cdc_block_cost_t cost = driver_block_cost(context, desc, plan);
    int64_t cut_rows = plan->cut == CDC_SHARD_A ? desc->a.view.rows : desc->bt.view.rows;
    int rc = cdc__plan_size_blocks(context, plan, &cost, cut_rows);
    if (rc == CDC_OK && context->config.plan != CDC_PLAN_EQUAL) {
        char what[64];
        snprintf(what, sizeof what, "gemm %lldx%lldx%lld", (long long) desc->a.view.rows,
                 (long long) desc->bt.view.rows, (long long) desc->a.view.k);
        /* the whole product here: every row of A */
        cdc__plan_prefer_here(context, plan,
                              here_ms(context, desc, CDC_SHARD_A, desc->a.view.rows), what);
    }
    return rc;
}

static int driver_encode(const cdc_gemm_desc_t *desc, const cdc_call_plan_t *plan,
                         driver_operands_t *ops)
{
    const cdc_gemm_operand_t *cut = plan->cut == CDC_SHARD_A ? &desc->a : &desc->bt;
    const cdc_gemm_operand_t *whole = plan->cut == CDC_SHARD_A ? &desc->bt : &desc->a;
    memset(ops, 0, sizeof *ops);
    ops->cut = plan->cut;
    ops->k = desc->a.view.k;
    size_t count = operand_pack_count(cut) + operand_pack_count(whole);
    if (count) {
        ops->packed = malloc(count * sizeof(float));
        if (!ops->packed)
            return cdc__fail(CDC_ENOMEM, "packing %lld x %lld x %lld",
                             (long long) desc->a.view.rows, (long long) desc->bt.view.rows,
                             (long long) ops->k);
    }
    float *next = ops->packed;
    ops->here_rows = plan->here_rows;
    ops->whole = operand_rows(whole, &next);
    if (whole->weights && !ops->whole)
        return CDC_ENOMEM;
    ops->whole_rows = whole->view.rows;
    ops->whole_weights = whole->weights;
    ops->patches = desc->patches;
    ops->whole_key = whole->weights ? whole->weights->whole_key : 0;
    ops->whole_hold = whole->weights ? whole->weights->hold : NULL;
    const int64_t *lengths = plan->sized ? plan->block_len : NULL;
    if (cut->weights) {
        /* Cached weights: row blocks + parity encoded once per layout, kept
           by workers under a key that names the layout too. */
        ops->cut_rows = cdc__weights_packed(cut->weights);
        int rc = ops->cut_rows ? CDC_OK : CDC_ENOMEM;
        if (rc == CDC_OK)
            rc = cdc__weights_shards(cut->weights, 0, plan->code, plan->n, plan->here_rows,
                                     lengths, &ops->set);
        if (rc == CDC_OK) {
            ops->set_key = cdc__shard_set_key(ops->set, cut->weights->set_key);
            ops->set_hold = cdc__shard_set_hold(ops->set);
        }
        return rc;
    }
    /* Per call: the caller's memory outlives the call, nothing to hold. */
    ops->cut_rows = operand_rows(cut, &next);
    int rc = cdc__shard_set_new_from(plan->code, plan->n, plan->here_rows, lengths,
                                     ops->cut_rows, cut->view.rows, ops->k, NULL, &ops->call_set);
    ops->set = ops->call_set;
    return rc;
}

/* The parity check's scales, filled only when the check or the accuracy
   guard runs: the cut blocks' row norms (kept with the set) and the whole
   operand's (cached with weights, else computed now). */
static int driver_scales_fill(cdc_dedicated_call_t *call)
{
    const driver_operands_t *ops = call->scales_job;
    const double *whole_norms;
    if (ops->whole_weights) {
        whole_norms = cdc__weights_norms(ops->whole_weights);
        if (!whole_norms)
            return cdc__fail(CDC_ENOMEM, "weight norms");
    } else {
        call->scale_storage = malloc((size_t) ops->whole_rows * sizeof(double));
        if (!call->scale_storage)
            return cdc__fail(CDC_ENOMEM, "norms of %lld rows", (long long) ops->whole_rows);
        if (ops->patches)
            cdc__patch_norms(ops->patches->geometry, ops->patches->batch,
                             ops->patches->input, call->scale_storage);
        else
            cdc__row_norms(ops->whole, ops->whole_rows, ops->k, call->scale_storage);
        whole_norms = call->scale_storage;
    }
    int cut_a = ops->cut == CDC_SHARD_A;
    for (int s = 0; s < ops->set->n + ops->set->r; s++) {
        call->scales[s].row = cut_a ? ops->set->row_norms[s] : whole_norms;
        call->scales[s].col = cut_a ? whole_norms : ops->set->row_norms[s];
    }
    call->inner = ops->k;
    return CDC_OK;
}

/* A task's product against the whole operand: its rows (a GEMM's bt;
   patches NULL) or a conv input's patches (a conv task, im2col where it
   runs). */
static void task_against_whole(const cdc_patches_t *patches, cdc_shard_task_t *task)
{
    if (!patches) {
        task->kind = CDC_TASK_GEMM;
        return;
    }
    task->kind = CDC_TASK_CONV;
    task->input = patches->input;
    task->geometry = patches->geometry;
    task->batch = patches->batch;
}

/* The coordinator's share: T's first here_rows rows (A cut: written in
   place, T's rows are contiguous) or columns (Bt cut: into *columns, a
   whole_rows x here_rows block that driver_assemble puts in place). */
static int driver_share(const driver_operands_t *ops, cdc_dedicated_call_t *call, float *t,
                        float **columns)
{
    if (ops->here_rows == 0)
        return CDC_OK;
    cdc_shard_task_t *share = &call->share;
    share->shard = share->cover = -1;
    task_against_whole(ops->patches, share);
    share->k = ops->k;
    if (ops->cut == CDC_SHARD_A) {
        share->a = ops->cut_rows;
        share->a_rows = ops->here_rows;
        share->bt = ops->whole;
        share->cols = ops->whole_rows;
        share->result = t;
        return CDC_OK;
    }
    *columns = malloc((size_t) ops->whole_rows * (size_t) ops->here_rows * sizeof(float));
    if (!*columns)
        return cdc__fail(CDC_ENOMEM, "the coordinator's share: %lld x %lld",
                         (long long) ops->whole_rows, (long long) ops->here_rows);
    share->a = ops->whole;
    share->a_rows = ops->whole_rows;
    share->bt = ops->cut_rows;
    share->cols = ops->here_rows;
    share->result = *columns;
    return CDC_OK;
}

/* The data results into T (ldt): row blocks, or column blocks when Bt was
   cut; and the coordinator's share columns (Bt cut) before them. */
static void driver_assemble(const cdc_dedicated_call_t *call, const driver_operands_t *ops,
                            const float *share_columns, float *t, int64_t ldt)
{
    const cdc_shard_set_t *set = ops->set;
    for (int64_t i = 0; share_columns && i < ops->whole_rows; i++)
        memcpy(t + i * ldt, share_columns + i * ops->here_rows,
               (size_t) ops->here_rows * sizeof(float));
    for (int s = 0; s < set->n; s++) {
        int64_t valid = cdc__shard_set_valid_rows(set, s);
        int64_t first = cdc__shard_set_first_row(set, s);
        const float *block = call->results[s];
        if (ops->cut == CDC_SHARD_A) {
            for (int64_t i = 0; i < valid; i++)
                memcpy(t + (first + i) * ldt, block + i * call->cols,
                       (size_t) ops->whole_rows * sizeof(float));
        } else if (valid > 0) {
            for (int64_t i = 0; i < ops->whole_rows; i++)
                memcpy(t + i * ldt + first, block + i * call->cols,
                       (size_t) valid * sizeof(float));
        }
    }
}

/* Re-sized blocks of cached weights (plan->stage_token) go to the workers
   in the background (plan_staging.c) while this call uses the old ones. A
   failure to encode them costs nothing but the staging: logged. */
static void driver_stage(cdc_context_t *context, const cdc_gemm_desc_t *desc,
                         const cdc_call_plan_t *plan)
{
    const cdc_gemm_operand_t *cut = plan->cut == CDC_SHARD_A ? &desc->a : &desc->bt;
    if (!plan->stage_token || !cut->weights || cdc__plan_here(plan))
        return;
    const cdc_shard_set_t *staged;
    if (cdc__weights_shards(cut->weights, 1, plan->code, plan->n, plan->stage_here_rows,
                            plan->stage_len, &staged) != CDC_OK) {
        CDC_LOG_WARNF("staging re-sized blocks: %s", cdc_last_error());
        return;
    }
    cdc__plan_stage_weights(context, plan, staged,
                            cdc__shard_set_key(staged, cut->weights->set_key));
}

static int driver_dispatch(cdc_context_t *context, const cdc_call_plan_t *plan,
                           const driver_operands_t *ops, float *t, int64_t ldt)
{
    const cdc_shard_set_t *set = ops->set;
    int cut_a = ops->cut == CDC_SHARD_A;
    int64_t result_rows = cut_a ? set->block_rows : ops->whole_rows;
    int64_t result_cols = cut_a ? ops->whole_rows : set->block_rows;
    cdc_dedicated_call_t call;
    int rc = cdc__dedicated_call_init(&call, plan->code, plan->n, result_rows, result_cols);
    if (rc != CDC_OK)
        return rc;
    cdc__dedicated_call_follow(&call, plan);
    for (int s = 0; s < set->n + set->r; s++) {
        cdc_shard_task_t *task = &call.tasks[s];
        task_against_whole(ops->patches, task);
        task->k = ops->k;
        /* A data task computes its block's real rows only. */
        int64_t len = s < set->n ? cdc__shard_set_valid_rows(set, s) : set->block_rows;
        task->a_rows = cut_a ? len : result_rows;
        task->cols = cut_a ? result_cols : len;
        task->a = cut_a ? set->blocks[s] : ops->whole;
        task->bt = cut_a ? ops->whole : set->blocks[s];
        task->a_key = cut_a ? ops->set_key : ops->whole_key;
        task->bt_key = cut_a ? ops->whole_key : ops->set_key;
        task->a_hold = cut_a ? ops->set_hold : ops->whole_hold;
        task->bt_hold = cut_a ? ops->whole_hold : ops->set_hold;
        task->a_whole = !cut_a;
        task->bt_whole = cut_a;
    }
    if (plan->code) {
        call.scales_fill = driver_scales_fill;
        call.scales_job = ops;
    }
    float *share_columns = NULL;
    rc = driver_share(ops, &call, t, &share_columns);
    if (rc == CDC_OK)
        rc = cdc__dedicated_call_run(context, &call);
    if (rc == CDC_OK)
        driver_assemble(&call, ops, share_columns, t, ldt);
    free(share_columns);
    cdc__dedicated_call_release(&call);
    return rc;
}

/* Re-sized stripes of cached weights (plan->stage_token, sized stripes)
   go to the workers in the background while this call uses the old ones;
   as driver_stage. */
static void driver_stage_stripes(cdc_context_t *context, cdc_weights_t *weights,
                                 const cdc_call_plan_t *plan)
{
    const void *staged;
    if (cdc__weights_layout(weights, &cdc__rotated_encoding, plan->code, plan->stage_len, 1,
                            &staged) != CDC_OK) {
        CDC_LOG_WARNF("staging re-sized stripes: %s", cdc_last_error());
        return;
    }
    cdc__plan_stage_stripes(context, plan, staged, weights->set_key);
}

/* The coordinator's share of a rotated call: the weights' first here rows
   (read in place, or copied into *copy when they span borrowed parts),
   against the whole operand, into product's first rows. */
static int rotated_share(cdc_weights_t *weights, int64_t here, float *product,
                         cdc_rotated_call_t *call, float **copy)
{
    cdc_row_parts_t *rows = cdc__weights_rows(weights);
    if (cdc__row_parts_spans(rows, 0, here) &&
        !(*copy = malloc((size_t) here * (size_t) rows->k * sizeof(float))))
        return cdc__fail(CDC_ENOMEM, "the coordinator's share: %lld rows", (long long) here);
    call->share = call->proto;
    call->share.shard = call->share.cover = -1;
    call->share.a = cdc__row_parts_view(rows, 0, here, *copy);
    call->share.a_rows = here;
    call->share.bt_key = 0;
    call->share.bt_hold = NULL;
    call->share.result = product;
    return CDC_OK;
}

/* The rotated parity layout (rotated_layout.h), for a cut operand that is
   cached weights: those weights are every task's a, the whole operand its
   bt, so a task's result rows are rows of the cut operand's product: T's
   rows (A cut, straight into t) or its columns (Bt cut: transposed into t,
   ldt wide, after the call). */
static int driver_rotated(cdc_context_t *context, const cdc_gemm_desc_t *desc,
                          const cdc_call_plan_t *plan, float *t, int64_t ldt)
{
    int cut_a = plan->cut == CDC_SHARD_A;
    const cdc_gemm_operand_t *cut = cut_a ? &desc->a : &desc->bt;
    const cdc_gemm_operand_t *whole = cut_a ? &desc->bt : &desc->a;
    const void *encoding;
    int rc = cdc__weights_layout(cut->weights, &cdc__rotated_encoding, plan->code,
                                 plan->rotated ? plan->block_len : NULL, 0, &encoding);
    const cdc_rotated_set_t *set = encoding;
    if (rc != CDC_OK)
        return rc;
    int64_t rows = cut->view.rows, cols = whole->view.rows;
    if (!plan->rotated) /* sized stripes were recorded as sized (plan.c) */
        cdc__plan_record_rotated(context, plan, rows, set->data_rows,
                                 (int64_t) set->layout.r * set->block_rows);
    if (plan->stage_token)
        driver_stage_stripes(context, cut->weights, plan);
    size_t packed_count = operand_pack_count(whole);
    float *packed = packed_count ? malloc(packed_count * sizeof(float)) : NULL;
    float *product = cut_a ? t : malloc((size_t) rows * (size_t) cols * sizeof(float));
    if ((packed_count && !packed) || !product) {
        free(packed);
        if (!cut_a)
            free(product);
        return cdc__fail(CDC_ENOMEM, "rotated call of %lld x %lld x %lld", (long long) rows,
                         (long long) cols, (long long) cut->view.k);
    }
    float *next = packed;
    int64_t here = rows - set->rows; /* the coordinator's share: the first rows */
    cdc_rotated_call_t call = {.set = set, .a_key = cut->weights->set_key,
                               .out = product + here * cols, .split = plan->split,
                               .wanted_r = plan->wanted_r, .here = cdc__plan_here(plan)};
    task_against_whole(desc->patches, &call.proto);
    call.proto.k = cut->view.k;
    call.proto.cols = cols;
    call.proto.bt = operand_rows(whole, &next);
    if (whole->weights && !call.proto.bt)
        rc = CDC_ENOMEM;
    call.proto.bt_key = whole->weights ? whole->weights->whole_key : 0;
    call.proto.bt_hold = whole->weights ? whole->weights->hold : NULL;
    call.proto.bt_whole = 1;
    float *share_copy = NULL;
    if (rc == CDC_OK && here > 0)
        rc = rotated_share(cut->weights, here, product, &call, &share_copy);
    if (rc == CDC_OK)
        rc = cdc__rotated_call_run(context, &call);
    if (here > 0) /* read again next call, from the map (row_parts.h) */
        cdc__row_parts_done(cdc__weights_rows(cut->weights), 0, here);
    free(share_copy);
    for (int64_t i = 0; rc == CDC_OK && !cut_a && i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            t[j * ldt + i] = product[i * cols + j];
    if (!cut_a)
        free(product);
    free(packed);
    return rc;
}

/* Whether the call runs in the rotated layout: cached weights cut, and the
   plan allows it (cdc__rotated_wanted). */
static int driver_rotated_wanted(cdc_context_t *context, const cdc_gemm_desc_t *desc,
                                 const cdc_call_plan_t *plan)
{
    const cdc_gemm_operand_t *cut = plan->cut == CDC_SHARD_A ? &desc->a : &desc->bt;
    if (!cut->weights)
        return 0;
    /* Borrowed weights computed here read their rows where they lie (the
       rotated set's blocks) rather than the dedicated layout's contiguous
       copy of them. */
    if (cdc__plan_here(plan) && cdc__weights_rows(cut->weights)->borrowed &&
        !plan->unfit_slots && cdc__plan_rotated_eligible(context, plan, cut->view.rows))
        return 1;
    return cdc__rotated_wanted(context, plan, cut->view.rows);
}

int cdc__driver_row_cut_spread(cdc_context_t *context, const cdc_call_plan_t *plan,
                               int64_t rows)
{
    return cdc__plan_rotated_eligible(context, plan, rows) ? plan->n + plan->r : plan->n;
}

/* The encoded call over T (ldt = cols wide): in the rotated layout when the
   plan allows it, else the dedicated one. */
static int driver_run(cdc_context_t *context, const cdc_gemm_desc_t *desc,
                      const cdc_call_plan_t *plan, float *t, int64_t cols)
{
    if (driver_rotated_wanted(context, desc, plan))
        return driver_rotated(context, desc, plan, t, cols);
    cdc_call_plan_t dedicated;
    if (plan->rotated) { /* sized stripes, but computed here after all */
        const cdc_gemm_operand_t *cut = plan->cut == CDC_SHARD_A ? &desc->a : &desc->bt;
        /* New stripes still go out meanwhile: once the workers hold them,
           their prediction may bring the calls back (cdc__plan_prefer_here). */
        if (plan->stage_token && cut->weights)
            driver_stage_stripes(context, cut->weights, plan);
        dedicated = *plan;
        cdc__plan_unrotate(&dedicated, cut->view.rows);
        plan = &dedicated;
    }
    driver_operands_t ops;
    int rc = driver_encode(desc, plan, &ops);
    if (rc == CDC_OK)
        driver_stage(context, desc, plan);
    if (rc == CDC_OK)
        rc = driver_dispatch(context, plan, &ops, t, cols);
    cdc__shard_set_retire(&ops.call_set);
    free(ops.packed);
    return rc;
}

/* Where T is computed: in the epilogue's out when it is T (a layer's y),
   else apart (STORE: C's layout, ld and beta; a conv's T of more than one
   image: channels first, y images first). */
static int driver_t(const cdc_epilogue_t *epilogue, int64_t rows, int64_t cols, float **t,
                    float **owned)
{
    int apart = epilogue->kind == CDC_EPILOGUE_STORE ||
                (epilogue->channels_major && epilogue->outer > 1);
    *t = epilogue->out;
    *owned = NULL;
    if (!apart)
        return CDC_OK;
    *t = *owned = malloc((size_t) rows * (size_t) cols * sizeof(float));
    return *t ? CDC_OK
              : cdc__fail(CDC_ENOMEM, "result of %lld x %lld", (long long) rows,
                          (long long) cols);
}

/* A conv's T (channels x (images x plane)) into y (images x channels x
   plane). */
static void channels_major_into_out(const cdc_epilogue_t *e, const float *t)
{
    for (int64_t o = 0; o < e->channels; o++)
        for (int64_t b = 0; b < e->outer; b++)
            memcpy(e->out + (b * e->channels + o) * e->inner, t + (o * e->outer + b) * e->inner,
                   (size_t) e->inner * sizeof(float));
}

int cdc__driver_gemm(cdc_context_t *context, const cdc_gemm_desc_t *desc,
                     cdc_call_plan_t *plan)
{
    int64_t rows = desc->a.view.rows, cols = desc->bt.view.rows;
    const cdc_epilogue_t *epilogue = &desc->epilogue;
    int rc = CDC_OK;
    if (desc->patches)
        plan->cut = CDC_SHARD_A; /* resolved by the front end; COLUMNS: bands */
    else
        rc = driver_resolve(context, desc, plan);
    if (rc != CDC_OK)
        return rc;
    if (desc->patches && plan->split == CDC_SPLIT_COLUMNS) {
        rc = cdc__driver_spatial(context, desc, plan);
        if (rc == CDC_OK)
            cdc__driver_finish(context, epilogue, epilogue->out, rows, cols);
        return rc;
    }
    float *t, *t_owned;
    rc = driver_t(epilogue, rows, cols, &t, &t_owned);
    if (rc == CDC_OK)
        rc = driver_run(context, desc, plan, t, cols);
    if (rc == CDC_OK && epilogue->channels_major && t != epilogue->out)
        channels_major_into_out(epilogue, t);
    if (rc == CDC_OK)
        cdc__driver_finish(context, epilogue, t, rows, cols);
    free(t_owned);
    return rc;
}

/* Bias and ReLU after decoding: shards carry pre-activation values, because
   ReLU on a shard would break the linear recovery. */
static void epilogue_bias_relu(const cdc_epilogue_t *e)
{
    if (!e->bias && !e->relu)
        return;
    for (int64_t b = 0; b < e->outer; b++) {
        float *y = e->out + b * e->channels * e->inner;
        if (e->inner == 1) { /* FC: one value per channel, a row of y */
            if (e->bias)
                for (int64_t o = 0; o < e->channels; o++)
                    y[o] += e->bias[o];
            if (e->relu)
                for (int64_t o = 0; o < e->channels; o++)
                    y[o] = y[o] > 0.0f ? y[o] : 0.0f;
            continue;
        }
        for (int64_t o = 0; o < e->channels; o++) {
            float *plane = y + o * e->inner;
            float bias = e->bias ? e->bias[o] : 0.0f;
            if (e->relu)
                for (int64_t i = 0; i < e->inner; i++) {
                    float v = plane[i] + bias;
                    plane[i] = v > 0.0f ? v : 0.0f;
                }
            else
                for (int64_t i = 0; i < e->inner; i++)
                    plane[i] += bias;
        }
    }
}

void cdc__driver_finish(cdc_context_t *context, const cdc_epilogue_t *epilogue,
                        const float *t, int64_t rows, int64_t cols)
{
    if (epilogue->kind == CDC_EPILOGUE_STORE)
        cdc__gemm_store(epilogue->out, epilogue->ld, t, rows, cols, epilogue->alpha,
                        epilogue->beta);
    else
        epilogue_bias_relu(epilogue);
    cdc__context_count_call(context);
}
