/* test_distributed.c - coded layers on real cdcgemm-worker processes, with faults. */
/* Contexts here use the dedicated parity layout and the equal plan: the
   assertions count its shards (weights per shard, one decoded shard per
   lost worker, results per call), and the adaptive default would compute
   these small calls on this host instead of on the workers they test. The
   rotated layout's own: test_rotated.c. */
#include "cdcgemm.h"
#include "context.h"
#include "layer.h"
#include "protocol.h"
#include "testutil.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define WORKERS 5
#define TIMEOUT_MS 1500

static pid_t worker_pids[WORKERS];
static pid_t runner_pid; /* the process that spawned the workers */
static char worker_paths[WORKERS][96];
static char endpoints[CDC_CONFIG_STR];


static void workers_stop(void)
{
    if (getpid() != runner_pid)
        return; /* a forked test process: the runner's teardown reaps them */
    for (int i = 0; i < WORKERS; i++) {
        if (worker_pids[i] <= 0)
            continue;
        cdc_test_worker_kill(worker_pids[i]);
        worker_pids[i] = 0;
        unlink(worker_paths[i]);
    }
}

/* Unchecked fixture (runs in the runner process, so teardown runs even when
   a test fails): five fresh workers on unique ipc endpoints. */
static void workers_start(void)
{
    static int serial;
    char *cursor = endpoints;
    serial++;
    for (int i = 0; i < WORKERS; i++) {
        snprintf(worker_paths[i], sizeof worker_paths[i], "/tmp/cdc-test-%ld-%d-%d.ipc",
                 (long) getpid(), serial, i);
        unlink(worker_paths[i]);
        char endpoint[128];
        snprintf(endpoint, sizeof endpoint, "ipc://%.95s", worker_paths[i]);
        cursor += sprintf(cursor, "%s%s", i ? "," : "", endpoint);
        cdc_test_worker_t w = {.bin = CDC_WORKER_BIN, .endpoint = endpoint, .threads = 1,
                               .log = "warn"};
        char error[512];
        worker_pids[i] = cdc_test_worker_spawn(&w, error, sizeof error);
        if (worker_pids[i] < 0) {
            fprintf(stderr, "%s\n", error);
            worker_pids[i] = 0;
        }
    }
    /* Ready once every worker's socket file exists (bounded wait). */
    double deadline = cdc_test_now_s() + 5.0;
    int ready = 0;
    for (int i = 0; i < WORKERS; i++) {
        char endpoint[128];
        snprintf(endpoint, sizeof endpoint, "ipc://%.95s", worker_paths[i]);
        ready += worker_pids[i] > 0 &&
                 cdc_test_worker_wait_bound(worker_pids[i], endpoint,
                                            deadline - cdc_test_now_s()) == 0;
    }
    if (ready == WORKERS)
        return;
    fprintf(stderr, "workers did not bind within 5 s\n");
}

static cdc_context_t *remote_context(int wait_ms)
{
    for (int i = 0; i < WORKERS; i++)
        ck_assert_msg(worker_pids[i] > 0, "worker %d did not start", i);
    cdc_config_t config;
    cdc_config_init(&config);
    config.parity_layout = CDC_LAYOUT_DEDICATED; /* what the assertions count (top) */
    config.plan = CDC_PLAN_EQUAL;                /* every call on the workers (top) */
    snprintf(config.workers, sizeof config.workers, "%s", endpoints);
    config.parity = 1;
    config.timeout_ms = TIMEOUT_MS;
    config.wait_ms = wait_ms;
    config.log_level = CDC_LOG_ERROR;
    cdc_context_t *context = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &context), CDC_OK);
    ck_assert_str_eq(context->executor->ops->name, "zmq");
    ck_assert_int_eq(context->workers, WORKERS);
    return context;
}

static cdc_context_t *reference_context(void)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.parity_layout = CDC_LAYOUT_DEDICATED; /* what the assertions count (top) */
    config.plan = CDC_PLAN_EQUAL;                /* every call on the workers (top) */
    config.parity = 0;
    config.local_workers = WORKERS;
    config.in_process = 1;
    config.log_level = CDC_LOG_ERROR;
    cdc_context_t *context = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &context), CDC_OK);
    return context;
}

static cdc_remote_counters_t remote_counters(cdc_context_t *context)
{
    cdc_remote_counters_t counters;
    ck_assert_int_eq(cdc__executor_remote_counters(context->executor, &counters), CDC_OK);
    return counters;
}

/* An FC layer (AlexNet fc-like, smaller) and its uncoded in-process answer. */
enum { FC_OUT = 1024, FC_IN = 2304, FC_BATCH = 4 };

