/* coded_call.h - one coded product: dispatch shard tasks, decode what is
   missing, finish locally when too much is missing. */
#ifndef CDC_CODED_CALL_H_INCLUDED
#define CDC_CODED_CALL_H_INCLUDED

#include "context.h"
#include "plan.h"
#include "shard_set.h"

enum { CDC_HERE_BUDGET = 1, CDC_HERE_FASTER = 2 };

typedef struct cdc_coded_call {
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
    /* Parity check of the results (when inner > 0 and the context verifies):
       per shard, the norms of the operand rows and columns its result came
       from, and the inner dimension of the products. */
    cdc_shard_scale_t scales[CDC_MAX_SHARDS];
    int64_t inner;
    /* Or: fill scales[] and inner when first needed (the parity check, the
       BLAS accuracy guard), so a call that can check nothing computes no
       operand norms. It may keep what it allocates in scale_storage (freed by
       cdc__coded_call_release) and reads scales_job. */
    int (*scales_fill)(struct cdc_coded_call *call);
    const void *scales_job;
    double *scale_storage;
    float *storage;                         /* the result blocks: this
                                               thread's scratch buffer        */
    cdc_split_t split;      /* the split in the caller's terms (the report)  */
    int wanted_r;           /* the parity asked for (plan.h): fewer shards
                               dispatched than n + this is a degraded call;
                               cdc__coded_call_init sets r                  */
    cdc_shard_task_t share; /* the coordinator's share (plan.h here_rows):
                               rows of the product outside the code, computed
                               here while the shards run, into share.result;
                               no rows (a_rows or cols 0): none            */
    int here;               /* compute every data task on the coordinator and
                               send nothing: CDC_HERE_BUDGET, the shards
                               would not fit their homes' memory (plan.h,
                               over_budget); CDC_HERE_FASTER, it is
                               predicted faster (local_faster); 0: no     */
    uint64_t unfit;         /* shards whose home cannot hold their weights
                               (plan.h unfit_slots): not sent, erasures    */
} cdc_coded_call_t;

/* Prepare a call of n data and r parity shard results of rows x cols: allocates
   the result blocks and points each task's result at its block. The caller then
   fills tasks[0..n+r-1] (everything but result; cols is preset to the call's),
   giving a data task of an unequal block its own, smaller, shape. */
/* The coded call's `here` for a sized plan. */
int cdc__coded_call_here(const cdc_call_plan_t *plan);

/* What an initialised call takes from its sized plan: the split, the
   parity asked for, here, the unfit shards. */
void cdc__coded_call_follow(cdc_coded_call_t *call, const cdc_call_plan_t *plan);

int cdc__coded_call_init(cdc_coded_call_t *call, const cdc_code_t *code, int n,
                         int64_t rows, int64_t cols);
void cdc__coded_call_release(cdc_coded_call_t *call);

/* Run the tasks on the context's executor (skipping shards erased by
   cdc_context_erase_next), decode missing data results from parity, and run
   still-missing data tasks locally (a fallback). On CDC_OK every data result
   block is the exact product, in the padded rows x cols layout (zeros past a
   block's real rows or column groups). Updates the context's counters. */
int cdc__coded_call_run(cdc_context_t *context, cdc_coded_call_t *call);

/* Compute task here, now: a local computation on an emulated coordinator
   (slow@c:gflops=G) ends no sooner than its flops at G, as on the device
   it stands for. An empty task (no rows or columns) computes nothing. */
/* The largest error amplification A (cdc__code_decode_amplification) a
   decode of products of inner dimension k may have: a rebuilt block's
   predicted relative error u * sqrt(k) * A (u = 2^-24) at most 1e-4, which
   it measures at about a quarter of (docs/codes.md). Never below 8 =
   sqrt(64), the all-ones parity's A for one loss at the largest n, so
   r = 1 decodes are never refused. Every decode path applies it; the BLAS
   entry points add their per-element guard. */
double cdc__decode_limit(int64_t k);

/* Whether this coded call waits for a parity result to check its data
   results with (config.verify: 0 never; 1 the first CDC_VERIFY_FIRST
   calls, then one in CDC_VERIFY_EVERY, and every call once a check has
   failed; 2 always). Counts the call; takes the context's lock. */
int cdc__verify_this_call(cdc_context_t *context);

/* After a call: its check ran (checked) and found a corruption (corrupt).
   Call with the context's lock held. */
void cdc__verify_account(cdc_context_t *context, int checked, int corrupt);

/* How long a checked call waits for the parity it checks with, past the
   moment its results first sufficed (decodable): half the time it took to
   get there, so a straggler costs a checked call at most 1.5x, and in the
   rotated layout, where every worker computes its parity blocks after its
   data (r/n more), the check comes well inside it fault-free. */
typedef struct {
    double started_ms;   /* the call's dispatch                           */
    double decodable_ms; /* when its results first sufficed; < 0: not yet */
} cdc_check_wait_t;

void cdc__check_wait_start(cdc_check_wait_t *wait);
/* Whether the call is done: decodable and either checkable (a parity to
   check with is in) or past the wait. Reads the clock. */
int cdc__check_wait_over(cdc_check_wait_t *wait, int decodable, int checkable);

int cdc__coded_call_run_here(const cdc_context_t *context, const cdc_shard_task_t *task);


#endif
