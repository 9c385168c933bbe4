/* test_homes.c - movable slot homes on real embedded workers (issue 12, the
   parity's placement): the parity slot moved to worker 0 and the data slots
   to workers 1..4, each shard computed on its home once the background has
   shipped the weights, with the previous homes serving meanwhile and no
   weight on the call path; the parity's home SIGKILLed and respawned into
   its slot; two homes swapped between calls; homes flipped under calls in
   flight; a bad map refused. */
/* Contexts here use the dedicated parity layout: the assertions count its
   shards (weights per shard, one decoded shard per lost worker, results per
   call). The rotated layout's own: test_rotated.c. */
#include "cdcgemm.h"
#include "cdcgemm_testing.h"
#include "context.h"
#include "local_workers.h"
#include "fc_fixture.h"
#include "testutil.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REL_TOL 1e-5
#define OUT 1024
#define IN 2304
#define BATCH 4
#define SLOTS 5 /* n = 4 data shards and r = 1 parity on 5 workers */

static const int identity[SLOTS] = {0, 1, 2, 3, 4};
static const int parity_on_0[SLOTS] = {1, 2, 3, 4, 0};
static const uint64_t slot_bytes = (uint64_t) (OUT / 4) * IN * sizeof(float);

/* Bounds on waits for the background (each a few ms here); widened under
   ASan + UBSan (CDC_TEST_SANITIZED). */
static double settle_bound_s = 3.0;

static cdc_context_t *local_context(void)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.parity_layout = CDC_LAYOUT_DEDICATED; /* what the assertions count (top) */
    config.plan = CDC_PLAN_EQUAL; /* homes moved by the rules below, not by speeds */
    config.local_workers = SLOTS;
    config.parity = 1;
    config.timeout_ms = 3000;
    config.log_level = getenv("CDC_TEST_LOG") ? CDC_LOG_INFO : CDC_LOG_ERROR;
    cdc_context_t *context = NULL;
    int rc = cdc_context_new(&config, &context);
    ck_assert_msg(rc == CDC_OK, "cdc_context_new: %s (%s)", cdc_err_name(rc),
                  cdc_last_error());
    return context;
}

static cdc_stats_t stats_of(cdc_context_t *context)
{
    cdc_stats_t stats;
    ck_assert_int_eq(cdc_context_stats(context, &stats), CDC_OK);
    return stats;
}

static cdc_call_report_t report_of(cdc_context_t *context)
{
    cdc_call_report_t report;
    ck_assert_int_eq(cdc_context_last_call(context, &report), CDC_OK);
    return report;
}

/* Weight bytes sent on the call path (all sent, less the background's). */
static uint64_t call_path_bytes(cdc_context_t *context)
{
    cdc_stats_t stats = stats_of(context);
    return stats.weight_bytes - stats.background_weight_bytes;
}

static uint64_t misses_of(cdc_context_t *context)
{
    cdc_remote_counters_t counters;
    ck_assert_int_eq(cdc__executor_remote_counters(context->executor, &counters), CDC_OK);
    return counters.misses;
}

/* Per shard of the last call: the worker it went to, the one that answered. */
static void last_call(cdc_context_t *context, int *sent_to, int *answered_by)
{
    ck_assert_int_eq(cdc__executor_last_call(context->executor, sent_to, answered_by, SLOTS),
                     CDC_OK);
}

/* Whether the last call sent every shard to homes[s], and its results came
   from there (a result may be missing: the call need not wait for all). */
static int last_call_at(cdc_context_t *context, const int *homes)
{
    int sent_to[SLOTS], answered_by[SLOTS];
    last_call(context, sent_to, answered_by);
    for (int s = 0; s < SLOTS; s++) {
        if (sent_to[s] != homes[s])
            return 0;
        ck_assert_msg(answered_by[s] == homes[s] || answered_by[s] == -1,
                      "shard %d sent to worker %d, answered by %d", s, sent_to[s],
                      answered_by[s]);
    }
    return 1;
}

/* Calls (each checked) until one sends every shard to its home in homes and
   runs with full redundancy; seconds taken, or -1 after limit_s. Every call
   meanwhile runs each shard where its weights are: its new home, its
   previous one (before[s]), or nowhere (an erasure). The calls before that
   one are counted in *waited. */
