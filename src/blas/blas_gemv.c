/* blas_gemv.c - the exported matrix-vector entry points: cblas_sgemv, sgemv_,
 * sgemv, SGEMV.
 *
 * A language model decoding one token at a time multiplies each weight
 * matrix by a vector: y = alpha·op(A)·x + beta·y. With the same exact
 * semantics as the GEMM entry points (blas_entry.c): arguments checked in
 * reference order, errors where the system BLAS sends them, y untouched
 * then; calls below CDCGEMM_MIN_FLOPS (2·M·N) or with alpha = 0 on OpenBLAS's
 * own sgemv; the rest through the coded path as a GEMM of one column, whose
 * matrix (the weights, repeated call after call) the workers cache, and
 * computed locally if that fails, so a call is never lost. */
#include "cdcgemm.h"

#include "blas_backend.h"
#include "blas_context.h"
#include "blas_errors.h"
#include "log.h"

#include <stddef.h>
#include <stdlib.h>

enum { ROW_MAJOR = 101, COL_MAJOR = 102, NO_TRANS = 111, TRANS = 112, CONJ_TRANS = 113 };

CDC_EXPORT void cblas_sgemv(int layout, int trans, int m, int n, float alpha, const float *a,
                            int lda, const float *x, int incx, float beta, float *y, int incy);
/* The trailing length is gfortran's hidden CHARACTER length: accepted, ignored. */
CDC_EXPORT void sgemv_(const char *trans, const int *m, const int *n, const float *alpha,
                       const float *a, const int *lda, const float *x, const int *incx,
                       const float *beta, float *y, const int *incy, size_t trans_len);
CDC_EXPORT void sgemv(const char *trans, const int *m, const int *n, const float *alpha,
                      const float *a, const int *lda, const float *x, const int *incx,
                      const float *beta, float *y, const int *incy, size_t trans_len)
    __attribute__((alias("sgemv_")));
CDC_EXPORT void SGEMV(const char *trans, const int *m, const int *n, const float *alpha,
                      const float *a, const int *lda, const float *x, const int *incx,
                      const float *beta, float *y, const int *incy, size_t trans_len)
    __attribute__((alias("sgemv_")));

/* Element i of a vector of len elements with stride inc (BLAS: a negative
   stride walks it from its far end). */
static inline size_t at(int len, int inc, int i)
{
    return inc > 0 ? (size_t) i * (size_t) inc : (size_t) (len - 1 - i) * (size_t) -inc;
}

/* The coded path for column-major A (m x n, lda): tmp = op(A)·x as a GEMM
   of one column, then y = alpha·tmp + beta·y (beta = 0 overwrites y, NaN
   included). 0 when done; -1 to compute locally (y untouched). */
__attribute__((noinline, cold)) static int gemv_coded(int trans, int m, int n, float alpha,
                                                      const float *a, int lda, const float *x,
                                                      int incx, float beta, float *y, int incy)
{
    int lenx = trans ? m : n, leny = trans ? n : m;
    float *tmp = malloc((size_t) leny * sizeof(float));
    float *packed = incx != 1 ? malloc((size_t) lenx * sizeof(float)) : NULL;
    int rc = tmp && (incx == 1 || packed) ? CDC_OK : CDC_ENOMEM;
    for (int i = 0; rc == CDC_OK && packed && i < lenx; i++)
        packed[i] = x[at(lenx, incx, i)];
    if (rc == CDC_OK)
        rc = cdc__blas_context_sgemm(1, trans, 0, leny, 1, lenx, 1.0f, a, lda,
                                     packed ? packed : x, lenx, 0.0f, tmp, leny);
    if (rc == CDC_OK)
        for (int i = 0; i < leny; i++) {
            float *yi = &y[at(leny, incy, i)];
            *yi = (beta == 0.0f ? 0.0f : beta * *yi) + alpha * tmp[i];
        }
    else
        CDC_LOG_WARNF("cdcgemm: coded sgemv %dx%d failed (%s); computed locally", m, n,
                      cdc_last_error());
    free(tmp);
    free(packed);
    return rc == CDC_OK ? 0 : -1;
}

