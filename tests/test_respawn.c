/* test_respawn.c - the supervisor of embedded workers on real processes: kill, stop, crash fault, crash loop, off;
   and redundancy restored after a failure: the time to full redundancy, a hot spare, no deaths without failures. */
#include "cdcgemm.h"
#include "context.h"
#include "local_workers.h"
#include "fc_fixture.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define REL_TOL 1e-5
#define OUT 1024
#define IN 2304
#define BATCH 4

/* Bounds on the time back: issue 11's, widened under ASan + UBSan
   (CDC_TEST_SANITIZED), where a worker starts several times slower. */
static double kill_bound_s = 1.0, stop_bound_s = 2.5;

/* A context over workers embedded workers, r = 1, n = data (0: workers - 1),
   respawn as given (faults and stats: NULL for none). */
static cdc_context_t *local_context(int workers, int data, int respawn, const char *faults,
                                    const char *stats)
{
    cdc_config_t config;
    cdc_config_init(&config);
    ck_assert_int_eq(config.respawn, 1); /* the default */
    config.plan = CDC_PLAN_EQUAL; /* every call on the workers (the default computes
                                     these small ones on this host) */
    config.local_workers = workers;
    config.parity = 1;
    config.data_shards = data;
    config.respawn = respawn;
    config.timeout_ms = 3000;
    config.log_level = getenv("CDC_TEST_LOG") ? CDC_LOG_INFO : CDC_LOG_ERROR;
    if (faults)
        snprintf(config.faults, sizeof config.faults, "%s", faults);
    if (stats)
        snprintf(config.stats_path, sizeof config.stats_path, "%s", stats);
    cdc_context_t *context = NULL;
    int rc = cdc_context_new(&config, &context);
    ck_assert_msg(rc == CDC_OK, "cdc_context_new: %s (%s)", cdc_err_name(rc),
                  cdc_last_error());
    ck_assert_ptr_nonnull(context->local);
    return context;
}

/* The test's layer on context, checked over `calls` calls (its weights on
   the workers). */
static void fc_warm(cdc_context_t *context, cdc_test_fc_t *f, int calls)
{
    cdc_test_fc_make(f, context, OUT, IN, BATCH, 11, 1);
    for (int i = 0; i < calls; i++)
        cdc_test_fc_check(f, REL_TOL);
}

static int is_live(cdc_context_t *context, int w)
{
    cdc_remote_counters_t counters;
    ck_assert_int_eq(cdc__executor_remote_counters(context->executor, &counters), CDC_OK);
    return (counters.live_mask >> w) & 1;
}

static cdc_stats_t stats_of(cdc_context_t *context)
{
    cdc_stats_t stats;
    ck_assert_int_eq(cdc_context_stats(context, &stats), CDC_OK);
    return stats;
}

/* Calls (each checked) until slot w holds a process other than old that
   answers heartbeats and the plan has all 5 again; the seconds from since,
   or -1 after limit_s. */
static double calls_until_back(cdc_context_t *context, cdc_test_fc_t *f, int w, pid_t old,
                               double since, double limit_s)
{
    while (cdc_test_now_s() - since < limit_s) {
        cdc_test_fc_check(f, REL_TOL);
        pid_t pid = cdc__local_workers_pid(context->local, w);
        if (pid > 0 && pid != old && is_live(context, w) &&
            cdc__context_plan_workers(context, NULL) == 5)
            return cdc_test_now_s() - since;
        cdc_test_sleep_ms(1);
    }
    return -1.0;
}

/* (a) SIGKILL during a run of calls: the slot gets a new process, live and
   planned again within 1 s; every result right; destroy right after another
   kill leaves no child (no respawn during shutdown); the counters reach
   CDCGEMM_STATS. */
