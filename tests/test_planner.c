/* test_planner.c - the latency model (src/coordinator/profile/planner.c): block lengths
   against brute force, the parity cap, the homes of a heterogeneous mix, and
   bad arguments. */
#include "cdcgemm.h"
#include "planner.h"
#include "testutil.h"

#include <math.h>
#include <string.h>

/* Per-row costs of the example mix: GFLOP/s 1, 1, 0.25, 0.25, 0.125. */
static const cdc_shard_cost_t mix[5] = {
    {0.0, 1.0, 0.0, 0}, {0.0, 1.0, 0.0, 0}, {0.0, 4.0, 0.0, 0}, {0.0, 4.0, 0.0, 0},
    {0.0, 8.0, 0.0, 0}};

static int64_t sum_of(const int64_t *len, int n)
{
    int64_t s = 0;
    for (int i = 0; i < n; i++)
        s += len[i];
    return s;
}

/* Whether lengths len respect the homes' max_rows (0: no limit). */
static int within_caps(const cdc_shard_cost_t *data, int n, const cdc_shard_cost_t *parity,
                       int r, const int64_t *len)
{
    int64_t longest = 0;
    for (int i = 0; i < n; i++) {
        if (data[i].max_rows > 0 && (double) len[i] > data[i].max_rows)
            return 0;
        longest = len[i] > longest ? len[i] : longest;
    }
    for (int j = 0; j < r; j++)
        if (parity[j].max_rows > 0 && (double) longest > parity[j].max_rows)
            return 0;
    return 1;
}

/* The least latency over every composition of rows into n blocks >= 0
   (an empty block is not sent) within the homes' caps (INFINITY: none
   fits). */
static double brute_force(const cdc_shard_cost_t *data, int n, const cdc_shard_cost_t *parity,
                          int r, int64_t rows, int64_t *len, int i)
{
    if (i == n - 1) {
        len[i] = rows;
        return within_caps(data, n, parity, r, len) ? cdc__planner_latency(data, n, parity, r, len)
                                                    : INFINITY;
    }
    double best = INFINITY;
    for (int64_t l = 0; l <= rows; l++) {
        len[i] = l;
        double t = brute_force(data, n, parity, r, rows - l, len, i + 1);
        best = t < best ? t : best;
    }
    return best;
}

START_TEST(test_equal_devices_equal_blocks)
{
    cdc_shard_cost_t same[4] = {
        {0.5, 2.0, 0, 0}, {0.5, 2.0, 0, 0}, {0.5, 2.0, 0, 0}, {0.5, 2.0, 0, 0}};
    int64_t len[3];
    double t;
    ck_assert_int_eq(cdc__planner_block_lengths(same, 3, same + 3, 1, 100, len, &t), CDC_OK);
    ck_assert_int_eq(sum_of(len, 3), 100);
    for (int i = 0; i < 3; i++)
        ck_assert(len[i] == 33 || len[i] == 34);
    ck_assert_double_eq_tol(t, 0.5 + 2.0 * 34, 1e-9);
}
END_TEST

START_TEST(test_lengths_follow_speed)
{
    /* Data on the four devices other than a fast one: 1 : 0.25 : 0.25 : 0.125. */
    const cdc_shard_cost_t data[4] = {mix[1], mix[2], mix[3], mix[4]};
    int64_t len[4];
    double t;
    ck_assert_int_eq(cdc__planner_block_lengths(data, 4, mix, 1, 1300, len, &t), CDC_OK);
    ck_assert_int_eq(sum_of(len, 4), 1300);
    /* 8 : 2 : 2 : 1 of 1300 rows: 800, 200, 200, 100. */
    ck_assert_int_eq(len[0], 800);
    ck_assert_int_eq(len[1], 200);
    ck_assert_int_eq(len[2], 200);
    ck_assert_int_eq(len[3], 100);
    ck_assert_double_eq_tol(t, 800.0, 1e-9);
}
END_TEST

START_TEST(test_parity_home_caps_blocks)
{
    /* Fast data homes, a parity home four times slower: no block may be
       longer than the parity computes by the deadline. */
    cdc_shard_cost_t data[2] = {{0.0, 1.0, 0, 0}, {0.0, 1.0, 0, 0}};
    cdc_shard_cost_t parity[1] = {{0.0, 4.0, 0, 0}};
    int64_t len[2];
    double t;
    ck_assert_int_eq(cdc__planner_block_lengths(data, 2, parity, 1, 100, len, &t), CDC_OK);
    ck_assert_int_eq(len[0], 50);
    ck_assert_int_eq(len[1], 50);
    ck_assert_double_eq_tol(t, 200.0, 1e-9);
    /* With one fast, one slow data home, the slow parity still caps. */
    data[1].per_row_ms = 8.0;
    ck_assert_int_eq(cdc__planner_block_lengths(data, 2, parity, 1, 90, len, &t), CDC_OK);
    ck_assert_int_eq(sum_of(len, 2), 90);
    ck_assert_double_eq_tol(t, brute_force(data, 2, parity, 1, 90, (int64_t[2]){0}, 0), 1e-9);
}
END_TEST

