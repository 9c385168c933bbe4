/* test_placement.c - stable placement of a call's shards on the planned
   workers: home workers, re-plans after a worker leaves or rejoins, spares,
   wrap-around, homes moved by a slot-to-home map, and every plan of a few
   workers. */
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
    cdc__placement_assign(shards, count, workers, planned, worker_of);
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
    cdc__placement_assign(shards, 5, 5, all_of(5), worker_of);
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
    cdc__placement_assign(shards, 6, 8, planned, first);
    for (int call = 0; call < 10; call++) {
        cdc__placement_assign(shards, 6, 8, planned, again);
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
    cdc__placement_assign(shards, 4, 4, all_of(4), worker_of);
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
    cdc__placement_assign(shards, 3, 3, all_of(3), worker_of);
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
    cdc__placement_assign(NULL, 0, 4, all_of(4), worker_of);
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

/* ---- movable homes: the slot-to-home map ------------------------------------ */

/* Slots 0..count-1 placed with homes and per-worker ready bits. */
static void place_homed(int count, int workers, const int *homes, uint64_t live,
                        const uint64_t *ready, int tolerable, int *worker_of)
{
    int shards[64];
    for (int t = 0; t < count; t++)
        shards[t] = t;
    cdc__placement_slots(shards, count, workers, homes, live, ready, tolerable, worker_of);
}

/* Ready bits: each slot's home ready for it (and nothing else). */
static void ready_at_homes(int count, const int *homes, uint64_t *ready)
{
    memset(ready, 0, 64 * sizeof *ready);
    for (int s = 0; s < count; s++)
        ready[homes[s]] |= BIT(s);
}

/* Parity slot 4 on worker 0, data slots 0..3 on workers 1..4: every slot
   on its live, ready home, whatever the task order. */
START_TEST(test_permuted_homes_live_ready)
{
    const int homes[5] = {1, 2, 3, 4, 0};
    uint64_t ready[64];
    ready_at_homes(5, homes, ready);
    int worker_of[5];
    place_homed(5, 5, homes, all_of(5), ready, 1, worker_of);
    for (int s = 0; s < 5; s++)
        ck_assert_int_eq(worker_of[s], homes[s]);
    int shards[5] = {4, 2, 0, 3, 1};
    cdc__placement_slots(shards, 5, 5, homes, all_of(5), ready, 1, worker_of);
    for (int t = 0; t < 5; t++)
        ck_assert_int_eq(worker_of[t], homes[shards[t]]);
}
END_TEST

/* A dead home's slot goes to a live spare ready for it: the spare is the
   worker that is home of no slot (here worker 2), not the one past the last
   slot. */
START_TEST(test_permuted_home_dead_takes_spare)
{
    const int homes[5] = {5, 0, 1, 3, 4}; /* worker 2: the spare */
    uint64_t ready[64];
    ready_at_homes(5, homes, ready);
    ready[2] = BIT(5) - 1; /* the spare holds every slot's weights */
    for (int slot = 0; slot < 5; slot++) {
        int worker_of[5];
        place_homed(5, 6, homes, all_of(6) & ~BIT(homes[slot]), ready, 1, worker_of);
        for (int s = 0; s < 5; s++)
            ck_assert_int_eq(worker_of[s], s == slot ? 2 : homes[s]);
    }
}
END_TEST

/* Homeless: a dead home's slot with no ready worker is an erasure while the
   call can lose it; when it cannot, it goes to its home if live (weights on
   the call path), else to the lowest free live worker. */
START_TEST(test_permuted_homes_homeless)
{
    const int homes[5] = {1, 2, 3, 4, 0};
    uint64_t ready[64];
    ready_at_homes(5, homes, ready);
    int worker_of[5];
    place_homed(5, 5, homes, all_of(5) & ~BIT(0), ready, 1, worker_of);
    ck_assert_int_eq(worker_of[4], -1); /* parity erased, decoded around */
    ready[0] = 0;                       /* its live home lacks the weights */
    place_homed(5, 5, homes, all_of(5), ready, 1, worker_of);
    ck_assert_int_eq(worker_of[4], -1);
    place_homed(5, 5, homes, all_of(5), ready, 0, worker_of);
    ck_assert_int_eq(worker_of[4], 0); /* not tolerable: home, weights follow */
    /* Slots 3 and 4 homeless, home of 4 (worker 0) dead, nothing tolerable:
       slot 3 goes home (worker 4), slot 4 to the lowest free live worker. */
    ready[4] = 0;
    place_homed(5, 6, homes, all_of(6) & ~BIT(0), ready, 0, worker_of);
    ck_assert_int_eq(worker_of[3], 4);
    ck_assert_int_eq(worker_of[4], 5);
}
END_TEST

/* NULL and the identity map are the same placement, for every plan and
   ready set of a few workers. */
START_TEST(test_identity_map_unchanged)
{
    int identity[64];
    for (int w = 0; w < 64; w++)
        identity[w] = w;
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 12);
    for (int workers = 1; workers <= 7; workers++)
        for (uint64_t live = 0; live <= all_of(workers); live++)
            for (int count = 1; count <= workers + 1; count++)
                for (int draw = 0; draw < 4; draw++) {
                    uint64_t ready[64];
                    for (int w = 0; w < 64; w++)
                        ready[w] = cdc_test_rng_next(&rng);
                    int tolerable = (int) cdc_test_rng_int(&rng, 0, 2);
                    int by_null[64], by_map[64];
                    place_homed(count, workers, NULL, live, ready, tolerable, by_null);
                    place_homed(count, workers, identity, live, ready, tolerable, by_map);
                    ck_assert_mem_eq(by_null, by_map, (size_t) count * sizeof(int));
                }
}
END_TEST

