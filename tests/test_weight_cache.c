/* test_weight_cache.c - the worker's weight cache: LRU, true byte accounting, caps, replace. */
#include "footprint.h"
#include "testutil.h"
#include "weight_cache.h"

#include "cdcgemm.h"

#include <stdlib.h>
#include <string.h>

/* A matrix owned by the test: release counts how many were let go. */
typedef struct {
    float *data;
    int *released;
} owned_t;

static int released_total;

static void release_owned(void *owner)
{
    owned_t *o = owner;
    (*o->released)++;
    free(o->data);
    free(o);
}

/* A rows x k matrix filled with `fill`, charged as alloc_bytes. */
static cdc_weight_value_t make_value(int64_t rows, int64_t k, float fill, size_t alloc_bytes)
{
    owned_t *o = cdc_test_alloc(sizeof *o);
    size_t count = (size_t) rows * (size_t) k;
    o->data = cdc_test_alloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++)
        o->data[i] = fill;
    o->released = &released_total;
    return (cdc_weight_value_t){rows, k, o->data, alloc_bytes, o, release_owned};
}

static cdc_weight_key_t key_of(uint64_t content)
{
    return (cdc_weight_key_t){content, 0};
}

static size_t cache_bytes(const cdc_weight_cache_t *cache)
{
    cdc_weight_cache_stats_t stats;
    cdc__weight_cache_stats(cache, &stats);
    return stats.bytes;
}

static cdc_weight_cache_stats_t stats_of(const cdc_weight_cache_t *cache)
{
    cdc_weight_cache_stats_t stats;
    cdc__weight_cache_stats(cache, &stats);
    return stats;
}

START_TEST(test_lru_order)
{
    /* Room for exactly three 1000-byte entries beside the index. */
    cdc_weight_cache_t *cache = NULL;
    ck_assert_int_eq(cdc__weight_cache_new(1 << 20, 3, &cache), CDC_OK);
    for (uint64_t key = 1; key <= 3; key++) {
        cdc_weight_value_t v = make_value(2, 2, (float) key, 1000);
        ck_assert_int_eq(cdc__weight_cache_put(cache, key_of(key), &v), CDC_OK);
    }
    /* Touch 1: now 2 is the least recently used. */
    ck_assert_ptr_nonnull(cdc__weight_cache_get(cache, key_of(1)));
    cdc_weight_value_t v4 = make_value(2, 2, 4.0f, 1000);
    ck_assert_int_eq(cdc__weight_cache_put(cache, key_of(4), &v4), CDC_OK);
    ck_assert_ptr_null(cdc__weight_cache_get(cache, key_of(2)));
    ck_assert_ptr_nonnull(cdc__weight_cache_get(cache, key_of(1)));
    ck_assert_ptr_nonnull(cdc__weight_cache_get(cache, key_of(3)));
    const cdc_weight_value_t *got = cdc__weight_cache_get(cache, key_of(4));
    ck_assert_ptr_nonnull(got);
    ck_assert(got->data[3] == 4.0f);
    /* Order now (old -> new): 1, 3, 4; two more evict 1 then 3. */
    cdc_weight_value_t v5 = make_value(1, 1, 5.0f, 10);
    cdc_weight_value_t v6 = make_value(1, 1, 6.0f, 10);
    ck_assert_int_eq(cdc__weight_cache_put(cache, key_of(5), &v5), CDC_OK);
    ck_assert_ptr_null(cdc__weight_cache_get(cache, key_of(1)));
    ck_assert_int_eq(cdc__weight_cache_put(cache, key_of(6), &v6), CDC_OK);
    ck_assert_ptr_null(cdc__weight_cache_get(cache, key_of(3)));
    ck_assert_ptr_nonnull(cdc__weight_cache_get(cache, key_of(4)));
    cdc_weight_cache_stats_t stats = stats_of(cache);
    ck_assert_uint_eq(stats.evictions, 3);
    ck_assert_uint_eq(stats.count, 3);
    int before = released_total;
    cdc__weight_cache_destroy(&cache);
    ck_assert_ptr_null(cache);
    ck_assert_int_eq(released_total - before, 3);
    cdc__weight_cache_destroy(&cache); /* NULL is fine */
}
END_TEST

