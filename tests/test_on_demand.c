/* test_on_demand.c - a spatial conv split with its parity on demand (issue
 * 26, item 2), on real worker processes.
 *
 * Under the default rotated layout a conv layer cut spatially gives every
 * worker a band of its per-call input (5 bands over 5 workers for r = 1),
 * and the parity band goes out only when a band is lost or late: a
 * fault-free call sends the 5 bands alone; a call that loses a worker (its
 * process SIGKILLed), or one whose worker straggles, gets the parity from a
 * worker done with its own band and rebuilds the missing band, exact; a
 * call the check samples sends its parity as soon as a worker is free,
 * and so still catches a device that corrupts its results. */
#include "cdcgemm.h"
#include "context.h"
#include "local_workers.h"
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REL_TOL 1e-5
/* corrupt@w1:p=0.5 drawn with this seed: its first task exact, its second
   not. */
#define CORRUPT_SEED "8"

/* Five local workers with faults, r = 1, the default layout (rotated);
   the equal plan puts every call on the workers; respawn 0: a killed
   worker stays dead. */
static cdc_context_t *bands_context(const char *faults)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.local_workers = 5;
    config.parity = 1;
    config.plan = CDC_PLAN_EQUAL;
    config.respawn = 0;
    config.timeout_ms = 5000;
    config.log_level = getenv("CDC_TEST_LOG") ? CDC_LOG_INFO : CDC_LOG_ERROR;
    snprintf(config.faults, sizeof config.faults, "%s", faults);
    cdc_context_t *ctx = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_OK);
    return ctx;
}

/* A 3x3 conv (16 -> 32 channels, pad 1) on one 40 x 40 image: 40 output
   rows, 8 a band; its in-process answer. */
typedef struct {
    cdc_conv2d_desc_t desc;
    int64_t h, w, out_count;
    float *weights, *x, *want, *got;
    cdc_layer_t *layer;
} bands_case_t;

static void bands_case_init(bands_case_t *c, cdc_context_t *ctx, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    c->desc = (cdc_conv2d_desc_t){.in_channels = 16, .out_channels = 32, .kernel_h = 3,
                                  .kernel_w = 3, .stride_h = 1, .stride_w = 1, .pad_h = 1,
                                  .pad_w = 1, .dilation_h = 1, .dilation_w = 1};
    c->h = c->w = 40;
    size_t in_count = (size_t) (16 * c->h * c->w), w_count = 32 * 16 * 9;
    c->out_count = 32 * c->h * c->w;
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, seed);
    c->weights = cdc_test_alloc(w_count * sizeof(float));
    c->x = cdc_test_alloc(in_count * sizeof(float));
    c->want = cdc_test_alloc((size_t) c->out_count * sizeof(float));
    c->got = cdc_test_alloc((size_t) c->out_count * sizeof(float));
    cdc_test_fill_uniform(&rng, c->weights, w_count);
    cdc_test_fill_uniform(&rng, c->x, in_count);
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = CDC_SPLIT_COLUMNS;
    cdc_config_t config;
    cdc_config_init(&config);
    config.in_process = 1;
    config.local_workers = 5;
    config.parity = 0;
    cdc_context_t *reference = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &reference), CDC_OK);
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_conv2d_new(reference, &c->desc, c->weights, NULL, &options, &layer),
                     CDC_OK);
    ck_assert_int_eq(cdc_conv2d_forward(layer, 1, c->h, c->w, c->x, c->want), CDC_OK);
    cdc_layer_destroy(&layer);
    cdc_context_destroy(&reference);
    ck_assert_int_eq(cdc_conv2d_new(ctx, &c->desc, c->weights, NULL, &options, &c->layer),
                     CDC_OK);
}

static void bands_case_free(bands_case_t *c)
{
    cdc_layer_destroy(&c->layer);
    free(c->weights);
    free(c->x);
    free(c->want);
    free(c->got);
}

