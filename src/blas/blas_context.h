/* blas_context.h - the process-wide state behind the BLAS entry points. */
#ifndef CDC_BLAS_CONTEXT_H_INCLUDED
#define CDC_BLAS_CONTEXT_H_INCLUDED

#include "cdcgemm.h"

#include <stdint.h>

/* Default CDCGEMM_MIN_FLOPS (2·M·N·K) when the variable is unset or
   config.min_flops < 0; chosen by measurement (docs/drop-in.md). */
#define CDC_BLAS_MIN_FLOPS_DEFAULT 2.0e8
/* The same under a measured plan (CDCGEMM_PLAN=auto, the default, or
   profiled), where the latency model chooses between here and the workers:
   a floor only below which planning is not worth its own cost (a call of
   2e6 flops takes well under a ms here, less than any worker's round trip).
   Not for matrix-vector products (sgemv, an sgemm with M or N = 1): the
   drop-in hashes the matrix every call, as long as computing it here takes,
   so the model would be asked only after that cost was paid; they keep
   CDC_BLAS_MIN_FLOPS_DEFAULT (docs/drop-in.md). */
#define CDC_BLAS_MIN_FLOPS_PLANNED 2.0e6

/* A BLAS call accepts a shard rebuilt from parity only where its error
   amplification (the sum of the used shards' |a||b| over its own) is at most
   this times sqrt(k): the rebuilt error, ~sqrt(k) eps per shard, then stays
   within the standard GEMM bound k eps |a||b|. Otherwise the shard is
   computed locally (context decode_guard). */
#define CDC_BLAS_DECODE_GUARD 1.0

/* The threshold below which BLAS calls run on local OpenBLAS. The CDCGEMM_*
   environment is read once (a bad value is reported on stderr once and every
   call then stays local); afterwards this is a plain load. Thread-safe. */
double cdc__blas_min_flops(void);

/* The threshold of matrix-vector products (above): CDCGEMM_MIN_FLOPS when
   set, else CDC_BLAS_MIN_FLOPS_DEFAULT under every plan. */
double cdc__blas_min_flops_vector(void);

/* The same, inlined into the entry points: after the first call, one load of
   a flag and one of the value (no call). */
extern int cdc__blas_min_flops_ready;
extern double cdc__blas_min_flops_value, cdc__blas_min_flops_vector_value;
static inline double cdc__blas_min_flops_fast(void)
{
    if (__builtin_expect(__atomic_load_n(&cdc__blas_min_flops_ready, __ATOMIC_ACQUIRE), 1))
        return cdc__blas_min_flops_value;
    return cdc__blas_min_flops();
}
static inline double cdc__blas_min_flops_vector_fast(void)
{
    if (__builtin_expect(__atomic_load_n(&cdc__blas_min_flops_ready, __ATOMIC_ACQUIRE), 1))
        return cdc__blas_min_flops_vector_value;
    return cdc__blas_min_flops_vector();
}

/* C = alpha·op(A)·op(B) + beta·C through the coded path on the process-wide
   context, created from the CDCGEMM_* environment on first use. Arguments are
   valid BLAS arguments (checked by the caller) with m, n, k >= 1 and
   alpha != 0; col_major selects the layout, trans_* are nonzero for
   transposed. The operand that repeats across calls is treated as cached
   weights (operand_cache.h). Returns CDC_OK with C written, or a status with
   C untouched (the caller then computes locally). Thread-safe: coded calls
   are serialised. */
int cdc__blas_context_sgemm(int col_major, int trans_a, int trans_b, int64_t m,
                            int64_t n, int64_t k, float alpha, const float *a,
                            int64_t lda, const float *b, int64_t ldb, float beta,
                            float *c, int64_t ldc);

/* Counters of the process-wide context; CDC_ESTATE when none exists yet. */
int cdc__blas_context_stats(cdc_stats_t *stats);

/* Tests: the next coded call on the process-wide context (created now if
   needed) treats the shards in mask as lost (cdc_context_erase_next). */
int cdc__blas_context_erase_next(uint64_t mask);

/* Destroy the process-wide context now (writing CDCGEMM_STATS); the next
   coded call creates a fresh one. Also runs at exit. */
void cdc__blas_context_shutdown(void);

#endif
