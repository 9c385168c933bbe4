/* weight_cache.h - the worker's weight matrices by key: hash index, LRU, true byte budget.
 *
 * Not thread-safe: the compute thread owns it. */
#ifndef CDC_WEIGHT_CACHE_H_INCLUDED
#define CDC_WEIGHT_CACHE_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#define CDC_WEIGHT_CACHE_DEFAULT_ENTRIES 65536

/* A cache key. content is the sender's key for the matrix (the header's
   a_key: a hash of its floats and shape, never 0). scope says whose it is:
   the worker uses a hash of the peer's CURVE key, or 0 (shared) for peers
   without one (compute.c), so one peer can neither read nor replace
   another's matrices. Both take part in the hash and the comparison. */
typedef struct {
    uint64_t content;
    uint64_t scope;
} cdc_weight_key_t;

/* What an entry holds: a rows x k float matrix (data, 4-byte aligned) whose
   storage belongs to owner, released by release(owner) when the entry goes.
   alloc_bytes is what that storage really costs (allocator rounding and
   bookkeeping included), the figure the budget counts. */
typedef struct {
    int64_t rows, k;
    const float *data;
    size_t alloc_bytes;
    void *owner;
    void (*release)(void *owner);
} cdc_weight_value_t;

typedef struct {
    size_t count;       /* entries held                                  */
    size_t bytes;       /* charged: entry costs + index_bytes            */
    size_t index_bytes; /* the hash index's bucket array                 */
    size_t max_bytes, max_entries;
    size_t max_scope_bytes; /* one scope's entries (default max_bytes)   */
    uint64_t hits, misses;
    uint64_t inserted;
    uint64_t evictions; /* entries removed to make room                  */
    uint64_t duplicates; /* puts of an identical matrix under a held key */
    uint64_t refused;   /* puts refused: too large, or a different matrix
                           under a held key                              */
} cdc_weight_cache_stats_t;

typedef struct cdc_weight_cache cdc_weight_cache_t;

/* An empty cache bounded by max_bytes (everything charged, see
   cdc__weight_cache_entry_cost) and max_entries (0: the default, 65536).
   CDC_EINVAL when max_bytes is 0. Caller owns *cache_p and must destroy it
   with cdc__weight_cache_destroy. */
int cdc__weight_cache_new(size_t max_bytes, size_t max_entries, cdc_weight_cache_t **cache_p);

/* Release every entry (their release functions run); accepts NULL and *NULL;
   nulls *cache_p. */
void cdc__weight_cache_destroy(cdc_weight_cache_t **cache_p);

/* Bound what the entries of any one scope may cost (entry costs, the index
   not included): 0 or more than max_bytes means max_bytes. Entries already
   held stay until the next put into their scope. */
void cdc__weight_cache_limit_scope(cdc_weight_cache_t *self, size_t max_scope_bytes);

/* What the entries of scope cost now (0 when it holds none). */
size_t cdc__weight_cache_scope_bytes(const cdc_weight_cache_t *self, uint64_t scope);

/* Keep *value under key, evicting until the entry fits every bound: first
   the least recently used entries of key.scope while that scope would
   exceed max_scope_bytes, then while the cache would exceed max_entries the
   least recently used of the scope with the most entries (key.scope's on a
   tie), then the least recently used of any scope while the cache would
   exceed max_bytes. On CDC_OK the cache owns value->owner. A key
   already held:
   - with an identical matrix (shape and every byte): the entry is kept and
     refreshed, value->owner released at once, CDC_OK (a duplicate);
   - with a different matrix: refused, CDC_EPROTO, nothing changes. A key
     names content, so this is a collision or a misbehaving sender; letting
     it through would change what other tasks under that key compute.
   An entry costing more than max_bytes or max_scope_bytes on its own is
   refused with CDC_ENOMEM (the text naming --max-memory or
   --max-peer-memory) and nothing is evicted. On any error the caller still owns
   value->owner. O(1) expected (plus the comparison for a duplicate). */
int cdc__weight_cache_put(cdc_weight_cache_t *self, cdc_weight_key_t key,
                          const cdc_weight_value_t *value);

/* The value under key, made most recently used; NULL when not held. The
   pointer is valid until the next put or destroy. O(1) expected. */
const cdc_weight_value_t *cdc__weight_cache_get(cdc_weight_cache_t *self, cdc_weight_key_t key);

/* What one entry holding an allocation of alloc_bytes is charged: the
   allocation and the entry record, as the allocator rounds them. The index
   (a bucket array, at most 2 slots per entry it was sized for) is charged
   as a whole, so stats.bytes = sum of entry costs + stats.index_bytes. */
size_t cdc__weight_cache_entry_cost(size_t alloc_bytes);

void cdc__weight_cache_stats(const cdc_weight_cache_t *self, cdc_weight_cache_stats_t *stats);

#endif