/* One forward call, exact, spatial; its report and how long it took (s). */
static cdc_call_report_t bands_call(cdc_context_t *ctx, bands_case_t *c, double *took)
{
    memset(c->got, 0, (size_t) c->out_count * sizeof(float));
    double started = cdc_test_now_s();
    ck_assert_msg(cdc_conv2d_forward(c->layer, 1, c->h, c->w, c->x, c->got) == CDC_OK, "%s",
                  cdc_last_error());
    *took = cdc_test_now_s() - started;
    double err = cdc_test_rel_error_ff(c->got, c->want, (size_t) c->out_count);
    ck_assert_msg(err <= REL_TOL, "relative error %g", err);
    ck_assert_int_eq(cdc_layer_split(c->layer), CDC_SPLIT_COLUMNS);
    cdc_call_report_t report;
    ck_assert_int_eq(cdc_context_last_call(ctx, &report), CDC_OK);
    return report;
}

static cdc_stats_t stats_of(cdc_context_t *ctx)
{
    cdc_stats_t stats;
    ck_assert_int_eq(cdc_context_stats(ctx, &stats), CDC_OK);
    return stats;
}

static uint64_t tasks_sent(cdc_context_t *ctx)
{
    cdc_remote_counters_t counters;
    ck_assert_int_eq(cdc__executor_remote_counters(ctx->executor, &counters), CDC_OK);
    return counters.tasks_sent;
}

/* Emulated devices: a band (8 of 40 rows, 2 x 32 x 144 x 320 flops) takes
   ~60 ms at 0.05 GFLOP/s. */
#define DEVICES "slow@*:gflops=0.05"

START_TEST(test_bands_fault_free_send_no_parity)
{
    cdc_context_t *ctx = bands_context(DEVICES);
    bands_case_t c;
    bands_case_init(&c, ctx, 1);
    double took;
    /* The first call: no worker known ready yet (they hold nothing), so it
       runs dedicated (4 bands and the parity), and ships the filters. */
    ck_assert_int_eq(bands_call(ctx, &c, &took).n, 4);
    /* The rest of the check's sample (the first 4 calls, and the fifth,
       which check_policy.c charges at least a quarter of its time: the next
       12 such calls earn it back): each sends its parity band once a worker
       is free, and checks the bands with it. */
    for (int i = 1; i < 5; i++)
        ck_assert_int_eq(bands_call(ctx, &c, &took).n, 5);
    cdc_stats_t sampled = stats_of(ctx);
    ck_assert_uint_eq(sampled.verified_calls, 5);
    ck_assert_uint_eq(sampled.parity_on_demand, 4);
    ck_assert_uint_eq(sampled.corrupt_detected, 0);
    uint64_t sent = tasks_sent(ctx);
    const int calls = 6;
    for (int i = 0; i < calls; i++) {
        cdc_call_report_t report = bands_call(ctx, &c, &took);
        ck_assert_int_eq(report.n, 5); /* a band per worker, not n = 4 */
        ck_assert_int_eq(report.r, 1);
        ck_assert_int_eq(report.decoded, 0);
        ck_assert_int_eq(report.redundancy, 1); /* the parity is there to be sent */
    }
    cdc_stats_t after = stats_of(ctx);
    ck_assert_uint_eq(tasks_sent(ctx) - sent, (uint64_t) calls * 5);
    ck_assert_uint_eq(after.parity_on_demand, sampled.parity_on_demand);
    ck_assert_uint_eq(after.degraded_calls, 0);
    ck_assert_uint_eq(after.fallbacks, 0);
    bands_case_free(&c);
    cdc_context_destroy(&ctx);
}
END_TEST

/* A worker SIGKILLed: the call that finds its band lost sends the parity
   and rebuilds the band; the next ones plan a band per live worker (4,
   with the parity on demand still). No result computed here. */
