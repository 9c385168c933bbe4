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
 * Scopes (issue 9): each key carries the scope of the peer that sent it, and
 * each scope has its own LRU list and byte count beside the global ones. A
 * put evicts the least recently used entries of its own scope while that
 * scope is over max_scope_bytes; at the entry cap, the least recently used
 * of the scope holding the most entries (issue 24: a peer sending tens of
 * thousands of tiny matrices, far under its bytes, evicted everyone else's);
 * then the globally least recently used while the cache is over max_bytes:
 * a peer at its cap displaces only itself, and another peer's entries go
 * only in global LRU order of bytes. Scope records live only
 * while they hold entries; there are few (one per authenticated peer that
 * sent weights, plus the shared scope 0), so they are searched linearly.
 *
 * The invariant: bytes = index array bytes + for each entry (its record as
 * the allocator rounds it + what its matrix's allocation really costs) <=
 * max_bytes, every scope's bytes (its entries' costs) <= max_scope_bytes,
 * and count <= max_entries, after every put. */
#include "weight_cache.h"

#include "error.h"
#include "footprint.h"
#include "grow.h"
#include "hash.h"

#include <stdlib.h>
#include <string.h>

#define MIN_BUCKETS 16

typedef struct entry entry_t;

/* One scope's entries: its own LRU list and what they cost. */
typedef struct {
    uint64_t id;
    size_t bytes, count;
    entry_t *newest, *oldest;
} scope_t;

struct entry {
    cdc_weight_key_t key;
    cdc_weight_value_t value;
    size_t charge;
    scope_t *scope;
    entry_t *chain;                     /* next in the same bucket      */
    entry_t *newer, *older;             /* global LRU neighbours        */
    entry_t *scope_newer, *scope_older; /* LRU neighbours in its scope  */
};

struct cdc_weight_cache {
    entry_t **buckets;
    size_t bucket_count; /* a power of two */
    entry_t *newest, *oldest;
    scope_t **scopes;
    size_t scope_count, scope_capacity;
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

size_t cdc__weight_cache_entry_cost(size_t alloc_bytes)
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

static void scope_unlink(entry_t *e)
{
    scope_t *scope = e->scope;
    if (e->scope_newer)
        e->scope_newer->scope_older = e->scope_older;
    else
        scope->newest = e->scope_older;
    if (e->scope_older)
        e->scope_older->scope_newer = e->scope_newer;
    else
        scope->oldest = e->scope_newer;
    e->scope_newer = e->scope_older = NULL;
}

static void scope_push_newest(entry_t *e)
{
    scope_t *scope = e->scope;
    e->scope_older = scope->newest;
    e->scope_newer = NULL;
    if (scope->newest)
        scope->newest->scope_newer = e;
    scope->newest = e;
    if (!scope->oldest)
        scope->oldest = e;
}

/* Used now: the newest in both lists. */
static void touch(cdc_weight_cache_t *self, entry_t *e)
{
    lru_unlink(self, e);
    lru_push_newest(self, e);
    scope_unlink(e);
    scope_push_newest(e);
}

/* ---- scopes ------------------------------------------------------------- */

static scope_t *scope_find(const cdc_weight_cache_t *self, uint64_t id)
{
    for (size_t i = 0; i < self->scope_count; i++)
        if (self->scopes[i]->id == id)
            return self->scopes[i];
    return NULL;
}

/* The record of scope id, made when missing; NULL when out of memory. */
static scope_t *scope_get(cdc_weight_cache_t *self, uint64_t id)
{
    scope_t *scope = scope_find(self, id);
    if (scope)
        return scope;
    scope_t **scopes =
        cdc__grow(self->scopes, &self->scope_capacity, self->scope_count, sizeof *scopes, 4);
    if (!scopes)
        return NULL;
    self->scopes = scopes;
    if (!(scope = calloc(1, sizeof *scope)))
        return NULL;
    scope->id = id;
    self->scopes[self->scope_count++] = scope;
    return scope;
}

/* A scope left without entries goes. */
static void scope_drop_if_empty(cdc_weight_cache_t *self, scope_t *scope)
{
    if (scope->count > 0)
        return;
    for (size_t i = 0; i < self->scope_count; i++)
        if (self->scopes[i] == scope) {
            self->scopes[i] = self->scopes[--self->scope_count];
            break;
        }
    free(scope);
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
    scope_unlink(e);
    self->stats.count--;
    self->stats.bytes -= e->charge;
    e->scope->count--;
    e->scope->bytes -= e->charge;
    scope_drop_if_empty(self, e->scope);
    if (e->value.release)
        e->value.release(e->value.owner);
    free(e);
}

static void evict(cdc_weight_cache_t *self, entry_t *e)
{
    entry_release(self, e);
    self->stats.evictions++;
}

int cdc__weight_cache_new(size_t max_bytes, size_t max_entries, cdc_weight_cache_t **cache_p)
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
    self->stats.max_scope_bytes = max_bytes;
    self->stats.max_entries = max_entries ? max_entries : CDC_WEIGHT_CACHE_DEFAULT_ENTRIES;
    if (!self->buckets || index_grow(self) != CDC_OK) {
        free(self->buckets);
        free(self);
        return cdc__fail(CDC_ENOMEM, "weight cache");
    }
    *cache_p = self;
    return CDC_OK;
}

void cdc__weight_cache_destroy(cdc_weight_cache_t **cache_p)
{
    if (!cache_p || !*cache_p)
        return;
    cdc_weight_cache_t *self = *cache_p;
    while (self->oldest)
        entry_release(self, self->oldest);
    free(self->buckets);
    free(self->scopes);
    free(self);
    *cache_p = NULL;
}

void cdc__weight_cache_limit_scope(cdc_weight_cache_t *self, size_t max_scope_bytes)
{
    self->stats.max_scope_bytes = max_scope_bytes && max_scope_bytes < self->stats.max_bytes
                                      ? max_scope_bytes
                                      : self->stats.max_bytes;
}

size_t cdc__weight_cache_scope_bytes(const cdc_weight_cache_t *self, uint64_t scope)
{
    const scope_t *record = scope_find(self, scope);
    return record ? record->bytes : 0;
}

const cdc_weight_value_t *cdc__weight_cache_get(cdc_weight_cache_t *self, cdc_weight_key_t key)
{
    entry_t *e = index_find(self, key);
    if (!e) {
        self->stats.misses++;
        return NULL;
    }
    self->stats.hits++;
    touch(self, e);
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
    touch(self, e);
    self->stats.duplicates++;
    if (value->release && value->owner != held->owner)
        value->release(value->owner);
    return CDC_OK;
}

/* Whether used + add bytes exceed max, without computing the sum: on a
   32-bit worker --max-memory may be up to 4 GiB - 1 and the sum would wrap. */
static int over(size_t used, size_t add, size_t max)
{
    return used > max || add > max - used;
}

/* An entry of charge bytes can never fit: refused before anything is
   evicted for it. */
static int check_fits_at_all(cdc_weight_cache_t *self, cdc_weight_key_t key, size_t charge)
{
    if (over(self->stats.index_bytes, charge, self->stats.max_bytes)) {
        self->stats.refused++;
        return cdc__fail(CDC_ENOMEM,
                         "weights %016llx: %zu bytes (with overhead) exceed the cache's "
                         "--max-memory %zu",
                         (unsigned long long) key.content, charge, self->stats.max_bytes);
    }
    if (charge > self->stats.max_scope_bytes) {
        self->stats.refused++;
        return cdc__fail(CDC_ENOMEM,
                         "weights %016llx: %zu bytes (with overhead) exceed this peer's "
                         "share of the cache, --max-peer-memory %zu",
                         (unsigned long long) key.content, charge,
                         self->stats.max_scope_bytes);
    }
    return CDC_OK;
}

/* The scope that holds the most entries, counting the one scope id is
   about to add (it wins a tie): the entry cap's eviction takes from it. */
static scope_t *most_entries(const cdc_weight_cache_t *self, uint64_t id)
{
    scope_t *most = NULL;
    size_t most_count = 0;
    for (size_t i = 0; i < self->scope_count; i++) {
        scope_t *scope = self->scopes[i];
        size_t count = scope->count + (scope->id == id);
        if (!most || count > most_count || (count == most_count && scope->id == id)) {
            most = scope;
            most_count = count;
        }
    }
    return most;
}

/* Room for charge more bytes of scope id: its own oldest entries first while
   it is over its cap; then, while the entry count is at its cap, the oldest
   of whichever scope holds the most entries (so one peer's churn of small
   entries evicts its own, not another's: issue 24); then the globally
   oldest while the cache is over its bytes. */
static void make_room(cdc_weight_cache_t *self, uint64_t id, size_t charge)
{
    scope_t *own = scope_find(self, id);
    while (own && own->oldest && over(own->bytes, charge, self->stats.max_scope_bytes)) {
        int last = own->count == 1; /* the record goes with its last entry */
        evict(self, own->oldest);
        if (last)
            own = NULL;
    }
    while (self->oldest && self->stats.count + 1 > self->stats.max_entries)
        evict(self, most_entries(self, id)->oldest);
    while (self->oldest && over(self->stats.bytes, charge, self->stats.max_bytes))
        evict(self, self->oldest);
}

int cdc__weight_cache_put(cdc_weight_cache_t *self, cdc_weight_key_t key,
                          const cdc_weight_value_t *value)
{
    entry_t *existing = index_find(self, key);
    if (existing)
        return put_existing(self, existing, value);
    size_t charge = cdc__weight_cache_entry_cost(value->alloc_bytes);
    int rc = check_fits_at_all(self, key, charge);
    if (rc != CDC_OK)
        return rc;
    entry_t *e = calloc(1, sizeof *e);
    if (!e)
        return cdc__fail(CDC_ENOMEM, "weight cache entry");
    /* Grow the index first: its bytes count toward the bound too. */
    if (self->stats.count + 1 > self->bucket_count && index_grow(self) != CDC_OK) {
        free(e);
        return CDC_ENOMEM;
    }
    make_room(self, key.scope, charge);
    if (over(self->stats.bytes, charge, self->stats.max_bytes)) { /* the grown index */
        free(e);
        self->stats.refused++;
        return cdc__fail(CDC_ENOMEM, "weights %016llx: %zu bytes do not fit beside the "
                         "cache's index", (unsigned long long) key.content, charge);
    }
    /* After the evictions, which may have dropped the scope's record. */
    if (!(e->scope = scope_get(self, key.scope))) {
        free(e);
        return cdc__fail(CDC_ENOMEM, "weight cache scope");
    }
    e->key = key;
    e->value = *value;
    e->charge = charge;
    index_insert(self, e);
    lru_push_newest(self, e);
    scope_push_newest(e);
    self->stats.count++;
    self->stats.bytes += charge;
    e->scope->count++;
    e->scope->bytes += charge;
    self->stats.inserted++;
    return CDC_OK;
}

void cdc__weight_cache_stats(const cdc_weight_cache_t *self, cdc_weight_cache_stats_t *stats)
{
    *stats = self->stats;
}