/* The homes move (data slots 0..3 to workers 1..4, parity 4 to worker 0)
   and no new home holds its slot yet: every slot stays with its previous
   home, the one ready worker, and nothing is erased. */
START_TEST(test_moved_homes_previous_serves)
{
    const int homes[5] = {1, 2, 3, 4, 0};
    uint64_t ready[64] = {0};
    for (int w = 0; w < 5; w++)
        ready[w] = BIT(w); /* the identity map's weights */
    int worker_of[5];
    place_homed(5, 5, homes, all_of(5), ready, 1, worker_of);
    for (int s = 0; s < 5; s++)
        ck_assert_int_eq(worker_of[s], s);
}
END_TEST

/* Part way through the move, some new homes hold their slot and claim a
   worker that is the only holder of another slot. Greedily that slot would
   be homeless (two of them here: more than the call can lose, so the
   weights would go on the call path); the augmenting path moves a slot
   back to its previous home instead, and every slot runs where its weights
   are. */
START_TEST(test_moved_homes_no_cascade)
{
    const int homes[5] = {1, 2, 3, 4, 0};
    uint64_t ready[64] = {0};
    for (int w = 0; w < 5; w++)
        ready[w] = BIT(w);
    ready[1] |= BIT(0); /* worker 1 holds its new slot 0 too */
    ready[3] |= BIT(2); /* worker 3 its new slot 2 */
    int worker_of[5];
    place_homed(5, 5, homes, all_of(5), ready, 1, worker_of);
    uint64_t used = 0;
    for (int s = 0; s < 5; s++) {
        int w = worker_of[s];
        ck_assert_msg(w >= 0 && (ready[w] & BIT(s)), "slot %d on worker %d", s, w);
        ck_assert(!(used & BIT(w)));
        used |= BIT(w);
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
    TCase *homes = tcase_create("homes");
    tcase_add_test(homes, test_permuted_homes_live_ready);
    tcase_add_test(homes, test_permuted_home_dead_takes_spare);
    tcase_add_test(homes, test_permuted_homes_homeless);
    tcase_add_test(homes, test_identity_map_unchanged);
    tcase_add_test(homes, test_moved_homes_previous_serves);
    tcase_add_test(homes, test_moved_homes_no_cascade);
    suite_add_tcase(suite, homes);
    TCase *exhaustive = tcase_create("exhaustive");
    tcase_add_test(exhaustive, test_every_plan);
    suite_add_tcase(suite, exhaustive);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(placement_suite());
}
