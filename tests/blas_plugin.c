/* blas_plugin.c - a module that does GEMMs through cblas_sgemm, as a Python
   extension does; blas_dlopen_host loads it with RTLD_LOCAL. */
#include <cblas.h>

/* C (m x n) = A (m x k) · B (k x n), row-major. */
void blas_plugin_gemm(int m, int n, int k, const float *a, const float *b, float *c)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f,
                c, n);
}
