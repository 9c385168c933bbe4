/* weight_cache.c - a chained hash index plus an intrusive LRU list, under a byte and entry cap.
 *
 * The problem: a worker keeps every weight shard the coordinator sends, named
 * by a 64-bit content key, until memory runs short; each task looks its
 * operands up by key. The first version was an array scanned linearly for
 * every lookup, insert and eviction (200,000 small entries took 15 s to
 * insert), and it counted only payload bytes, so many small entries could
 * cost several times the --max-memory they were charged.
 *
 * The structure (Redis's dict plus its eviction order, simplified):
 * - every entry is one allocation holding the key, the value, a chain link
 *   for its hash bucket and two links for the LRU list;
 * - the index is an array of 2^b bucket heads, doubled when the entries
 *   outnumber the buckets, so chains stay ~1 long: lookup, insert and delete
 *   are O(1) expected;
 * - the LRU list runs from the most recently used (newest) to the least
 *   (oldest); get and put move an entry to the newest end, eviction takes
 *   from the oldest end: O(1).
 *
 * The invariant: bytes = index array bytes + for each entry (its record as
 * the allocator rounds it + what its matrix's allocation really costs) <=
 * max_bytes, and count <= max_entries, after every put. */
#include "weight_cache.h"

#include "error.h"
#include "footprint.h"
#include "hash.h"

#include <stdlib.h>
#include <string.h>

#define MIN_BUCKETS 16

typedef struct entry {
    cdc_weight_key_t key;
    cdc_weight_value_t value;
    size_t charge;
    struct entry *chain;         /* next in the same bucket        */
    struct entry *newer, *older; /* LRU neighbours                 */
} entry_t;

struct cdc_weight_cache {
    entry_t **buckets;
    size_t bucket_count; /* a power of two */
    entry_t *newest, *oldest;
    cdc_weight_cache_stats_t stats;
};

static size_t bucket_of(const cdc_weight_cache_t *self, cdc_weight_key_t key)
{
    return (size_t) cdc__hash_mix(key.content, key.scope) & (self->bucket_count - 1);
}

static int same_key(cdc_weight_key_t a, cdc_weight_key_t b)
{
    return a.content == b.content && a.scope == b.scope;
}

size_t cdc_weight_cache_entry_cost(size_t alloc_bytes)
{
    return cdc__alloc_footprint(sizeof(entry_t)) + alloc_bytes;
}

/* ---- the LRU list ------------------------------------------------------- */

static void lru_unlink(cdc_weight_cache_t *self, entry_t *e)
{
    if (e->newer)
        e->newer->older = e->older;
    else
        self->newest = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        self->oldest = e->newer;
    e->newer = e->older = NULL;
}

static void lru_push_newest(cdc_weight_cache_t *self, entry_t *e)
{
    e->older = self->newest;
    e->newer = NULL;
    if (self->newest)
        self->newest->newer = e;
    self->newest = e;
    if (!self->oldest)
        self->oldest = e;
}

/* ---- the index ---------------------------------------------------------- */

static entry_t *index_find(const cdc_weight_cache_t *self, cdc_weight_key_t key)
{
    for (entry_t *e = self->buckets[bucket_of(self, key)]; e; e = e->chain)
        if (same_key(e->key, key))
            return e;
    return NULL;
}

static void index_insert(cdc_weight_cache_t *self, entry_t *e)
{
    entry_t **head = &self->buckets[bucket_of(self, e->key)];
    e->chain = *head;
    *head = e;
}

static void index_remove(cdc_weight_cache_t *self, entry_t *e)
{
    entry_t **link = &self->buckets[bucket_of(self, e->key)];
    while (*link != e)
        link = &(*link)->chain;
    *link = e->chain;
}

/* Double the bucket array and rehash; charged to bytes. */
static int index_grow(cdc_weight_cache_t *self)
{
    size_t count = self->bucket_count * 2;
    entry_t **grown = calloc(count, sizeof *grown);
    if (!grown)
        return cdc__fail(CDC_ENOMEM, "weight cache index of %zu buckets", count);
    entry_t **old = self->buckets;
    size_t old_count = self->bucket_count;
    self->buckets = grown;
    self->bucket_count = count;
    for (size_t b = 0; b < old_count; b++)
        for (entry_t *e = old[b], *next; e; e = next) {
            next = e->chain;
            index_insert(self, e);
        }
    free(old);
    size_t index_bytes = cdc__alloc_footprint(count * sizeof *grown);
    self->stats.bytes += index_bytes - self->stats.index_bytes;
    self->stats.index_bytes = index_bytes;
    return CDC_OK;
}

/* ---- entries ------------------------------------------------------------ */

static void entry_release(cdc_weight_cache_t *self, entry_t *e)
{
    index_remove(self, e);
    lru_unlink(self, e);
    self->stats.count--;
    self->stats.bytes -= e->charge;
    if (e->value.release)
        e->value.release(e->value.owner);
    free(e);
}

