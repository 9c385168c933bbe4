/* test_budget.c - memory budgets (issue 12) on real embedded workers started
   with CDCGEMM_WORKER_MAX_MEMORY=2M: a layer whose shards fit is distributed
   and its shards stay in the workers' caches; a layer whose shards would not
   fit any worker runs on the coordinator, exact, counted in budget_fallbacks,
   and no worker is sent its weights. And workers that lie (issue 24,
   misreport faults): one reporting a 1-byte budget costs its own slot (an
   erasure), not every call, and is forgotten once dead; one reporting an
   absurd speed is planned as the slowest device. */
#include "cdcgemm.h"
#include "context.h"
#include "executor.h"
#include "plan.h"
#include "profiled_plan.h"
#include "local_workers.h"
#include "fc_fixture.h"
#include "profile.h"
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#define REL_TOL 1e-5
#define WORKERS 5
#define BUDGET (2u << 20)

/* faults: the workers' CDCGEMM_FAULTS; liar: the worker whose reported
   budget differs (-1: none). */
static cdc_context_t *budget_context_with(const char *faults, int liar, cdc_plan_mode_t plan)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.local_workers = WORKERS;
    config.parity = 1;
    config.timeout_ms = 5000;
    config.respawn = 0; /* a killed liar stays dead */
    config.plan = plan;
    snprintf(config.faults, sizeof config.faults, "%s", faults);
    config.log_level = getenv("CDC_TEST_LOG") ? CDC_LOG_INFO : CDC_LOG_ERROR;
    cdc_context_t *context = NULL;
    int rc = cdc_context_new(&config, &context);
    ck_assert_msg(rc == CDC_OK, "cdc_context_new: %s (%s)", cdc_err_name(rc),
                  cdc_last_error());
    /* Every worker's budget as its heartbeats report it (bounded wait). */
    double start = cdc_test_now_s();
    for (;;) {
        cdc_worker_profile_t p[WORKERS];
        int known = 0, count = cdc__context_profile(context, p, WORKERS);
        for (int w = 0; w < count; w++)
            known += w == liar ? p[w].max_memory > 0 : p[w].max_memory == BUDGET;
        if (known == WORKERS)
            break;
        ck_assert_msg(cdc_test_now_s() - start < 10.0, "%d of %d budgets reported", known,
                      WORKERS);
        cdc_test_sleep_ms(20);
    }
    return context;
}

static cdc_context_t *budget_context(void)
{
    return budget_context_with("", -1, CDC_PLAN_EQUAL);
}

static cdc_stats_t stats_of(cdc_context_t *context)
{
    cdc_stats_t stats;
    ck_assert_int_eq(cdc_context_stats(context, &stats), CDC_OK);
    return stats;
}