START_TEST(test_byte_accounting)
{
    cdc_weight_cache_t *cache = NULL;
    ck_assert_int_eq(cdc__weight_cache_new(1 << 30, 0, &cache), CDC_OK);
    size_t empty = cache_bytes(cache);
    ck_assert_uint_eq(empty, stats_of(cache).index_bytes);
    ck_assert_uint_gt(empty, 0);
    /* An entry costs more than its payload: the record and the real
       allocation (here 64 bytes of data in a 100-byte allocation). */
    ck_assert_uint_gt(cdc__weight_cache_entry_cost(100), 100);
    ck_assert_uint_ge(cdc__weight_cache_entry_cost(100), 100 + cdc__alloc_footprint(1));
    size_t sum = 0;
    for (uint64_t key = 1; key <= 100; key++) {
        cdc_weight_value_t v = make_value(4, 4, (float) key, 100);
        ck_assert_int_eq(cdc__weight_cache_put(cache, key_of(key), &v), CDC_OK);
        sum += cdc__weight_cache_entry_cost(100);
    }
    cdc_weight_cache_stats_t stats = stats_of(cache);
    ck_assert_uint_eq(stats.count, 100);
    ck_assert_uint_eq(stats.bytes, sum + stats.index_bytes);
    /* The index grew with the entries, and is charged for it. */
    ck_assert_uint_gt(stats.index_bytes, empty);
    ck_assert_uint_ge(stats.index_bytes, 100 * sizeof(void *));
    cdc__weight_cache_destroy(&cache);

    /* A bound that fits 10 entries by payload but fewer once overhead counts. */
    size_t bound = stats.index_bytes + 10 * 100;
    ck_assert_int_eq(cdc__weight_cache_new(bound, 0, &cache), CDC_OK);
    for (uint64_t key = 1; key <= 10; key++) {
        cdc_weight_value_t v = make_value(4, 4, (float) key, 100);
        ck_assert_int_eq(cdc__weight_cache_put(cache, key_of(key), &v), CDC_OK);
        ck_assert_uint_le(cache_bytes(cache), bound);
    }
    stats = stats_of(cache);
    ck_assert_uint_lt(stats.count, 10);
    ck_assert_uint_gt(stats.evictions, 0);
    cdc__weight_cache_destroy(&cache);
}
END_TEST

START_TEST(test_entry_cap)
{
    cdc_weight_cache_t *cache = NULL;
    ck_assert_int_eq(cdc__weight_cache_new(1 << 30, 5, &cache), CDC_OK);
    for (uint64_t key = 1; key <= 12; key++) {
        cdc_weight_value_t v = make_value(1, 1, (float) key, 8);
        ck_assert_int_eq(cdc__weight_cache_put(cache, key_of(key), &v), CDC_OK);
        ck_assert_uint_le(stats_of(cache).count, 5);
    }
    cdc_weight_cache_stats_t stats = stats_of(cache);
    ck_assert_uint_eq(stats.count, 5);
    ck_assert_uint_eq(stats.evictions, 7);
    for (uint64_t key = 8; key <= 12; key++)
        ck_assert_ptr_nonnull(cdc__weight_cache_get(cache, key_of(key)));
    ck_assert_ptr_null(cdc__weight_cache_get(cache, key_of(7)));
    cdc__weight_cache_destroy(&cache);
    /* 0 means the default cap. */
    ck_assert_int_eq(cdc__weight_cache_new(1 << 20, 0, &cache), CDC_OK);
    ck_assert_uint_eq(stats_of(cache).max_entries, CDC_WEIGHT_CACHE_DEFAULT_ENTRIES);
    cdc__weight_cache_destroy(&cache);
    ck_assert_int_eq(cdc__weight_cache_new(0, 0, &cache), CDC_EINVAL);
}
END_TEST

