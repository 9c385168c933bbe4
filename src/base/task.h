/* task.h - one shard task: what a worker computes, wherever it runs.
 *
 * Shared by the coordinator (which fills it), the transport (which puts it on
 * the wire) and the local compute (which runs it), so it lives in the base. */
#ifndef CDC_TASK_H_INCLUDED
#define CDC_TASK_H_INCLUDED

#include "geometry.h"
#include "hold.h"
#include "operand_source.h"

#include <stdint.h>

typedef enum {
    CDC_TASK_GEMM, /* result = a · btᵀ                                        */
    CDC_TASK_CONV  /* result = a · [im2col(input_0) | ... | im2col(input_b-1)] */
} cdc_task_kind_t;

typedef struct {
    cdc_task_kind_t kind;
    int shard;           /* 0..n-1 data, n..n+r-1 parity (or replicas)       */
    int cover;           /* the data shard this result provides, -1 for a
                            parity; a replica (2-modular redundancy) covers
                            the shard it copies: the call is complete once
                            every covered index has one result             */
    const float *a;      /* a_rows x k, row-major, contiguous; NULL with a
                            source (a_source)                                */
    const cdc_operand_source_t *a_source; /* with a_key and a_hold and no a:
                            builds a when it must be sent or run here (the
                            rotated layout's operands); a_hold keeps it    */
    int64_t a_rows, k;
    uint64_t a_key;      /* nonzero: a is a cached weight shard with this key */
    uint64_t bt_key;     /* nonzero: bt is a cached weight matrix with this key */
    int a_whole, bt_whole; /* with a_key (bt_key): the operand is the same
                            whole matrix for every shard of the call (the
                            filters of a spatial split), so its wire key
                            does not name the shard: a worker holding it
                            serves any shard, an on-demand parity included */
    cdc_hold_t *a_hold;  /* with a_key: keeps a alive past the call (hold.h),
                            so it can be sent without a copy and re-shipped
                            later; NULL: a is only valid during the call     */
    cdc_hold_t *bt_hold; /* the same for bt with bt_key                       */
    const float *bt;     /* GEMM: cols x k, row-major (B transposed)          */
    const cdc_conv_geometry_t *geometry; /* CONV: one image's geometry        */
    int64_t batch;       /* CONV: images in input                             */
    const float *input;  /* CONV: batch x channels x h x w                    */
    int64_t cols;        /* result columns (GEMM: rows of bt; CONV: batch*out_h*out_w) */
    float *result;       /* a_rows x cols, contiguous, written by the executor */
    double elapsed_ms;   /* set by the executor: dispatch of the call to this
                            result's arrival                                 */
    int dispatched;      /* set by the executor: the task went to a worker
                            (or ran); 0: not sent (no worker could take it) */
    double sent_ms;      /* set by the executor: dispatch of the call to this
                            task's send done (0: run in process)          */
    /* Streamed (the rotated parity layout, rotated_set.h): lead_rows > 0
       sends the result back in parts, each as soon as it is computed: the
       first lead_rows rows (the data blocks) into result, then the rows
       after them (parity blocks) in parts of part_rows rows into tail
       ((a_rows - lead_rows) x cols), each computed only while the call
       still wants it. 0: one result, into result. */
    int64_t lead_rows, part_rows;
    float *tail;
    uint32_t parts_in;   /* set by the executor: bit p, part p came back
                            (bit 0 the lead rows; a task not streamed has
                            one part)                                   */
    /* On demand (CDC_ON_DEMAND_*: a parity of per-call operands, plan.h
       on_demand): not a slot of the plan, sent after dispatch when wanted,
       to a worker done with its own tasks. released: set by the executor,
       the task was wanted and sent (or tried); 0, never needed. */
    int on_demand, released;
} cdc_shard_task_t;

/* When an on-demand task is wanted (task.h on_demand). */
enum {
    CDC_ON_DEMAND_NO = 0,   /* sent with the others                          */
    CDC_ON_DEMAND_LATE = 1, /* once a data task is lost (its worker dead, an
                               error), or the last of them lag the others
                               past the executor's patience                */
    CDC_ON_DEMAND_FREE = 2  /* as soon as some worker is done with its own
                               (a data task came back): a call that checks
                               its results, or lost a data slot before
                               dispatch, wants its parity anyway           */
};

/* A GEMM of rows x cols over k: its flops, and the operand bytes it
   streams, (rows + cols)·k floats (a conv task's: its filters and im2col
   matrix). What the workers count and emulate (faults.h), the profile's
   roofline measures (profile.h) and the coordinator predicts and emulates
   for itself (local_cost.h, engine.c) are these two figures. */
static inline double cdc__gemm_flops(double rows, double cols, double k)
{
    return 2.0 * rows * k * cols;
}

static inline double cdc__gemm_streamed_bytes(double rows, double cols, double k)
{
    return (rows + cols) * k * sizeof(float);
}

/* The parts a task's result comes back in (at most 32). */
static inline int cdc_task_parts(const cdc_shard_task_t *task)
{
    if (task->lead_rows <= 0 || task->lead_rows >= task->a_rows)
        return 1;
    return 1 + (int) ((task->a_rows - task->lead_rows + task->part_rows - 1) / task->part_rows);
}

/* Part `part` of a streamed task (task.h) as a task of its own, not
   streamed: its rows of a, its result at its place in result (the lead)
   or tail (NULL when tail is); *first_row the row of the whole result it
   starts at. A task that is not streamed is its own part 0. */
cdc_shard_task_t cdc__task_part(const cdc_shard_task_t *task, int part, int64_t *first_row);

/* The per-call input a task sends (its bt, or its conv input), in bytes:
   what a call's bytes_out counts besides cached weights. */
uint64_t cdc__task_bytes_out(const cdc_shard_task_t *task);

/* What a call of streamed tasks waits for: enough(ctx, tasks, count) says
   whether the parts in so far (tasks[t].parts_in) let the caller rebuild
   every data block it wants. Called by the executor as parts arrive. */
typedef struct {
    int (*enough)(void *ctx, const cdc_shard_task_t *tasks, int count);
    void *ctx;
} cdc_call_goal_t;

#endif