/* Fewer workers when the link dominates: a home whose fixed cost (its
   round trip, the whole operand sent to it) alone exceeds the others' whole
   blocks gets none (one row would make the call wait for it), also with a
   parity; and fewer rows than blocks leave blocks empty. */
START_TEST(test_fixed_cost_past_latency_gets_none)
{
    cdc_shard_cost_t data[3] = {{0.0, 1.0, 0, 0}, {0.0, 1.0, 0, 0}, {500.0, 1.0, 0, 0}};
    int64_t len[3];
    double t;
    ck_assert_int_eq(cdc__planner_block_lengths(data, 3, NULL, 0, 200, len, &t), CDC_OK);
    ck_assert_int_eq(len[2], 0);
    ck_assert_int_eq(len[0], 100);
    ck_assert_int_eq(len[1], 100);
    ck_assert_double_eq_tol(t, 100.0, 1e-12); /* one row on it: 501 */
    const cdc_shard_cost_t parity[1] = {{0.0, 1.0, 0, 0}};
    ck_assert_int_eq(cdc__planner_block_lengths(data, 3, parity, 1, 200, len, &t), CDC_OK);
    ck_assert_int_eq(len[2], 0);
    ck_assert_double_eq_tol(t, 100.0, 1e-12);
    ck_assert_double_eq_tol(cdc__planner_latency_first_n(data, 3, parity, 1, len), 100.0, 1e-12);
    /* A home near the others' finish takes what it can by then. */
    data[2].fixed_ms = 60.0;
    ck_assert_int_eq(cdc__planner_block_lengths(data, 3, NULL, 0, 200, len, &t), CDC_OK);
    ck_assert(len[2] == 26 || len[2] == 27); /* (T - 60) rows by T = 86.67 */
    ck_assert_int_eq(sum_of(len, 3), 200);
    ck_assert_double_eq_tol(t, 87.0, 1e-12);
    ck_assert_int_eq(cdc__planner_block_lengths(data, 3, NULL, 0, 2, len, &t), CDC_OK);
    ck_assert_int_eq(len[0], 1);
    ck_assert_int_eq(len[1], 1);
    ck_assert_int_eq(len[2], 0);
}
END_TEST

START_TEST(test_optimal_against_brute_force)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 12);
    for (int trial = 0; trial < 300; trial++) {
        int n = (int) cdc_test_rng_int(&rng, 1, 4), r = (int) cdc_test_rng_int(&rng, 0, 2);
        int64_t rows = cdc_test_rng_int(&rng, n, 14);
        cdc_shard_cost_t cost[6];
        for (int i = 0; i < n + r; i++) {
            cost[i].fixed_ms = cdc_test_rng_uniform(&rng, 0.0, 5.0);
            cost[i].per_row_ms = cdc_test_rng_uniform(&rng, 0.1, 10.0);
            cost[i].max_rows = 0.0;
        }
        int64_t len[4], scratch[4];
        double t;
        ck_assert_int_eq(cdc__planner_block_lengths(cost, n, cost + n, r, rows, len, &t), CDC_OK);
        ck_assert_int_eq(sum_of(len, n), rows);
        for (int i = 0; i < n; i++)
            ck_assert_int_ge(len[i], 0);
        double best = brute_force(cost, n, cost + n, r, rows, scratch, 0);
        /* Whole rows: at most one row of the slowest home above the optimum. */
        double slowest = 0.0;
        for (int i = 0; i < n + r; i++)
            slowest = cost[i].per_row_ms > slowest ? cost[i].per_row_ms : slowest;
        ck_assert_msg(t <= best + slowest + 1e-9, "trial %d: %g vs best %g", trial, t, best);
        ck_assert_double_eq_tol(t, cdc__planner_latency(cost, n, cost + n, r, len), 1e-12);
    }
}
END_TEST

/* Memory budgets (max_rows): the planner's lengths stay within every cap,
   are as good as the best composition that does (up to one row of the
   slowest home), and a call no composition fits is refused (CDC_ENOMEM). */