typedef struct {
    float *weights, *bias, *x, *want, *got;
    cdc_layer_t *layer;
} fc_case_t;

static void fc_case_init(fc_case_t *fc, cdc_context_t *context, uint64_t seed)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, seed);
    fc->weights = cdc_test_alloc(sizeof(float) * FC_OUT * FC_IN);
    fc->bias = cdc_test_alloc(sizeof(float) * FC_OUT);
    fc->x = cdc_test_alloc(sizeof(float) * FC_BATCH * FC_IN);
    fc->want = cdc_test_alloc(sizeof(float) * FC_BATCH * FC_OUT);
    fc->got = cdc_test_alloc(sizeof(float) * FC_BATCH * FC_OUT);
    cdc_test_fill_uniform(&rng, fc->weights, (size_t) FC_OUT * FC_IN);
    cdc_test_fill_uniform(&rng, fc->bias, FC_OUT);
    cdc_test_fill_uniform(&rng, fc->x, (size_t) FC_BATCH * FC_IN);

    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = CDC_SPLIT_ROWS; /* weight shards live on the workers */
    cdc_context_t *reference = reference_context();
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_fc_new(reference, FC_OUT, FC_IN, fc->weights, fc->bias, &options,
                                &layer), CDC_OK);
    ck_assert_int_eq(cdc_fc_forward(layer, FC_BATCH, fc->x, fc->want), CDC_OK);
    cdc_layer_destroy(&layer);
    cdc_context_destroy(&reference);
    ck_assert_int_eq(cdc_fc_new(context, FC_OUT, FC_IN, fc->weights, fc->bias, &options,
                                &fc->layer), CDC_OK);
}

/* One forward call: right answer, within the time bound; returns seconds. */
static double fc_check(fc_case_t *fc)
{
    memset(fc->got, 0, sizeof(float) * FC_BATCH * FC_OUT);
    double start = cdc_test_now_s();
    ck_assert_int_eq(cdc_fc_forward(fc->layer, FC_BATCH, fc->x, fc->got), CDC_OK);
    double elapsed = cdc_test_now_s() - start;
    double err = cdc_test_rel_error_ff(fc->got, fc->want, (size_t) FC_BATCH * FC_OUT);
    ck_assert_msg(err <= 1e-5, "FC relative error %g", err);
    ck_assert_msg(elapsed < TIMEOUT_MS / 1000.0 + 1.0, "FC call took %.3f s", elapsed);
    return elapsed;
}

static void fc_case_free(fc_case_t *fc)
{
    cdc_layer_destroy(&fc->layer);
    free(fc->weights);
    free(fc->bias);
    free(fc->x);
    free(fc->want);
    free(fc->got);
}

/* A conv layer of desc on 27 x 27 images, checked against in-process. */
static void conv_check_desc(cdc_context_t *context, cdc_conv2d_desc_t desc, cdc_split_t split,
                            uint64_t seed)
{
    const int64_t batch = 2, h = 27, w = 27;
    int64_t out_h, out_w;
    ck_assert_int_eq(cdc_conv2d_output_size(&desc, h, w, &out_h, &out_w), CDC_OK);
    size_t in_count = (size_t) (batch * desc.in_channels * h * w);
    size_t w_count = (size_t) (desc.out_channels * desc.in_channels * desc.kernel_h *
                               desc.kernel_w);
    size_t out_count = (size_t) (batch * desc.out_channels * out_h * out_w);
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, seed);
    float *x = cdc_test_alloc(in_count * sizeof(float));
    float *weights = cdc_test_alloc(w_count * sizeof(float));
    float *want = cdc_test_alloc(out_count * sizeof(float));
    float *got = cdc_test_alloc(out_count * sizeof(float));
    cdc_test_fill_uniform(&rng, x, in_count);
    cdc_test_fill_uniform(&rng, weights, w_count);
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = split;

    cdc_context_t *reference = reference_context();
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_conv2d_new(reference, &desc, weights, NULL, &options, &layer),
                     CDC_OK);
    ck_assert_int_eq(cdc_conv2d_forward(layer, batch, h, w, x, want), CDC_OK);
    cdc_layer_destroy(&layer);
    cdc_context_destroy(&reference);

    ck_assert_int_eq(cdc_conv2d_new(context, &desc, weights, NULL, &options, &layer), CDC_OK);
    for (int call = 0; call < 2; call++) {
        memset(got, 0, out_count * sizeof(float));
        double start = cdc_test_now_s();
        ck_assert_int_eq(cdc_conv2d_forward(layer, batch, h, w, x, got), CDC_OK);
        ck_assert(cdc_test_now_s() - start < TIMEOUT_MS / 1000.0 + 1.0);
        double err = cdc_test_rel_error_ff(got, want, out_count);
        ck_assert_msg(err <= 1e-5, "conv (split %d) relative error %g", (int) split, err);
    }
    ck_assert_int_eq(cdc_layer_split(layer), split);
    cdc_layer_destroy(&layer);
    free(x);
    free(weights);
    free(want);
    free(got);
}