START_TEST(test_bands_worker_killed)
{
    cdc_context_t *ctx = bands_context(DEVICES);
    bands_case_t c;
    bands_case_init(&c, ctx, 2);
    double took;
    for (int i = 0; i < 5; i++)
        bands_call(ctx, &c, &took);
    cdc_stats_t before = stats_of(ctx);
    pid_t victim = cdc__local_workers_pid(ctx->local, 2);
    ck_assert_int_gt(victim, 0);
    ck_assert_int_eq(kill(victim, SIGKILL), 0);
    int decoded = 0;
    for (int i = 0; i < 5; i++) {
        cdc_call_report_t report = bands_call(ctx, &c, &took);
        decoded += report.decoded;
        ck_assert_msg(took < 2.0, "a call after the kill took %.3f s", took);
    }
    cdc_call_report_t last = bands_call(ctx, &c, &took);
    ck_assert_int_eq(last.n, 4);
    ck_assert_int_eq(last.r, 1);
    cdc_stats_t after = stats_of(ctx);
    ck_assert_uint_eq(after.fallbacks, before.fallbacks);
    ck_assert_int_ge(decoded, 1);
    ck_assert_uint_ge(after.parity_on_demand, before.parity_on_demand + 1);
    bands_case_free(&c);
    cdc_context_destroy(&ctx);
}
END_TEST

/* Worker 3 answers 2 s late on every call: each call sends the parity once
   the others' bands are in and its band lags them, and ends long before
   the straggler would have (its band rebuilt). */
START_TEST(test_bands_straggler_released)
{
    cdc_context_t *ctx = bands_context(DEVICES ";delay@w3:ms=2000");
    bands_case_t c;
    bands_case_init(&c, ctx, 3);
    double took;
    for (int i = 0; i < 4; i++) /* the check's sample */
        bands_call(ctx, &c, &took);
    cdc_stats_t before = stats_of(ctx);
    const int calls = 3;
    for (int i = 0; i < calls; i++) {
        cdc_call_report_t report = bands_call(ctx, &c, &took);
        ck_assert_int_eq(report.decoded, 1);
        ck_assert_msg(took < 1.0, "a call beside a 2 s straggler took %.3f s", took);
    }
    cdc_stats_t after = stats_of(ctx);
    ck_assert_uint_eq(after.parity_on_demand - before.parity_on_demand, calls);
    ck_assert_uint_eq(after.fallbacks, before.fallbacks);
    bands_case_free(&c);
    cdc_context_destroy(&ctx);
}
END_TEST

/* A device that corrupts half its results (CORRUPT_SEED): not its first,
   in the first call (dedicated: no worker known ready yet), which checks it;
   its second, its band in the second call, on demand and in the check's
   sample: that call sends its parity once a worker is free, waits for it
   and catches the bad band. From then on every call is checked, dedicated
   (the parity wanted at once), and none comes back wrong. */
START_TEST(test_bands_corrupt_device_caught)
{
    cdc_context_t *ctx = bands_context(DEVICES ";corrupt@w1:p=0.5;seed=" CORRUPT_SEED);
    bands_case_t c;
    bands_case_init(&c, ctx, 4);
    double took;
    const int calls = 12;
    for (int i = 0; i < calls; i++)
        bands_call(ctx, &c, &took); /* each exact */
    cdc_stats_t stats = stats_of(ctx);
    ck_assert_uint_eq(stats.first_corrupt_call, 2);
    ck_assert_uint_eq(stats.parity_on_demand, 1);
    ck_assert_uint_ge(stats.corrupt_detected, 2);
    ck_assert_uint_eq(stats.verified_calls, calls);
    bands_case_free(&c);
    cdc_context_destroy(&ctx);
}
END_TEST

static Suite *on_demand_suite(void)
{
    Suite *s = suite_create("on_demand");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_bands_fault_free_send_no_parity);
    tcase_add_test(tc, test_bands_worker_killed);
    tcase_add_test(tc, test_bands_straggler_released);
    tcase_add_test(tc, test_bands_corrupt_device_caught);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return cdc_test_run_suite(on_demand_suite());
}
