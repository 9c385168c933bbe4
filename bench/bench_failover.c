/* bench_failover.c - coded vs uncoded latency on local workers, and recovery from a SIGKILL. */
#include "bench_failover.h"

#include "bench_util.h"
#include "cdcgemm.h"
#include "cdcgemm_testing.h"
#include "models.h"
#include "run.h"
#include "workload.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One layer under test: its data and reference (a one-layer workload), the
   layer object on the context being measured, and the output buffer. */
typedef struct {
    cdc_workload_t data;
    cdc_layer_t *layer;
    float *got;
} bench_layer_t;

static const cdc_bench_layer_t *bench_data(const bench_layer_t *b)
{
    return &b->data.layers[0];
}

/* Operands and the uncoded in-process answer. */
static int layer_prepare(bench_layer_t *b, const cdc_model_layer_t *shape, unsigned seed)
{
    memset(b, 0, sizeof *b);
    if (cdc_workload_add_layer(&b->data, shape) || cdc_workload_prepare(&b->data, seed))
        return -1;
    b->got = cdc_bench_xmalloc(bench_data(b)->out_count * sizeof(float));
    return CDC_OK;
}

static int layer_new(cdc_context_t *context, bench_layer_t *b)
{
    return cdc_workload_layers_new(&b->data, context, CDC_SPLIT_AUTO, CDC_PARITY_DEFAULT,
                                   &b->layer)
               ? -1
               : CDC_OK;
}

static void layer_free(bench_layer_t *b)
{
    cdc_layer_destroy(&b->layer);
    cdc_workload_free(&b->data);
    free(b->got);
}

/* One timed call; counts a wrong answer (beyond CDC_BENCH_WRONG_TOLERANCE) in *wrong. */
static double timed_call(bench_layer_t *b, int *wrong)
{
    const cdc_bench_layer_t *l = bench_data(b);
    double start = cdc_bench_now_ms();
    int rc = cdc_workload_forward(l, b->layer, b->got);
    double elapsed = cdc_bench_now_ms() - start;
    if (rc != CDC_OK ||
        cdc_bench_rel_error(b->got, l->reference, l->out_count) > CDC_BENCH_WRONG_TOLERANCE)
        (*wrong)++;
    return elapsed;
}

static cdc_context_t *workers_context(int workers, int parity)
{
    cdc_config_t config;
    cdc_config_init(&config);
    cdc_config_from_env(&config); /* CDCGEMM_FAULTS etc. still apply */
    config.workers[0] = '\0';
    config.in_process = 0;
    config.local_workers = workers;
    config.parity = parity;
    config.timeout_ms = 10000; /* shipping fc6's shards is not a failure */
    cdc_context_t *context = NULL;
    int rc = cdc_context_new(&config, &context);
    if (rc != CDC_OK)
        fprintf(stderr, "cdcgemm-bench failover: context: %s (%s)\n", cdc_err_name(rc),
                cdc_last_error());
    return context;
}

static int fault_free(bench_layer_t *b, int workers, int parity, int requests)
{
    cdc_context_t *context = workers_context(workers, parity);
    if (!context || layer_new(context, b) != CDC_OK) {
        cdc_context_destroy(&context);
        return 1;
    }
    int wrong = 0;
    for (int i = 0; i < 3; i++)
        timed_call(b, &wrong); /* warm-up: weights out */
    double *ms = cdc_bench_xmalloc((size_t) requests * sizeof *ms), sum = 0.0;
    for (int i = 0; i < requests; i++)
        sum += ms[i] = timed_call(b, &wrong);
    cdc_call_report_t report;
    cdc_context_last_call(context, &report);
    double p50 = cdc_bench_percentile(ms, (size_t) requests, 50), p99 = cdc_bench_percentile(ms, (size_t) requests, 99);
    printf("failover layer=%s workers=%d r=%d n=%d requests=%d p50_ms=%.3f p99_ms=%.3f "
           "mean_ms=%.3f wrong=%d\n",
           bench_data(b)->name, workers, parity, report.n, requests, p50, p99, sum / requests,
           wrong);
    fflush(stdout);
    free(ms);
    cdc_layer_destroy(&b->layer);
    cdc_context_destroy(&context);
    return wrong != 0;
}

typedef struct {
    cdc_context_t *context;
    int worker;
    double killed_at, detected_at;
    volatile int stop;
} watch_t;

/* Worker w answers heartbeats now. */
static int worker_live(cdc_context_t *context, int worker)
{
    cdc_testing_worker_status_t status[CDC_MAX_WORKERS];
    int count = cdc_testing_worker_status(context, status, CDC_MAX_WORKERS);
    return worker < count && status[worker].live;
}