/* AlexNet conv2-like, smaller. */
static void conv_check(cdc_context_t *context, cdc_split_t split, uint64_t seed)
{
    cdc_conv2d_desc_t desc = {.in_channels = 32, .out_channels = 64, .kernel_h = 5,
                              .kernel_w = 5, .stride_h = 1, .stride_w = 1, .pad_h = 2,
                              .pad_w = 2, .dilation_h = 1, .dilation_w = 1};
    conv_check_desc(context, desc, split, seed);
}

START_TEST(test_no_fault)
{
    cdc_context_t *context = remote_context(0);
    fc_case_t fc;
    fc_case_init(&fc, context, 1);
    fc_check(&fc);
    fc_check(&fc);
    conv_check(context, CDC_SPLIT_ROWS, 2);
    conv_check(context, CDC_SPLIT_COLUMNS, 3);
    cdc_stats_t stats;
    ck_assert_int_eq(cdc_context_stats(context, &stats), CDC_OK);
    ck_assert_uint_eq(stats.fallbacks, 0);
    cdc_remote_counters_t counters = remote_counters(context);
    ck_assert_uint_eq(counters.send_failures, 0);
    ck_assert_uint_eq(counters.error_replies, 0);
    ck_assert_uint_eq(counters.invalid_replies, 0);
    ck_assert_uint_eq(counters.timeouts, 0);
    ck_assert_uint_ge(counters.results, 6 * 4); /* >= n results for each of 6 calls */
    ck_assert_uint_gt(counters.bytes_in, 0);
    /* Where the calls' time went (cdcgemm-bench smallcalls): every call
       counted, sends and waits seen, the steps inside the whole. */
    cdc_testing_call_steps_t steps;
    ck_assert_int_eq(cdc_testing_call_steps(context, &steps), CDC_OK);
    ck_assert_uint_eq(steps.calls, stats.calls);
    ck_assert(steps.send_ms > 0.0 && steps.wait_ms > 0.0 && steps.finish_ms >= 0.0);
    ck_assert_msg(steps.send_ms + steps.wait_ms + steps.finish_ms <= steps.total_ms + 1e-6,
                  "steps %.3f + %.3f + %.3f ms past the calls' %.3f", steps.send_ms,
                  steps.wait_ms, steps.finish_ms, steps.total_ms);
    ck_assert_int_eq(cdc_testing_call_steps(NULL, &steps), CDC_EINVAL);
    fc_case_free(&fc);
    cdc_context_destroy(&context);
}
END_TEST

/* Padding not smaller than the dilated kernel span (a 1x1 kernel with
   padding 1, as PyTorch allows): workers refuse such tasks (issue 9), so the
   coordinator never sends them and computes the layer itself, right. */
START_TEST(test_padding_beyond_span_local)
{
    cdc_context_t *context = remote_context(0);
    cdc_remote_counters_t before = remote_counters(context);
    cdc_conv2d_desc_t desc = {.in_channels = 7, .out_channels = 12, .kernel_h = 1,
                              .kernel_w = 1, .stride_h = 1, .stride_w = 1, .pad_h = 1,
                              .pad_w = 1, .dilation_h = 1, .dilation_w = 1};
    conv_check_desc(context, desc, CDC_SPLIT_ROWS, 4);
    conv_check_desc(context, desc, CDC_SPLIT_COLUMNS, 5);
    cdc_stats_t stats;
    ck_assert_int_eq(cdc_context_stats(context, &stats), CDC_OK);
    ck_assert_uint_eq(stats.fallbacks, 4); /* every call, two per split */
    cdc_remote_counters_t after = remote_counters(context);
    ck_assert_uint_eq(after.tasks_sent, before.tasks_sent);
    ck_assert_uint_eq(after.error_replies, 0);
    /* A padding one below the span still goes to the workers. */
    desc.kernel_h = desc.kernel_w = 3;
    desc.pad_h = desc.pad_w = 2;
    conv_check_desc(context, desc, CDC_SPLIT_ROWS, 6);
    ck_assert_int_eq(cdc_context_stats(context, &stats), CDC_OK);
    ck_assert_uint_eq(stats.fallbacks, 4);
    ck_assert_uint_gt(remote_counters(context).tasks_sent, after.tasks_sent);
    cdc_context_destroy(&context);
}
END_TEST

