/* blas_entry.h - the BLAS entry points of libcdcgemm, for the suites that
 * compile src/blas/blas_entry.c into their program (CMakeLists.txt): the
 * static archive leaves them out, and no public header declares them (a
 * program gets them from its own cblas.h). */
#ifndef CDC_TEST_BLAS_ENTRY_H_INCLUDED
#define CDC_TEST_BLAS_ENTRY_H_INCLUDED

#include <stddef.h>

void cblas_sgemm(int layout, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c,
                 int ldc);
void sgemm_(const char *transa, const char *transb, const int *m, const int *n,
            const int *k, const float *alpha, const float *a, const int *lda,
            const float *b, const int *ldb, const float *beta, float *c, const int *ldc,
            size_t transa_len, size_t transb_len);

#endif
