/* executor.h - runs shard tasks somewhere: in process, or on ZeroMQ workers.
 *
 * The coordinator hands an executor a batch of shard tasks and learns which
 * results arrived; it never knows how or where they ran. The math (encode,
 * decode, fallback) stays in coded_call.c whatever the transport. */
#ifndef CDC_EXECUTOR_H_INCLUDED
#define CDC_EXECUTOR_H_INCLUDED

#include "cdcgemm.h"
#include "im2col.h"

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
    const float *a;      /* a_rows x k, row-major, contiguous                 */
    int64_t a_rows, k;
    uint64_t a_key;      /* nonzero: a is a cached weight shard with this key */
    uint64_t bt_key;     /* nonzero: bt is a cached weight matrix with this key */
    const float *bt;     /* GEMM: cols x k, row-major (B transposed)          */
    const cdc_conv_geometry_t *geometry; /* CONV: one image's geometry        */
    int64_t batch;       /* CONV: images in input                             */
    const float *input;  /* CONV: batch x channels x h x w                    */
    int64_t cols;        /* result columns (GEMM: rows of bt; CONV: batch*out_h*out_w) */
    float *result;       /* a_rows x cols, contiguous, written by the executor */
    double elapsed_ms;   /* set by the executor: dispatch of the call to this
                            result's arrival                                 */
} cdc_shard_task_t;

typedef struct cdc_executor cdc_executor_t;

typedef struct {
    const char *name;
    /* Run count tasks; set bit t of *arrived for each task t whose result is
       complete. needed is the decode threshold n: once any needed results are
       in, a remote executor may stop waiting for the rest (after the
       configured wait for data shards, shard < needed). Returns CDC_OK even
       when some results did not arrive; the caller decodes or falls back. */
    int (*run)(cdc_executor_t *self, cdc_shard_task_t *tasks, int count, int needed,
               uint64_t *arrived);
    void (*destroy)(cdc_executor_t *self);
    /* Workers in the plan now (live by heartbeats, or silent for less than
       a grace period); NULL = every worker, always. *mask (may be NULL) gets
       bit w for each. Thread-safe. */
    int (*live)(cdc_executor_t *self, uint64_t *mask);
} cdc_executor_ops_t;

struct cdc_executor {
    const cdc_executor_ops_t *ops;
};

/* In-process executor: every task on this thread with OpenBLAS.
   Caller owns the result and destroys it with ops->destroy. NULL on OOM. */
cdc_executor_t *cdc__executor_local_new(void);

/* What a remote executor's transport did since it was created. */
typedef struct {
    uint64_t tasks_sent;      /* TASK messages sent (retries included)       */
    uint64_t send_failures;   /* tasks not dispatched: worker unreachable    */
    uint64_t results;         /* RESULT messages accepted                    */
    uint64_t weights_sent;    /* WEIGHTS messages sent                       */
    uint64_t weight_bytes;    /* payload bytes of those                      */
    uint64_t misses;          /* MISS replies (weights re-sent)              */
    uint64_t late_replies;    /* replies to an earlier request, dropped      */
    uint64_t error_replies;   /* ERROR replies from workers                  */
    uint64_t invalid_replies; /* malformed or unmatched replies, dropped     */
    uint64_t timeouts;        /* calls that hit timeout_ms                   */
    uint64_t bytes_out;       /* payload bytes sent (weights included)       */
    uint64_t bytes_in;        /* payload bytes of accepted results           */
    uint64_t heartbeats_missed; /* PINGs to a live worker unanswered at the next */
    uint64_t worker_deaths;   /* live -> dead: connection dropped or silent  */
    uint64_t worker_rejoins;  /* dead -> live again (answered a PING)        */
    uint64_t dead_skipped;    /* tasks not sent or given up: worker dead     */
    uint64_t live_mask;       /* bit w: worker w answers heartbeats now      */
} cdc_remote_counters_t;

/* ZeroMQ executor over the comma-separated endpoints (W = their count; NULL
   = config->workers): a background thread heartbeats every worker; task t of
   a call goes to the (tasks[t].shard mod L)-th of the L live workers. Waits
   up to connect_wait_ms for the workers to answer a first PING; workers that
   do not are used once they come up. Caller owns *executor_p and destroys it
   with ops->destroy. */
int cdc__executor_zmq_new(const cdc_config_t *config, const char *endpoints,
                          int connect_wait_ms, cdc_executor_t **executor_p);

/* Workers in an executor's plan and their bits in *mask (may be NULL); -1
   with every bit set for an executor without heartbeats (all its workers
   always count). Thread-safe. */
int cdc__executor_live(cdc_executor_t *executor, uint64_t *mask);

/* The transport counters of a ZeroMQ executor; CDC_EINVAL for another kind.
   Thread-safe. */
int cdc__executor_remote_counters(cdc_executor_t *executor,
                                  cdc_remote_counters_t *counters);

/* Run one task here and now with OpenBLAS (also the local fallback path). */
int cdc__task_run_local(const cdc_shard_task_t *task);

#endif
