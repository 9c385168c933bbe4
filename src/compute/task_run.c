/* task_run.c - one shard task on local OpenBLAS: GEMM (GEMV for a vector), or im2col + GEMM;
 * the process's meter of that work (task_run.h). */
#include "task_run.h"

#include "blas_backend.h"
#include "clock.h"
#include "error.h"
#include "im2col.h"
#include "scratch.h"

#include <stdatomic.h>

static atomic_uint_fast64_t meter_flops, meter_busy_us;

static int run(const cdc_shard_task_t *task)
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
        cdc__im2col(g, task->input + b * image_size, cols + b * spatial, task->cols);
    cdc__blas_sgemm_rm(0, 0, task->a_rows, task->cols, task->k, 1.0f, task->a, task->k,
                       cols, task->cols, 0.0f, task->result, task->cols);
    return CDC_OK;
}

/* Every part of a streamed task, each into its place. */
static int run_parts(const cdc_shard_task_t *task)
{
    int parts = cdc_task_parts(task), rc = CDC_OK;
    for (int p = 0; p < parts && rc == CDC_OK; p++) {
        int64_t first;
        cdc_shard_task_t piece = cdc__task_part(task, p, &first);
        rc = run(&piece);
    }
    return rc;
}

int cdc__task_run_local(const cdc_shard_task_t *task)
{
    double started = cdc__clock_ms();
    int rc = cdc_task_parts(task) > 1 ? run_parts(task) : run(task);
    if (rc == CDC_OK) {
        double flops =
            cdc__gemm_flops((double) task->a_rows, (double) task->cols, (double) task->k);
        atomic_fetch_add(&meter_flops, (uint64_t) flops);
        atomic_fetch_add(&meter_busy_us, (uint64_t) ((cdc__clock_ms() - started) * 1000.0));
    }
    return rc;
}

void cdc__task_run_meter(cdc_task_meter_t *meter)
{
    /* A task counted between the two reads may show in one only: the next
       reading's difference makes good. */
    meter->busy_us = atomic_load(&meter_busy_us);
    meter->flops = atomic_load(&meter_flops);
}
