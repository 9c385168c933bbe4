/* task_run.c - one shard task on local OpenBLAS: GEMM (GEMV for a vector), or im2col + GEMM. */
#include "task_run.h"

#include "blas_backend.h"
#include "error.h"
#include "im2col.h"
#include "scratch.h"

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