START_TEST(test_weights_cross_once)
{
    cdc_context_t *context = remote_context(0);
    fc_case_t fc;
    fc_case_init(&fc, context, 4);
    fc_check(&fc);
    cdc_remote_counters_t first = remote_counters(context);
    ck_assert_uint_eq(first.weights_sent, WORKERS); /* one shard per worker */
    /* Each worker's shard is (FC_OUT / 4) rows of FC_IN floats. */
    ck_assert_uint_eq(first.weight_bytes,
                      (uint64_t) WORKERS * (FC_OUT / 4) * FC_IN * sizeof(float));
    for (int call = 0; call < 4; call++)
        fc_check(&fc);
    cdc_remote_counters_t later = remote_counters(context);
    ck_assert_uint_eq(later.weights_sent, WORKERS);
    ck_assert_uint_eq(later.misses, 0);
    ck_assert_uint_eq(later.tasks_sent, 5 * WORKERS);
    /* After warm-up, a call moves the input once per worker and the results. */
    uint64_t per_call_out = (later.bytes_out - first.bytes_out) / 4;
    ck_assert_uint_eq(per_call_out, (uint64_t) WORKERS * FC_BATCH * FC_IN * sizeof(float));
    fc_case_free(&fc);
    cdc_context_destroy(&context);
}
END_TEST

/* WEIGHTS go without a copy (zmq_msg_init_data over held memory): a worker
   that is stopped leaves its WEIGHTS queued in libzmq, still holding what
   they point into, when the call (decoded from the others) returns and the
   layer is destroyed. That memory lives on until libzmq's I/O thread has
   written the message to the resumed worker, then goes (ASan sees a read of
   freed memory, LSan anything never released). A row block (output or
   channel split) is held through the layer's shard set, which holds the
   weights; the whole matrix (batch or spatial split) by the weights' own
   hold. Weights of 16 MiB or more: more than the 4 MB socket buffers on
   both ends take. */

/* A context on the five workers, every one live after a first call. */
static cdc_context_t *in_flight_context(fc_case_t *warm)
{
    cdc_context_t *context = remote_context(0);
    fc_case_init(warm, context, 21);
    fc_check(warm);
    return context;
}

/* The call ran with worker 1 stopped: destroy the layer, see its WEIGHTS
   hold the weights, resume the worker, see them let go. */
static void in_flight_finish(cdc_context_t *context, fc_case_t *warm, cdc_layer_t *layer,
                             cdc_split_t split)
{
    ck_assert_int_eq(cdc_layer_split(layer), split);
    ck_assert_uint_eq(remote_counters(context).weights_sent, 2 * WORKERS);
    /* Mine: tells when nothing else holds the weights. */
    cdc_hold_t *weights = cdc__hold_retain(&layer->parts->hold);
    cdc_layer_destroy(&layer);
    ck_assert(cdc__hold_retired(weights));
    /* Still in libzmq's hands: the stopped worker's slices hold the retired
       set (which holds the weights once), or the weights themselves. */
    if (split == CDC_SPLIT_ROWS)
        ck_assert_int_eq(cdc__hold_refs(weights), 2);
    else
        ck_assert_int_ge(cdc__hold_refs(weights), 2);
    ck_assert_int_eq(kill(worker_pids[1], SIGCONT), 0);
    double deadline = cdc_test_now_s() + 20.0;
    while (cdc__hold_refs(weights) > 1 && cdc_test_now_s() < deadline)
        cdc_test_sleep_ms(5);
    ck_assert_int_eq(cdc__hold_refs(weights), 1);
    cdc__hold_release(weights);
    fc_case_free(warm);
    cdc_context_destroy(&context);
}

static void fc_in_flight(cdc_split_t split, int64_t out, int64_t in, int64_t batch)
{
    fc_case_t warm;
    cdc_context_t *context = in_flight_context(&warm);
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 22);
    float *w = cdc_test_alloc(sizeof(float) * (size_t) (out * in));
    float *x = cdc_test_alloc(sizeof(float) * (size_t) (batch * in));
    float *y = cdc_test_alloc(sizeof(float) * (size_t) (batch * out));
    cdc_test_fill_uniform(&rng, w, (size_t) (out * in));
    cdc_test_fill_uniform(&rng, x, (size_t) (batch * in));
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = split;
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_fc_new(context, out, in, w, NULL, &options, &layer), CDC_OK);
    ck_assert_int_eq(kill(worker_pids[1], SIGSTOP), 0);
    ck_assert_int_eq(cdc_fc_forward(layer, batch, x, y), CDC_OK); /* n of n + r suffice */
    in_flight_finish(context, &warm, layer, split);
    free(w);
    free(x);
    free(y);
}