static void evict_oldest(cdc_weight_cache_t *self)
{
    entry_release(self, self->oldest);
    self->stats.evictions++;
}

int cdc_weight_cache_new(size_t max_bytes, size_t max_entries, cdc_weight_cache_t **cache_p)
{
    *cache_p = NULL;
    if (max_bytes == 0)
        return cdc__fail(CDC_EINVAL, "weight cache: max_bytes is 0");
    cdc_weight_cache_t *self = calloc(1, sizeof *self);
    if (!self)
        return cdc__fail(CDC_ENOMEM, "weight cache");
    self->bucket_count = MIN_BUCKETS / 2;
    self->buckets = calloc(self->bucket_count, sizeof *self->buckets);
    self->stats.max_bytes = max_bytes;
    self->stats.max_entries = max_entries ? max_entries : CDC_WEIGHT_CACHE_DEFAULT_ENTRIES;
    if (!self->buckets || index_grow(self) != CDC_OK) {
        free(self->buckets);
        free(self);
        return cdc__fail(CDC_ENOMEM, "weight cache");
    }
    *cache_p = self;
    return CDC_OK;
}

void cdc_weight_cache_destroy(cdc_weight_cache_t **cache_p)
{
    if (!cache_p || !*cache_p)
        return;
    cdc_weight_cache_t *self = *cache_p;
    while (self->oldest)
        entry_release(self, self->oldest);
    free(self->buckets);
    free(self);
    *cache_p = NULL;
}

const cdc_weight_value_t *cdc_weight_cache_get(cdc_weight_cache_t *self, cdc_weight_key_t key)
{
    entry_t *e = index_find(self, key);
    if (!e) {
        self->stats.misses++;
        return NULL;
    }
    self->stats.hits++;
    lru_unlink(self, e);
    lru_push_newest(self, e);
    return &e->value;
}

/* A put under a key already held: identical matrix kept, another refused. */
static int put_existing(cdc_weight_cache_t *self, entry_t *e, const cdc_weight_value_t *value)
{
    const cdc_weight_value_t *held = &e->value;
    size_t bytes = (size_t) value->rows * (size_t) value->k * sizeof(float);
    if (held->rows != value->rows || held->k != value->k ||
        (held->data != value->data && memcmp(held->data, value->data, bytes) != 0)) {
        self->stats.refused++;
        return cdc__fail(CDC_EPROTO,
                         "weights %016llx: the key already names a different %lld x %lld "
                         "matrix; refused",
                         (unsigned long long) e->key.content, (long long) held->rows,
                         (long long) held->k);
    }
    lru_unlink(self, e);
    lru_push_newest(self, e);
    self->stats.duplicates++;
    if (value->release && value->owner != held->owner)
        value->release(value->owner);
    return CDC_OK;
}

int cdc_weight_cache_put(cdc_weight_cache_t *self, cdc_weight_key_t key,
                         const cdc_weight_value_t *value)
{
    entry_t *existing = index_find(self, key);
    if (existing)
        return put_existing(self, existing, value);
    size_t charge = cdc_weight_cache_entry_cost(value->alloc_bytes);
    if (charge + self->stats.index_bytes > self->stats.max_bytes) {
        self->stats.refused++;
        return cdc__fail(CDC_ENOMEM,
                         "weights %016llx: %zu bytes (with overhead) exceed the cache's "
                         "--max-memory %zu",
                         (unsigned long long) key.content, charge, self->stats.max_bytes);
    }
    entry_t *e = calloc(1, sizeof *e);
    if (!e)
        return cdc__fail(CDC_ENOMEM, "weight cache entry");
    /* Grow the index first: its bytes count toward the bound too. */
    if (self->stats.count + 1 > self->bucket_count && index_grow(self) != CDC_OK) {
        free(e);
        return CDC_ENOMEM;
    }
    while (self->oldest && (self->stats.count + 1 > self->stats.max_entries ||
                            self->stats.bytes + charge > self->stats.max_bytes))
        evict_oldest(self);
    if (self->stats.bytes + charge > self->stats.max_bytes) { /* the grown index */
        free(e);
        self->stats.refused++;
        return cdc__fail(CDC_ENOMEM, "weights %016llx: %zu bytes do not fit beside the "
                         "cache's index", (unsigned long long) key.content, charge);
    }
    e->key = key;
    e->value = *value;
    e->charge = charge;
    index_insert(self, e);
    lru_push_newest(self, e);
    self->stats.count++;
    self->stats.bytes += charge;
    self->stats.inserted++;
    return CDC_OK;
}

void cdc_weight_cache_stats(const cdc_weight_cache_t *self, cdc_weight_cache_stats_t *stats)
{
    *stats = self->stats;
}