START_TEST(test_kill_respawned)
{
    char stats_path[] = "/tmp/cdc-respawn-XXXXXX";
    cdc_test_temp_file(stats_path);
    cdc_context_t *context = local_context(5, 0, 1, NULL, stats_path);
    cdc_test_fc_t f;
    fc_warm(context, &f, 5);
    pid_t old = cdc__local_workers_pid(context->local, 1);
    ck_assert_int_gt(old, 0);
    double killed = cdc_test_now_s();
    ck_assert_int_eq(kill(old, SIGKILL), 0);
    double back = calls_until_back(context, &f, 1, old, killed, 3.0);
    printf("respawn: SIGKILL to live and planned again: %.3f s\n", back);
    ck_assert_msg(back >= 0 && back <= kill_bound_s, "back after %.3f s", back);
    for (int i = 0; i < 10; i++)
        cdc_test_fc_check(&f, REL_TOL);
    cdc_stats_t stats = stats_of(context);
    ck_assert_uint_eq(stats.worker_respawns, 1);
    ck_assert_uint_eq(stats.respawns_given_up, 0);
    ck_assert_uint_eq(stats.fallbacks, 0);
    ck_assert_int_eq(kill(cdc__local_workers_pid(context->local, 0), SIGKILL), 0);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
    errno = 0;
    ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1); /* no child left */
    ck_assert_int_eq(errno, ECHILD);
    char text[4096];
    cdc_test_read_text(stats_path, text, sizeof text);
    unlink(stats_path);
    ck_assert_msg(strstr(text, "\"worker_respawns\": 1") &&
                      strstr(text, "\"respawns_given_up\": 0"), "%s", text);
}
END_TEST