START_TEST(test_caps_against_brute_force)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 13);
    int refused = 0;
    for (int trial = 0; trial < 300; trial++) {
        int n = (int) cdc_test_rng_int(&rng, 1, 4), r = (int) cdc_test_rng_int(&rng, 0, 2);
        int64_t rows = cdc_test_rng_int(&rng, n, 14);
        cdc_shard_cost_t cost[6];
        double slowest = 0.0;
        for (int i = 0; i < n + r; i++) {
            cost[i].fixed_ms = cdc_test_rng_uniform(&rng, 0.0, 5.0);
            cost[i].per_row_ms = cdc_test_rng_uniform(&rng, 0.1, 10.0);
            int64_t cap = cdc_test_rng_int(&rng, 0, rows); /* 0: no limit */
            cost[i].max_rows = (double) cap;
            slowest = cost[i].per_row_ms > slowest ? cost[i].per_row_ms : slowest;
        }
        int64_t len[4] = {-1, -1, -1, -1}, scratch[4];
        double t = -1.0;
        double best = brute_force(cost, n, cost + n, r, rows, scratch, 0);
        int rc = cdc__planner_block_lengths(cost, n, cost + n, r, rows, len, &t);
        if (!isfinite(best)) {
            ck_assert_msg(rc == CDC_ENOMEM, "trial %d: fitted what does not fit", trial);
            ck_assert_int_eq(len[0], -1);
            refused++;
            continue;
        }
        ck_assert_msg(rc == CDC_OK, "trial %d: refused what fits (%s)", trial, cdc_last_error());
        ck_assert_int_eq(sum_of(len, n), rows);
        ck_assert(within_caps(cost, n, cost + n, r, len));
        ck_assert_msg(t <= best + slowest + 1e-9, "trial %d: %g vs best %g", trial, t, best);
    }
    ck_assert_int_gt(refused, 10); /* the random caps did refuse some */
}
END_TEST

/* A parity home that cannot hold the longest block is not chosen, though
   it is the fastest. */
START_TEST(test_homes_skip_parity_over_budget)
{
    cdc_shard_cost_t capped[5];
    memcpy(capped, mix, sizeof mix);
    capped[0].max_rows = 300; /* can hold a short data block, not the parity */
    capped[1].max_rows = 300;
    int homes[5];
    double t;
    ck_assert_int_eq(cdc__planner_homes(capped, 5, 4, 1, 1300, homes, &t), CDC_OK);
    ck_assert(homes[4] != 0 && homes[4] != 1);
    int64_t longest = 0;
    cdc_shard_cost_t data[4], parity[1] = {capped[homes[4]]};
    for (int s = 0; s < 4; s++)
        data[s] = capped[homes[s]];
    int64_t len[4];
    ck_assert_int_eq(cdc__planner_block_lengths(data, 4, parity, 1, 1300, len, NULL), CDC_OK);
    for (int s = 0; s < 4; s++) {
        ck_assert(data[s].max_rows == 0 || (double) len[s] <= data[s].max_rows);
        longest = len[s] > longest ? len[s] : longest;
    }
    /* Every home capped below a quarter: nothing fits. */
    for (int w = 0; w < 5; w++)
        capped[w].max_rows = 320;
    ck_assert_int_eq(cdc__planner_homes(capped, 5, 4, 1, 1300, homes, &t), CDC_ENOMEM);
}
END_TEST

START_TEST(test_homes_put_parity_on_fast_device)
{
    int homes[5];
    double t;
    ck_assert_int_eq(cdc__planner_homes(mix, 5, 4, 1, 1300, homes, &t), CDC_OK);
    /* Parity on one of the two fast devices; data on the other four. */
    ck_assert(homes[4] == 0 || homes[4] == 1);
    int seen = 0;
    for (int s = 0; s < 5; s++)
        seen |= 1 << homes[s];
    ck_assert_int_eq(seen, 0x1f);
    ck_assert_double_eq_tol(t, 800.0, 1e-9);
    /* Equal blocks with the parity on the slowest device (today's plan). */
    int64_t equal[4] = {325, 325, 325, 325};
    double equal_t = cdc__planner_latency(mix, 4, mix + 4, 1, equal);
    ck_assert_double_eq_tol(equal_t, 2600.0, 1e-9);
    ck_assert(t < 0.65 * (325.0 * 4)); /* below the fast-path equal plan too */
}
END_TEST