/* 1024 filters of 512 x 3 x 3 (18.9 MB) on one 512 x 8 x 8 image. */
static void conv_in_flight(cdc_split_t split)
{
    fc_case_t warm;
    cdc_context_t *context = in_flight_context(&warm);
    cdc_conv2d_desc_t desc = {512, 1024, 3, 3, 1, 1, 1, 1, 1, 1};
    size_t w_count = (size_t) (1024 * 512 * 9), in_count = 512 * 8 * 8;
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 23);
    float *w = cdc_test_alloc(sizeof(float) * w_count);
    float *x = cdc_test_alloc(sizeof(float) * in_count);
    float *y = cdc_test_alloc(sizeof(float) * 1024 * 8 * 8);
    cdc_test_fill_uniform(&rng, w, w_count);
    cdc_test_fill_uniform(&rng, x, in_count);
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = split;
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_conv2d_new(context, &desc, w, NULL, &options, &layer), CDC_OK);
    ck_assert_int_eq(kill(worker_pids[1], SIGSTOP), 0);
    ck_assert_int_eq(cdc_conv2d_forward(layer, 1, 8, 8, x, y), CDC_OK);
    in_flight_finish(context, &warm, layer, split);
    free(w);
    free(x);
    free(y);
}

START_TEST(test_layer_gone_while_weights_in_flight)
{
    switch (_i) {
    case 0: /* FC output split: 16 MiB row blocks */
        fc_in_flight(CDC_SPLIT_ROWS, 4096, 4096, 1);
        break;
    case 1: /* FC batch split: the 16 MiB matrix, two samples per data shard */
        fc_in_flight(CDC_SPLIT_COLUMNS, 2048, 2048, 8);
        break;
    case 2: /* conv channel split: blocks of filters */
        conv_in_flight(CDC_SPLIT_ROWS);
        break;
    default: /* conv spatial split: every filter */
        conv_in_flight(CDC_SPLIT_COLUMNS);
    }
}
END_TEST

START_TEST(test_worker_killed_between_calls)
{
    cdc_context_t *context = remote_context(0);
    fc_case_t fc;
    fc_case_init(&fc, context, 5);
    fc_check(&fc);
    ck_assert_int_eq(kill(worker_pids[2], SIGKILL), 0); /* a data shard's worker */
    cdc_stats_t before, after;
    cdc_context_stats(context, &before);
    fc_check(&fc); /* at once: decoded, or planned around it if already seen */
    cdc_test_sleep_ms(100);
    /* The dropped connection took it out of the plan. */
    ck_assert_int_eq(cdc__context_plan_workers(context, NULL), WORKERS - 1);
    for (int call = 0; call < 3; call++)
        fc_check(&fc);
    conv_check(context, CDC_SPLIT_ROWS, 6);
    cdc_call_report_t report;
    ck_assert_int_eq(cdc_context_last_call(context, &report), CDC_OK);
    /* The default re-plan keeps the shards (n = 4) and the code: the dead
       worker's slot is an erasure, decoded from parity every call, and no
       weight shard moves to another worker. */
    ck_assert_int_eq(report.n, WORKERS - 1);
    ck_assert_int_eq(report.r, 1);
    ck_assert_int_eq(report.arrived, report.n);
    ck_assert_int_eq(report.decoded, 1);
    ck_assert_int_eq(report.redundancy, 0);
    ck_assert_int_eq(report.degraded, 1);
    cdc_context_stats(context, &after);
    ck_assert_uint_eq(after.fallbacks, before.fallbacks);
    /* Only the new conv layer's shards, once each to the 4 live slot workers. */
    ck_assert_uint_eq(after.weights_sent - before.weights_sent, WORKERS - 1);
    ck_assert_uint_ge(after.degraded_calls - before.degraded_calls, 5);
    ck_assert_uint_eq(after.worker_deaths, 1);
    fc_case_free(&fc);
    cdc_context_destroy(&context);
}
END_TEST

