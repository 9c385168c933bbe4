/* operand_cache.c - weight detection by repetition, exact by full content hash. */
#include "operand_cache.h"

#include "error.h"
#include "hash.h"

#include <stdlib.h>
#include <string.h>

struct cdc_operand_cache {
    cdc_operand_entry_t *entries;
    int count, max_entries;
    size_t bytes, max_bytes; /* packed copies + shard set storage */
    uint64_t clock;
};

uint64_t cdc__operand_hash(const cdc_operand_t *op)
{
    /* Stored lines: rows lines of k floats, or k lines of rows when transposed. */
    int64_t lines = op->transposed ? op->k : op->rows;
    int64_t line = op->transposed ? op->rows : op->k;
    cdc_hash_t hash;
    cdc__hash_init(&hash, (uint64_t) op->rows);
    if (op->ld == line) {
        cdc__hash_update(&hash, op->src, (size_t) lines * (size_t) line * sizeof(float));
    } else {
        for (int64_t i = 0; i < lines; i++)
            cdc__hash_update(&hash, op->src + i * op->ld, (size_t) line * sizeof(float));
    }
    return cdc__hash_final(&hash, (uint64_t) op->k ^ ((uint64_t) op->transposed << 63));
}

static size_t packed_bytes(const cdc_operand_entry_t *e)
{
    return (size_t) e->desc.rows * (size_t) e->desc.k * sizeof(float);
}

/* Back to a candidate: forget the copy and its shards (stale or evicted).
   Both are retired: a send in flight may still hold them. */
static void entry_demote(cdc_operand_cache_t *cache, cdc_operand_entry_t *e)
{
    cache->bytes -= e->encoded_bytes;
    cdc__encoded_weights_retire(&e->encoded);
    e->encoded_bytes = 0;
    if (e->packed)
        cache->bytes -= packed_bytes(e);
    cdc__hold_retire(e->packed_hold);
    e->packed_hold = NULL;
    e->packed = NULL;
    e->key = 0;
    e->whole_ready = 0;
}

static int same_desc(const cdc_operand_t *x, const cdc_operand_t *y)
{
    return x->src == y->src && x->rows == y->rows && x->k == y->k && x->ld == y->ld &&
           x->transposed == y->transposed;
}

int cdc__operand_cache_new(int max_entries, size_t max_bytes, cdc_operand_cache_t **cache_p)
{
    if (max_entries < 2 || !cache_p)
        return cdc__fail(CDC_EINVAL, "operand cache: max_entries = %d (need >= 2)",
                         max_entries);
    cdc_operand_cache_t *cache = calloc(1, sizeof *cache);
    if (!cache)
        return cdc__fail(CDC_ENOMEM, "operand cache");
    cache->entries = calloc((size_t) max_entries, sizeof *cache->entries);
    if (!cache->entries) {
        free(cache);
        return cdc__fail(CDC_ENOMEM, "operand cache of %d entries", max_entries);
    }
    cache->max_entries = max_entries;
    cache->max_bytes = max_bytes;
    *cache_p = cache;
    return CDC_OK;
}

void cdc__operand_cache_destroy(cdc_operand_cache_t **cache_p)
{
    if (!cache_p || !*cache_p)
        return;
    cdc_operand_cache_t *cache = *cache_p;
    for (int i = 0; i < cache->max_entries; i++)
        if (cache->entries[i].in_use)
            entry_demote(cache, &cache->entries[i]);
    free(cache->entries);
    free(cache);
    *cache_p = NULL;
}

static cdc_operand_entry_t *cache_find(cdc_operand_cache_t *cache, const cdc_operand_t *op)
{
    for (int i = 0; i < cache->max_entries; i++)
        if (cache->entries[i].in_use && same_desc(&cache->entries[i].desc, op))
            return &cache->entries[i];
    return NULL;
}

/* Drop least recently used entries other than keep/keep2 (in use by this
   call) until the bytes fit and, with need_slot, a slot is free. Slots never
   move, so pointers to kept entries stay valid. */
static void cache_evict(cdc_operand_cache_t *cache, const cdc_operand_entry_t *keep,
                        const cdc_operand_entry_t *keep2, int need_slot)
{
    while ((need_slot && cache->count >= cache->max_entries) ||
           cache->bytes > cache->max_bytes) {
        int only_bytes = !(need_slot && cache->count >= cache->max_entries);
        cdc_operand_entry_t *victim = NULL;
        for (int i = 0; i < cache->max_entries; i++) {
            cdc_operand_entry_t *e = &cache->entries[i];
            if (!e->in_use || e == keep || e == keep2)
                continue;
            if (only_bytes && !e->packed)
                continue; /* candidates hold no bytes */
            if (!victim || e->last_use < victim->last_use)
                victim = e;
        }
        if (!victim)
            return;
        entry_demote(cache, victim);
        victim->in_use = 0;
        cache->count--;
    }
}