static void *watch_main(void *arg)
{
    watch_t *w = arg;
    while (!w->stop) {
        if (!worker_live(w->context, w->worker)) {
            w->detected_at = cdc_bench_now_ms();
            break;
        }
        struct timespec ts = {0, 200000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static int kill_one(bench_layer_t *b, int workers, int parity, int requests, int victim)
{
    cdc_context_t *context = workers_context(workers, parity);
    if (!context || layer_new(context, b) != CDC_OK) {
        cdc_context_destroy(&context);
        return 1;
    }
    int wrong = 0;
    for (int i = 0; i < 3; i++)
        timed_call(b, &wrong);
    double *before = cdc_bench_xmalloc((size_t) requests * sizeof *before);
    double *after = cdc_bench_xmalloc((size_t) requests * sizeof *after);
    for (int i = 0; i < requests; i++)
        before[i] = timed_call(b, &wrong);
    cdc_stats_t stats_before, stats_after;
    cdc_context_stats(context, &stats_before);

    watch_t watch = {context, victim, 0.0, -1.0, 0};
    pthread_t thread;
    pid_t pid = (pid_t) cdc_testing_local_worker_pid(context, victim);
    if (pid <= 0) { /* never kill(0): that is our own process group */
        fprintf(stderr, "cdcgemm-bench failover: no worker %d\n", victim);
        free(before);
        free(after);
        cdc_layer_destroy(&b->layer);
        cdc_context_destroy(&context);
        return 1;
    }
    watch.killed_at = cdc_bench_now_ms();
    kill(pid, SIGKILL);
    int watching = pthread_create(&thread, NULL, watch_main, &watch) == 0;
    double replanned_at = -1.0, first_call = -1.0, worst = 0.0;
    int planned_n = workers - parity;
    for (int i = 0; i < requests; i++) {
        after[i] = timed_call(b, &wrong);
        if (i == 0)
            first_call = after[i];
        if (after[i] > worst)
            worst = after[i];
        cdc_call_report_t report;
        cdc_context_last_call(context, &report);
        if (replanned_at < 0 && report.n + report.r == workers - 1)
            replanned_at = cdc_bench_now_ms();
    }
    watch.stop = 1;
    if (watching)
        pthread_join(thread, NULL);
    cdc_context_stats(context, &stats_after);
    double p50_before = cdc_bench_percentile(before, (size_t) requests, 50);
    double p50_after = cdc_bench_percentile(after, (size_t) requests, 50);
    printf("failover-kill layer=%s workers=%d r=%d n_before=%d victim=%d requests=%d "
           "detect_ms=%.1f replan_ms=%.1f first_call_ms=%.3f worst_after_ms=%.3f "
           "p50_before_ms=%.3f p50_after_ms=%.3f after_over_before=%.3f fallbacks=%llu "
           "decoded=%llu wrong=%d\n",
           bench_data(b)->name, workers, parity, planned_n, victim, requests,
           watch.detected_at >= 0 ? watch.detected_at - watch.killed_at : -1.0,
           replanned_at >= 0 ? replanned_at - watch.killed_at : -1.0, first_call, worst,
           p50_before, p50_after, p50_after / p50_before,
           (unsigned long long) (stats_after.fallbacks - stats_before.fallbacks),
           (unsigned long long) (stats_after.results_decoded - stats_before.results_decoded),
           wrong);
    fflush(stdout);
    free(before);
    free(after);
    cdc_layer_destroy(&b->layer);
    cdc_context_destroy(&context);
    return wrong != 0;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: cdcgemm-bench failover [--layers all|fc6|conv|NAME] [--requests N] "
                 "[--workers W]\n");
}

int cdc_bench_failover(int argc, char **argv)
{
    const char *which = "all";
    int requests = 100, workers = 5;
    for (int i = 1; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--layers") == 0 && value) {
            which = value;
        } else if (strcmp(argv[i], "--requests") == 0 && value && atoi(value) > 0) {
            requests = atoi(value);
        } else if (strcmp(argv[i], "--workers") == 0 && value && atoi(value) >= 3 &&
                   atoi(value) <= CDC_MAX_WORKERS) {
            workers = atoi(value);
        } else if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
        i++;
    }
    size_t count = 0;
    const cdc_model_layer_t *layers = cdc_model_layers("alexnet", &count);
    int failed = 0;
    for (size_t l = 0; l < count; l++) {
        const cdc_model_layer_t *shape = &layers[l];
        int is_fc6 = strcmp(shape->name, "fc6") == 0;
        int pick = strcmp(which, "all") == 0
                       ? (is_fc6 || shape->kind == CDC_MODEL_CONV)
                       : strcmp(which, "conv") == 0 ? shape->kind == CDC_MODEL_CONV
                                                    : strcmp(which, shape->name) == 0;
        if (!pick)
            continue;
        bench_layer_t b;
        if (layer_prepare(&b, shape, 7u + (unsigned) l) != CDC_OK) {
            fprintf(stderr, "cdcgemm-bench failover: %s: %s\n", shape->name,
                    cdc_last_error());
            layer_free(&b);
            return 1;
        }
        failed |= fault_free(&b, workers, 1, requests);
        failed |= fault_free(&b, workers, 0, requests);
        failed |= kill_one(&b, workers, 1, requests, 1);
        failed |= kill_one(&b, workers, 0, requests, 1);
        layer_free(&b);
        cdc_test_sleep_ms(50);
    }
    return failed;
}
