/* operand_cache.h - which GEMM operand is the weights: the one that repeats.
 *
 * A BLAS call does not say which operand is the weight matrix. The cache
 * remembers operands by where they are (address, shape, leading dimension,
 * transposition) and what they hold (a 64-bit hash of every element of the
 * view, padding excluded). An operand seen a second time with the same
 * descriptor and the same hash is the weights: it is packed into a private
 * copy and, per plan (code, n and the data blocks' lengths), cut and
 * parity-encoded once; later calls reuse that.
 * A changed operand (any element) gets a new hash, so its stale copy is
 * dropped instead of used. Not thread-safe: the caller serialises.
 *
 * The packed copy and its shard set carry holds (hold.h): a demoted or
 * evicted entry retires them, and the memory goes once the last zero-copy
 * send or other holder lets go (its bytes leave the cache's count at once). */
#ifndef CDC_OPERAND_CACHE_H_INCLUDED
#define CDC_OPERAND_CACHE_H_INCLUDED

#include "encoded_weights.h"
#include "gemm_operands.h"

#include <stddef.h>
#include <stdint.h>

/* 64-bit hash of the rows x k elements of op (never the padding between
   lines) and of its shape. A difference in any single 8-byte word always
   changes the hash (every step is a bijection of the lane state); other
   differences collide with probability about 2^-64. Never 0. */
uint64_t cdc__operand_hash(const cdc_operand_t *op);

typedef struct {
    cdc_operand_t desc;   /* where the operand is (the caller's memory)     */
    uint64_t hash;        /* what it held when last seen                    */
    uint64_t key;         /* names the packed copy on workers; 0 = candidate */
    float *packed;        /* rows x k private copy once promoted: the
                             single part of a cdc_row_parts_t            */
    cdc_hold_t *packed_hold; /* that parts' hold: keeps packed alive for
                             its sets and sends                         */
    cdc_encoded_weights_t encoded; /* packed's encodings (row blocks +
                             parity per plan, a parity layout's, the row
                             norms); they hold packed_hold              */
    size_t encoded_bytes; /* of them, as the cache's count has them       */
    int whole_ready;      /* packed was handed out whole (counted once)     */
    uint64_t last_use;    /* LRU clock                                      */
    int in_use;           /* slot holds an operand (slots never move)       */
    int repeats;          /* calls in a row that found it unchanged         */
} cdc_operand_entry_t;

typedef struct cdc_operand_cache cdc_operand_cache_t;

/* A cache of at most max_entries operands whose packed copies and shard sets
   take at most max_bytes together (the entry in use may exceed it alone).
   Caller owns *cache_p and destroys it with cdc__operand_cache_destroy. */
int cdc__operand_cache_new(int max_entries, size_t max_bytes, cdc_operand_cache_t **cache_p);
/* Accepts NULL and *NULL; nulls *cache_p. */
void cdc__operand_cache_destroy(cdc_operand_cache_t **cache_p);

/* Which of a call's operands is the weights. *side is 0 (neither: both are
   recorded as candidates), 1 (a) or 2 (bt); when nonzero *entry holds the
   weights' packed copy, valid until the next call on the cache. An operand is
   the weights when its descriptor and hash match an entry (a candidate seen
   before, or an entry already promoted); a promoted entry wins over a
   candidate, a over bt when both are promoted. When both are unpromoted
   candidates that repeat (the same input passed twice), the call waits for
   the one that keeps repeating; after 3 such calls in a row, a is taken.
   Returns CDC_OK or CDC_ENOMEM. */
int cdc__operand_cache_match(cdc_operand_cache_t *cache, const cdc_operand_t *a,
                             const cdc_operand_t *bt, int *side,
                             cdc_operand_entry_t **entry);

/* After a call encoded something of the entry (its `encoded` store,
   encoded_weights.h): its bytes into the cache's count, and other entries
   evicted if the cache is over its budget. */
void cdc__operand_entry_settle(cdc_operand_cache_t *cache, cdc_operand_entry_t *entry);

/* Counters: entries held, bytes of packed copies and shard sets. */
void cdc__operand_cache_usage(const cdc_operand_cache_t *cache, int *entries, size_t *bytes);

#endif