START_TEST(test_replace_semantics)
{
    cdc_weight_cache_t *cache = NULL;
    ck_assert_int_eq(cdc__weight_cache_new(1 << 20, 0, &cache), CDC_OK);
    cdc_weight_value_t first = make_value(2, 3, 1.5f, 24);
    ck_assert_int_eq(cdc__weight_cache_put(cache, key_of(42), &first), CDC_OK);
    size_t bytes = cache_bytes(cache);

    /* The same matrix again (another copy): kept once, the copy released. */
    int before = released_total;
    cdc_weight_value_t same = make_value(2, 3, 1.5f, 24);
    ck_assert_int_eq(cdc__weight_cache_put(cache, key_of(42), &same), CDC_OK);
    ck_assert_int_eq(released_total - before, 1);
    ck_assert_uint_eq(cache_bytes(cache), bytes);
    ck_assert_ptr_eq(cdc__weight_cache_get(cache, key_of(42))->data, first.data);
    ck_assert_uint_eq(stats_of(cache).duplicates, 1);

    /* Different content under the key: refused, the held one unchanged, the
       caller still owns the refused value. */
    cdc_weight_value_t other = make_value(2, 3, 2.5f, 24);
    ck_assert_int_eq(cdc__weight_cache_put(cache, key_of(42), &other), CDC_EPROTO);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "different"));
    const cdc_weight_value_t *held = cdc__weight_cache_get(cache, key_of(42));
    ck_assert(held->data[5] == 1.5f);
    other.release(other.owner);
    /* Another shape under the key: refused too. */
    cdc_weight_value_t reshaped = make_value(3, 2, 1.5f, 24);
    ck_assert_int_eq(cdc__weight_cache_put(cache, key_of(42), &reshaped), CDC_EPROTO);
    reshaped.release(reshaped.owner);
    ck_assert_uint_eq(stats_of(cache).refused, 2);

    /* The same content key in another scope is another entry. */
    cdc_weight_value_t scoped = make_value(2, 3, 9.0f, 24);
    ck_assert_int_eq(cdc__weight_cache_put(cache, (cdc_weight_key_t){42, 7}, &scoped), CDC_OK);
    ck_assert(cdc__weight_cache_get(cache, (cdc_weight_key_t){42, 7})->data[0] == 9.0f);
    ck_assert(cdc__weight_cache_get(cache, key_of(42))->data[0] == 1.5f);
    cdc__weight_cache_destroy(&cache);
}
END_TEST

/* A scope (a peer) over its cap evicts its own least recently used entries,
   never another scope's; the global bound still evicts in global LRU order;
   an entry over the scope cap alone is refused naming --max-peer-memory. */