START_TEST(test_worker_stopped)
{
    cdc_context_t *context = remote_context(0);
    fc_case_t fc;
    fc_case_init(&fc, context, 7);
    fc_check(&fc);
    /* A second context that waits 150 ms for data shards, connected while
       every worker is up. */
    cdc_context_t *patient = remote_context(150);
    fc_case_t fc2;
    fc_case_init(&fc2, patient, 7);
    fc_check(&fc2);
    ck_assert_int_eq(kill(worker_pids[1], SIGSTOP), 0);
    /* Before the heartbeats notice (300 ms): with wait_ms, the call waits
       that long for the missing data shard, then decodes anyway. */
    double elapsed = fc_check(&fc2);
    ck_assert_msg(elapsed >= 0.14 && elapsed < 1.0, "wait_ms = 150 call took %.3f s",
                  elapsed);
    cdc_stats_t before, after;
    cdc_context_stats(context, &before);
    for (int call = 0; call < 3; call++) {
        elapsed = fc_check(&fc);
        /* n results suffice: the hung worker is not waited for. */
        ck_assert_msg(elapsed < 0.5, "call with a stopped worker took %.3f s", elapsed);
    }
    cdc_context_stats(context, &after);
    ck_assert_uint_eq(after.fallbacks, before.fallbacks);
    /* Then it is dead (no PONG for 300 ms), and out of the plan after the
       1 s grace. */
    cdc_test_sleep_ms(400);
    ck_assert_uint_eq(remote_counters(context).live_mask & 2, 0);
    ck_assert_uint_eq(remote_counters(patient).live_mask & 2, 0);
    cdc_test_sleep_ms(1000);
    ck_assert_int_eq(cdc__context_plan_workers(context, NULL), WORKERS - 1);
    fc_check(&fc);
    fc_case_free(&fc2);
    cdc_context_destroy(&patient);

    ck_assert_int_eq(kill(worker_pids[1], SIGCONT), 0);
    /* Its shards of the calls it missed were CANCELled when those calls
       returned (it was still live then), so it skips them as it resumes;
       one not cancelled is answered late and dropped. Either way nothing
       stale is taken for a later call's result. */
    cdc_test_sleep_ms(300);
    for (int call = 0; call < 3; call++)
        fc_check(&fc);
    cdc_remote_counters_t counters = remote_counters(context);
    ck_assert_uint_ge(counters.late_replies + counters.cancels_sent, 1);
    ck_assert_uint_eq(counters.invalid_replies, 0);
    fc_case_free(&fc);
    cdc_context_destroy(&context);
}
END_TEST

START_TEST(test_all_workers_dead)
{
    cdc_context_t *context = remote_context(0);
    fc_case_t fc;
    fc_case_init(&fc, context, 8);
    fc_check(&fc);
    for (int i = 0; i < WORKERS; i++)
        ck_assert_int_eq(kill(worker_pids[i], SIGKILL), 0);
    cdc_test_sleep_ms(100);
    cdc_stats_t before, after;
    cdc_context_stats(context, &before);
    fc_check(&fc);
    fc_check(&fc);
    conv_check(context, CDC_SPLIT_COLUMNS, 9);
    cdc_context_stats(context, &after);
    ck_assert_uint_ge(after.fallbacks - before.fallbacks, 4);
    fc_case_free(&fc);
    cdc_context_destroy(&context);
}
END_TEST

/* Send raw frames from a test DEALER; return the reply's header. */
static cdc_msg_header_t raw_exchange(void *socket, const void *const *frames,
                                     const size_t *sizes, int count)
{
    for (int i = 0; i < count; i++)
        ck_assert_int_ge(zmq_send(socket, frames[i], sizes[i],
                                  i + 1 < count ? ZMQ_SNDMORE : 0), 0);
    zmq_pollitem_t item = {socket, 0, ZMQ_POLLIN, 0};
    ck_assert_msg(zmq_poll(&item, 1, 2000) == 1, "no reply within 2 s");
    uint8_t header[CDC_PROTO_HEADER_SIZE + 1];
    int size = zmq_recv(socket, header, sizeof header, 0);
    ck_assert_int_eq(size, CDC_PROTO_HEADER_SIZE);
    int more = 0;
    size_t more_size = sizeof more;
    zmq_getsockopt(socket, ZMQ_RCVMORE, &more, &more_size);
    while (more) { /* the ERROR text */
        char text[CDC_PROTO_MAX_TEXT];
        zmq_recv(socket, text, sizeof text, 0);
        zmq_getsockopt(socket, ZMQ_RCVMORE, &more, &more_size);
    }
    cdc_msg_header_t h;
    ck_assert_int_eq(cdc__msg_header_unpack(header, CDC_PROTO_HEADER_SIZE, &h), CDC_OK);
    return h;
}

