/* test_hold.c - cdc_hold_t (src/base/hold.h): the owner's reference, retain,
   release, retire; the memory freed exactly once, by the last reference,
   on whichever thread drops it; a held buffer in one allocation. And what
   rides on holds: the meter of built operands libzmq still holds
   (transport/build_meter.h) and a weight matrix's rows kept or borrowed
   (src/base/row_parts.h). */
#include "cdcgemm.h"
#include "build_meter.h"
#include "hold.h"
#include "row_parts.h"
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

/* ---- built operands in libzmq's hands (build_meter.h) -------------------- */

static void *release_later(void *hold)
{
    cdc_test_sleep_ms(50);
    cdc__hold_release(hold);
    return NULL;
}

/* A build waits while the budget is out, at most its bound; a tracker's
   last release (another thread's, as libzmq's) uncounts it, releases what
   it tracked and wakes the wait; the meter outlives its owner's release
   while a tracker is out. */
START_TEST(test_build_meter_waits_for_the_budget)
{
    cdc_build_meter_t *meter = cdc__build_meter_new(100);
    ck_assert_ptr_nonnull(meter);
    void *data;
    cdc_hold_t *built[2] = {cdc__hold_alloc(8, &data), cdc__hold_alloc(8, &data)};
    cdc_hold_t *keep = cdc__hold_retain(built[1]);
    ck_assert_int_eq(cdc__build_meter_wait(meter, 1000), 0);
    cdc_hold_t *first = cdc__build_meter_track(meter, built[0], 60);
    ck_assert_int_eq(cdc__build_meter_wait(meter, 1000), 0); /* 60 < 100 */
    cdc_hold_t *second = cdc__build_meter_track(meter, built[1], 60);
    ck_assert_uint_eq(cdc__build_meter_outstanding(meter), 120);
    double started = cdc_test_now_s();
    ck_assert_int_eq(cdc__build_meter_wait(meter, 100), 1); /* waited out */
    ck_assert_double_ge(cdc_test_now_s() - started, 0.09);
    pthread_t thread;
    ck_assert_int_eq(pthread_create(&thread, NULL, release_later, first), 0);
    started = cdc_test_now_s();
    ck_assert_int_eq(cdc__build_meter_wait(meter, 5000), 0); /* woken */
    ck_assert_double_lt(cdc_test_now_s() - started, 2.0);
    pthread_join(thread, NULL);
    ck_assert_uint_eq(cdc__build_meter_outstanding(meter), 60);
    cdc__build_meter_release(meter); /* the owner goes; the tracker keeps it */
    ck_assert_int_eq(cdc__hold_refs(keep), 2);
    cdc__hold_release(second);
    ck_assert_int_eq(cdc__hold_refs(keep), 1); /* released with the tracker */
    cdc__hold_release(keep);
}
END_TEST

/* ---- rows kept or borrowed (row_parts.h) ---------------------------------- */

/* Rows lent in parts read back as the whole they stack: views in place
   inside a part, copied across parts; nothing is read once the owner let
   go. */
START_TEST(test_row_parts_views_and_close)
{
    enum { K = 3, ROWS = 10 };
    float whole[ROWS * K];
    for (int i = 0; i < ROWS * K; i++)
        whole[i] = (float) i;
    const cdc_weight_part_t list[3] = {{whole, 4}, {whole + 4 * K, 1}, {whole + 5 * K, 5}};
    cdc_row_parts_t *parts;
    ck_assert_int_eq(cdc__row_parts_borrow(list, 3, K, 0, &parts), CDC_OK);
    ck_assert_int_eq(parts->rows, ROWS);
    float scratch[ROWS * K], copy[ROWS * K];
    ck_assert(!cdc__row_parts_spans(parts, 1, 3));
    ck_assert_ptr_eq(cdc__row_parts_view(parts, 1, 3, scratch), whole + K);
    ck_assert(cdc__row_parts_spans(parts, 3, 4));
    ck_assert_ptr_eq(cdc__row_parts_view(parts, 3, 4, scratch), scratch);
    ck_assert(memcmp(scratch, whole + 3 * K, 4 * K * sizeof(float)) == 0);
    ck_assert_int_eq(cdc__row_parts_enter(parts), CDC_OK);
    cdc__row_parts_copy(parts, 0, ROWS, copy);
    cdc__row_parts_leave(parts);
    ck_assert(memcmp(copy, whole, sizeof whole) == 0);
    const float *packed = cdc__row_parts_packed(parts); /* a copy, once */
    ck_assert(packed != whole && memcmp(packed, whole, sizeof whole) == 0);
    ck_assert_ptr_eq(cdc__row_parts_packed(parts), packed);
    cdc_hold_t *held = cdc__hold_retain(&parts->hold);
    cdc__row_parts_close(parts);
    ck_assert_int_eq(cdc__row_parts_enter(parts), CDC_ESTATE);
    cdc__hold_release(held);
    /* The library's own copy: its one part. */
    cdc_row_parts_t *copied = cdc__row_parts_copy_new(whole, ROWS, K);
    ck_assert_ptr_nonnull(copied);
    ck_assert(!copied->borrowed && copied->part[0] != whole);
    ck_assert_ptr_eq(cdc__row_parts_packed(copied), copied->part[0]);
    ck_assert_int_eq(cdc__row_parts_enter(copied), CDC_OK);
    cdc__row_parts_leave(copied);
    cdc__row_parts_close(copied);
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
    TCase *meter = tcase_create("meter");
    tcase_add_test(meter, test_build_meter_waits_for_the_budget);
    suite_add_tcase(suite, meter);
    TCase *parts = tcase_create("parts");
    tcase_add_test(parts, test_row_parts_views_and_close);
    suite_add_tcase(suite, parts);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(hold_suite());
}