START_TEST(test_homes_leave_slowest_as_spare)
{
    /* Six workers, five slots: the slowest is the spare. */
    cdc_shard_cost_t six[6] = {mix[0], mix[1], mix[2], mix[3], {0.0, 20.0, 0, 0}, mix[4]};
    int homes[5];
    ck_assert_int_eq(cdc__planner_homes(six, 6, 4, 1, 1000, homes, NULL), CDC_OK);
    for (int s = 0; s < 5; s++)
        ck_assert_int_ne(homes[s], 4);
    /* Same devices, same answer: deterministic. */
    int again[5];
    ck_assert_int_eq(cdc__planner_homes(six, 6, 4, 1, 1000, again, NULL), CDC_OK);
    for (int s = 0; s < 5; s++)
        ck_assert_int_eq(homes[s], again[s]);
}
END_TEST

START_TEST(test_homes_homogeneous_identity)
{
    cdc_shard_cost_t same[5] = {
        {1, 1, 0, 0}, {1, 1, 0, 0}, {1, 1, 0, 0}, {1, 1, 0, 0}, {1, 1, 0, 0}};
    int homes[5];
    ck_assert_int_eq(cdc__planner_homes(same, 5, 3, 2, 600, homes, NULL), CDC_OK);
    for (int s = 0; s < 5; s++)
        ck_assert_int_eq(homes[s], s);
}
END_TEST

/* Nothing failing, a call ends with its n-th shard: equal blocks on the
   example mix wait for the quarter-speed devices, not the slowest parity. */
START_TEST(test_latency_first_n)
{
    const cdc_shard_cost_t data[4] = {{1, 1, 0, 0}, {1, 1, 0, 0}, {1, 4, 0, 0}, {1, 4, 0, 0}};
    const cdc_shard_cost_t parity[1] = {{1, 8, 0, 0}};
    const int64_t len[4] = {10, 10, 10, 10};
    ck_assert_double_eq_tol(cdc__planner_latency(data, 4, parity, 1, len), 81.0, 1e-12);
    ck_assert_double_eq_tol(cdc__planner_latency_first_n(data, 4, parity, 1, len), 41.0, 1e-12);
    /* No parity: every data block. */
    ck_assert_double_eq_tol(cdc__planner_latency_first_n(data, 4, NULL, 0, len), 41.0, 1e-12);
    const cdc_shard_cost_t fast_parity[1] = {{1, 1, 0, 0}};
    ck_assert_double_eq_tol(cdc__planner_latency_first_n(data, 4, fast_parity, 1, len), 41.0,
                            1e-12);
    const int64_t sized[4] = {16, 16, 4, 4};
    ck_assert_double_eq_tol(cdc__planner_latency_first_n(data, 4, fast_parity, 1, sized), 17.0,
                            1e-12);
}
END_TEST

START_TEST(test_bad_arguments)
{
    int64_t len[4];
    int homes[4];
    ck_assert_int_eq(cdc__planner_block_lengths(mix, 4, mix + 4, 1, 0, len, NULL), CDC_EINVAL);
    ck_assert_int_eq(cdc__planner_block_lengths(mix, 0, NULL, 0, 3, len, NULL), CDC_EINVAL);
    cdc_shard_cost_t bad[2] = {{0.0, 0.0, 0, 0}, {NAN, 1.0, 0, 0}};
    ck_assert_int_eq(cdc__planner_block_lengths(bad, 1, NULL, 0, 3, len, NULL), CDC_EINVAL);
    ck_assert_int_eq(cdc__planner_block_lengths(bad + 1, 1, NULL, 0, 3, len, NULL), CDC_EINVAL);
    ck_assert_int_eq(cdc__planner_homes(mix, 3, 3, 1, 10, homes, NULL), CDC_EINVAL);
}
END_TEST

static Suite *planner_suite(void)
{
    Suite *suite = suite_create("planner");
    TCase *lengths = tcase_create("lengths");
    tcase_add_test(lengths, test_equal_devices_equal_blocks);
    tcase_add_test(lengths, test_lengths_follow_speed);
    tcase_add_test(lengths, test_parity_home_caps_blocks);
    tcase_add_test(lengths, test_fixed_cost_past_latency_gets_none);
    tcase_add_test(lengths, test_optimal_against_brute_force);
    tcase_add_test(lengths, test_latency_first_n);
    tcase_add_test(lengths, test_caps_against_brute_force);
    tcase_add_test(lengths, test_bad_arguments);
    suite_add_tcase(suite, lengths);
    TCase *homes = tcase_create("homes");
    tcase_add_test(homes, test_homes_put_parity_on_fast_device);
    tcase_add_test(homes, test_homes_skip_parity_over_budget);
    tcase_add_test(homes, test_homes_leave_slowest_as_spare);
    tcase_add_test(homes, test_homes_homogeneous_identity);
    suite_add_tcase(suite, homes);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(planner_suite());
}