START_TEST(test_malformed_to_worker)
{
    void *zmq = zmq_ctx_new();
    void *socket = zmq_socket(zmq, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof linger);
    char endpoint[128];
    snprintf(endpoint, sizeof endpoint, "ipc://%.95s", worker_paths[0]);
    ck_assert_int_eq(zmq_connect(socket, endpoint), 0);

    /* Garbage bytes. */
    const void *frames[3] = {"garbage!", NULL, NULL};
    size_t sizes[3] = {8, 0, 0};
    cdc_msg_header_t reply = raw_exchange(socket, frames, sizes, 1);
    ck_assert_uint_eq(reply.type, CDC_MSG_ERROR);
    ck_assert_int_eq(reply.error_code, CDC_EPROTO);

    /* Wrong version, request id echoed. */
    uint8_t packed[CDC_PROTO_HEADER_SIZE];
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_PING);
    h.version = 9;
    h.request_id = 1234;
    cdc__msg_header_pack(&h, packed);
    frames[0] = packed;
    sizes[0] = sizeof packed;
    reply = raw_exchange(socket, frames, sizes, 1);
    ck_assert_uint_eq(reply.type, CDC_MSG_ERROR);
    ck_assert_uint_eq(reply.request_id, 1234);

    /* Truncated task (header only), then a shape/length mismatch, then huge dims. */
    static float payload[64];
    cdc__msg_header_init(&h, CDC_MSG_TASK_GEMM);
    h.request_id = 1235;
    h.rows = 4;
    h.k = 4;
    h.cols = 4;
    cdc__msg_header_pack(&h, packed);
    reply = raw_exchange(socket, frames, sizes, 1);
    ck_assert_uint_eq(reply.type, CDC_MSG_ERROR);
    frames[1] = payload;
    sizes[1] = 16 * sizeof(float);
    frames[2] = payload;
    sizes[2] = 15 * sizeof(float);
    reply = raw_exchange(socket, frames, sizes, 3);
    ck_assert_uint_eq(reply.type, CDC_MSG_ERROR);
    h.rows = h.cols = CDC_PROTO_MAX_DIM;
    cdc__msg_header_pack(&h, packed);
    reply = raw_exchange(socket, frames, sizes, 3);
    ck_assert_uint_eq(reply.type, CDC_MSG_ERROR);

    /* An unknown weight key is a MISS, not a crash. */
    h.rows = h.cols = 4;
    h.a_key = 42;
    cdc__msg_header_pack(&h, packed);
    sizes[1] = 0;
    sizes[2] = 16 * sizeof(float);
    reply = raw_exchange(socket, frames, sizes, 3);
    ck_assert_uint_eq(reply.type, CDC_MSG_MISS);
    ck_assert_uint_eq(reply.a_key, 42);

    /* A valid task still gets a result: the worker kept serving. */
    h.a_key = 0;
    cdc__msg_header_pack(&h, packed);
    sizes[1] = 16 * sizeof(float);
    reply = raw_exchange(socket, frames, sizes, 3);
    ck_assert_uint_eq(reply.type, CDC_MSG_RESULT);
    ck_assert_int_eq(reply.rows, 4);
    cdc__msg_header_init(&h, CDC_MSG_PING);
    h.request_id = 99;
    cdc__msg_header_pack(&h, packed);
    reply = raw_exchange(socket, frames, sizes, 1);
    ck_assert_uint_eq(reply.type, CDC_MSG_PONG);
    ck_assert_uint_eq(reply.request_id, 99);
    zmq_close(socket);
    zmq_ctx_term(zmq);

    /* And the coordinator still gets right answers from that worker. */
    cdc_context_t *context = remote_context(0);
    fc_case_t fc;
    fc_case_init(&fc, context, 10);
    fc_check(&fc);
    cdc_remote_counters_t counters = remote_counters(context);
    ck_assert_uint_eq(counters.error_replies, 0);
    ck_assert_uint_eq(counters.send_failures, 0);
    fc_case_free(&fc);
    cdc_context_destroy(&context);
}
END_TEST


/* Payloads of several chunks (protocol version 2, 4 MiB chunks): fc
   3000x3000 at batch 360 on two of the workers (n = 1, r = 1). The weight
   shards (36 MB, 9 chunks), the input (4.3 MB, 2 chunks) and every result
   (4.3 MB, 2 chunks) travel in several frames each; the answer is right
   and came back from the workers (no time-out, nothing invalid). */
