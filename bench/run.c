/* run.c - execute a benchmark run and classify every request's outcome;
   outside chaos (chaos_actor.c) and samples of the bench process meanwhile. */
#include "run.h"

#include "bench_util.h"
#include "external.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *cdc_outcome_name(cdc_outcome_t outcome)
{
    static const char *const names[] = {"ok", "recovered", "fallback", "lost", "wrong"};
    return names[outcome];
}

/* Layer i's plan and time in this request (cdcgemm-bench plan). */
static void note_layer_plan(cdc_context_t *context, cdc_layer_plan_t *plan, double ms)
{
    cdc_testing_last_plan(context, &plan->last);
    plan->expected_ms[plan->count] = plan->last.expected_ms;
    plan->measured_ms[plan->count] = ms;
    plan->count++;
}

/* One request: every layer once; the worst outcome wins. plans (NULL: not
   recorded) get each layer's plan and time. */
static void run_request(const cdc_workload_t *workload, cdc_context_t *context,
                        cdc_layer_t **layers, float *y, cdc_request_record_t *record,
                        cdc_layer_plan_t *plans)
{
    memset(record, 0, sizeof *record);
    record->outcome = CDC_OUTCOME_OK;
    record->r = record->redundancy = CDC_MAX_PARITY + 1;
    double start = cdc_bench_now_ms();
    for (int i = 0; i < workload->count; i++) {
        const cdc_bench_layer_t *l = &workload->layers[i];
        double layer_start = cdc_bench_now_ms();
        int rc = cdc_workload_forward(l, layers[i], y);
        if (plans)
            note_layer_plan(context, &plans[i], cdc_bench_now_ms() - layer_start);
        cdc_call_report_t report;
        cdc_context_last_call(context, &report);
        if (rc != CDC_OK) {
            record->outcome = CDC_OUTCOME_LOST;
            continue;
        }
        double err = cdc_bench_rel_error(y, l->reference, l->out_count);
        record->rel_error = err > record->rel_error ? err : record->rel_error;
        record->oracle_ms += report.oracle_ms > 0 ? report.oracle_ms : report.executor_ms;
        record->decoded += report.decoded;
        if (report.n + report.r > record->shards)
            record->shards = report.n + report.r;
        if (report.r < record->r)
            record->r = report.r;
        if (report.redundancy < record->redundancy)
            record->redundancy = report.redundancy;
        cdc_outcome_t outcome = err > CDC_BENCH_WRONG_TOLERANCE ? CDC_OUTCOME_WRONG
                                : report.fallback > 0           ? CDC_OUTCOME_FALLBACK
                                : report.decoded > 0            ? CDC_OUTCOME_RECOVERED
                                                                : CDC_OUTCOME_OK;
        if (outcome > record->outcome)
            record->outcome = outcome;
    }
    if (record->r > CDC_MAX_PARITY)
        record->r = record->redundancy = 0;
    record->latency_ms = cdc_bench_now_ms() - start;
}

static void sample(cdc_run_t *run, int request)
{
    cdc_run_sample_t *s = &run->samples[run->sample_count++];
    s->request = request;
    s->rss_kib = cdc_test_rss_kib(getpid());
    s->fds = cdc_bench_self_fds();
    s->threads = cdc_bench_self_threads();
}

/* Requests done, rate and time left on stderr, at most 4 times a second,
   once the run has taken a second; cleared by progress_end. */
typedef struct {
    int on, shown;
    double start, last;
} progress_t;

static void progress_show(progress_t *p, const char *label, int done, int total)
{
    double now = cdc_bench_now_ms();
    if (!p->on || now - p->start < 1000.0 || now - p->last < 250.0)
        return;
    p->last = now;
    p->shown = 1;
    double rate = done / ((now - p->start) / 1e3);
    double left = rate > 0 ? (total - done) / rate : 0.0;
    fprintf(stderr, "\r\033[K%s: %d/%d requests, %.1f/s, %.0f s left", label, done, total, rate,
            left);
    fflush(stderr);
}

static void progress_end(progress_t *p)
{
    if (p->shown) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
}

static pid_t embedded_pid(void *arg, int worker)
{
    return (pid_t) cdc_testing_local_worker_pid(arg, worker);
}

/* The process serving worker i: the library's child or one the bench started;
   -1 when unknown (endpoints of CDCGEMM_WORKERS, in process). */
static long worker_pid(cdc_context_t *context, cdc_external_t *external, int worker)
{
    if (external)
        return cdc_external_pid(external, worker);
    if (cdc_testing_local_worker_count(context) > 0)
        return cdc_testing_local_worker_pid(context, worker);
    return -1;
}