static double calls_until_at(cdc_context_t *context, cdc_test_fc_t *f, const int *homes,
                             const int *before, double limit_s, int *waited)
{
    double start = cdc_test_now_s();
    for (*waited = 0; cdc_test_now_s() - start < limit_s; ++*waited) {
        cdc_test_fc_check(f, REL_TOL);
        cdc_call_report_t report = report_of(context);
        if (last_call_at(context, homes) && !report.degraded && report.r == 1)
            return cdc_test_now_s() - start;
        int sent_to[SLOTS];
        last_call(context, sent_to, NULL);
        for (int s = 0; s < SLOTS; s++)
            ck_assert_msg(sent_to[s] == homes[s] || sent_to[s] == before[s] ||
                              sent_to[s] == -1,
                          "shard %d on worker %d: neither home %d nor %d", s, sent_to[s],
                          homes[s], before[s]);
        cdc_test_sleep_ms(2);
    }
    return -1.0;
}

/* Calls, every shard on its home in homes, none degraded. */
static void calls_at(cdc_context_t *context, cdc_test_fc_t *f, const int *homes, int calls)
{
    for (int i = 0; i < calls; i++) {
        cdc_test_fc_check(f, REL_TOL);
        ck_assert_msg(last_call_at(context, homes), "call %d not at its homes", i);
        cdc_call_report_t report = report_of(context);
        ck_assert_int_eq(report.n, 4);
        ck_assert_int_eq(report.r, 1);
        ck_assert_int_eq(report.degraded, 0);
    }
}

/* A context whose parity slot lives on worker 0 and data slots on 1..4,
   every home holding its weights. */
static cdc_context_t *parity_on_worker_0(cdc_test_fc_t *f)
{
    cdc_context_t *context = local_context();
    cdc_test_fc_make(f, context, OUT, IN, BATCH, 12, 1);
    for (int i = 0; i < 3; i++)
        cdc_test_fc_check(f, REL_TOL);
    ck_assert(last_call_at(context, identity));
    ck_assert_int_eq(cdc_context_set_homes(context, parity_on_0, SLOTS), CDC_OK);
    int waited;
    double took = calls_until_at(context, f, parity_on_0, identity, settle_bound_s, &waited);
    ck_assert_msg(took >= 0, "not at the new homes within %.1f s", settle_bound_s);
    return context;
}

/* (a) The parity on worker 0, the data shards on 1..4: the background ships
   each new home its slot (nothing on the call path, no MISS), the previous
   homes serve meanwhile, then every shard runs on its home. */
