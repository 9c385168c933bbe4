/* gemm_operands.h - a GEMM call as row-major views: the canonical operands
   T = A'·Bt'ᵀ, packing them, and storing alpha·T + beta·C back. Shared by
   cdc_sgemm and the BLAS entry points. */
#ifndef CDC_GEMM_OPERANDS_H_INCLUDED
#define CDC_GEMM_OPERANDS_H_INCLUDED

#include <stdint.h>

/* A rows x k operand as the caller stores it: element (i, j) is
   src[i * ld + j], or src[j * ld + i] when transposed. */
typedef struct {
    const float *src;
    int64_t rows, k, ld;
    int transposed;
} cdc_operand_t;

/* dst (rows x k, row-major, contiguous) = the elements of op. */
void cdc__operand_pack(const cdc_operand_t *op, float *dst);

/* The canonical operands of C = op(A)·op(B) (m x n, inner k): T = A'·Bt'ᵀ with
   A' = op(A) (T's rows x k) and Bt' = op(B)ᵀ (T's columns x k), as views of the
   caller's memory. A column-major call is the row-major Cᵀ = op(B)ᵀ·op(A)ᵀ: A
   and B swap roles and T is Cᵀ (n x m). */
void cdc__gemm_operands(int col_major, int trans_a, int trans_b, int64_t m, int64_t n,
                        int64_t k, const float *a, int64_t lda, const float *b,
                        int64_t ldb, cdc_operand_t *op_a, cdc_operand_t *op_bt);

/* C (m x n row-major view, ldc) = alpha·T + beta·C for T (m x n, contiguous);
   beta = 0 overwrites C, so NaN already in C does not survive (BLAS rule). */
void cdc__gemm_store(float *c, int64_t ldc, const float *t, int64_t m, int64_t n,
                     float alpha, float beta);

#endif