/* (b) SIGSTOP: silent past hang detection, killed and replaced. */
START_TEST(test_stop_replaced)
{
    cdc_context_t *context = local_context(5, 0, 1, NULL, NULL);
    cdc_test_fc_t f;
    fc_warm(context, &f, 5);
    pid_t old = cdc__local_workers_pid(context->local, 2);
    double stopped = cdc_test_now_s();
    ck_assert_int_eq(kill(old, SIGSTOP), 0);
    double back = calls_until_back(context, &f, 2, old, stopped, 4.0);
    printf("respawn: SIGSTOP to replaced, live and planned again: %.3f s\n", back);
    ck_assert_msg(back >= 0 && back <= stop_bound_s, "back after %.3f s", back);
    errno = 0;
    ck_assert_int_eq(kill(old, 0), -1); /* killed and reaped */
    ck_assert_int_eq(errno, ESRCH);
    cdc_stats_t stats = stats_of(context);
    ck_assert_uint_eq(stats.worker_respawns, 1);
    ck_assert_uint_eq(stats.fallbacks, 0);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

/* (b') SIGSTOP for 300 ms (the churn of issue 27: a device that pauses), five
   times while calls go on: silent, so the heartbeats call it dead and the
   calls go without it, but not hung: the same process serves again after
   each, nothing is killed or respawned, every result right. */
START_TEST(test_short_stop_not_killed)
{
    cdc_context_t *context = local_context(5, 0, 1, NULL, NULL);
    cdc_test_fc_t f;
    fc_warm(context, &f, 5);
    pid_t pid = cdc__local_workers_pid(context->local, 3);
    for (int round = 0; round < 5; round++) {
        ck_assert_int_eq(kill(pid, SIGSTOP), 0);
        double stopped = cdc_test_now_s();
        while (cdc_test_now_s() - stopped < 0.3)
            cdc_test_fc_check(&f, REL_TOL);
        ck_assert_int_eq(kill(pid, SIGCONT), 0);
        double resumed = cdc_test_now_s();
        while (!is_live(context, 3) && cdc_test_now_s() - resumed < 2.0)
            cdc_test_fc_check(&f, REL_TOL);
        ck_assert_msg(is_live(context, 3), "round %d: not live 2 s after SIGCONT", round);
        ck_assert_int_eq(cdc__local_workers_pid(context->local, 3), pid);
    }
    cdc_stats_t stats = stats_of(context);
    ck_assert_uint_eq(stats.worker_respawns, 0);
    ck_assert_uint_eq(stats.fallbacks, 0);
    ck_assert_int_eq(kill(pid, 0), 0); /* the same process, alive */
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

/* (c) A one-shot crash fault fires once per slot: the respawned worker
   (--incarnation 1) does not crash again. */
START_TEST(test_crash_fault_once)
{
    cdc_context_t *context = local_context(5, 0, 1, "crash@w1:after=2", NULL);
    cdc_test_fc_t f;
    cdc_test_fc_make(&f, context, OUT, IN, BATCH, 11, 1);
    pid_t old = cdc__local_workers_pid(context->local, 1);
    double start = cdc_test_now_s();
    double back = calls_until_back(context, &f, 1, old, start, 4.0);
    ck_assert_msg(back >= 0, "crashed worker not back within 4 s");
    pid_t respawned = cdc__local_workers_pid(context->local, 1);
    for (int i = 0; i < 20; i++)
        cdc_test_fc_check(&f, REL_TOL);
    ck_assert_int_eq(cdc__local_workers_pid(context->local, 1), respawned);
    ck_assert(is_live(context, 1));
    cdc_call_report_t report;
    ck_assert_int_eq(cdc_context_last_call(context, &report), CDC_OK);
    ck_assert_int_eq(report.n + report.r, 5);
    cdc_stats_t stats = stats_of(context);
    ck_assert_uint_eq(stats.worker_respawns, 1);
    ck_assert_uint_ge(stats.worker_deaths, 1); /* more only if load stalls one */
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

/* (d) CDCGEMM_RESPAWN=0: a killed worker stays dead (the behaviour before). */
START_TEST(test_respawn_off)
{
    cdc_config_t config;
    cdc_config_init(&config);
    cdc_test_env_refused("CDCGEMM_RESPAWN", "2", "0", &config);
    ck_assert_int_eq(config.respawn, 0);
    cdc_context_t *context = local_context(5, 0, config.respawn, NULL, NULL);
    cdc_test_fc_t f;
    fc_warm(context, &f, 1);
    pid_t old = cdc__local_workers_pid(context->local, 1);
    ck_assert_int_eq(kill(old, SIGKILL), 0);
    double start = cdc_test_now_s();
    while (cdc_test_now_s() - start < 1.0)
        cdc_test_fc_check(&f, REL_TOL);
    ck_assert_int_eq(cdc__local_workers_pid(context->local, 1), old);
    ck_assert(!is_live(context, 1));
    ck_assert_int_eq(cdc__context_plan_workers(context, NULL), 4);
    cdc_stats_t stats = stats_of(context);
    ck_assert_uint_eq(stats.worker_respawns, 0);
    ck_assert_uint_eq(stats.fallbacks, 0);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

/* (e) A crash loop: killed 6 times within 10 s, the slot is given up and
   counted; the calls go on over the other four. */
START_TEST(test_crash_loop_given_up)
{
    cdc_context_t *context = local_context(5, 0, 1, NULL, NULL);
    cdc_test_fc_t f;
    fc_warm(context, &f, 1);
    pid_t last = 0;
    double start = cdc_test_now_s();
    for (int kills = 0; kills < 6; kills++) {
        pid_t pid = 0;
        while (cdc_test_now_s() - start < 8.0) {
            pid = cdc__local_workers_pid(context->local, 3);
            if (pid > 0 && pid != last)
                break;
            cdc_test_sleep_ms(2);
        }
        ck_assert_msg(pid > 0 && pid != last, "no new process for kill %d", kills + 1);
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        last = pid;
    }
    cdc_test_sleep_ms(600); /* longer than any backoff left: nothing comes */
    for (int i = 0; i < 5; i++)
        cdc_test_fc_check(&f, REL_TOL);
    ck_assert_int_eq(cdc__local_workers_pid(context->local, 3), 0);
    cdc_stats_t stats = stats_of(context);
    ck_assert_uint_eq(stats.worker_respawns, 5);
    ck_assert_uint_eq(stats.respawns_given_up, 1);
    ck_assert_int_eq(cdc__context_plan_workers(context, NULL), 4);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

/* ---- redundancy restored (issue 11, item 2) ------------------------------ */

static double repair_bound_s = 0.5, hang_repair_bound_s = 1.0;

static cdc_remote_counters_t remote_of(cdc_context_t *context)
{
    cdc_remote_counters_t counters;
    ck_assert_int_eq(cdc__executor_remote_counters(context->executor, &counters), CDC_OK);
    return counters;
}

/* Calls (each checked) until the counters show a repair; its time in s, or
   -1 after limit_s. */
static double calls_until_repaired(cdc_context_t *context, cdc_test_fc_t *f, uint64_t repairs_before,
                                   double limit_s)
{
    double start = cdc_test_now_s();
    while (cdc_test_now_s() - start < limit_s) {
        cdc_test_fc_check(f, REL_TOL);
        cdc_stats_t stats = stats_of(context);
        if (stats.redundancy_repairs > repairs_before)
            return (double) stats.repair_us_max / 1e6;
        cdc_test_sleep_ms(1);
    }
    return -1.0;
}

static void assert_fully_redundant(cdc_context_t *context)
{
    cdc_call_report_t report;
    ck_assert_int_eq(cdc_context_last_call(context, &report), CDC_OK);
    ck_assert_int_eq(report.r, 1);
    ck_assert_int_eq(report.redundancy, 1);
    ck_assert_int_eq(report.degraded, 0);
}

/* After a repair: calls (each checked) until one runs with full redundancy,
   within limit_s. Not simply the next call: on a loaded machine (the
   sanitizer build) a heartbeat can miss meanwhile and degrade one call. */
static void calls_until_fully_redundant(cdc_context_t *context, cdc_test_fc_t *f, double limit_s)
{
    double start = cdc_test_now_s();
    cdc_call_report_t report;
    do {
        cdc_test_fc_check(f, REL_TOL);
        ck_assert_int_eq(cdc_context_last_call(context, &report), CDC_OK);
    } while ((report.redundancy < 1 || report.degraded) && cdc_test_now_s() - start < limit_s);
    assert_fully_redundant(context);
}

/* (f) SIGKILL: the respawned worker gets its slot's weights in the
   background (no MISS on the call path) and full redundancy is back within
   0.5 s of the death, by the counters. */
START_TEST(test_kill_full_redundancy)
{
    cdc_context_t *context = local_context(5, 0, 1, NULL, NULL);
    cdc_test_fc_t f;
    fc_warm(context, &f, 5);
    assert_fully_redundant(context);
    cdc_stats_t before = stats_of(context);
    ck_assert_int_eq(cdc__executor_repairing(context->executor), 0);
    ck_assert_int_eq(kill(cdc__local_workers_pid(context->local, 1), SIGKILL), 0);
    /* The plan holds re-sizes while the repair is under way (profiled_plan.c). */
    int repairing_seen = 0;
    double start = cdc_test_now_s(), repair = -1.0;
    while (repair < 0 && cdc_test_now_s() - start < 3.0) {
        cdc_test_fc_check(&f, REL_TOL);
        repairing_seen |= cdc__executor_repairing(context->executor);
        cdc_stats_t stats = stats_of(context);
        if (stats.redundancy_repairs > before.redundancy_repairs)
            repair = (double) stats.repair_us_max / 1e6;
    }
    printf("redundancy: SIGKILL, death to full redundancy: %.3f s\n", repair);
    ck_assert_msg(repair >= 0 && repair <= repair_bound_s, "repaired after %.3f s", repair);
    ck_assert_msg(repairing_seen, "the executor never said a repair was under way");
    calls_until_fully_redundant(context, &f, 1.0);
    cdc_stats_t after = stats_of(context);
    const uint64_t shard_bytes = (uint64_t) (OUT / 4) * IN * sizeof(float);
    ck_assert_uint_ge(after.background_weight_bytes - before.background_weight_bytes,
                      shard_bytes);
    ck_assert_uint_eq(after.fallbacks, before.fallbacks);
    ck_assert_uint_ge(after.degraded_calls, before.degraded_calls); /* the window's */
    ck_assert_uint_eq(remote_of(context).misses, 0); /* nothing re-shipped on a call */
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

/* Store files (*.cdcw) in worker w's store under dir; with damage, one
   byte of each file's floats changed. */
static int store_files(const char *dir, int w, int damage)
{
    char path[512];
    snprintf(path, sizeof path, "%s/worker-%d", dir, w);
    DIR *listing = opendir(path);
    ck_assert_msg(listing != NULL, "%s: %s", path, strerror(errno));
    int count = 0;
    for (struct dirent *e; (e = readdir(listing));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".cdcw") != 0)
            continue;
        count++;
        if (!damage)
            continue;
        char file[1024];
        snprintf(file, sizeof file, "%s/%s", path, e->d_name);
        FILE *f = fopen(file, "r+b");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(fseek(f, 64 + 4, SEEK_SET), 0);
        int byte = fgetc(f);
        ck_assert_int_eq(fseek(f, 64 + 4, SEEK_SET), 0);
        fputc(byte ^ 0x40, f);
        fclose(f);
    }
    closedir(listing);
    return count;
}

/* A SIGKILLed worker until full redundancy is back, every call checked;
   the counters before and after. */
static void kill_until_repaired(cdc_context_t *context, cdc_test_fc_t *f, int w,
                                cdc_stats_t *before, cdc_stats_t *after)
{
    *before = stats_of(context);
    ck_assert_int_eq(kill(cdc__local_workers_pid(context->local, w), SIGKILL), 0);
    double repair = calls_until_repaired(context, f, before->redundancy_repairs, 3.0);
    printf("store: SIGKILL of worker %d, death to full redundancy: %.3f s\n", w, repair);
    ck_assert_msg(repair >= 0 && repair <= repair_bound_s, "repaired after %.3f s", repair);
    calls_until_fully_redundant(context, f, 1.0);
    *after = stats_of(context);
    ck_assert_uint_eq(after->fallbacks, before->fallbacks);
}

/* (h) Workers keeping a store on their disk (CDCGEMM_WORKER_STORE): a
   SIGKILLed worker's new process is asked for its slot's weights and loads
   them from its store, so the repair ships no weight bytes; a store damaged
   on disk is refused by its checksum and the slot crosses the wire as
   before; a coordinator started again over the stores sends nothing. Every
   result right. */
START_TEST(test_kill_reloaded_from_store)
{
    char store[256];
    cdc_test_temp_dir(store, sizeof store, "cdc-store");
    setenv("CDCGEMM_WORKER_STORE", store, 1);
    cdc_context_t *context = local_context(5, 0, 1, NULL, NULL);
    cdc_test_fc_t f;
    fc_warm(context, &f, 5);
    ck_assert_int_ge(store_files(store, 1, 0), 1);
    cdc_stats_t before, after;
    kill_until_repaired(context, &f, 1, &before, &after);
    ck_assert_uint_ge(after.weights_stored_asked - before.weights_stored_asked, 1);
    ck_assert_uint_eq(after.weights_stored_missing, before.weights_stored_missing);
    ck_assert_uint_eq(after.background_weight_bytes, before.background_weight_bytes);
    ck_assert_uint_eq(after.weight_bytes, before.weight_bytes);
    ck_assert_uint_eq(remote_of(context).misses, 0);

    ck_assert_int_ge(store_files(store, 2, 1), 1);
    kill_until_repaired(context, &f, 2, &before, &after);
    ck_assert_uint_ge(after.weights_stored_missing - before.weights_stored_missing, 1);
    const uint64_t shard_bytes = (uint64_t) (OUT / 4) * IN * sizeof(float);
    ck_assert_uint_ge(after.background_weight_bytes - before.background_weight_bytes,
                      shard_bytes);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);

    context = local_context(5, 0, 1, NULL, NULL); /* new workers, the same stores */
    fc_warm(context, &f, 3);
    after = stats_of(context);
    printf("store: a new coordinator: %llu shards asked, %llu weight bytes sent\n",
           (unsigned long long) after.weights_stored_asked,
           (unsigned long long) after.weight_bytes);
    ck_assert_uint_ge(after.weights_stored_asked, 5);
    ck_assert_uint_eq(after.weights_stored_missing, 0);
    ck_assert_uint_eq(after.weight_bytes, 0);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
    unsetenv("CDCGEMM_WORKER_STORE");
    cdc_test_temp_dir_remove(store);
}
END_TEST

/* (g) SIGSTOP: the supervisor replaces the hung worker and full redundancy
   is back within 1 s of the heartbeats losing it. */
START_TEST(test_hang_full_redundancy)
{
    cdc_context_t *context = local_context(5, 0, 1, NULL, NULL);
    cdc_test_fc_t f;
    fc_warm(context, &f, 5);
    cdc_stats_t before = stats_of(context);
    double stopped = cdc_test_now_s();
    ck_assert_int_eq(kill(cdc__local_workers_pid(context->local, 2), SIGSTOP), 0);
    double repair = calls_until_repaired(context, &f, before.redundancy_repairs, 5.0);
    printf("redundancy: SIGSTOP, hang seen to full redundancy: %.3f s (%.3f s after the "
           "signal)\n", repair, cdc_test_now_s() - stopped);
    ck_assert_msg(repair >= 0 && repair <= hang_repair_bound_s, "repaired after %.3f s",
                  repair);
    calls_until_fully_redundant(context, &f, 1.0);
    ck_assert_uint_eq(stats_of(context).fallbacks, before.fallbacks);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

/* (h) A hot spare (6 workers, CDCGEMM_DATA_SHARDS=4, r = 1): once it holds
   every slot's weights, a death degrades no call made after it is seen;
   the dead worker's successor takes its slot back. */
START_TEST(test_spare_absorbs_failure)
{
    cdc_context_t *context = local_context(6, 4, 1, NULL, NULL);
    cdc_test_fc_t f;
    fc_warm(context, &f, 1);
    /* The spare is sent the 5 slots' weights between calls. */
    const uint64_t shard_bytes = (uint64_t) (OUT / 4) * IN * sizeof(float);
    double start = cdc_test_now_s();
    while (stats_of(context).background_weight_bytes < 5 * shard_bytes &&
           cdc_test_now_s() - start < 3.0)
        cdc_test_sleep_ms(10);
    ck_assert_uint_ge(stats_of(context).background_weight_bytes, 5 * shard_bytes);
    cdc_test_sleep_ms(100); /* its acknowledgement */
    for (int i = 0; i < 3; i++)
        cdc_test_fc_check(&f, REL_TOL);
    assert_fully_redundant(context);
    cdc_stats_t seen = stats_of(context);
    ck_assert_int_eq(kill(cdc__local_workers_pid(context->local, 1), SIGKILL), 0);
    /* A call made before the coordinator sees the death (its connection
       drop, normally within a millisecond; longer on a loaded machine) is
       in flight when it happens: it loses shard 1 and decodes it from
       parity. The claim is about the calls after that. */
    start = cdc_test_now_s();
    while (stats_of(context).worker_deaths == seen.worker_deaths &&
           cdc_test_now_s() - start < 1.0)
        cdc_test_sleep_ms(1);
    cdc_stats_t before = stats_of(context);
    ck_assert_uint_gt(before.worker_deaths, seen.worker_deaths);
    start = cdc_test_now_s();
    while (cdc_test_now_s() - start < 1.0) {
        cdc_test_fc_check(&f, REL_TOL);
        cdc_call_report_t report;
        ck_assert_int_eq(cdc_context_last_call(context, &report), CDC_OK);
        ck_assert_int_eq(report.n, 4);
        ck_assert_int_eq(report.r, 1);
    }
    cdc_stats_t after = stats_of(context);
    ck_assert_uint_eq(after.degraded_calls, before.degraded_calls);
    ck_assert_uint_eq(after.fallbacks, before.fallbacks);
    ck_assert_uint_eq(after.redundancy_repairs, before.redundancy_repairs); /* never lost */
    ck_assert_uint_ge(after.worker_respawns, 1);
    ck_assert_uint_eq(remote_of(context).misses, 0);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

/* (i) No failure: no death, no degraded call, nothing to repair, also in
   the counters written at exit (CDCGEMM_STATS). */
START_TEST(test_no_failure_no_death)
{
    char stats_path[] = "/tmp/cdc-redundancy-XXXXXX";
    cdc_test_temp_file(stats_path);
    cdc_context_t *context = local_context(5, 0, 1, NULL, stats_path);
    cdc_test_fc_t f;
    cdc_test_fc_make(&f, context, OUT, IN, BATCH, 11, 1);
    for (int i = 0; i < 20; i++)
        cdc_test_fc_check(&f, REL_TOL);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
    char text[4096];
    cdc_test_read_text(stats_path, text, sizeof text);
    unlink(stats_path);
    ck_assert_msg(strstr(text, "\"worker_deaths\": 0,") && strstr(text, "\"degraded_calls\": 0,") &&
                      strstr(text, "\"redundancy_repairs\": 0,"), "%s", text);
}
END_TEST

/* ---- a fresh ipc path per incarnation (issue 11) -------------------------- */

/* The value after "--bind" in process pid's command line, into out; 0 when
   it cannot be read. */
static int bound_endpoint_of(pid_t pid, char *out, size_t size)
{
    char path[64], args[8192];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", (long) pid);
    FILE *file = fopen(path, "r");
    if (!file)
        return 0;
    size_t got = fread(args, 1, sizeof args - 1, file);
    fclose(file);
    args[got] = '\0';
    for (size_t at = 0; at < got; at += strlen(args + at) + 1)
        if (strcmp(args + at, "--bind") == 0 && at + 7 < got) {
            snprintf(out, size, "%s", args + at + 7);
            return 1;
        }
    return 0;
}

/* Slot w's endpoint as the supervisor, the process itself and the client's
   heartbeat view have it; all three must agree. */
static void endpoint_of(cdc_context_t *context, int w, char *out, size_t size)
{
    ck_assert_int_eq(cdc__local_workers_endpoint(context->local, w, out, size), CDC_OK);
    char bound[PATH_MAX + 32] = "";
    pid_t pid = cdc__local_workers_pid(context->local, w);
    ck_assert_int_gt(pid, 0);
    ck_assert_msg(bound_endpoint_of(pid, bound, sizeof bound), "no --bind for pid %ld",
                  (long) pid);
    ck_assert_str_eq(bound, out);
    cdc_worker_status_t status[8];
    ck_assert_int_eq(cdc__executor_worker_status(context->executor, status, 8), 5);
    ck_assert_str_eq(status[w].endpoint, out);
    char list[CDC_LOCAL_ENDPOINTS_MAX];
    cdc__local_workers_endpoints(context->local, list, sizeof list);
    ck_assert_msg(strstr(list, out) != NULL, "%s not in %s", out, list);
}

static int socket_file_exists(const char *endpoint)
{
    struct stat st;
    return stat(endpoint + strlen("ipc://"), &st) == 0 && S_ISSOCK(st.st_mode);
}

/* Calls (each checked) until slot w holds a process other than old, live,
   whose endpoint the client uses, and full redundancy is back. */
static void calls_until_moved_back(cdc_context_t *context, cdc_test_fc_t *f, int w, pid_t old,
                                   uint64_t repairs_before)
{
    double start = cdc_test_now_s();
    ck_assert_msg(calls_until_back(context, f, w, old, start, 5.0) >= 0,
                  "slot %d not back within 5 s", w);
    ck_assert_msg(calls_until_repaired(context, f, repairs_before, 5.0) >= 0,
                  "no repair within 5 s");
    calls_until_fully_redundant(context, f, 1.0);
}

/* (j) SIGKILL twice: each respawn listens on a path of its own (wI.1, then
   wI.2), which the supervisor, the process's --bind, the client's status
   and the endpoint list agree on; the dead incarnation's socket file is
   gone; the other slots keep theirs; every result is right and full
   redundancy comes back each time, with no weight re-shipped on a call. */
START_TEST(test_kill_fresh_endpoint)
{
    cdc_context_t *context = local_context(5, 0, 1, NULL, NULL);
    cdc_test_fc_t f;
    fc_warm(context, &f, 5);
    assert_fully_redundant(context);
    char first[PATH_MAX + 32], other[PATH_MAX + 32];
    endpoint_of(context, 1, first, sizeof first);
    endpoint_of(context, 3, other, sizeof other);
    const char *dir = cdc__local_workers_dir(context->local);
    char want[PATH_MAX + 32];
    snprintf(want, sizeof want, "ipc://%s/w1.0", dir);
    ck_assert_str_eq(first, want);
    ck_assert(socket_file_exists(first));

    char previous[PATH_MAX + 32];
    snprintf(previous, sizeof previous, "%s", first);
    for (int k = 1; k <= 2; k++) {
        cdc_stats_t before = stats_of(context);
        pid_t old = cdc__local_workers_pid(context->local, 1);
        ck_assert_int_eq(kill(old, SIGKILL), 0);
        calls_until_moved_back(context, &f, 1, old, before.redundancy_repairs);
        char now[PATH_MAX + 32];
        endpoint_of(context, 1, now, sizeof now);
        snprintf(want, sizeof want, "ipc://%s/w1.%d", dir, k);
        ck_assert_str_eq(now, want);
        ck_assert_str_ne(now, previous);
        ck_assert(socket_file_exists(now));
        ck_assert_msg(!socket_file_exists(previous), "%s left behind", previous);
        char list[CDC_LOCAL_ENDPOINTS_MAX];
        cdc__local_workers_endpoints(context->local, list, sizeof list);
        ck_assert_msg(strstr(list, previous) == NULL, "%s still listed: %s", previous, list);
        snprintf(previous, sizeof previous, "%s", now);
        for (int i = 0; i < 5; i++)
            cdc_test_fc_check(&f, REL_TOL);
        cdc_stats_t after = stats_of(context);
        ck_assert_uint_eq(after.worker_respawns, (uint64_t) k);
        ck_assert_uint_gt(after.redundancy_repairs, before.redundancy_repairs);
        ck_assert_uint_eq(after.fallbacks, 0);
    }
    char still[PATH_MAX + 32];
    endpoint_of(context, 3, still, sizeof still); /* untouched */
    ck_assert_str_eq(still, other);
    ck_assert(socket_file_exists(other));
    ck_assert_uint_eq(remote_of(context).misses, 0);
    /* No such worker: refused, nothing moved. */
    ck_assert_int_eq(cdc__executor_worker_moved(context->executor, 5, "ipc:///nowhere"),
                     CDC_EINVAL);
    ck_assert_int_eq(cdc__executor_worker_moved(context->executor, -1, "ipc:///nowhere"),
                     CDC_EINVAL);
    cdc_test_fc_check(&f, REL_TOL);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

/* CDCGEMM_DATA_SHARDS beyond the workers: an error naming it. */
START_TEST(test_data_shards_too_many)
{
    cdc_config_t config;
    cdc_config_init(&config);
    cdc_test_env_refused("CDCGEMM_DATA_SHARDS", "0", "5", &config);
    ck_assert_int_eq(config.data_shards, 5);
    config.local_workers = 5;
    config.parity = 1;
    config.log_level = CDC_LOG_ERROR;
    cdc_context_t *context = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &context), CDC_ECONFIG);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "CDCGEMM_DATA_SHARDS"));
    ck_assert_ptr_null(context);
}
END_TEST

static Suite *respawn_suite(void)
{
    Suite *suite = suite_create("respawn");
    TCase *tcase = tcase_create("respawn");
    tcase_set_timeout(tcase, 60);
    tcase_add_test(tcase, test_kill_respawned);
    tcase_add_test(tcase, test_stop_replaced);
    tcase_add_test(tcase, test_short_stop_not_killed);
    tcase_add_test(tcase, test_crash_fault_once);
    tcase_add_test(tcase, test_respawn_off);
    tcase_add_test(tcase, test_crash_loop_given_up);
    suite_add_tcase(suite, tcase);
    TCase *redundancy = tcase_create("redundancy");
    tcase_set_timeout(redundancy, 60);
    tcase_add_test(redundancy, test_kill_full_redundancy);
    tcase_add_test(redundancy, test_hang_full_redundancy);
    tcase_add_test(redundancy, test_spare_absorbs_failure);
    tcase_add_test(redundancy, test_no_failure_no_death);
    tcase_add_test(redundancy, test_kill_fresh_endpoint);
    tcase_add_test(redundancy, test_data_shards_too_many);
    tcase_add_test(redundancy, test_kill_reloaded_from_store);
    suite_add_tcase(suite, redundancy);
    return suite;
}

int main(void)
{
    setenv("CDCGEMM_WORKER_BIN", CDC_WORKER_BIN, 1);
    const char *sanitized = getenv("CDC_TEST_SANITIZED");
    if (sanitized && strcmp(sanitized, "0") != 0) {
        kill_bound_s = 3.0;
        stop_bound_s = 5.0;
        repair_bound_s = 3.0;
        hang_repair_bound_s = 5.0;
    }
    return cdc_test_run_suite(respawn_suite());
}
