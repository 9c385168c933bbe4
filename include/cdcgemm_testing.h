/* cdcgemm_testing.h - test and demo hooks of cdcgemm: fault injection into the
   next coded call, where the plan's slots live, forced sizes of the data
   blocks. Not part of the stable API of cdcgemm.h (docs/abi.md): a hook may
   change or go in any minor release. */
#ifndef CDCGEMM_TESTING_H_INCLUDED
#define CDCGEMM_TESTING_H_INCLUDED

#include "cdcgemm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Erasure injection for tests and demos: the next coded call treats the shards
   whose bit is set in mask (bit i = shard i; data shards 0..n-1, parity n..n+r-1;
   in the rotated parity layout bit w = worker w's task, its data and parity
   blocks) as lost. Cleared after that call. Returns CDC_OK, or CDC_EINVAL for a NULL
   context. Thread-safe (serialised with the context's calls). */
CDC_EXPORT int cdc_context_erase_next(cdc_context_t *context, uint64_t mask);

/* Silent-corruption injection, the in-process twin of the `corrupt` fault: in
   the next coded call, one element of each arrived result whose bit is set in
   mask is changed by 1% of that result's largest magnitude. The
   parity check (config.verify) is what catches it. Cleared after that call.
   Returns CDC_OK, or CDC_EINVAL for a NULL context. Thread-safe. */
CDC_EXPORT int cdc_context_corrupt_next(cdc_context_t *context, uint64_t mask);

/* Where the plan's slots live, for tests and the planner: shard s of every
   later coded call (data 0..n-1, parity n..n+r-1) is computed on worker
   home_of_slot[s] for s < slots (distinct workers in 0..W-1), the other
   slots on the other workers in ascending order; slots 0 (home_of_slot may
   be NULL): shard s on worker s, the default. A new home gets its slot's
   weights in the background; until it holds them, a worker that does (the
   previous home) computes the shard. A call in flight is not disturbed.
   Returns CDC_OK (also for an in-process context: nothing to place), or
   CDC_EINVAL for a NULL context or a map that is not one (the message
   names the slot or worker). Thread-safe. */
CDC_EXPORT int cdc_context_set_homes(cdc_context_t *context, const int *home_of_slot,
                                     int slots);

/* Unequal data blocks on demand: every later coded call with n data shards
   cuts its operand into blocks of rows in proportion to weights[0..n-1]
   (largest remainder; each block gets at least one row when there are at
   least n rows), instead of the planner's lengths. Calls with another number
   of data shards are unaffected. n = 0 (or weights NULL) restores the
   planner. Returns CDC_OK, or CDC_EINVAL for a NULL context, n outside
   0..64 or a weight that is not finite and > 0. Thread-safe. */
CDC_EXPORT int cdc_testing_force_block_weights(cdc_context_t *context,
                                               const double *weights, int n);

#ifdef __cplusplus
}
#endif

#endif /* CDCGEMM_TESTING_H_INCLUDED */