/* GEMV on validated column-major arguments (m, n > 0): local or coded. */
static void gemv_dispatch(int trans, int m, int n, float alpha, const float *a, int lda,
                          const float *x, int incx, float beta, float *y, int incy)
{
    double flops = 2.0 * (double) m * (double) n;
    if (alpha != 0.0f && flops >= cdc__blas_min_flops_vector_fast() &&
        gemv_coded(trans, m, n, alpha, a, lda, x, incx, beta, y, incy) == 0)
        return;
    cdc_openblas_sgemv_fn sgemv = cdc__blas_openblas_sgemv();
    if (!sgemv) {
        CDC_LOG_ERRORF("cdcgemm: OpenBLAS unavailable: %s", cdc_last_error());
        return;
    }
    sgemv(COL_MAJOR, trans ? TRANS : NO_TRANS, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

void sgemv_(const char *trans, const int *m, const int *n, const float *alpha, const float *a,
            const int *lda, const float *x, const int *incx, const float *beta, float *y,
            const int *incy, size_t trans_len)
{
    (void) trans_len;
    char t = *trans;
    int ta = t == 'N' || t == 'n' ? 0 : t == 'T' || t == 't' || t == 'C' || t == 'c' ? 1 : -1;
    /* Reference sgemv.f: the first failing check in this order wins. */
    int info = ta < 0 ? 1
               : *m < 0 ? 2
               : *n < 0 ? 3
               : *lda < cdc__blas_max1(*m) ? 6
               : *incx == 0 ? 8
               : *incy == 0 ? 11
                            : 0;
    if (info != 0) {
        cdc__blas_xerbla("SGEMV ", info);
        return;
    }
    if (*m == 0 || *n == 0 || (*alpha == 0.0f && *beta == 1.0f))
        return;
    gemv_dispatch(ta, *m, *n, *alpha, a, *lda, x, *incx, *beta, y, *incy);
}

void cblas_sgemv(int layout, int trans, int m, int n, float alpha, const float *a, int lda,
                 const float *x, int incx, float beta, float *y, int incy)
{
    const char *routine = "cblas_sgemv";
    if (layout != ROW_MAJOR && layout != COL_MAJOR) {
        cdc__blas_cblas_xerbla(routine, 1, "layout", layout);
        return;
    }
    if (trans != NO_TRANS && trans != TRANS && trans != CONJ_TRANS) {
        cdc__blas_cblas_xerbla(routine, 2, "TransA", trans);
        return;
    }
    /* The reference CBLAS hands the rest to Fortran sgemv (info + 1); in
       row-major as the column-major A transposed, with M and N swapped, so
       the order and the numbers are those of the swapped call. */
    int row = layout == ROW_MAJOR;
    int d1 = row ? n : m, d2 = row ? m : n, ta = (trans != NO_TRANS) ^ row;
    int info = d1 < 0 ? 3 : d2 < 0 ? 4 : lda < cdc__blas_max1(d1) ? 7 : incx == 0 ? 9
                                                                 : incy == 0 ? 12 : 0;
    if (info != 0) {
        const char *what = info == 3 ? (row ? "N" : "M") : info == 4 ? (row ? "M" : "N")
                           : info == 7 ? "lda" : info == 9 ? "incX" : "incY";
        int value = info == 3 ? d1 : info == 4 ? d2 : info == 7 ? lda : info == 9 ? incx : incy;
        cdc__blas_cblas_xerbla(routine, info, what, value);
        return;
    }
    if (d1 == 0 || d2 == 0 || (alpha == 0.0f && beta == 1.0f))
        return;
    gemv_dispatch(ta, d1, d2, alpha, a, lda, x, incx, beta, y, incy);
}
