/* test_hold.c - cdc_hold_t (src/base/hold.h): the owner's reference, retain,
   release, retire; the memory freed exactly once, by the last reference,
   on whichever thread drops it; a held buffer in one allocation. */
#include "cdcgemm.h"
#include "hold.h"
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* An object that embeds a hold and counts how often it was freed (the
   counter lives outside it, so it can be read after the free). */
typedef struct {
    cdc_hold_t hold;
    atomic_int *frees;
    atomic_uintptr_t *freed_on; /* the thread that ran free_fn */
    float data[64];
} held_t;

static void held_free(cdc_hold_t *hold)
{
    held_t *h = (held_t *) hold; /* hold is the first member */
    atomic_fetch_add(h->frees, 1);
    if (h->freed_on)
        atomic_store(h->freed_on, (uintptr_t) pthread_self());
    free(h);
}

static held_t *held_new(atomic_int *frees, atomic_uintptr_t *freed_on)
{
    held_t *h = cdc_test_alloc(sizeof *h);
    cdc__hold_init(&h->hold, held_free);
    h->frees = frees;
    h->freed_on = freed_on;
    return h;
}

START_TEST(test_init_is_one_owner_reference)
{
    atomic_int frees = 0;
    held_t *h = held_new(&frees, NULL);
    ck_assert_int_eq(cdc__hold_refs(&h->hold), 1);
    ck_assert_int_eq(cdc__hold_retired(&h->hold), 0);
    cdc__hold_release(&h->hold); /* the owner's: the last one */
    ck_assert_int_eq(atomic_load(&frees), 1);
}
END_TEST

START_TEST(test_retain_release_free_once)
{
    atomic_int frees = 0;
    held_t *h = held_new(&frees, NULL);
    ck_assert_ptr_eq(cdc__hold_retain(&h->hold), &h->hold);
    ck_assert_ptr_eq(cdc__hold_retain(&h->hold), &h->hold);
    ck_assert_int_eq(cdc__hold_refs(&h->hold), 3);
    cdc__hold_release(&h->hold);
    cdc__hold_release(&h->hold);
    ck_assert_int_eq(atomic_load(&frees), 0);
    ck_assert_int_eq(cdc__hold_refs(&h->hold), 1);
    cdc__hold_release(&h->hold);
    ck_assert_int_eq(atomic_load(&frees), 1);
}
END_TEST

/* Retire marks it and drops the owner's reference; a holder still reads
   the memory and sees it retired; its release frees it. */
START_TEST(test_retire_then_last_holder_frees)
{
    atomic_int frees = 0;
    held_t *h = held_new(&frees, NULL);
    for (int i = 0; i < 64; i++)
        h->data[i] = (float) i;
    cdc_hold_t *mine = cdc__hold_retain(&h->hold);
    cdc__hold_retire(&h->hold);
    ck_assert_int_eq(atomic_load(&frees), 0);
    ck_assert_int_eq(cdc__hold_retired(mine), 1);
    ck_assert_int_eq(cdc__hold_refs(mine), 1);
    for (int i = 0; i < 64; i++) /* still readable (ASan: no use after free) */
        ck_assert_float_eq(h->data[i], (float) i);
    cdc__hold_release(mine);
    ck_assert_int_eq(atomic_load(&frees), 1);
}
END_TEST

START_TEST(test_retire_alone_frees)
{
    atomic_int frees = 0;
    held_t *h = held_new(&frees, NULL);
    cdc__hold_retire(&h->hold);
    ck_assert_int_eq(atomic_load(&frees), 1);
}
END_TEST

START_TEST(test_null_accepted)
{
    ck_assert_ptr_null(cdc__hold_retain(NULL));
    cdc__hold_release(NULL);
    cdc__hold_retire(NULL);
}
END_TEST

static void *release_on_thread(void *arg)
{
    cdc__hold_release(arg);
    return NULL;
}

/* The last reference dropped on another thread (as libzmq's I/O thread
   does) frees it there, once. */
