/* test_placement.c - stable placement of a call's shards on the planned
   workers: home workers, re-plans after a worker leaves or rejoins, spares,
   wrap-around, and every plan of a few workers. */
#include "bits.h"
#include "placement.h"
#include "testutil.h"

#include <string.h>

#define BIT(w) (UINT64_C(1) << (w))

static uint64_t all_of(int workers)
{
    return workers == 64 ? ~UINT64_C(0) : BIT(workers) - 1;
}

/* Shards 0..count-1, one task each, as the coordinator sends them. */
static void place_range(int count, int workers, uint64_t planned, int *worker_of)
{
    int shards[64];
    for (int t = 0; t < count; t++)
        shards[t] = t;
    cdc_placement_assign(shards, count, workers, planned, worker_of);
}

/* ---- home: every shard on its own worker when it can be ------------------- */

START_TEST(test_full_plan_is_identity)
{
    for (int workers = 1; workers <= 64; workers++) {
        int worker_of[64];
        place_range(workers, workers, all_of(workers), worker_of);
        for (int t = 0; t < workers; t++)
            ck_assert_int_eq(worker_of[t], t);
    }
}
END_TEST

START_TEST(test_fewer_shards_than_workers)
{
    /* 3 shards on 6 workers: each on its home, workers 3..5 idle. */
    int worker_of[3];
    place_range(3, 6, all_of(6), worker_of);
    for (int t = 0; t < 3; t++)
        ck_assert_int_eq(worker_of[t], t);
}
END_TEST

START_TEST(test_task_order_does_not_matter_for_homes)
{
    int shards[5] = {4, 2, 0, 3, 1}, worker_of[5];
    cdc_placement_assign(shards, 5, 5, all_of(5), worker_of);
    for (int t = 0; t < 5; t++)
        ck_assert_int_eq(worker_of[t], shards[t]);
}
END_TEST

/* ---- re-plan: survivors keep their shards ------------------------------------ */

/* Keep-shards re-plan: n + r shards stay, one worker leaves. Every survivor
   keeps its shard; the dead worker's shard moves to the lowest spare. */
START_TEST(test_worker_leaves_same_shards)
{
    const int workers = 6, shards = 4;
    for (int dead = 0; dead < workers; dead++) {
        int worker_of[4];
        place_range(shards, workers, all_of(workers) & ~BIT(dead), worker_of);
        for (int t = 0; t < shards; t++) {
            if (t != dead)
                ck_assert_int_eq(worker_of[t], t);
            else
                ck_assert_int_eq(worker_of[t], shards); /* worker 4: the first spare */
        }
    }
}
END_TEST

/* A re-plan over P - 1 workers (one shard fewer): every shard whose home
   survived stays there, the dead worker's shard (if it still exists) goes to
   the one survivor whose shard no longer exists. */
START_TEST(test_worker_leaves_replan)
{
    for (int workers = 2; workers <= 12; workers++)
        for (int dead = 0; dead < workers; dead++) {
            int count = workers - 1, worker_of[64];
            place_range(count, workers, all_of(workers) & ~BIT(dead), worker_of);
            for (int t = 0; t < count; t++) {
                int want = t == dead ? workers - 1 : t;
                ck_assert_msg(worker_of[t] == want, "W = %d, dead %d: shard %d on %d, want %d",
                              workers, dead, t, worker_of[t], want);
            }
        }
}
END_TEST

/* Two workers leave, then one of them rejoins: shards go back home, and the
   placement is the same as if nothing had happened. */
START_TEST(test_worker_rejoins)
{
    const int workers = 5;
    int before[5], during[3], after[5];
    place_range(5, workers, all_of(workers), before);
    place_range(3, workers, all_of(workers) & ~BIT(0) & ~BIT(3), during);
    ck_assert_int_eq(during[0], 4); /* shard 0's home left: the first spare */
    ck_assert_int_eq(during[1], 1);
    ck_assert_int_eq(during[2], 2);
    place_range(5, workers, all_of(workers), after);
    ck_assert_mem_eq(before, after, sizeof before);
}
END_TEST

/* Same shards, the plan unchanged (a silent worker stays planned through its
   grace period): the placement is the same call after call. */
START_TEST(test_placement_is_deterministic)
{
    int shards[6] = {0, 1, 2, 3, 4, 5}, first[6], again[6];
    uint64_t planned = BIT(1) | BIT(2) | BIT(5) | BIT(7);
    cdc_placement_assign(shards, 6, 8, planned, first);
    for (int call = 0; call < 10; call++) {
        cdc_placement_assign(shards, 6, 8, planned, again);
        ck_assert_mem_eq(first, again, sizeof first);
    }
}
END_TEST

/* ---- spares, replicas and wrap-around ----------------------------------------- */

