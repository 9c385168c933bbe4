/* gemm_operands.c - row-major views of a GEMM call, packing, the C epilogue. */
#include "gemm_operands.h"

#include <string.h>

void cdc__operand_pack(const cdc_operand_t *op, float *dst)
{
    int64_t rows = op->rows, cols = op->k, ld = op->ld;
    const float *src = op->src;
    if (!op->transposed) {
        for (int64_t i = 0; i < rows; i++)
            memcpy(dst + i * cols, src + i * ld, (size_t) cols * sizeof(float));
        return;
    }
    /* Blocked transpose keeps both sides in cache. */
    enum { TILE = 32 };
    for (int64_t i0 = 0; i0 < rows; i0 += TILE)
        for (int64_t j0 = 0; j0 < cols; j0 += TILE)
            for (int64_t i = i0; i < rows && i < i0 + TILE; i++)
                for (int64_t j = j0; j < cols && j < j0 + TILE; j++)
                    dst[i * cols + j] = src[j * ld + i];
}

void cdc__gemm_operands(int col_major, int trans_a, int trans_b, int64_t m, int64_t n,
                        int64_t k, const float *a, int64_t lda, const float *b,
                        int64_t ldb, cdc_operand_t *op_a, cdc_operand_t *op_bt)
{
    if (col_major) {
        *op_a = (cdc_operand_t){b, n, k, ldb, trans_b != 0};
        *op_bt = (cdc_operand_t){a, m, k, lda, trans_a == 0};
    } else {
        *op_a = (cdc_operand_t){a, m, k, lda, trans_a != 0};
        *op_bt = (cdc_operand_t){b, n, k, ldb, trans_b == 0};
    }
}

void cdc__gemm_store(float *c, int64_t ldc, const float *t, int64_t m, int64_t n,
                     float alpha, float beta)
{
    for (int64_t i = 0; i < m; i++) {
        float *row = c + i * ldc;
        const float *trow = t + i * n;
        if (beta == 0.0f)
            for (int64_t j = 0; j < n; j++)
                row[j] = alpha * trow[j];
        else
            for (int64_t j = 0; j < n; j++)
                row[j] = alpha * trow[j] + beta * row[j];
    }
}