/* Record op (hash h) as a candidate; the slot it takes may evict the LRU. */
static cdc_operand_entry_t *cache_insert(cdc_operand_cache_t *cache, const cdc_operand_t *op,
                                         uint64_t h, const cdc_operand_entry_t *keep)
{
    cache_evict(cache, keep, NULL, 1);
    for (int i = 0; i < cache->max_entries; i++) {
        cdc_operand_entry_t *e = &cache->entries[i];
        if (e->in_use)
            continue;
        memset(e, 0, sizeof *e);
        e->desc = *op;
        e->hash = h;
        e->last_use = ++cache->clock;
        e->in_use = 1;
        cache->count++;
        return e;
    }
    return NULL;
}

/* Packed copy and key for an entry seen again unchanged. */
static int entry_promote(cdc_operand_cache_t *cache, cdc_operand_entry_t *e)
{
    if (e->packed)
        return CDC_OK;
    size_t bytes = packed_bytes(e);
    cdc_row_parts_t *parts = cdc__row_parts_alloc(e->desc.rows, e->desc.k, &e->packed);
    if (!parts)
        return CDC_ENOMEM;
    e->packed_hold = &parts->hold;
    cdc__operand_pack(&e->desc, e->packed);
    cdc__encoded_weights_init(&e->encoded, parts);
    cache->bytes += bytes;
    /* The key names content and shape, not the address: the same weights at
       another address (or after a fork) reuse what workers hold. */
    e->key = cdc__hash_mix(cdc__hash_mix(e->hash, (uint64_t) e->desc.rows),
                           (uint64_t) e->desc.k) | 1;
    return CDC_OK;
}

/* Descriptor match: hash now, and drop what the entry held if it changed. */
static int entry_check(cdc_operand_cache_t *cache, cdc_operand_entry_t *e,
                       const cdc_operand_t *op)
{
    uint64_t h = cdc__operand_hash(op);
    e->last_use = ++cache->clock;
    if (h == e->hash) {
        e->repeats++;
        return 1;
    }
    entry_demote(cache, e);
    e->hash = h;
    e->repeats = 0;
    return 0;
}

int cdc__operand_cache_match(cdc_operand_cache_t *cache, const cdc_operand_t *a,
                             const cdc_operand_t *bt, int *side,
                             cdc_operand_entry_t **entry)
{
    *side = 0;
    *entry = NULL;
    cdc_operand_entry_t *ea = cache_find(cache, a), *eb = cache_find(cache, bt);
    if (a->src == bt->src && same_desc(a, bt))
        eb = NULL; /* A·Aᵀ with one buffer: one entry, side a */
    int a_same = ea ? entry_check(cache, ea, a) : 0;
    int b_same = eb ? entry_check(cache, eb, bt) : 0;

    cdc_operand_entry_t *chosen = NULL;
    if (a_same && ea->packed)
        chosen = ea, *side = 1;
    else if (b_same && eb->packed)
        chosen = eb, *side = 2;
    else if (a_same && b_same) {
        /* Both unchanged: an input passed twice looks like weights once;
           wait for the operand that keeps repeating. */
        if (ea->repeats >= 3 && eb->repeats >= 3)
            chosen = ea, *side = 1;
    } else if (a_same)
        chosen = ea, *side = 1;
    else if (b_same)
        chosen = eb, *side = 2;

    if (chosen) {
        int rc = entry_promote(cache, chosen);
        if (rc != CDC_OK) {
            *side = 0;
            return rc;
        }
        cache_evict(cache, chosen, NULL, 0);
        *entry = chosen;
        return CDC_OK;
    }
    /* Neither repeats (yet): remember both, to recognise the weights next time. */
    if (!ea)
        ea = cache_insert(cache, a, cdc__operand_hash(a), eb);
    if (!eb && !(a->src == bt->src && same_desc(a, bt)))
        cache_insert(cache, bt, cdc__operand_hash(bt), ea);
    return CDC_OK;
}

void cdc__operand_entry_settle(cdc_operand_cache_t *cache, cdc_operand_entry_t *entry)
{
    size_t now = cdc__encoded_weights_bytes(&entry->encoded);
    if (now == entry->encoded_bytes)
        return;
    cache->bytes = cache->bytes - entry->encoded_bytes + now;
    entry->encoded_bytes = now;
    cache_evict(cache, entry, NULL, 0);
}

void cdc__operand_cache_usage(const cdc_operand_cache_t *cache, int *entries, size_t *bytes)
{
    *entries = cache->count;
    *bytes = cache->bytes;
}