START_TEST(test_replicas_take_spares)
{
    /* 2-modular redundancy: shards 0, 1 twice over 4 workers. The first copy
       of each stays home, the second takes a spare in order. */
    int shards[4] = {0, 1, 0, 1}, worker_of[4];
    cdc_placement_assign(shards, 4, 4, all_of(4), worker_of);
    ck_assert_int_eq(worker_of[0], 0);
    ck_assert_int_eq(worker_of[1], 1);
    ck_assert_int_eq(worker_of[2], 2);
    ck_assert_int_eq(worker_of[3], 3);
}
END_TEST

START_TEST(test_more_shards_than_workers_wrap)
{
    /* 5 shards, planned workers {1, 3}: shards 1 and 3 home, then no spare
       is left and task t wraps onto planned[t mod 2]. */
    int worker_of[5];
    uint64_t planned = BIT(1) | BIT(3);
    place_range(5, 4, planned, worker_of);
    ck_assert_int_eq(worker_of[1], 1);
    ck_assert_int_eq(worker_of[3], 3);
    ck_assert_int_eq(worker_of[0], 1); /* planned[0 % 2] */
    ck_assert_int_eq(worker_of[2], 1); /* planned[2 % 2] */
    ck_assert_int_eq(worker_of[4], 1); /* planned[4 % 2] */
}
END_TEST

START_TEST(test_shards_beyond_workers)
{
    /* Shard indices past the last worker have no home: they take spares. */
    int shards[3] = {5, 6, 0}, worker_of[3];
    cdc_placement_assign(shards, 3, 3, all_of(3), worker_of);
    ck_assert_int_eq(worker_of[2], 0);
    ck_assert_int_eq(worker_of[0], 1);
    ck_assert_int_eq(worker_of[1], 2);
}
END_TEST

START_TEST(test_no_planned_worker)
{
    int worker_of[4];
    memset(worker_of, 0x5a, sizeof worker_of);
    place_range(4, 4, 0, worker_of);
    for (int t = 0; t < 4; t++)
        ck_assert_int_eq(worker_of[t], -1);
}
END_TEST

START_TEST(test_no_tasks)
{
    int worker_of[1] = {123};
    cdc_placement_assign(NULL, 0, 4, all_of(4), worker_of);
    ck_assert_int_eq(worker_of[0], 123);
}
END_TEST

/* ---- every plan of a few workers ---------------------------------------------- */

/* For W <= 7 workers, every plan (mask) and every shard count 1..W: each
   task goes to a planned worker; a shard whose home is planned stays home;
   with no more shards than planned workers no worker gets two; with more,
   every planned worker gets one. */
START_TEST(test_every_plan)
{
    for (int workers = 1; workers <= 7; workers++)
        for (uint64_t planned = 1; planned <= all_of(workers); planned++) {
            int p = cdc__popcount64(planned);
            for (int count = 1; count <= workers; count++) {
                int worker_of[64], load[64] = {0};
                place_range(count, workers, planned, worker_of);
                for (int t = 0; t < count; t++) {
                    int w = worker_of[t];
                    ck_assert_msg(w >= 0 && w < workers && (planned & BIT(w)),
                                  "W = %d, plan %llx: shard %d on worker %d", workers,
                                  (unsigned long long) planned, t, w);
                    if (planned & BIT(t))
                        ck_assert_int_eq(w, t);
                    load[w]++;
                }
                for (int w = 0; w < workers; w++) {
                    if (count <= p)
                        ck_assert_int_le(load[w], 1);
                    else if (planned & BIT(w))
                        ck_assert_int_ge(load[w], 1);
                }
            }
        }
}
END_TEST

static Suite *placement_suite(void)
{
    Suite *suite = suite_create("placement");
    TCase *home = tcase_create("home");
    tcase_add_test(home, test_full_plan_is_identity);
    tcase_add_test(home, test_fewer_shards_than_workers);
    tcase_add_test(home, test_task_order_does_not_matter_for_homes);
    suite_add_tcase(suite, home);
    TCase *replan = tcase_create("replan");
    tcase_add_test(replan, test_worker_leaves_same_shards);
    tcase_add_test(replan, test_worker_leaves_replan);
    tcase_add_test(replan, test_worker_rejoins);
    tcase_add_test(replan, test_placement_is_deterministic);
    suite_add_tcase(suite, replan);
    TCase *spares = tcase_create("spares");
    tcase_add_test(spares, test_replicas_take_spares);
    tcase_add_test(spares, test_more_shards_than_workers_wrap);
    tcase_add_test(spares, test_shards_beyond_workers);
    tcase_add_test(spares, test_no_planned_worker);
    tcase_add_test(spares, test_no_tasks);
    suite_add_tcase(suite, spares);
    TCase *exhaustive = tcase_create("exhaustive");
    tcase_add_test(exhaustive, test_every_plan);
    suite_add_tcase(suite, exhaustive);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(placement_suite());
}
