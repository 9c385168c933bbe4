/* hash.h - the library's one 64-bit (non-cryptographic) hash.
 *
 * Used for content keys (a weight matrix is named on workers by the hash of
 * its floats and shape), for noticing that a BLAS operand changed between
 * calls, and for folding small values together. Four independent lanes keep
 * the multiplier pipelines busy: one lane alone is latency bound, and the
 * BLAS entry points hash every repeated operand on every call. */
#ifndef CDC_HASH_H_INCLUDED
#define CDC_HASH_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

enum { CDC_HASH_LANES = 4 };

/* A hash in progress. Caller allocates; cdc__hash_init fills it. */
typedef struct {
    uint64_t lanes[CDC_HASH_LANES];
} cdc_hash_t;

/* Start a hash; seed separates uses (and can carry a shape). */
void cdc__hash_init(cdc_hash_t *hash, uint64_t seed);

/* Feed size bytes. Feeding data in pieces gives the same result as feeding
   it whole only when every piece but the last is a multiple of 32 bytes; a
   strided matrix fed row by row is still a deterministic function of its
   rows. */
void cdc__hash_update(cdc_hash_t *hash, const void *data, size_t size);

/* The 64-bit result, never 0 (0 means "no key" on the wire). */
uint64_t cdc__hash_final(const cdc_hash_t *hash, uint64_t salt);

/* One-shot hash of size bytes. */
uint64_t cdc__hash_bytes(const void *data, size_t size, uint64_t seed);

/* Fold the value v into h (a strong 64-bit finaliser: every bit of v moves
   about half of the result's bits). */
uint64_t cdc__hash_mix(uint64_t h, uint64_t v);

#endif
