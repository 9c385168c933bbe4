/* executor.h - runs shard tasks somewhere (in process now, on workers later).
 *
 * The coordinator hands an executor a batch of shard tasks and learns which
 * results arrived; it never knows how or where they ran. The math (encode,
 * decode, fallback) stays in coded_call.c whatever the transport. */
#ifndef CDC_EXECUTOR_H_INCLUDED
#define CDC_EXECUTOR_H_INCLUDED

#include "im2col.h"

#include <stdint.h>

typedef enum {
    CDC_TASK_GEMM, /* result = a · btᵀ                                        */
    CDC_TASK_CONV  /* result = a · [im2col(input_0) | ... | im2col(input_b-1)] */
} cdc_task_kind_t;

typedef struct {
    cdc_task_kind_t kind;
    int shard;           /* 0..n-1 data, n..n+r-1 parity                     */
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
} cdc_shard_task_t;

typedef struct cdc_executor cdc_executor_t;

typedef struct {
    const char *name;
    /* Run count tasks; set bit t of *arrived for each task t whose result is
       complete. Returns CDC_OK even when some results did not arrive. */
    int (*run)(cdc_executor_t *self, cdc_shard_task_t *tasks, int count,
               uint64_t *arrived);
    void (*destroy)(cdc_executor_t *self);
} cdc_executor_ops_t;

struct cdc_executor {
    const cdc_executor_ops_t *ops;
};

/* In-process executor: every task on this thread with OpenBLAS.
   Caller owns the result and destroys it with ops->destroy. NULL on OOM. */
cdc_executor_t *cdc__executor_local_new(void);

/* Run one task here and now with OpenBLAS (also the local fallback path). */
int cdc__task_run_local(const cdc_shard_task_t *task);

#endif
