/* bench_smallcalls.c - `cdcgemm-bench smallcalls` (bench_smallcalls.h). */
#include "bench_smallcalls.h"

#include "bench_util.h"
#include "cdcgemm.h"
#include "cdcgemm_testing.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

enum { WARMUP_CALLS = 100 };

/* Layers of a Llama decoder at llama2.c's 110M shapes, and the smallest. */
static const struct {
    const char *name;
    int64_t out, in;
} shapes[] = {{"fc:64x64", 64, 64}, {"fc:768x768 (wo)", 768, 768},
              {"fc:4096x768 (w1+w3)", 4096, 768}};

static const struct {
    const char *label;
    int in_process, parity;
} configs[] = {{"in process, r = 1", 1, 1},
               {"workers, r = 0", 0, 0},
               {"workers, r = 1", 0, 1},
               {"workers, r = 2", 0, 2}};

/* What one configuration measured, per call (ms; CPU in microseconds). */
typedef struct {
    double p50, p99, prepare, send, wait, finish, coordinator_cpu_us, workers_cpu_us, rtt_ms;
    double rel_error;
    int workers;
} smallcall_result_t;

static double cpu_self_us(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double) (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 +
           (double) (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/* CPU time (user + system) of the context's embedded workers now, us. */
static double cpu_workers_us(cdc_context_t *context)
{
    double ticks = 0.0;
    for (int w = 0; w < cdc_testing_local_worker_count(context); w++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/stat", cdc_testing_local_worker_pid(context, w));
        FILE *f = fopen(path, "r");
        unsigned long utime = 0, stime = 0;
        /* after the command's ")": state and 10 numbers, then utime, stime */
        if (f && fscanf(f, "%*[^)]) %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                        &utime, &stime) == 2)
            ticks += (double) (utime + stime);
        if (f)
            fclose(f);
    }
    return ticks * 1e6 / (double) sysconf(_SC_CLK_TCK);
}

/* The workers' PING round trip, averaged over those answering. */
static double mean_rtt_ms(cdc_context_t *context)
{
    cdc_testing_worker_status_t status[CDC_MAX_WORKERS];
    int count = cdc_testing_worker_status(context, status, CDC_MAX_WORKERS), live = 0;
    double sum = 0.0;
    for (int w = 0; w < count; w++)
        if (status[w].live && status[w].rtt_ms >= 0) {
            sum += status[w].rtt_ms;
            live++;
        }
    return live ? sum / live : -1.0;
}

/* y = W x in double, for the check. */
static void reference(const float *w, const float *x, int64_t out, int64_t in, float *y)
{
    for (int64_t o = 0; o < out; o++) {
        double sum = 0.0;
        for (int64_t i = 0; i < in; i++)
            sum += (double) w[o * in + i] * x[i];
        y[o] = (float) sum;
    }
}

/* calls timed calls of layer into r (after the warmup). */
static int time_calls(cdc_context_t *context, cdc_layer_t *layer, const float *x, float *y,
                      int calls, smallcall_result_t *r)
{
    double *ms = cdc_bench_xmalloc((size_t) calls * sizeof *ms);
    cdc_testing_call_steps_t before, after;
    cdc_testing_call_steps(context, &before);
    double cpu0 = cpu_self_us(), workers0 = cpu_workers_us(context);
    int rc = CDC_OK;
    for (int i = 0; i < calls && rc == CDC_OK; i++) {
        double t0 = cdc_bench_now_ms();
        rc = cdc_fc_forward(layer, 1, x, y);
        ms[i] = cdc_bench_now_ms() - t0;
    }
    double cpu1 = cpu_self_us(), workers1 = cpu_workers_us(context);
    cdc_testing_call_steps(context, &after);
    double count = (double) (after.calls - before.calls);
    if (rc == CDC_OK && count > 0) {
        r->p50 = cdc_bench_percentile(ms, (size_t) calls, 50);
        r->p99 = cdc_bench_percentile(ms, (size_t) calls, 99);
        r->send = (after.send_ms - before.send_ms) / count;
        r->wait = (after.wait_ms - before.wait_ms) / count;
        r->finish = (after.finish_ms - before.finish_ms) / count;
        r->prepare = (after.total_ms - before.total_ms) / count - r->send - r->wait - r->finish;
        r->coordinator_cpu_us = (cpu1 - cpu0) / calls;
        r->workers_cpu_us = (workers1 - workers0) / calls;
    }
    free(ms);
    return rc;
}

/* One shape on one configuration. */
static int measure(int shape, int config, int workers, int calls, smallcall_result_t *r)
{
    int64_t out = shapes[shape].out, in = shapes[shape].in;
    cdc_config_t c;
    cdc_config_init(&c);
    if (cdc_config_from_env(&c) != CDC_OK) {
        fprintf(stderr, "cdcgemm-bench smallcalls: %s\n", cdc_last_error());
        return -1;
    }
    c.workers[0] = '\0';
    c.local_workers = workers;
    c.parity = configs[config].parity;
    c.in_process = configs[config].in_process;
    unsigned seed = 17u + (unsigned) shape;
    float *w = cdc_bench_xmalloc((size_t) (out * in) * sizeof(float));
    float *x = cdc_bench_xmalloc((size_t) in * sizeof(float));
    float *y = cdc_bench_xmalloc((size_t) out * sizeof(float));
    float *want = cdc_bench_xmalloc((size_t) out * sizeof(float));
    cdc_bench_fill(w, (size_t) (out * in), &seed);
    cdc_bench_fill(x, (size_t) in, &seed);
    reference(w, x, out, in, want);
    cdc_context_t *context = NULL;
    cdc_layer_t *layer = NULL;
    int rc = cdc_context_new(&c, &context);
    if (rc == CDC_OK)
        rc = cdc_fc_new(context, out, in, w, NULL, NULL, &layer);
    for (int i = 0; i < WARMUP_CALLS && rc == CDC_OK; i++)
        rc = cdc_fc_forward(layer, 1, x, y);
    if (rc == CDC_OK) {
        r->rel_error = cdc_bench_rel_error(y, want, (size_t) out);
        r->workers = workers;
        rc = time_calls(context, layer, x, y, calls, r);
        r->rtt_ms = mean_rtt_ms(context);
    }
    if (rc != CDC_OK)
        fprintf(stderr, "cdcgemm-bench smallcalls: %s on %s: %s: %s\n", shapes[shape].name,
                configs[config].label, cdc_err_name(rc), cdc_last_error());
    cdc_layer_destroy(&layer);
    cdc_context_destroy(&context);
    free(w);
    free(x);
    free(y);
    free(want);
    return rc == CDC_OK ? 0 : -1;
}

static void print_row(int shape, int config, const smallcall_result_t *r)
{
    printf("%-20s %-18s %7.3f %7.3f %7.1f %7.1f %7.1f %7.1f %9.1f %9.1f %7.3f %9.1e\n",
           shapes[shape].name, configs[config].label, r->p50, r->p99, r->prepare * 1e3,
           r->send * 1e3, r->wait * 1e3, r->finish * 1e3, r->coordinator_cpu_us,
           r->workers_cpu_us, r->rtt_ms, r->rel_error);
}

static void write_json(FILE *out, int shape, int config, const smallcall_result_t *r, int first)
{
    fprintf(out, "%s\n  {\"shape\": \"%s\", \"config\": \"%s\", \"workers\": %d, \"parity\": %d, "
                 "\"p50_ms\": %.4f, \"p99_ms\": %.4f, \"prepare_us\": %.2f, \"send_us\": %.2f, "
                 "\"wait_us\": %.2f, \"finish_us\": %.2f, \"coordinator_cpu_us\": %.2f, "
                 "\"workers_cpu_us\": %.2f, \"rtt_ms\": %.4f, \"rel_error\": %.3e}",
            first ? "" : ",", shapes[shape].name, configs[config].label, r->workers,
            configs[config].parity, r->p50, r->p99, r->prepare * 1e3, r->send * 1e3,
            r->wait * 1e3, r->finish * 1e3, r->coordinator_cpu_us, r->workers_cpu_us,
            r->rtt_ms, r->rel_error);
}

static int parse_int(const char *option, const char *value, int lo, int hi, int *out)
{
    char *end;
    long v = value ? strtol(value, &end, 10) : 0;
    if (!value || *end || end == value || v < lo || v > hi) {
        fprintf(stderr, "cdcgemm-bench smallcalls: %s '%s': expected %d..%d\n", option,
                value ? value : "", lo, hi);
        return -1;
    }
    *out = (int) v;
    return 0;
}

int cdc_bench_smallcalls(int argc, char **argv)
{
    int calls = 2000, workers = 6;
    const char *json = NULL;
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (strcmp(argv[i], "--calls") == 0)
            bad = parse_int("--calls", v, 10, 1000000, &calls);
        else if (strcmp(argv[i], "--workers") == 0)
            bad = parse_int("--workers", v, 5, CDC_MAX_WORKERS, &workers);
        else if (strcmp(argv[i], "--json") == 0 && v)
            json = v;
        else
            bad = -1;
        if (bad) {
            fprintf(stderr, "usage: cdcgemm-bench smallcalls [--calls N] [--workers W (>= 5)] "
                            "[--json F]\n");
            return 2;
        }
    }
    FILE *out = json ? fopen(json, "w") : NULL;
    if (json && !out) {
        fprintf(stderr, "cdcgemm-bench smallcalls: --json %s: %s\n", json, strerror(errno));
        return 1;
    }
    printf("batch-1 FC calls, %d timed after %d, %d workers; per call: ms, and us for the "
           "steps and CPU\n%-20s %-18s %7s %7s %7s %7s %7s %7s %9s %9s %7s %9s\n",
           calls, WARMUP_CALLS, workers, "shape", "configuration", "p50", "p99", "prepare",
           "send", "wait", "finish", "coord CPU", "work CPU", "ping", "rel err");
    int failed = 0, first = 1;
    if (out)
        fputs("[", out);
    for (int s = 0; s < (int) (sizeof shapes / sizeof *shapes); s++)
        for (int c = 0; c < (int) (sizeof configs / sizeof *configs); c++) {
            smallcall_result_t r = {0};
            if (measure(s, c, workers, calls, &r) != 0 || !(r.rel_error <= 1e-5)) {
                failed = 1;
                continue;
            }
            print_row(s, c, &r);
            if (out)
                write_json(out, s, c, &r, first);
            first = 0;
        }
    if (out) {
        fputs("\n]\n", out);
        fclose(out);
    }
    return failed;
}
