/* blas_entry.c - the exported BLAS entry points: cblas_sgemm, sgemm_, sgemm, SGEMM.
 *
 * Exact BLAS semantics: arguments are checked in reference order and errors
 * go where the system BLAS would send them (Fortran: the caller's xerbla_;
 * CBLAS: the caller's cblas_xerbla), with C untouched. Calls below
 * CDCGEMM_MIN_FLOPS (2·M·N·K), and calls with nothing to multiply (k = 0 or
 * alpha = 0), go straight to OpenBLAS through its private handle; the rest go
 * through the coded path, and if that fails they are computed locally, so a
 * call is never lost. Only these four symbols are defined here: every other
 * BLAS symbol keeps resolving to the system BLAS. */
#include "cdcgemm.h"

#include "blas_backend.h"
#include "blas_context.h"
#include "blas_errors.h"
#include "log.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

enum { ROW_MAJOR = 101, COL_MAJOR = 102, NO_TRANS = 111, TRANS = 112, CONJ_TRANS = 113 };

CDC_EXPORT void cblas_sgemm(int layout, int trans_a, int trans_b, int m, int n, int k,
                            float alpha, const float *a, int lda, const float *b, int ldb,
                            float beta, float *c, int ldc);
/* The trailing lengths are gfortran's hidden CHARACTER lengths: accepted, ignored. */
CDC_EXPORT void sgemm_(const char *transa, const char *transb, const int *m, const int *n,
                       const int *k, const float *alpha, const float *a, const int *lda,
                       const float *b, const int *ldb, const float *beta, float *c,
                       const int *ldc, size_t transa_len, size_t transb_len);
CDC_EXPORT void sgemm(const char *transa, const char *transb, const int *m, const int *n,
                      const int *k, const float *alpha, const float *a, const int *lda,
                      const float *b, const int *ldb, const float *beta, float *c,
                      const int *ldc, size_t transa_len, size_t transb_len)
    __attribute__((alias("sgemm_")));
CDC_EXPORT void SGEMM(const char *transa, const char *transb, const int *m, const int *n,
                      const int *k, const float *alpha, const float *a, const int *lda,
                      const float *b, const int *ldb, const float *beta, float *c,
                      const int *ldc, size_t transa_len, size_t transb_len)
    __attribute__((alias("sgemm_")));

/* The coded path, kept out of line so the local path's frame stays small. */
__attribute__((noinline, cold)) static int gemm_coded(int col_major, int ta, int tb, int m,
                                                      int n, int k, float alpha,
                                                      const float *a, int lda,
                                                      const float *b, int ldb, float beta,
                                                      float *c, int ldc)
{
    if (alpha == 0.0f || k == 0)
        return -1; /* nothing to multiply: OpenBLAS scales C */
    if (cdc__blas_context_sgemm(col_major, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                                ldc) == CDC_OK)
        return 0;
    CDC_LOG_WARNF("cdcgemm: coded sgemm %dx%dx%d failed (%s); computed locally", m, n, k,
                  cdc_last_error());
    return -1;
}

/* GEMM on validated arguments (m, n > 0): local or coded. */
static inline void gemm_dispatch(int col_major, int ta, int tb, int m, int n, int k,
                                 float alpha, const float *a, int lda, const float *b,
                                 int ldb, float beta, float *c, int ldc)
{
    /* 2·M·N·K in double: exact enough and no overflow. */
    double flops = 2.0 * (double) m * (double) n * (double) k;
    double min_flops = m == 1 || n == 1 ? cdc__blas_min_flops_vector_fast()
                                        : cdc__blas_min_flops_fast();
    if (__builtin_expect(flops >= min_flops, 0) &&
        gemm_coded(col_major, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) == 0)
        return;
    /* Straight to OpenBLAS's own function: the local path is the common one
       and must cost next to nothing over calling OpenBLAS directly. */
    static cdc_openblas_sgemm_fn openblas;
    cdc_openblas_sgemm_fn sgemm = __atomic_load_n(&openblas, __ATOMIC_ACQUIRE);
    if (__builtin_expect(!sgemm, 0)) {
        sgemm = cdc__blas_openblas_sgemm();
        if (!sgemm) {
            CDC_LOG_ERRORF("cdcgemm: OpenBLAS unavailable: %s", cdc_last_error());
            return;
        }
        __atomic_store_n(&openblas, sgemm, __ATOMIC_RELEASE);
    }
    sgemm(col_major ? 102 : 101, ta ? 112 : 111, tb ? 112 : 111, m, n, k, alpha, a, lda, b,
          ldb, beta, c, ldc);
}

/* 0 = N, 1 = T or C (real), -1 = invalid; case-insensitive as LSAME. */
static inline int fortran_trans(char t)
{
    if (t == 'N' || t == 'n')
        return 0;
    if (t == 'T' || t == 't' || t == 'C' || t == 'c')
        return 1;
    return -1;
}