START_TEST(test_scope_cap)
{
    enum { A = 11, B = 22, C = 33 };
    size_t cost = cdc__weight_cache_entry_cost(1000);
    cdc_weight_cache_t *cache = NULL;
    ck_assert_int_eq(cdc__weight_cache_new(1 << 20, 0, &cache), CDC_OK);
    cdc__weight_cache_limit_scope(cache, 3 * cost); /* three entries per scope */
    ck_assert_uint_eq(stats_of(cache).max_scope_bytes, 3 * cost);
    cdc_weight_value_t b1 = make_value(2, 2, -1.0f, 1000);
    ck_assert_int_eq(cdc__weight_cache_put(cache, (cdc_weight_key_t){1, B}, &b1), CDC_OK);
    for (uint64_t key = 1; key <= 3; key++) {
        cdc_weight_value_t v = make_value(2, 2, (float) key, 1000);
        ck_assert_int_eq(cdc__weight_cache_put(cache, (cdc_weight_key_t){key, A}, &v), CDC_OK);
    }
    ck_assert_uint_eq(cdc__weight_cache_scope_bytes(cache, A), 3 * cost);
    /* Touch A's 1: its 2 is now A's oldest; B's 1 is the globally oldest. */
    ck_assert_ptr_nonnull(cdc__weight_cache_get(cache, (cdc_weight_key_t){1, A}));
    cdc_weight_value_t v4 = make_value(2, 2, 4.0f, 1000);
    ck_assert_int_eq(cdc__weight_cache_put(cache, (cdc_weight_key_t){4, A}, &v4), CDC_OK);
    ck_assert_ptr_null(cdc__weight_cache_get(cache, (cdc_weight_key_t){2, A}));
    ck_assert_ptr_nonnull(cdc__weight_cache_get(cache, (cdc_weight_key_t){1, B}));
    ck_assert_uint_eq(cdc__weight_cache_scope_bytes(cache, A), 3 * cost);
    ck_assert_uint_eq(cdc__weight_cache_scope_bytes(cache, B), cost);
    ck_assert_uint_eq(stats_of(cache).evictions, 1);
    /* One entry larger than the cap: refused, nothing evicted. */
    cdc_weight_value_t big = make_value(2, 2, 5.0f, 3 * cost);
    ck_assert_int_eq(cdc__weight_cache_put(cache, (cdc_weight_key_t){5, A}, &big), CDC_ENOMEM);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "--max-peer-memory"));
    big.release(big.owner);
    ck_assert_uint_eq(stats_of(cache).evictions, 1);
    ck_assert_uint_eq(stats_of(cache).count, 4);
    cdc__weight_cache_destroy(&cache);

    /* The global bound: room for four entries in all, three per scope. C's
       put evicts the globally oldest, whoever's it is (here A's). */
    ck_assert_int_eq(cdc__weight_cache_new(1 << 20, 4, &cache), CDC_OK);
    cdc__weight_cache_limit_scope(cache, 3 * cost);
    for (uint64_t key = 1; key <= 3; key++) {
        cdc_weight_value_t v = make_value(2, 2, (float) key, 1000);
        ck_assert_int_eq(cdc__weight_cache_put(cache, (cdc_weight_key_t){key, A}, &v), CDC_OK);
    }
    cdc_weight_value_t b = make_value(2, 2, 9.0f, 1000);
    ck_assert_int_eq(cdc__weight_cache_put(cache, (cdc_weight_key_t){1, B}, &b), CDC_OK);
    cdc_weight_value_t c = make_value(2, 2, 8.0f, 1000);
    ck_assert_int_eq(cdc__weight_cache_put(cache, (cdc_weight_key_t){1, C}, &c), CDC_OK);
    ck_assert_ptr_null(cdc__weight_cache_get(cache, (cdc_weight_key_t){1, A}));
    ck_assert_ptr_nonnull(cdc__weight_cache_get(cache, (cdc_weight_key_t){1, B}));
    ck_assert_uint_eq(cdc__weight_cache_scope_bytes(cache, A), 2 * cost);
    ck_assert_uint_eq(cdc__weight_cache_scope_bytes(cache, C), cost);
    /* A scope left empty is forgotten; 0 restores the whole budget. */
    cdc__weight_cache_limit_scope(cache, 0);
    ck_assert_uint_eq(stats_of(cache).max_scope_bytes, 1 << 20);
    cdc__weight_cache_destroy(&cache);
}
END_TEST

/* Two peers under the default entry cap (65,536) and no byte share: peer B
   sends 70,000 1x1 matrices, far under any byte bound; A's 8 larger entries
   stay (the entry cap evicts from the scope holding the most entries), and
   B keeps the newest it sent (issue 24: all 8 of A's were evicted). */
START_TEST(test_entry_churn_evicts_own)
{
    enum { A = 11, B = 22, B_PUTS = 70000 };
    cdc_weight_cache_t *cache = NULL;
    ck_assert_int_eq(cdc__weight_cache_new((size_t) 1 << 30, 0, &cache), CDC_OK);
    static float shared[4];
    for (uint64_t key = 1; key <= 8; key++) {
        cdc_weight_value_t v = {1, 4, shared, 1 << 20, NULL, NULL};
        ck_assert_int_eq(cdc__weight_cache_put(cache, (cdc_weight_key_t){key, A}, &v), CDC_OK);
    }
    for (uint64_t key = 1; key <= B_PUTS; key++) {
        cdc_weight_value_t v = {1, 1, shared, 4, NULL, NULL};
        ck_assert_int_eq(cdc__weight_cache_put(cache, (cdc_weight_key_t){key, B}, &v), CDC_OK);
    }
    for (uint64_t key = 1; key <= 8; key++)
        ck_assert_msg(cdc__weight_cache_get(cache, (cdc_weight_key_t){key, A}),
                      "A's entry %llu evicted", (unsigned long long) key);
    ck_assert_ptr_nonnull(cdc__weight_cache_get(cache, (cdc_weight_key_t){B_PUTS, B}));
    ck_assert_ptr_null(cdc__weight_cache_get(cache, (cdc_weight_key_t){1, B}));
    ck_assert_uint_eq(stats_of(cache).count, CDC_WEIGHT_CACHE_DEFAULT_ENTRIES);
    cdc__weight_cache_destroy(&cache);
}
END_TEST