/* Where chaos can act: the bench's own workers, or the library's children. */
static int chaos_targets(cdc_context_t *context, cdc_external_t *external,
                         const cdc_chaos_spec_t *spec, cdc_chaos_targets_t *targets)
{
    char error[CDC_CHAOS_ERROR_BYTES];
    memset(targets, 0, sizeof *targets);
    if (external) {
        *targets = (cdc_chaos_targets_t){external->count, cdc_external_pid,
                                         cdc_external_restart, external};
    } else if (cdc_testing_local_worker_count(context) > 0) {
        *targets = (cdc_chaos_targets_t){cdc_testing_local_worker_count(context), embedded_pid,
                                         NULL, context};
    } else {
        fprintf(stderr, "cdcgemm-bench: --chaos needs worker processes the bench knows: the "
                        "embedded ones or --external W (not CDCGEMM_WORKERS or in process)\n");
        return 1;
    }
    if (cdc_chaos_check(spec, targets->workers, targets->restart != NULL, error, sizeof error)) {
        fprintf(stderr, "cdcgemm-bench: --chaos: %s\n", error);
        return 1;
    }
    return 0;
}

static int compare_events(const void *a, const void *b)
{
    double x = ((const cdc_chaos_event_t *) a)->t_ms, y = ((const cdc_chaos_event_t *) b)->t_ms;
    return (x > y) - (x < y);
}

/* The chaos actor's events and the --crash-at fault, in time order. */
static void merge_events(cdc_run_t *run, cdc_chaos_event_t *chaos, int count,
                         const cdc_chaos_event_t *crash)
{
    run->events = cdc_bench_xmalloc(sizeof *run->events * (size_t) (count + 1));
    if (count)
        memcpy(run->events, chaos, sizeof *chaos * (size_t) count);
    run->event_count = count;
    if (crash)
        run->events[run->event_count++] = *crash;
    qsort(run->events, (size_t) run->event_count, sizeof *run->events, compare_events);
    free(chaos);
}

typedef struct {
    cdc_context_t *context;
    cdc_layer_t *layers[CDC_BENCH_MAX_LAYERS];
    float *y;
    cdc_external_t *external;
} run_state_t;

/* Requests in a row the plan must have been settled for before the timed
   ones start: a staging given up or a re-size being confirmed can leave it
   unsettled for a request and then settle again on the next move. */
#define SETTLED_REQUESTS 10

/* More warm-up while the plan stages or confirms re-sized blocks
   (run->settle_s): the timed requests then start from the plan it settled
   on, not one worker short for the seconds its new blocks take over its
   link. */
static void settle(const cdc_workload_t *workload, run_state_t *st, cdc_run_t *run)
{
    cdc_request_record_t scratch;
    double until = cdc_bench_now_ms() + run->settle_s * 1000.0;
    run->settle_requests = 0;
    int settled = 0;
    while (run->settle_s > 0 && cdc_bench_now_ms() < until) {
        settled = cdc_testing_plan_settling(st->context) ? 0 : settled + 1;
        if (settled > SETTLED_REQUESTS)
            break;
        run_request(workload, st->context, st->layers, st->y, &scratch, NULL);
        run->settle_requests++;
    }
}

/* The timed requests, with chaos and samples. */
static int timed_requests(const cdc_workload_t *workload, run_state_t *st, cdc_run_t *run)
{
    cdc_chaos_targets_t targets;
    if (run->chaos && chaos_targets(st->context, st->external, run->chaos, &targets))
        return 1;
    int requests = run->requests;
    run->samples = cdc_bench_xmalloc(sizeof *run->samples *
                                     (size_t) (requests / CDC_RUN_SAMPLE_EVERY + 2));
    progress_t progress = {run->progress && isatty(STDERR_FILENO), 0, cdc_bench_now_ms(), 0};
    atomic_int current;
    atomic_init(&current, 0);
    cdc_chaos_actor_t *actor = NULL;
    cdc_chaos_event_t crash = {0}, *crash_event = NULL;
    double start = cdc_bench_now_ms();
    /* A mark for logs timestamped from outside (bench/hetero_summary.py). */
    if (run->config.log_level >= CDC_LOG_INFO)
        fprintf(stderr, "cdcgemm-bench: %s: timed requests begin\n", run->label);
    if (run->chaos && cdc_chaos_actor_start(run->chaos, &targets, start, &current, &actor)) {
        fprintf(stderr, "cdcgemm-bench: --chaos: cannot start its thread\n");
        return 1;
    }
    sample(run, 0); /* every sample with the chaos thread running, if any */
    for (int i = 0; i < requests; i++) {
        atomic_store(&current, i);
        if (i > 0 && i % CDC_RUN_SAMPLE_EVERY == 0)
            sample(run, i);
        if (i == run->crash_at) {
            crash = (cdc_chaos_event_t){cdc_bench_now_ms() - start, i, "crash", run->crash_worker,
                                        worker_pid(st->context, st->external, run->crash_worker)};
            crash_event = &crash;
            if (run->crash_kill && crash.pid > 0)
                kill((pid_t) crash.pid, SIGKILL);
        }
        double began = cdc_bench_now_ms() - start;
        run_request(workload, st->context, st->layers, st->y, &run->records[i],
                    run->layer_plans);
        run->records[i].start_ms = began;
        progress_show(&progress, run->label, i + 1, requests);
    }
    sample(run, requests);
    cdc_chaos_event_t *events = NULL;
    int count = 0;
    cdc_chaos_actor_stop(actor, &events, &count);
    progress_end(&progress);
    merge_events(run, events, count, crash_event);
    return 0;
}