/* 256 x 1024 weights: 256 KiB shards of 64 rows fit 2 MiB. */
START_TEST(test_fitting_layer_distributed)
{
    cdc_context_t *context = budget_context();
    cdc_test_fc_t f;
    cdc_test_fc_make(&f, context, 256, 1024, 2, 31, 1);
    for (int i = 0; i < 5; i++)
        cdc_test_fc_check(&f, REL_TOL);
    cdc_stats_t stats = stats_of(context);
    ck_assert_uint_eq(stats.budget_fallbacks, 0);
    ck_assert_uint_ge(stats.weight_bytes, 256u * 1024u * sizeof(float));
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

/* 2048 x 1024 weights: shards of 512 rows are 2 MiB of floats, over the
   budget with the cache's own costs; no worker can hold one. */
START_TEST(test_oversized_layer_on_coordinator)
{
    cdc_context_t *context = budget_context();
    cdc_test_fc_t f;
    cdc_test_fc_make(&f, context, 2048, 1024, 2, 32, 1);
    for (int i = 0; i < 4; i++)
        cdc_test_fc_check(&f, REL_TOL);
    cdc_stats_t stats = stats_of(context);
    ck_assert_uint_eq(stats.budget_fallbacks, 4);
    ck_assert_uint_eq(stats.fallbacks, 0); /* planned, not a failure */
    ck_assert_uint_eq(stats.weight_bytes, 0);
    ck_assert_uint_eq(stats.shards_sent, 0);
    cdc_worker_profile_t p[WORKERS];
    int count = cdc__context_profile(context, p, WORKERS);
    for (int w = 0; w < count; w++)
        ck_assert_uint_le(p[w].cache_bytes, BUDGET);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

/* Worker 1 says its --max-memory is 1 byte. Its slot is not sent (the
   parity covers it): no call goes to the coordinator for it. Killed, it is
   forgotten: the calls after its death are not held by its report either. */
START_TEST(test_tiny_budget_costs_its_slot)
{
    for (int layout = 0; layout < 2; layout++) {
        setenv("CDCGEMM_PARITY_LAYOUT", layout ? "dedicated" : "rotated", 1);
        cdc_context_t *context = budget_context_with("misreport@w1:memory=1", 1,
                                                     CDC_PLAN_EQUAL);
        cdc_test_fc_t f;
        cdc_test_fc_make(&f, context, 256, 1024, 2, 33, 1);
        for (int i = 0; i < 30; i++)
            cdc_test_fc_check(&f, REL_TOL);
        cdc_stats_t stats = stats_of(context);
        ck_assert_msg(stats.budget_fallbacks <= 3, "%s: %llu of 30 calls on the coordinator",
                      layout ? "dedicated" : "rotated",
                      (unsigned long long) stats.budget_fallbacks);
        ck_assert_uint_ge(stats.budget_erasures, 27);
        ck_assert_uint_eq(stats.fallbacks, 0);

        ck_assert_int_eq(kill(cdc__local_workers_pid(context->local, 1), SIGKILL), 0);
        double start = cdc_test_now_s();
        cdc_remote_counters_t counters;
        do {
            cdc_test_sleep_ms(5);
            cdc__executor_remote_counters(context->executor, &counters);
        } while ((counters.live_mask & 2) && cdc_test_now_s() - start < 5.0);
        ck_assert_msg(!(counters.live_mask & 2), "worker 1 still live 5 s after SIGKILL");
        cdc_test_sleep_ms(1000);
        cdc_stats_t before = stats_of(context);
        for (int i = 0; i < 20; i++)
            cdc_test_fc_check(&f, REL_TOL);
        cdc_stats_t after = stats_of(context);
        ck_assert_uint_eq(after.budget_fallbacks, before.budget_fallbacks);
        ck_assert_uint_eq(after.budget_erasures, before.budget_erasures);
        cdc_test_fc_free(&f);
        cdc_context_destroy(&context);
    }
}
END_TEST

/* Worker 1 claims 10^11 GFLOP/s. The profiled plan (devices at 0.5 GFLOP/s,
   the coordinator too, so the work goes out) does not believe it: every
   call exact, its rate marked implausible (dropped), and its block no
   longer than the others'. */
START_TEST(test_absurd_speed_planned_slowest)
{
    cdc_context_t *context = budget_context_with(
        "slow@*:gflops=0.5;slow@c:gflops=0.5;misreport@w1:rate=1e11", 1, CDC_PLAN_PROFILED);
    cdc_test_fc_t f;
    cdc_test_fc_make(&f, context, 512, 512, 8, 34, 1);
    cdc_worker_profile_t p[WORKERS];
    int calls = 0;
    double start = cdc_test_now_s();
    do {
        cdc_test_fc_check(&f, REL_TOL);
        cdc__context_profile(context, p, WORKERS);
    } while (!p[1].implausible && ++calls < 200 && cdc_test_now_s() - start < 30.0);
    ck_assert_msg(p[1].implausible, "worker 1's claim believed after %d calls", calls);
    /* Found out, it is re-planned: the new blocks are staged (the calls keep
       the old ones meanwhile), then 30 calls on them. */
    for (calls = 0;
         calls < 400 && cdc_test_now_s() - start < 60.0 && cdc__profiled_plan_staging(context);
         calls++)
        cdc_test_fc_check(&f, REL_TOL);
    for (int i = 0; i < 30; i++)
        cdc_test_fc_check(&f, REL_TOL);
    if (getenv("CDC_TEST_SANITIZED")) { /* ASan's real compute under the emulated */
        cdc_test_fc_free(&f);           /* devices: timed plans mean little there */
        cdc_context_destroy(&context);
        return;
    }
    cdc_plan_record_t record;
    cdc__plan_last(context, &record);
    int64_t longest_other = 0, its = 0;
    int blocks = record.rotated ? record.n + record.r : record.n; /* sized stripes: workers' */
    for (int s = 0; s < blocks; s++) {
        if (record.home[s] == 1)
            its = record.block_len[s];
        else
            longest_other = record.block_len[s] > longest_other ? record.block_len[s]
                                                                : longest_other;
    }
    /* (a row more at most: the rows the shares leave over go one apiece) */
    ck_assert_msg(its <= longest_other + 1,
                  "worker 1's block %lld rows, the others' at most %lld",
                  (long long) its, (long long) longest_other);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

/* Worker 1 names a new instance in every PONG on the same connection. It
   is not believed (no process came back empty): over 3 s of calls (some
   30 heartbeats) its slot's weights are re-sent at most twice over; they
   were re-sent every heartbeat. */
START_TEST(test_flapping_instance_not_reshipped)
{
    cdc_context_t *context = budget_context_with("misreport@w1:flap=1", -1, CDC_PLAN_EQUAL);
    cdc_test_fc_t f;
    cdc_test_fc_make(&f, context, 256, 1024, 2, 35, 1);
    for (int i = 0; i < 5; i++)
        cdc_test_fc_check(&f, REL_TOL);
    cdc_stats_t before = stats_of(context);
    double start = cdc_test_now_s();
    for (int i = 0; i < 3000 && cdc_test_now_s() - start < 3.0; i++) {
        cdc_test_fc_check(&f, REL_TOL);
        cdc_test_sleep_ms(10);
    }
    cdc_stats_t after = stats_of(context);
    double slot_bytes = 256.0 / 4 * 1024 * sizeof(float); /* one block of n = 4 */
    double resent = (double) (after.weight_bytes - before.weight_bytes);
    ck_assert_msg(resent <= 2.0 * slot_bytes, "%.0f weight bytes re-sent (a slot: %.0f)",
                  resent, slot_bytes);
    ck_assert_uint_eq(after.fallbacks, 0);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

static Suite *budget_suite(void)
{
    Suite *suite = suite_create("budget");
    TCase *tc = tcase_create("embedded");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fitting_layer_distributed);
    tcase_add_test(tc, test_oversized_layer_on_coordinator);
    suite_add_tcase(suite, tc);
    TCase *liars = tcase_create("liars");
    tcase_set_timeout(liars, 120);
    tcase_add_test(liars, test_tiny_budget_costs_its_slot);
    tcase_add_test(liars, test_absurd_speed_planned_slowest);
    tcase_add_test(liars, test_flapping_instance_not_reshipped);
    suite_add_tcase(suite, liars);
    return suite;
}

int main(void)
{
    setenv("CDCGEMM_WORKER_BIN", CDC_WORKER_BIN, 1);
    setenv("CDCGEMM_WORKER_MAX_MEMORY", "2M", 1);
    return cdc_test_run_suite(budget_suite());
}