START_TEST(test_last_release_on_another_thread)
{
    atomic_int frees = 0;
    atomic_uintptr_t freed_on = 0;
    held_t *h = held_new(&frees, &freed_on);
    cdc_hold_t *theirs = cdc__hold_retain(&h->hold);
    cdc__hold_retire(&h->hold);
    ck_assert_int_eq(atomic_load(&frees), 0);
    pthread_t thread;
    ck_assert_int_eq(pthread_create(&thread, NULL, release_on_thread, theirs), 0);
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
    ck_assert_int_eq(atomic_load(&frees), 1);
    ck_assert(atomic_load(&freed_on) == (uintptr_t) thread);
}
END_TEST

#define THREADS 4
#define ROUNDS 20000

typedef struct {
    cdc_hold_t *hold;
    atomic_int *go;
} churn_t;

/* Retain and release in a loop, then drop the one reference taken for it. */
static void *churn(void *arg)
{
    churn_t *c = arg;
    while (!atomic_load(c->go))
        ;
    for (int i = 0; i < ROUNDS; i++) {
        cdc__hold_retain(c->hold);
        cdc__hold_release(c->hold);
    }
    cdc__hold_release(c->hold);
    return NULL;
}

/* Threads retain and release at once while the owner retires: the count
   never reaches zero early and the memory is freed exactly once, by the
   last of them. */
START_TEST(test_concurrent_holders_free_once)
{
    for (int round = 0; round < 20; round++) {
        atomic_int frees = 0, go = 0;
        held_t *h = held_new(&frees, NULL);
        pthread_t threads[THREADS];
        churn_t c = {&h->hold, &go};
        for (int t = 0; t < THREADS; t++) {
            cdc__hold_retain(&h->hold); /* before the thread could drop it */
            ck_assert_int_eq(pthread_create(&threads[t], NULL, churn, &c), 0);
        }
        atomic_store(&go, 1);
        cdc__hold_retire(&h->hold);
        for (int t = 0; t < THREADS; t++)
            ck_assert_int_eq(pthread_join(threads[t], NULL), 0);
        ck_assert_int_eq(atomic_load(&frees), 1);
    }
}
END_TEST

/* A held buffer: aligned, writable to its end, freed by the last release. */
START_TEST(test_alloc_buffer)
{
    size_t sizes[] = {0, 1, 63, 64, 65, 4096 + 3, (size_t) 9 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        void *data = NULL;
        cdc_hold_t *hold = cdc__hold_alloc(sizes[i], &data);
        ck_assert_ptr_nonnull(hold);
        ck_assert_ptr_nonnull(data);
        ck_assert_uint_eq((uintptr_t) data % 64, 0);
        ck_assert_int_eq(cdc__hold_refs(hold), 1);
        memset(data, 0x5a, sizes[i]);
        cdc_hold_t *holder = cdc__hold_retain(hold);
        cdc__hold_retire(hold);
        ck_assert_int_eq(cdc__hold_retired(holder), 1);
        for (size_t b = 0; b < sizes[i]; b += 4093)
            ck_assert_uint_eq(((unsigned char *) data)[b], 0x5a);
        cdc__hold_release(holder); /* LSan: nothing left */
    }
}
END_TEST

START_TEST(test_alloc_too_large)
{
    void *data = (void *) 1;
    ck_assert_ptr_null(cdc__hold_alloc(SIZE_MAX - 8, &data));
    ck_assert_ptr_null(data);
}
END_TEST

static Suite *hold_suite(void)
{
    Suite *suite = suite_create("hold");
    TCase *count = tcase_create("count");
    tcase_add_test(count, test_init_is_one_owner_reference);
    tcase_add_test(count, test_retain_release_free_once);
    tcase_add_test(count, test_retire_then_last_holder_frees);
    tcase_add_test(count, test_retire_alone_frees);
    tcase_add_test(count, test_null_accepted);
    suite_add_tcase(suite, count);
    TCase *threads = tcase_create("threads");
    tcase_add_test(threads, test_last_release_on_another_thread);
    tcase_add_test(threads, test_concurrent_holders_free_once);
    suite_add_tcase(suite, threads);
    TCase *buffer = tcase_create("buffer");
    tcase_add_test(buffer, test_alloc_buffer);
    tcase_add_test(buffer, test_alloc_too_large);
    suite_add_tcase(suite, buffer);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(hold_suite());
}
