/* executor_local.c - the in-process executor: shard tasks on local OpenBLAS. */
#include "executor.h"

#include "blas_backend.h"
#include "error.h"
#include "scratch.h"

#include <stdlib.h>
#include <time.h>

int cdc__task_run_local(const cdc_shard_task_t *task)
{
    if (task->kind == CDC_TASK_GEMM) {
        /* One row or one column (FC at batch 1): a matrix-vector product. */
        if (task->a_rows == 1)
            cdc__blas_sgemv_rm(task->cols, task->k, task->bt, task->k, task->a, task->result);
        else if (task->cols == 1)
            cdc__blas_sgemv_rm(task->a_rows, task->k, task->a, task->k, task->bt,
                               task->result);
        else
            cdc__blas_sgemm_rm(0, 1, task->a_rows, task->cols, task->k, 1.0f, task->a,
                               task->k, task->bt, task->k, 0.0f, task->result, task->cols);
        return CDC_OK;
    }
    const cdc_conv_geometry_t *g = task->geometry;
    int64_t spatial = g->out_h * g->out_w;
    int64_t image_size = g->channels * g->h * g->w;
    /* One im2col matrix for the whole batch (images side by side) so the
       shard is a single GEMM. */
    float *cols = cdc__scratch(CDC_SCRATCH_IM2COL, (size_t) task->k * (size_t) task->cols);
    if (!cols)
        return cdc__fail(CDC_ENOMEM, "im2col buffer of %lld x %lld floats",
                         (long long) task->k, (long long) task->cols);
    for (int64_t b = 0; b < task->batch; b++)
        cdc_im2col(g, task->input + b * image_size, cols + b * spatial, task->cols);
    cdc__blas_sgemm_rm(0, 0, task->a_rows, task->cols, task->k, 1.0f, task->a, task->k,
                       cols, task->cols, 0.0f, task->result, task->cols);
    return CDC_OK;
}

static int local_run(cdc_executor_t *self, cdc_shard_task_t *tasks, int count,
                     int needed, uint64_t *arrived)
{
    (void) self;
    (void) needed; /* every task runs here: all of them always arrive */
    *arrived = 0;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int t = 0; t < count; t++) {
        int rc = cdc__task_run_local(&tasks[t]);
        if (rc != CDC_OK)
            return rc;
        clock_gettime(CLOCK_MONOTONIC, &end);
        tasks[t].elapsed_ms = (double) (end.tv_sec - start.tv_sec) * 1e3 +
                              (double) (end.tv_nsec - start.tv_nsec) * 1e-6;
        *arrived |= UINT64_C(1) << t;
    }
    return CDC_OK;
}

static void local_destroy(cdc_executor_t *self)
{
    free(self);
}

static const cdc_executor_ops_t local_ops = {"local", local_run, local_destroy, NULL};

cdc_executor_t *cdc__executor_local_new(void)
{
    cdc_executor_t *self = malloc(sizeof *self);
    if (self)
        self->ops = &local_ops;
    return self;
}
