/* matmul_coded.c - coded products of plain matrices (FC layers, the GEMM API). */
#include "matmul_coded.h"

#include "error.h"
#include "norms.h"

#include <stdlib.h>
#include <string.h>

/* What a lazy fill of a matmul call's scales reads. */
typedef struct {
    cdc_shard_side_t side;
    const cdc_shard_set_t *set;
    const float *whole;      /* the operand that goes whole to every shard */
    int64_t whole_rows, k;
} matmul_scales_job_t;

static void matmul_scales_set(cdc_coded_call_t *call, const matmul_scales_job_t *job,
                              const double *whole_norms)
{
    for (int s = 0; s < job->set->n + job->set->r; s++) {
        call->scales[s].row = job->side == CDC_SHARD_A ? job->set->row_norms[s] : whole_norms;
        call->scales[s].col = job->side == CDC_SHARD_A ? whole_norms : job->set->row_norms[s];
    }
    call->inner = job->k;
}

static int matmul_scales_fill(cdc_coded_call_t *call)
{
    const matmul_scales_job_t *job = call->scales_job;
    call->scale_storage = malloc((size_t) job->whole_rows * sizeof(double));
    if (!call->scale_storage)
        return cdc__fail(CDC_ENOMEM, "norms of %lld rows", (long long) job->whole_rows);
    cdc__row_norms(job->whole, job->whole_rows, job->k, call->scale_storage);
    matmul_scales_set(call, job, call->scale_storage);
    return CDC_OK;
}

/* The coded product; whole_norms NULL with lazy_norms set computes them only
   if the parity check or the accuracy guard needs them. */
static int matmul_run(cdc_context_t *context, const cdc_code_t *code, cdc_shard_side_t side,
                      const cdc_shard_set_t *set, uint64_t set_key, uint64_t whole_key,
                      const float *a, int64_t m, const float *bt, int64_t ncols, int64_t k,
                      const double *whole_norms, int lazy_norms, float *t, int64_t ldt)
{
    int n = set->n, shards = set->n + set->r;
    int64_t result_rows = side == CDC_SHARD_A ? set->block_rows : m;
    int64_t result_cols = side == CDC_SHARD_A ? ncols : set->block_rows;
    cdc_coded_call_t call;
    int rc = cdc__coded_call_init(&call, code, n, result_rows, result_cols);
    if (rc != CDC_OK)
        return rc;
    for (int s = 0; s < shards; s++) {
        cdc_shard_task_t *task = &call.tasks[s];
        task->kind = CDC_TASK_GEMM;
        task->k = k;
        task->a_rows = result_rows;
        task->a = side == CDC_SHARD_A ? set->blocks[s] : a;
        task->bt = side == CDC_SHARD_A ? bt : set->blocks[s];
        task->a_key = side == CDC_SHARD_A ? set_key : whole_key;
        task->bt_key = side == CDC_SHARD_A ? whole_key : set_key;
    }
    matmul_scales_job_t job = {side, set, side == CDC_SHARD_A ? bt : a,
                               side == CDC_SHARD_A ? ncols : m, k};
    if (whole_norms)
        matmul_scales_set(&call, &job, whole_norms);
    else if (lazy_norms && code) {
        call.scales_fill = matmul_scales_fill;
        call.scales_job = &job;
    }
    rc = cdc__coded_call_run(context, &call);
    if (rc == CDC_OK) {
        for (int s = 0; s < n; s++) {
            int64_t valid = cdc__shard_set_valid_rows(set, s);
            int64_t first = (int64_t) s * set->block_rows;
            const float *block = call.results[s];
            if (side == CDC_SHARD_A) {
                for (int64_t i = 0; i < valid; i++)
                    memcpy(t + (first + i) * ldt, block + i * result_cols,
                           (size_t) ncols * sizeof(float));
            } else if (valid > 0) {
                for (int64_t i = 0; i < m; i++)
                    memcpy(t + i * ldt + first, block + i * result_cols,
                           (size_t) valid * sizeof(float));
            }
        }
    }
    cdc__coded_call_release(&call);
    return rc;
}

int cdc__matmul_coded_normed(cdc_context_t *context, const cdc_code_t *code,
                             cdc_shard_side_t side, const cdc_shard_set_t *set,
                             uint64_t set_key, uint64_t whole_key, const float *a, int64_t m,
                             const float *bt, int64_t ncols, int64_t k,
                             const double *whole_norms, float *t, int64_t ldt)
{
    return matmul_run(context, code, side, set, set_key, whole_key, a, m, bt, ncols, k,
                      whole_norms, 0, t, ldt);
}

int cdc__matmul_coded(cdc_context_t *context, const cdc_code_t *code,
                      cdc_shard_side_t side, const cdc_shard_set_t *set, uint64_t set_key,
                      uint64_t whole_key, const float *a, int64_t m, const float *bt,
                      int64_t ncols, int64_t k, float *t, int64_t ldt)
{
    return matmul_run(context, code, side, set, set_key, whole_key, a, m, bt, ncols, k, NULL,
                      1, t, ldt);
}
