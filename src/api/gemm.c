/* gemm.c - cdc_sgemm: BLAS arguments checked, then described to the one
   coded-GEMM driver (driver.h) as T = A·Btᵀ with an alpha/beta epilogue. */
#include "cdcgemm.h"

#include "driver.h"
#include "error.h"

#include <limits.h>
#include <string.h>

static int64_t max1(int64_t v)
{
    return v > 1 ? v : 1;
}

/* Argument checks in BLAS order; a failure names the argument. */
static int gemm_validate(cdc_layout_t layout, cdc_transpose_t ta, cdc_transpose_t tb,
                         int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                         int64_t ldc)
{
    if (layout != CDC_ROW_MAJOR && layout != CDC_COL_MAJOR)
        return cdc__fail(CDC_EINVAL, "cdc_sgemm: layout = %d", (int) layout);
    if (ta != CDC_NO_TRANS && ta != CDC_TRANS && ta != CDC_CONJ_TRANS)
        return cdc__fail(CDC_EINVAL, "cdc_sgemm: trans_a = %d", (int) ta);
    if (tb != CDC_NO_TRANS && tb != CDC_TRANS && tb != CDC_CONJ_TRANS)
        return cdc__fail(CDC_EINVAL, "cdc_sgemm: trans_b = %d", (int) tb);
    if (m < 0 || m > INT_MAX)
        return cdc__fail(CDC_EDIM, "cdc_sgemm: m = %lld", (long long) m);
    if (n < 0 || n > INT_MAX)
        return cdc__fail(CDC_EDIM, "cdc_sgemm: n = %lld", (long long) n);
    if (k < 0 || k > INT_MAX)
        return cdc__fail(CDC_EDIM, "cdc_sgemm: k = %lld", (long long) k);
    int row = layout == CDC_ROW_MAJOR;
    int a_t = ta != CDC_NO_TRANS, b_t = tb != CDC_NO_TRANS;
    /* Stored shapes: row-major A is (a_t ? k x m : m x k), ld = its columns;
       column-major A is (a_t ? k x m : m x k), ld = its rows. */
    int64_t need_a = row ? (a_t ? m : k) : (a_t ? k : m);
    int64_t need_b = row ? (b_t ? k : n) : (b_t ? n : k);
    int64_t need_c = row ? n : m;
    if (lda < max1(need_a) || lda > INT_MAX)
        return cdc__fail(CDC_ELD, "cdc_sgemm: lda = %lld < max(1, %lld)", (long long) lda,
                         (long long) need_a);
    if (ldb < max1(need_b) || ldb > INT_MAX)
        return cdc__fail(CDC_ELD, "cdc_sgemm: ldb = %lld < max(1, %lld)", (long long) ldb,
                         (long long) need_b);
    if (ldc < max1(need_c) || ldc > INT_MAX)
        return cdc__fail(CDC_ELD, "cdc_sgemm: ldc = %lld < max(1, %lld)", (long long) ldc,
                         (long long) need_c);
    return CDC_OK;
}

/* C = beta * C over a row-major m x n view (beta = 0 overwrites, NaN included). */
static void scale_c(float *c, int64_t m, int64_t n, int64_t ldc, float beta)
{
    for (int64_t i = 0; i < m; i++) {
        float *row = c + i * ldc;
        if (beta == 0.0f)
            memset(row, 0, (size_t) n * sizeof(float));
        else if (beta != 1.0f)
            for (int64_t j = 0; j < n; j++)
                row[j] *= beta;
    }
}

int cdc_sgemm(cdc_context_t *context, cdc_layout_t layout, cdc_transpose_t trans_a,
              cdc_transpose_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
              float *c, int64_t ldc)
{
    if (!context)
        return cdc__fail(CDC_EINVAL, "cdc_sgemm: context is NULL");
    int rc = gemm_validate(layout, trans_a, trans_b, m, n, k, lda, ldb, ldc);
    if (rc != CDC_OK)
        return rc;
    if (m == 0 || n == 0)
        return CDC_OK;
    if (!c)
        return cdc__fail(CDC_EINVAL, "cdc_sgemm: c is NULL");
    int compute = k > 0 && alpha != 0.0f;
    if (compute && (!a || !b))
        return cdc__fail(CDC_EINVAL, "cdc_sgemm: %s is NULL", a ? "b" : "a");

    /* T = A'·Bt'ᵀ over the caller's memory; column-major calls compute Cᵀ,
       so the caller's rows are T's columns. */
    cdc_gemm_desc_t desc;
    memset(&desc, 0, sizeof desc);
    cdc__gemm_operands(layout == CDC_COL_MAJOR, trans_a != CDC_NO_TRANS,
                       trans_b != CDC_NO_TRANS, m, n, k, a, lda, b, ldb, &desc.a.view,
                       &desc.bt.view);
    desc.transposed = layout == CDC_COL_MAJOR;
    desc.epilogue = (cdc_epilogue_t){.kind = CDC_EPILOGUE_STORE, .out = c, .ld = ldc,
                                     .alpha = alpha, .beta = beta};
    if (!compute) {
        scale_c(c, desc.a.view.rows, desc.bt.view.rows, ldc, beta);
        cdc__context_count_call(context);
        return CDC_OK;
    }
    cdc_call_plan_t plan;
    cdc__context_call_begin(context);
    rc = cdc__plan_resolve(context, CDC_PARITY_DEFAULT, CDC_SPLIT_AUTO, &plan);
    if (rc == CDC_OK)
        rc = cdc__driver_gemm(context, &desc, &plan);
    cdc__context_call_end(context);
    return rc;
}
