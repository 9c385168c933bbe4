/* bench_failover.c - coded vs uncoded latency on local workers, and recovery from a SIGKILL. */
#include "bench_failover.h"

#include "cdcgemm.h"
#include "context.h"
#include "local_workers.h"
#include "models.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const cdc_model_layer_t *shape;
    cdc_layer_t *layer;
    float *weights, *bias, *x, *want, *got;
    size_t in_count, out_count, w_count;
    int64_t out_h, out_w;
} bench_layer_t;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec * 1e-6;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "cdcgemm-bench failover: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

static void fill(float *x, size_t count, unsigned *seed)
{
    for (size_t i = 0; i < count; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        x[i] = (float) (*seed >> 8) / 16777216.0f - 0.5f;
    }
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of count values (sorts values in place). */
static double percentile(double *values, size_t count, double p)
{
    if (count == 0)
        return NAN;
    qsort(values, count, sizeof *values, compare_double);
    size_t rank = (size_t) ceil(p / 100.0 * (double) count);
    return values[rank ? rank - 1 : 0];
}

static double rel_error(const float *got, const float *want, size_t count)
{
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < count; i++) {
        double d = (double) got[i] - (double) want[i];
        diff += d * d;
        norm += (double) want[i] * (double) want[i];
    }
    return norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

static cdc_conv2d_desc_t conv_desc(const cdc_model_layer_t *s)
{
    cdc_conv2d_desc_t d = {s->in_channels, s->out_channels, s->kernel, s->kernel, s->stride,
                           s->stride, s->pad, s->pad, 1, 1};
    return d;
}

static int layer_new(cdc_context_t *context, bench_layer_t *b)
{
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    if (b->shape->kind == CDC_MODEL_FC) {
        options.split = CDC_SPLIT_ROWS;
        return cdc_fc_new(context, b->shape->out_channels, b->shape->in_channels, b->weights,
                          b->bias, &options, &b->layer);
    }
    cdc_conv2d_desc_t desc = conv_desc(b->shape);
    return cdc_conv2d_new(context, &desc, b->weights, b->bias, &options, &b->layer);
}

static int layer_forward(bench_layer_t *b, float *y)
{
    if (b->shape->kind == CDC_MODEL_FC)
        return cdc_fc_forward(b->layer, 1, b->x, y);
    return cdc_conv2d_forward(b->layer, 1, b->shape->h, b->shape->w, b->x, y);
}

/* Operands and the uncoded in-process answer. */
static int layer_prepare(bench_layer_t *b, const cdc_model_layer_t *shape, unsigned seed)
{
    memset(b, 0, sizeof *b);
    b->shape = shape;
    if (shape->kind == CDC_MODEL_FC) {
        b->in_count = (size_t) shape->in_channels;
        b->out_count = (size_t) shape->out_channels;
        b->w_count = (size_t) (shape->out_channels * shape->in_channels);
    } else {
        cdc_conv2d_desc_t desc = conv_desc(shape);
        if (cdc_conv2d_output_size(&desc, shape->h, shape->w, &b->out_h, &b->out_w) != CDC_OK)
            return -1;
        b->in_count = (size_t) (shape->in_channels * shape->h * shape->w);
        b->out_count = (size_t) (shape->out_channels * b->out_h * b->out_w);
        b->w_count = (size_t) (shape->out_channels * cdc_model_layer_inner(shape));
    }
    b->weights = xmalloc(b->w_count * sizeof(float));
    b->bias = xmalloc((size_t) shape->out_channels * sizeof(float));
    b->x = xmalloc(b->in_count * sizeof(float));
    b->want = xmalloc(b->out_count * sizeof(float));
    b->got = xmalloc(b->out_count * sizeof(float));
    fill(b->weights, b->w_count, &seed);
    fill(b->bias, (size_t) shape->out_channels, &seed);
    fill(b->x, b->in_count, &seed);
    cdc_config_t config;
    cdc_config_init(&config);
    config.in_process = 1;
    config.local_workers = 1;
    config.parity = 0;
    cdc_context_t *reference = NULL;
    int rc = cdc_context_new(&config, &reference);
    if (rc == CDC_OK)
        rc = layer_new(reference, b);
    if (rc == CDC_OK)
        rc = layer_forward(b, b->want);
    cdc_layer_destroy(&b->layer);
    cdc_context_destroy(&reference);
    return rc;
}

static void layer_free(bench_layer_t *b)
{
    cdc_layer_destroy(&b->layer);
    free(b->weights);
    free(b->bias);
    free(b->x);
    free(b->want);
    free(b->got);
}

/* One timed call; counts a wrong answer (rel. error > 1e-4) in *wrong. */
static double timed_call(bench_layer_t *b, int *wrong)
{
    double start = now_ms();
    int rc = layer_forward(b, b->got);
    double elapsed = now_ms() - start;
    if (rc != CDC_OK || rel_error(b->got, b->want, b->out_count) > 1e-4)
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
    double *ms = xmalloc((size_t) requests * sizeof *ms), sum = 0.0;
    for (int i = 0; i < requests; i++)
        sum += ms[i] = timed_call(b, &wrong);
    cdc_call_report_t report;
    cdc_context_last_call(context, &report);
    double p50 = percentile(ms, (size_t) requests, 50), p99 = percentile(ms, (size_t) requests, 99);
    printf("failover layer=%s workers=%d r=%d n=%d requests=%d p50_ms=%.3f p99_ms=%.3f "
           "mean_ms=%.3f wrong=%d\n",
           b->shape->name, workers, parity, report.n, requests, p50, p99, sum / requests,
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

static void *watch_main(void *arg)
{
    watch_t *w = arg;
    while (!w->stop) {
        cdc_remote_counters_t counters;
        cdc__executor_remote_counters(w->context->executor, &counters);
        if (!(counters.live_mask & (UINT64_C(1) << w->worker))) {
            w->detected_at = now_ms();
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
    double *before = xmalloc((size_t) requests * sizeof *before);
    double *after = xmalloc((size_t) requests * sizeof *after);
    for (int i = 0; i < requests; i++)
        before[i] = timed_call(b, &wrong);
    cdc_stats_t stats_before, stats_after;
    cdc_context_stats(context, &stats_before);

    watch_t watch = {context, victim, 0.0, -1.0, 0};
    pthread_t thread;
    pid_t pid = cdc__local_workers_pid(context->local, victim);
    if (pid <= 0) { /* never kill(0): that is our own process group */
        fprintf(stderr, "cdcgemm-bench failover: no worker %d\n", victim);
        free(before);
        free(after);
        cdc_layer_destroy(&b->layer);
        cdc_context_destroy(&context);
        return 1;
    }
    watch.killed_at = now_ms();
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
            replanned_at = now_ms();
    }
    watch.stop = 1;
    if (watching)
        pthread_join(thread, NULL);
    cdc_context_stats(context, &stats_after);
    double p50_before = percentile(before, (size_t) requests, 50);
    double p50_after = percentile(after, (size_t) requests, 50);
    printf("failover-kill layer=%s workers=%d r=%d n_before=%d victim=%d requests=%d "
           "detect_ms=%.1f replan_ms=%.1f first_call_ms=%.3f worst_after_ms=%.3f "
           "p50_before_ms=%.3f p50_after_ms=%.3f after_over_before=%.3f fallbacks=%llu "
           "decoded=%llu wrong=%d\n",
           b->shape->name, workers, parity, planned_n, victim, requests,
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
        sleep_ms(50);
    }
    return failed;
}
