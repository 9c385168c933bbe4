/* dedicated_layout.h - a coded product in the dedicated parity layout: one
 * stripe of n data and r parity shards, each shard a worker's whole task
 * (the last r workers compute parity on every call), run by the call
 * engine (engine.h); or, with the parity on demand (a spatial split's
 * bands, plan.h on_demand), the n data shards on n workers and the r
 * parity tasks sent only once a data shard is lost or late. Under
 * 2-modular redundancy (r = 0) every data shard goes to two workers and
 * the first copy wins. */
#ifndef CDC_DEDICATED_LAYOUT_H_INCLUDED
#define CDC_DEDICATED_LAYOUT_H_INCLUDED

#include "context.h"
#include "layout.h"
#include "plan.h"
#include "shard_set.h"

typedef struct cdc_dedicated_call {
    cdc_call_layout_t layout;    /* first: the engine's view (set by the run)     */
    const cdc_code_t *code; /* NULL when r = 0                               */
    int n, r;
    int64_t rows, cols;     /* padded shape of every shard result: the shape
                               the code combines (parity tasks compute it)  */
    int64_t col_groups;     /* cols = col_groups equal groups (1; a spatial
                               conv's batch of images): a data task of fewer
                               rows or cols (an unequal block) computes
                               a_rows x (col_groups * g) compactly, and the
                               call pads it to rows x (col_groups * cols /
                               col_groups) with zeros before any decode   */
    cdc_shard_task_t tasks[CDC_MAX_SHARDS]; /* n + r, result set by the call;
                               a data task of 0 rows or cols is not sent:
                               its result is zero                          */
    float *results[CDC_MAX_SHARDS];         /* n + r result blocks, rows x
                                               cols once the call ran     */
    /* Parity check of the results: per shard, the norms of the operand rows
       and columns its result came from, and the inner dimension of the
       products, filled by scales_fill when first needed (the parity check,
       the BLAS accuracy guard), so a call that checks nothing computes no
       operand norms. It may keep what it allocates in scale_storage (freed
       by cdc__dedicated_call_release) and reads scales_job. */
    cdc_shard_scale_t scales[CDC_MAX_SHARDS];
    int64_t inner;
    int (*scales_fill)(struct cdc_dedicated_call *call);
    const void *scales_job;
    double *scale_storage;
    float *storage;         /* the result blocks: this thread's scratch      */
    cdc_split_t split;      /* the split in the caller's terms (the report)  */
    int wanted_r;           /* the parity asked for (plan.h): fewer shards
                               dispatched than n + this is a degraded call */
    cdc_shard_task_t share; /* the coordinator's share (plan.h here_rows):
                               rows of the product outside the code, computed
                               here while the shards run, into share.result;
                               no rows (a_rows or cols 0): none            */
    int here;               /* CDC_HERE_* (layout.h): every data task
                               computed here, nothing sent; 0: no          */
    int on_demand;          /* the parity shards go on demand (plan.h):
                               sent only once a data shard is lost or late */
    uint64_t unfit;         /* shards whose home cannot hold their weights
                               (plan.h unfit_slots): not sent, erasures    */
    /* The run's own (cdc__dedicated_call_run). */
    int replicate;          /* 2-modular redundancy: data shards sent twice  */
    float *replicas;        /* the replicas' result blocks                   */
    uint64_t empty;         /* data shards of no rows: zero, never sent      */
} cdc_dedicated_call_t;

/* Prepare a call of n data and r parity shard results of rows x cols:
   allocates the result blocks and points each task's result at its block.
   The caller then fills tasks[0..n+r-1] (everything but result; cols is
   preset to the call's), giving a data task of an unequal block its own,
   smaller, shape. */
int cdc__dedicated_call_init(cdc_dedicated_call_t *call, const cdc_code_t *code, int n,
                             int64_t rows, int64_t cols);
void cdc__dedicated_call_release(cdc_dedicated_call_t *call);

/* What an initialised call takes from its sized plan: the split, the
   parity asked for, here, the unfit shards, parity on demand. */
void cdc__dedicated_call_follow(cdc_dedicated_call_t *call, const cdc_call_plan_t *plan);

/* Run the call through the engine (engine.h). On CDC_OK every data result
   block is the exact product, in the padded rows x cols layout (zeros past
   a block's real rows or column groups). */
int cdc__dedicated_call_run(cdc_context_t *context, cdc_dedicated_call_t *call);

#endif
