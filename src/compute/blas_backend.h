/* blas_backend.h - every local GEMM goes to OpenBLAS through its own handle. */
#ifndef CDC_BLAS_BACKEND_H_INCLUDED
#define CDC_BLAS_BACKEND_H_INCLUDED

#include <stdint.h>

/* Row-major single-precision GEMM on OpenBLAS:
   C (m x n, ldc) = alpha * op(A) * op(B) + beta * C, trans_* nonzero = transposed.
   Resolved once from libopenblas.so.0 opened RTLD_LOCAL, so it never reaches the
   library's own BLAS entry points. Thread-safe. */
void cdc__blas_sgemm_rm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                        float alpha, const float *a, int64_t lda, const float *b,
                        int64_t ldb, float beta, float *c, int64_t ldc);

/* Column-major variant with CBLAS/Fortran semantics (used by the BLAS entry points). */
void cdc__blas_sgemm_cm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                        float alpha, const float *a, int64_t lda, const float *b,
                        int64_t ldb, float beta, float *c, int64_t ldc);

/* Row-major y (m) = A (m x n, lda) · x (n), on OpenBLAS. GEMMs with one row
   or one column go here: OpenBLAS's sgemm is several times slower on them. */
void cdc__blas_sgemv_rm(int64_t m, int64_t n, const float *a, int64_t lda, const float *x,
                        float *y);

/* OpenBLAS's own cblas_sgemm (CBLAS layout/transpose codes 101/102, 111/112),
   resolved once; NULL when OpenBLAS could not be loaded. For the hottest path
   only, the BLAS entry points' local calls: one indirect call, no wrapper. */
typedef void (*cdc_openblas_sgemm_fn)(int layout, int trans_a, int trans_b, int m, int n,
                                      int k, float alpha, const float *a, int lda,
                                      const float *b, int ldb, float beta, float *c,
                                      int ldc);
cdc_openblas_sgemm_fn cdc__blas_openblas_sgemm(void);

/* OpenBLAS's own cblas_sgemv, the same way (the BLAS entry points' local
   matrix-vector calls). */
typedef void (*cdc_openblas_sgemv_fn)(int layout, int trans, int m, int n, float alpha,
                                      const float *a, int lda, const float *x, int incx,
                                      float beta, float *y, int incy);
cdc_openblas_sgemv_fn cdc__blas_openblas_sgemv(void);

/* Set OpenBLAS's thread count (workers sharing few cores use 1). */
void cdc__blas_set_threads(int threads);

/* 0 when OpenBLAS was resolved, CDC_EBLAS otherwise (detail in cdc_last_error). */
int cdc__blas_ready(void);

#endif