void sgemm_(const char *transa, const char *transb, const int *m, const int *n,
            const int *k, const float *alpha, const float *a, const int *lda,
            const float *b, const int *ldb, const float *beta, float *c, const int *ldc,
            size_t transa_len, size_t transb_len)
{
    (void) transa_len;
    (void) transb_len;
    int ta = fortran_trans(*transa), tb = fortran_trans(*transb);
    int nrowa = ta == 0 ? *m : *k, nrowb = tb == 0 ? *k : *n;
    /* Reference sgemm.f: the first failing check in this order wins. */
    int info = 0;
    if (ta < 0)
        info = 1;
    else if (tb < 0)
        info = 2;
    else if (*m < 0)
        info = 3;
    else if (*n < 0)
        info = 4;
    else if (*k < 0)
        info = 5;
    else if (*lda < cdc__blas_max1(nrowa))
        info = 8;
    else if (*ldb < cdc__blas_max1(nrowb))
        info = 10;
    else if (*ldc < cdc__blas_max1(*m))
        info = 13;
    if (__builtin_expect(info != 0, 0)) {
        cdc__blas_xerbla("SGEMM ", info);
        return;
    }
    if (*m == 0 || *n == 0 || ((*alpha == 0.0f || *k == 0) && *beta == 1.0f))
        return;
    gemm_dispatch(1, ta, tb, *m, *n, *k, *alpha, a, *lda, b, *ldb, *beta, c, *ldc);
}

/* The reference CBLAS's check of arguments that failed the fast test: the
   first bad one in reference order, reported with its number. */
__attribute__((noinline, cold)) static void cblas_report(int layout, int trans_a,
                                                          int trans_b, int m, int n, int k,
                                                          int lda, int ldb, int ldc)
{
    if (layout != ROW_MAJOR && layout != COL_MAJOR) {
        cdc__blas_cblas_xerbla("cblas_sgemm", 1, "layout", layout);
        return;
    }
    if (trans_a != NO_TRANS && trans_a != TRANS && trans_a != CONJ_TRANS) {
        cdc__blas_cblas_xerbla("cblas_sgemm", 2, "TransA", trans_a);
        return;
    }
    if (trans_b != NO_TRANS && trans_b != TRANS && trans_b != CONJ_TRANS) {
        cdc__blas_cblas_xerbla("cblas_sgemm", 3, "TransB", trans_b);
        return;
    }
    /* The reference CBLAS hands the rest to Fortran sgemm (info + 1); in
       row-major it calls it with the operands swapped (Cᵀ = Bᵀ·Aᵀ), so the
       order and the numbers are those of the swapped call. */
    int row = layout == ROW_MAJOR;
    int ta = trans_a != NO_TRANS, tb = trans_b != NO_TRANS;
    int d1 = row ? n : m, d2 = row ? m : n;
    int t1 = row ? tb : ta, t2 = row ? ta : tb;
    int ld1 = row ? ldb : lda, ld2 = row ? lda : ldb;
    if (d1 < 0)
        cdc__blas_cblas_xerbla("cblas_sgemm", 4, row ? "N" : "M", d1);
    else if (d2 < 0)
        cdc__blas_cblas_xerbla("cblas_sgemm", 5, row ? "M" : "N", d2);
    else if (k < 0)
        cdc__blas_cblas_xerbla("cblas_sgemm", 6, "K", k);
    else if (ld1 < cdc__blas_max1(t1 == 0 ? d1 : k))
        cdc__blas_cblas_xerbla("cblas_sgemm", 9, row ? "ldb" : "lda", ld1);
    else if (ld2 < cdc__blas_max1(t2 == 0 ? k : d2))
        cdc__blas_cblas_xerbla("cblas_sgemm", 11, row ? "lda" : "ldb", ld2);
    else if (ldc < cdc__blas_max1(d1))
        cdc__blas_cblas_xerbla("cblas_sgemm", 14, "ldc", ldc);
}

void cblas_sgemm(int layout, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c,
                 int ldc)
{
    /* One branch for all the checks; the cold path finds which one failed. */
    int row = layout == ROW_MAJOR;
    int ta = trans_a != NO_TRANS, tb = trans_b != NO_TRANS;
    int a_ld = row ? (ta ? m : k) : (ta ? k : m);
    int b_ld = row ? (tb ? k : n) : (tb ? n : k);
    int valid = (row | (layout == COL_MAJOR)) &
                ((unsigned) trans_a - NO_TRANS <= CONJ_TRANS - NO_TRANS) &
                ((unsigned) trans_b - NO_TRANS <= CONJ_TRANS - NO_TRANS) & (m >= 0) &
                (n >= 0) & (k >= 0) & (lda >= cdc__blas_max1(a_ld)) &
                (ldb >= cdc__blas_max1(b_ld)) & (ldc >= cdc__blas_max1(row ? n : m));
    if (__builtin_expect(!valid, 0)) {
        cblas_report(layout, trans_a, trans_b, m, n, k, lda, ldb, ldc);
        return;
    }
    if (m == 0 || n == 0 || ((alpha == 0.0f || k == 0) && beta == 1.0f))
        return;
    gemm_dispatch(!row, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