START_TEST(test_parity_home_moved)
{
    cdc_test_fc_t f;
    cdc_context_t *context = local_context();
    cdc_test_fc_make(&f, context, OUT, IN, BATCH, 12, 1);
    for (int i = 0; i < 3; i++)
        cdc_test_fc_check(&f, REL_TOL);
    uint64_t call_path = call_path_bytes(context);
    cdc_stats_t before = stats_of(context);
    ck_assert_int_eq(cdc_context_set_homes(context, parity_on_0, SLOTS), CDC_OK);
    int waited;
    double took = calls_until_at(context, &f, parity_on_0, identity, settle_bound_s, &waited);
    printf("homes: parity to worker 0, data to 1..4: at the new homes after %.3f s (%d "
           "calls on the previous homes)\n", took, waited);
    ck_assert_msg(took >= 0, "not at the new homes within %.1f s", settle_bound_s);
    calls_at(context, &f, parity_on_0, 10);
    cdc_stats_t after = stats_of(context);
    ck_assert_uint_eq(after.degraded_calls, before.degraded_calls);
    ck_assert_uint_eq(call_path_bytes(context), call_path);
    ck_assert_uint_ge(after.background_weight_bytes - before.background_weight_bytes,
                      SLOTS * slot_bytes); /* each new home its slot */
    ck_assert_uint_eq(after.fallbacks, before.fallbacks);
    ck_assert_uint_eq(misses_of(context), 0);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

/* (b) The parity's home SIGKILLed during a run of calls: nothing lost or
   wrong; the respawned process is sent slot 4 in the background and takes
   it back, full redundancy returns. Then a data home killed: its shard is
   decoded from the parity that worker 0 computed. */
START_TEST(test_parity_home_killed)
{
    cdc_test_fc_t f;
    cdc_context_t *context = parity_on_worker_0(&f);
    cdc_stats_t before = stats_of(context);
    uint64_t call_path = call_path_bytes(context);
    pid_t old = cdc__local_workers_pid(context->local, 0);
    ck_assert_int_gt(old, 0);
    ck_assert_int_eq(kill(old, SIGKILL), 0);
    double start = cdc_test_now_s();
    while (stats_of(context).redundancy_repairs == before.redundancy_repairs &&
           cdc_test_now_s() - start < settle_bound_s)
        cdc_test_fc_check(&f, REL_TOL);
    cdc_stats_t repaired = stats_of(context);
    ck_assert_msg(repaired.redundancy_repairs > before.redundancy_repairs,
                  "no repair within %.1f s", settle_bound_s);
    printf("homes: parity's home SIGKILLed, full redundancy after %.3f s\n",
           (double) repaired.repair_us_max / 1e6);
    pid_t respawned = cdc__local_workers_pid(context->local, 0);
    ck_assert_int_gt(respawned, 0);
    ck_assert_int_ne(respawned, old);
    int waited;
    ck_assert_msg(calls_until_at(context, &f, parity_on_0, parity_on_0, settle_bound_s,
                                 &waited) >= 0,
                  "the parity not back on worker 0");
    calls_at(context, &f, parity_on_0, 5);
    cdc_stats_t after = stats_of(context);
    ck_assert_uint_ge(after.worker_respawns, before.worker_respawns + 1);
    ck_assert_uint_ge(after.background_weight_bytes - before.background_weight_bytes,
                      slot_bytes);
    ck_assert_uint_eq(after.fallbacks, before.fallbacks);
    ck_assert_uint_eq(call_path_bytes(context), call_path);
    ck_assert_uint_eq(misses_of(context), 0);

    /* Worker 1 (data slot 0) killed: once the coordinator sees it, slot 0
       is an erasure and the parity from worker 0 rebuilds it. */
    ck_assert_int_eq(kill(cdc__local_workers_pid(context->local, 1), SIGKILL), 0);
    int decoded_by_0 = 0;
    start = cdc_test_now_s();
    while (!decoded_by_0 && cdc_test_now_s() - start < settle_bound_s) {
        cdc_test_fc_check(&f, REL_TOL);
        int sent_to[SLOTS], answered_by[SLOTS];
        last_call(context, sent_to, answered_by);
        decoded_by_0 = report_of(context).decoded == 1 && sent_to[0] == -1 &&
                       answered_by[4] == 0;
    }
    ck_assert_msg(decoded_by_0, "no call decoded shard 0 from worker 0's parity");
    ck_assert_uint_eq(stats_of(context).fallbacks, before.fallbacks);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

/* (c) Two homes swapped between calls: results right throughout, each
   worker serves the slot it holds until the background has brought the
   other's weights, then both are ready and no call is degraded. Swapped
   back, both already hold both slots: at home from the next call, with
   nothing shipped. */
START_TEST(test_homes_swapped)
{
    static const int swapped[SLOTS] = {0, 3, 2, 1, 4};
    cdc_test_fc_t f;
    cdc_context_t *context = local_context();
    cdc_test_fc_make(&f, context, OUT, IN, BATCH, 12, 1);
    for (int i = 0; i < 3; i++)
        cdc_test_fc_check(&f, REL_TOL);
    uint64_t call_path = call_path_bytes(context);
    cdc_stats_t before = stats_of(context);
    ck_assert_int_eq(cdc_context_set_homes(context, swapped, SLOTS), CDC_OK);
    int waited;
    double took = calls_until_at(context, &f, swapped, identity, settle_bound_s, &waited);
    printf("homes: slots 1 and 3 swapped: at the new homes after %.3f s (%d calls on the "
           "previous homes)\n", took, waited);
    ck_assert_msg(took >= 0, "not at the swapped homes within %.1f s", settle_bound_s);
    calls_at(context, &f, swapped, 10);
    cdc_stats_t after = stats_of(context);
    ck_assert_uint_ge(after.background_weight_bytes - before.background_weight_bytes,
                      2 * slot_bytes);
    ck_assert_uint_eq(after.degraded_calls, before.degraded_calls);
    ck_assert_uint_eq(after.fallbacks, before.fallbacks);
    ck_assert_int_eq(cdc_context_set_homes(context, NULL, 0), CDC_OK);
    calls_at(context, &f, identity, 5);
    ck_assert_uint_eq(stats_of(context).background_weight_bytes,
                      after.background_weight_bytes);
    ck_assert_uint_eq(call_path_bytes(context), call_path);
    ck_assert_uint_eq(misses_of(context), 0);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

typedef struct {
    cdc_test_fc_t *f;
    atomic_int stop;
    int calls, wrong;
} caller_t;

static void *caller_main(void *arg)
{
    caller_t *caller = arg;
    while (!atomic_load(&caller->stop)) {
        caller->wrong += cdc_test_fc_error(caller->f) > REL_TOL;
        caller->calls++;
    }
    return NULL;
}

/* (d) Homes flipped every 20 ms while another thread calls: a call in
   flight keeps the map it began with; no result is wrong or lost. */
START_TEST(test_homes_flipped_under_calls)
{
    cdc_test_fc_t f;
    cdc_context_t *context = local_context();
    cdc_test_fc_make(&f, context, OUT, IN, BATCH, 12, 1);
    cdc_test_fc_check(&f, REL_TOL);
    cdc_stats_t before = stats_of(context);
    caller_t caller = {&f, 0, 0, 0};
    pthread_t thread;
    ck_assert_int_eq(pthread_create(&thread, NULL, caller_main, &caller), 0);
    for (int flip = 0; flip < 50; flip++) {
        const int *homes = flip % 2 ? identity : parity_on_0;
        ck_assert_int_eq(cdc_context_set_homes(context, homes, SLOTS), CDC_OK);
        cdc_test_sleep_ms(20);
    }
    atomic_store(&caller.stop, 1);
    pthread_join(thread, NULL);
    printf("homes: %d calls under 50 flips, %d wrong\n", caller.calls, caller.wrong);
    ck_assert_int_gt(caller.calls, 10);
    ck_assert_int_eq(caller.wrong, 0);
    ck_assert_uint_eq(stats_of(context).fallbacks, before.fallbacks);
    ck_assert_int_eq(cdc_context_set_homes(context, parity_on_0, SLOTS), CDC_OK);
    int waited;
    ck_assert(calls_until_at(context, &f, parity_on_0, identity, settle_bound_s, &waited) >=
              0);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

/* (e) A map that is not one: refused with a message naming the fault, the
   homes as they were. In process there is nothing to place: accepted. */
START_TEST(test_bad_map_refused)
{
    ck_assert_int_eq(cdc_context_set_homes(NULL, identity, SLOTS), CDC_EINVAL);
    cdc_test_fc_t f;
    cdc_context_t *context = local_context();
    cdc_test_fc_make(&f, context, OUT, IN, BATCH, 12, 1);
    cdc_test_fc_check(&f, REL_TOL);
    const int twice[SLOTS] = {0, 1, 2, 3, 1}, outside[2] = {5, 0};
    ck_assert_int_eq(cdc_context_set_homes(context, twice, SLOTS), CDC_EINVAL);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "worker 1 is home of slots 1 and 4"));
    ck_assert_int_eq(cdc_context_set_homes(context, outside, 2), CDC_EINVAL);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "slot 0's home 5 is no worker (0..4)"));
    const int six[SLOTS + 1] = {0, 1, 2, 3, 4, 5};
    ck_assert_int_eq(cdc_context_set_homes(context, six, SLOTS + 1), CDC_EINVAL);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "6 slots given, there are 5 workers"));
    calls_at(context, &f, identity, 3);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);

    cdc_config_t config;
    cdc_config_init(&config);
    config.parity_layout = CDC_LAYOUT_DEDICATED; /* what the assertions count (top) */
    config.in_process = 1;
    config.local_workers = SLOTS;
    config.parity = 1;
    config.log_level = CDC_LOG_ERROR;
    ck_assert_int_eq(cdc_context_new(&config, &context), CDC_OK);
    ck_assert_int_eq(cdc_context_set_homes(context, parity_on_0, SLOTS), CDC_OK);
    cdc_context_destroy(&context);
}
END_TEST

static Suite *homes_suite(void)
{
    Suite *suite = suite_create("homes");
    TCase *tcase = tcase_create("homes");
    tcase_set_timeout(tcase, 60);
    tcase_add_test(tcase, test_parity_home_moved);
    tcase_add_test(tcase, test_parity_home_killed);
    tcase_add_test(tcase, test_homes_swapped);
    tcase_add_test(tcase, test_homes_flipped_under_calls);
    tcase_add_test(tcase, test_bad_map_refused);
    suite_add_tcase(suite, tcase);
    return suite;
}

int main(void)
{
    setenv("CDCGEMM_WORKER_BIN", CDC_WORKER_BIN, 1);
    const char *sanitized = getenv("CDC_TEST_SANITIZED");
    if (sanitized && strcmp(sanitized, "0") != 0)
        settle_bound_s = 10.0;
    return cdc_test_run_suite(homes_suite());
}