int cdc_run_execute(const cdc_workload_t *workload, const cdc_config_t *config,
                    cdc_split_t split, int requests, int warmup, cdc_run_t *run)
{
    run->config = *config;
    run->requests = requests;
    run->profile_json = NULL; /* none unless the run gets that far */
    run->records = cdc_bench_xmalloc((size_t) (requests > 0 ? requests : 1) *
                                     sizeof *run->records);
    if (run->plan_table) {
        size_t each = (size_t) (requests > 0 ? requests : 1) * sizeof(double);
        run->layer_count = workload->count;
        run->layer_plans = cdc_bench_xmalloc((size_t) workload->count * sizeof *run->layer_plans);
        memset(run->layer_plans, 0, (size_t) workload->count * sizeof *run->layer_plans);
        for (int i = 0; i < workload->count; i++) {
            snprintf(run->layer_plans[i].name, sizeof run->layer_plans[i].name, "%s",
                     workload->layers[i].name);
            run->layer_plans[i].expected_ms = cdc_bench_xmalloc(each);
            run->layer_plans[i].measured_ms = cdc_bench_xmalloc(each);
        }
    }
    run_state_t st;
    memset(&st, 0, sizeof st);
    cdc_external_t external;
    cdc_config_t used = *config;
    if (run->external > 0) {
        if (cdc_external_start(&external, run->external, config->faults))
            return 1;
        st.external = &external;
        snprintf(used.workers, sizeof used.workers, "%s", external.endpoints);
        snprintf(run->config.workers, sizeof run->config.workers, "%s", external.endpoints);
        used.in_process = 0;
    }
    int failed = 0;
    if (cdc_context_new(&used, &st.context) != CDC_OK) {
        fprintf(stderr, "cdcgemm-bench: context: %s\n", cdc_last_error());
        failed = 1;
    } else if (cdc_workload_layers_new(workload, st.context, split, config->parity,
                                       st.layers)) {
        failed = 1;
    }
    if (!failed) {
        size_t largest = 1;
        for (int i = 0; i < workload->count; i++)
            if (workload->layers[i].out_count > largest)
                largest = workload->layers[i].out_count;
        st.y = cdc_bench_xmalloc(largest * sizeof *st.y);
        cdc_request_record_t scratch;
        for (int i = 0; i < warmup; i++)
            run_request(workload, st.context, st.layers, st.y, &scratch, NULL);
        settle(workload, &st, run);
        failed = timed_requests(workload, &st, run);
        cdc_context_stats(st.context, &run->stats);
        run->profile_json = cdc_bench_profile_json(st.context);
        free(st.y);
        for (int i = 0; i < workload->count; i++)
            cdc_layer_destroy(&st.layers[i]);
    }
    cdc_context_destroy(&st.context);
    if (st.external)
        cdc_external_stop(st.external);
    return failed;
}

void cdc_run_free(cdc_run_t *run)
{
    for (int i = 0; i < run->layer_count; i++) {
        free(run->layer_plans[i].expected_ms);
        free(run->layer_plans[i].measured_ms);
    }
    free(run->layer_plans);
    run->layer_plans = NULL;
    run->layer_count = 0;
    free(run->records);
    free(run->events);
    free(run->samples);
    free(run->profile_json);
    run->profile_json = NULL;
    run->records = NULL;
    run->events = NULL;
    run->samples = NULL;
}
