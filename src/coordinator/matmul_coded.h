/* matmul_coded.h - coded T = A · Btᵀ with one operand cut into coded row blocks. */
#ifndef CDC_MATMUL_CODED_H_INCLUDED
#define CDC_MATMUL_CODED_H_INCLUDED

#include "coded_call.h"

typedef enum {
    CDC_SHARD_A, /* blocks of A's rows: shard results are row blocks of T    */
    CDC_SHARD_BT /* blocks of Bt's rows: shard results are column blocks of T */
} cdc_shard_side_t;

/* T (m x ncols, ldt) = A (m x k) · Bt (ncols x k)ᵀ, all row-major. set holds the
   sharded operand (A when side is CDC_SHARD_A, Bt otherwise) cut and encoded by
   cdc__shard_set_new with the same code; the other operand goes whole to every
   shard. set_key / whole_key are nonzero when that operand is a cached weight
   matrix (workers keep it; it is not sent per call). The parity check's scale
   for the whole operand (its row norms) is computed in the call, and only when
   the parity check or the accuracy guard runs. */
int cdc__matmul_coded(cdc_context_t *context, const cdc_code_t *code,
                      cdc_shard_side_t side, const cdc_shard_set_t *set, uint64_t set_key,
                      uint64_t whole_key, const float *a, int64_t m, const float *bt,
                      int64_t ncols, int64_t k, float *t, int64_t ldt);

/* The same with the whole operand's row norms given (cached with weights);
   NULL skips the parity check. */
int cdc__matmul_coded_normed(cdc_context_t *context, const cdc_code_t *code,
                             cdc_shard_side_t side, const cdc_shard_set_t *set,
                             uint64_t set_key, uint64_t whole_key, const float *a, int64_t m,
                             const float *bt, int64_t ncols, int64_t k,
                             const double *whole_norms, float *t, int64_t ldt);

#endif
