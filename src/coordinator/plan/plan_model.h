/* plan_model.h - what a call's plan is (cdc_call_plan_t), what a block of
   its work costs (cdc_block_cost_t), and the two sizing rules every plan
   uses, the equal one and what a memory budget holds. Below both planners:
   plan.c (which chooses) and profiled_plan.c (which sizes to the measured
   devices) include this, so neither includes the other's header in a
   cycle. */
#ifndef CDC_PLAN_MODEL_H_INCLUDED
#define CDC_PLAN_MODEL_H_INCLUDED

#include "cdcgemm.h"
#include "code.h"

#include <stdint.h>

/* What a cache entry costs beyond its floats (the entry record, the
   allocator's rounding, the index's share): generous, so that a shard
   planned to fit does fit. */
#define CDC_PLAN_BUDGET_ENTRY_SLACK 65536.0

/* Which operand of T = A·Btᵀ a coded product cuts into row blocks. */
typedef enum {
    CDC_SHARD_A, /* blocks of A's rows: shard results are row blocks of T    */
    CDC_SHARD_BT /* blocks of Bt's rows: shard results are column blocks of T */
} cdc_shard_side_t;

/* The work of one call as a function of a data block's rows, for sizing
   blocks to workers: a block of len rows costs flops_per_row * len flops
   that stream streamed_fixed + streamed_per_row * len operand bytes (the
   memory term of a worker's roofline, profile.h), bytes_fixed_out +
   bytes_per_row_out * len bytes sent, and bytes_per_row_in * len result
   bytes back. */
typedef struct {
    double flops_per_row;     /* of one row of the cut operand's result      */
    double flops_fixed;       /* every non-empty data block's whatever its
                                 length: a spatial band's halo rows (conv2d.c) */
    double streamed_per_row;  /* operand bytes a row's GEMM reads: (its row
                                 of the cut operand or of the im2col matrix) */
    double streamed_fixed;    /* and every block's whatever its length: the
                                 whole operand (a halo's rows count at
                                 streamed_per_row each, as their flops)      */
    double bytes_fixed_out;   /* sent to every shard whatever its length (the
                                 whole operand, a band's halo; 0 when cached) */
    double bytes_per_row_out; /* sent per row of the block (0 when the cut
                                 operand is cached weights)                  */
    double bytes_per_row_in;  /* result bytes per row                        */
    double held_per_row;      /* bytes a row of the cut operand takes in its
                                 home's weight cache (0 when it is not cached) */
    double held_fixed;        /* bytes every home holds whatever its block:
                                 the whole operand when it is cached weights */
    uint64_t held_key;        /* the cut operand when the workers cache it
                                 (its weights' key; 0: per call): each such
                                 operand keeps lengths of its own, as its
                                 blocks are shipped and staged on their own */
    double here_fixed_ms;     /* the coordinator computing c rows of the cut */
    double here_per_row_ms;   /* operand itself takes here_fixed_ms +
                                 here_per_row_ms * c (local_cost.h); 0 per
                                 row: the front end cannot take a share */
} cdc_block_cost_t;

/* What one coded call does, whatever its front end. */
typedef struct {
    int n, r;               /* data and parity shards                       */
    int wanted_r;           /* the parity asked for, before r was lowered to
                               fit the workers: a call with less redundancy
                               than this is degraded                        */
    const cdc_code_t *code; /* the code for (n, r); NULL when r = 0         */
    cdc_split_t split;      /* in the caller's terms: ROWS cuts the rows of
                               C (the weights' rows of a layer: output or
                               channel), COLUMNS its columns (batch or
                               spatial); AUTO until the front end's rule or
                               the driver resolves it                       */
    cdc_shard_side_t cut;   /* the operand of T = A·Btᵀ that is cut (driver) */
    int64_t block_len[CDC_CODE_MAX_N]; /* rows of each data block of the cut
                               operand (rows of C, filters, output rows of a
                               band), once sized; parity blocks are as large
                               as the largest                               */
    int64_t here_rows;      /* the coordinator's share: the cut operand's
                               first here_rows rows are computed here,
                               beside the coded call over the rest (the
                               data blocks start at this row, block_len
                               sums to the rest); 0: none                  */
    int sized;              /* block_len is set (cdc__plan_size_blocks)     */
    int rotated;            /* sized stripes: the call runs in the rotated
                               layout (rotated_set.h), block_len[w] worker
                               w's data rows (w < n + r; stage_len likewise);
                               0: block_len are the dedicated layout's n
                               data blocks (the equal plan's rotated calls
                               cut their own equal stripes)                */
    int on_demand;          /* the cut is a per-call operand (a spatial
                               split's bands) whose r parity tasks go on
                               demand (task.h): n counts every worker of
                               the plan (the dedicated layout's n + r), and
                               the blocks are sized and predicted as an
                               uncoded call over them (cdc__plan_on_demand) */
    uint64_t unfit_slots;   /* slots whose home cannot hold its shard's
                               weights within its --max-memory: not sent,
                               erasures the code covers (budget_erasures)  */
    int over_budget;        /* more unfit slots than r: the call runs on the
                               coordinator (budget_fallbacks), nothing sent */
    double predicted_ms;    /* the model's latency for the sized blocks,
                               nothing failing (< 0: cannot predict yet)  */
    int local_faster;       /* computing it here is predicted faster than
                               distributing it (cdc__plan_prefer_here): it
                               runs on the coordinator (planned_local)    */
    uint64_t stage_token;   /* nonzero: the profiled plan re-sized the blocks
                               to stage_len, whose weights the workers are
                               sent in the background (plan_staging.c),
                               while this call keeps block_len, which they
                               hold                                       */
    int64_t stage_len[CDC_CODE_MAX_N];
    cdc_block_cost_t cost;  /* the call's work by rows of the cut operand, as
                               the blocks were sized with (cdc__plan_size_blocks) */
    int64_t stage_here_rows; /* the coordinator's share that goes with them */
    int stage_order[CDC_CODE_MAX_N + CDC_CODE_MAX_R]; /* the slots to stage,
                               the busiest under block_len first          */
} cdc_call_plan_t;

/* The parity a plan's blocks are sized and predicted with: r, or 0 when
   it goes on demand (computed only after a loss: a fault-free call is an
   uncoded one over its n). */
static inline int cdc__plan_sized_r(const cdc_call_plan_t *plan)
{
    return plan->on_demand ? 0 : plan->r;
}

/* Equal blocks: rows spread over n lengths, the first rows % n one row
   longer (all >= 1 when rows >= n). */
void cdc__plan_equal_lengths(int n, int64_t rows, int64_t *len);

/* The coordinator's line in cost (here_fixed_ms, here_per_row_ms) through
   its predicted time for one row of the cut operand (one_ms) and for all
   `rows` of them (all_ms; rows >= 2). */
void cdc__plan_here_line(cdc_block_cost_t *cost, double one_ms, double all_ms, int64_t rows);

/* The most rows of the cut operand a worker whose weight cache is bounded
   by max_memory bytes (0: unknown or unbounded) can hold, as the planner's
   max_rows (planner.h): 0 for no limit, 0.5 for none at all. */
double cdc__plan_budget_rows(uint64_t max_memory, const cdc_block_cost_t *cost);

#endif
