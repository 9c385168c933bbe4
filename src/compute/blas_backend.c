/* blas_backend.c - OpenBLAS resolved by its own handle, once.
 *
 * Why not call cblas_sgemm directly: the library exports cblas_sgemm/sgemm_
 * itself (drop-in use), so a direct call could bind back to our own symbol,
 * and dlsym(RTLD_NEXT) finds nothing when the host loaded its BLAS from a
 * library dlopen'ed RTLD_LOCAL. A private handle to libopenblas avoids both. */
#include "blas_backend.h"

#include "error.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

enum { CBLAS_ROW_MAJOR = 101, CBLAS_COL_MAJOR = 102, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

typedef void (*set_threads_fn)(int threads);

static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;
static cdc_openblas_sgemm_fn openblas_sgemm;
static cdc_openblas_sgemv_fn openblas_sgemv;
static set_threads_fn openblas_set_threads;
static char resolve_error[256];

static void resolve_openblas(void)
{
    static const char *const candidates[] = {"libopenblas.so.0", "libopenblas.so"};
    void *handle = NULL;
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates && !handle; i++)
        handle = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        snprintf(resolve_error, sizeof resolve_error, "dlopen libopenblas.so.0: %s",
                 why ? why : "not found");
        return;
    }
    /* The handle is kept for the life of the process: OpenBLAS owns threads. */
    *(void **) &openblas_sgemm = dlsym(handle, "cblas_sgemm");
    *(void **) &openblas_sgemv = dlsym(handle, "cblas_sgemv");
    *(void **) &openblas_set_threads = dlsym(handle, "openblas_set_num_threads");
    if (!openblas_sgemm || !openblas_sgemv) {
        openblas_sgemm = NULL;
        snprintf(resolve_error, sizeof resolve_error,
                 "libopenblas.so.0 has no cblas_sgemm/cblas_sgemv");
    }
}

int cdc__blas_ready(void)
{
    pthread_once(&resolve_once, resolve_openblas);
    if (!openblas_sgemm)
        return cdc__fail(CDC_EBLAS, "%s", resolve_error);
    return CDC_OK;
}

static void blas_sgemm(int layout, int trans_a, int trans_b, int64_t m, int64_t n,
                       int64_t k, float alpha, const float *a, int64_t lda,
                       const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    pthread_once(&resolve_once, resolve_openblas);
    /* Callers validate dimensions (int range) before reaching here. */
    openblas_sgemm(layout, trans_a ? CBLAS_TRANS : CBLAS_NO_TRANS,
                   trans_b ? CBLAS_TRANS : CBLAS_NO_TRANS, (int) m, (int) n, (int) k,
                   alpha, a, (int) lda, b, (int) ldb, beta, c, (int) ldc);
}

void cdc__blas_sgemm_rm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                        float alpha, const float *a, int64_t lda, const float *b,
                        int64_t ldb, float beta, float *c, int64_t ldc)
{
    blas_sgemm(CBLAS_ROW_MAJOR, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
               c, ldc);
}

void cdc__blas_sgemm_cm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                        float alpha, const float *a, int64_t lda, const float *b,
                        int64_t ldb, float beta, float *c, int64_t ldc)
{
    blas_sgemm(CBLAS_COL_MAJOR, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
               c, ldc);
}

void cdc__blas_sgemv_rm(int64_t m, int64_t n, const float *a, int64_t lda, const float *x,
                        float *y)
{
    pthread_once(&resolve_once, resolve_openblas);
    openblas_sgemv(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, (int) m, (int) n, 1.0f, a, (int) lda, x,
                   1, 0.0f, y, 1);
}

cdc_openblas_sgemm_fn cdc__blas_openblas_sgemm(void)
{
    pthread_once(&resolve_once, resolve_openblas);
    return openblas_sgemm;
}

cdc_openblas_sgemv_fn cdc__blas_openblas_sgemv(void)
{
    pthread_once(&resolve_once, resolve_openblas);
    return openblas_sgemm ? openblas_sgemv : NULL;
}

void cdc__blas_set_threads(int threads)
{
    pthread_once(&resolve_once, resolve_openblas);
    if (openblas_set_threads)
        openblas_set_threads(threads);
}