START_TEST(test_oversize_refused)
{
    cdc_weight_cache_t *cache = NULL;
    ck_assert_int_eq(cdc__weight_cache_new(64 << 10, 0, &cache), CDC_OK);
    cdc_weight_value_t small = make_value(4, 4, 1.0f, 64);
    ck_assert_int_eq(cdc__weight_cache_put(cache, key_of(1), &small), CDC_OK);
    /* Payload alone is just under the bound; with overhead it is over. */
    cdc_weight_value_t big = make_value(1, 1, 2.0f, (64 << 10) - 8);
    ck_assert_int_eq(cdc__weight_cache_put(cache, key_of(2), &big), CDC_ENOMEM);
    big.release(big.owner);
    /* Nothing was evicted for it. */
    ck_assert_ptr_nonnull(cdc__weight_cache_get(cache, key_of(1)));
    cdc_weight_cache_stats_t stats = stats_of(cache);
    ck_assert_uint_eq(stats.evictions, 0);
    ck_assert_uint_eq(stats.refused, 1);
    cdc__weight_cache_destroy(&cache);
}
END_TEST

/* The linear cache took 15 s for this; the index makes it well under 1 s
   even on a loaded 2-core machine (bench: cdcgemm-bench cache). */
START_TEST(test_many_entries_fast)
{
    enum { COUNT = 200000 };
    cdc_weight_cache_t *cache = NULL;
    ck_assert_int_eq(cdc__weight_cache_new((size_t) 1 << 30, COUNT, &cache), CDC_OK);
    static float shared[4];
    double start = cdc_test_now_s();
    for (uint64_t key = 1; key <= COUNT; key++) {
        cdc_weight_value_t v = {1, 4, shared, 16, NULL, NULL};
        ck_assert_int_eq(cdc__weight_cache_put(cache, key_of(key * 0x9e3779b97f4a7c15ull), &v),
                         CDC_OK);
    }
    for (uint64_t key = 1; key <= COUNT; key += 997)
        ck_assert_ptr_nonnull(cdc__weight_cache_get(cache, key_of(key * 0x9e3779b97f4a7c15ull)));
    double elapsed = cdc_test_now_s() - start;
    ck_assert_uint_eq(stats_of(cache).count, COUNT);
    ck_assert_msg(elapsed < 5.0, "200,000 inserts took %.2f s", elapsed);
    /* One more evicts exactly the oldest. */
    cdc_weight_value_t v = {1, 4, shared, 16, NULL, NULL};
    ck_assert_int_eq(cdc__weight_cache_put(cache, key_of(1), &v), CDC_OK);
    ck_assert_ptr_null(cdc__weight_cache_get(cache, key_of(2 * 0x9e3779b97f4a7c15ull)));
    cdc__weight_cache_destroy(&cache);
}
END_TEST

static Suite *weight_cache_suite(void)
{
    Suite *suite = suite_create("weight_cache");
    TCase *order = tcase_create("order");
    tcase_add_test(order, test_lru_order);
    tcase_add_test(order, test_entry_cap);
    suite_add_tcase(suite, order);
    TCase *bytes = tcase_create("bytes");
    tcase_add_test(bytes, test_byte_accounting);
    tcase_add_test(bytes, test_oversize_refused);
    suite_add_tcase(suite, bytes);
    TCase *keys = tcase_create("keys");
    tcase_add_test(keys, test_replace_semantics);
    tcase_add_test(keys, test_scope_cap);
    tcase_add_test(keys, test_entry_churn_evicts_own);
    suite_add_tcase(suite, keys);
    TCase *scale = tcase_create("scale");
    tcase_add_test(scale, test_many_entries_fast);
    tcase_set_timeout(scale, 60);
    suite_add_tcase(suite, scale);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(weight_cache_suite());
}