START_TEST(test_large_payloads)
{
    enum { OUT = 3000, IN = 3000, BATCH = 360 };
    ck_assert_uint_gt((size_t) OUT * BATCH * sizeof(float), CDC_PROTO_CHUNK_BYTES);
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 11);
    float *weights = cdc_test_alloc(sizeof(float) * OUT * IN);
    float *x = cdc_test_alloc(sizeof(float) * BATCH * IN);
    float *want = cdc_test_alloc(sizeof(float) * BATCH * OUT);
    float *got = cdc_test_alloc(sizeof(float) * BATCH * OUT);
    cdc_test_fill_uniform(&rng, weights, (size_t) OUT * IN);
    cdc_test_fill_uniform(&rng, x, (size_t) BATCH * IN);
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = CDC_SPLIT_ROWS;
    cdc_context_t *reference = reference_context();
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_fc_new(reference, OUT, IN, weights, NULL, &options, &layer), CDC_OK);
    ck_assert_int_eq(cdc_fc_forward(layer, BATCH, x, want), CDC_OK);
    cdc_layer_destroy(&layer);
    cdc_context_destroy(&reference);

    cdc_config_t config;
    cdc_config_init(&config);
    config.parity_layout = CDC_LAYOUT_DEDICATED; /* what the assertions count (top) */
    config.plan = CDC_PLAN_EQUAL;                /* every call on the workers (top) */
    const char *second_comma = strchr(strchr(endpoints, ',') + 1, ',');
    snprintf(config.workers, sizeof config.workers, "%.*s", (int) (second_comma - endpoints),
             endpoints);
    config.parity = 1;
    config.timeout_ms = 30000; /* a loaded machine must not turn this into a fallback */
    config.log_level = CDC_LOG_ERROR;
    cdc_context_t *context = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &context), CDC_OK);
    ck_assert_int_eq(context->workers, 2);
    ck_assert_int_eq(cdc_fc_new(context, OUT, IN, weights, NULL, &options, &layer), CDC_OK);
    for (int call = 0; call < 2; call++) {
        memset(got, 0, sizeof(float) * BATCH * OUT);
        ck_assert_int_eq(cdc_fc_forward(layer, BATCH, x, got), CDC_OK);
        double err = cdc_test_rel_error_ff(got, want, (size_t) BATCH * OUT);
        ck_assert_msg(err <= 1e-5, "FC 3000x3000 relative error %g", err);
    }
    cdc_remote_counters_t counters = remote_counters(context);
    /* Data + parity per call; a call returns once one of them is in (the
       other may be counted late, by the next call or never). */
    ck_assert_uint_eq(counters.tasks_sent, 4);
    ck_assert_uint_ge(counters.results, 2);
    ck_assert_uint_eq(counters.bytes_in, counters.results * OUT * BATCH * sizeof(float));
    ck_assert_uint_eq(counters.weight_bytes, (uint64_t) 2 * OUT * IN * sizeof(float));
    ck_assert_uint_eq(counters.timeouts + counters.invalid_replies + counters.error_replies, 0);
    cdc_layer_destroy(&layer);
    cdc_context_destroy(&context);
    free(weights);
    free(x);
    free(want);
    free(got);
}
END_TEST

static TCase *scenario(const char *name, const TTest *test)
{
    TCase *tcase = tcase_create(name);
    tcase_add_unchecked_fixture(tcase, workers_start, workers_stop);
    tcase_set_timeout(tcase, 60);
    tcase_add_test(tcase, test);
    return tcase;
}

static Suite *distributed_suite(void)
{
    Suite *suite = suite_create("distributed");
    suite_add_tcase(suite, scenario("no_fault", test_no_fault));
    suite_add_tcase(suite, scenario("weights_once", test_weights_cross_once));
    suite_add_tcase(suite, scenario("padding", test_padding_beyond_span_local));
    TCase *in_flight = tcase_create("in_flight");
    tcase_add_unchecked_fixture(in_flight, workers_start, workers_stop);
    tcase_set_timeout(in_flight, 60);
    tcase_add_loop_test(in_flight, test_layer_gone_while_weights_in_flight, 0, 4);
    suite_add_tcase(suite, in_flight);
    suite_add_tcase(suite, scenario("killed", test_worker_killed_between_calls));
    suite_add_tcase(suite, scenario("stopped", test_worker_stopped));
    suite_add_tcase(suite, scenario("all_dead", test_all_workers_dead));
    suite_add_tcase(suite, scenario("malformed", test_malformed_to_worker));
    suite_add_tcase(suite, scenario("large_payloads", test_large_payloads));
    return suite;
}

int main(void)
{
    /* Whatever happens, no worker outlives the suite. */
    runner_pid = getpid();
    atexit(workers_stop);
    return cdc_test_run_suite(distributed_suite());
}
