/* run.c - execute a benchmark run and classify every request's outcome. */
#include "run.h"

#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *cdc_outcome_name(cdc_outcome_t outcome)
{
    static const char *const names[] = {"ok", "recovered", "fallback", "lost", "wrong"};
    return names[outcome];
}

/* One request: every layer once; the worst outcome wins. */
static void run_request(const cdc_workload_t *workload, cdc_context_t *context,
                        cdc_layer_t **layers, float *y, cdc_request_record_t *record)
{
    memset(record, 0, sizeof *record);
    record->outcome = CDC_OUTCOME_OK;
    double start = cdc_bench_now_ms();
    for (int i = 0; i < workload->count; i++) {
        const cdc_bench_layer_t *l = &workload->layers[i];
        int rc = cdc_workload_forward(l, layers[i], y);
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
        cdc_outcome_t outcome = err > CDC_BENCH_WRONG_TOLERANCE ? CDC_OUTCOME_WRONG
                                : report.fallback > 0           ? CDC_OUTCOME_FALLBACK
                                : report.decoded > 0            ? CDC_OUTCOME_RECOVERED
                                                                : CDC_OUTCOME_OK;
        if (outcome > record->outcome)
            record->outcome = outcome;
    }
    record->latency_ms = cdc_bench_now_ms() - start;
}

int cdc_run_execute(const cdc_workload_t *workload, const cdc_config_t *config,
                    cdc_split_t split, int requests, int warmup, cdc_run_t *run)
{
    run->config = *config;
    run->requests = requests;
    run->records = cdc_bench_xmalloc((size_t) (requests > 0 ? requests : 1) *
                                     sizeof *run->records);
    cdc_context_t *context = NULL;
    if (cdc_context_new(config, &context) != CDC_OK) {
        fprintf(stderr, "cdcgemm-bench: context: %s\n", cdc_last_error());
        return 1;
    }
    cdc_layer_t *layers[CDC_BENCH_MAX_LAYERS] = {0};
    if (cdc_workload_layers_new(workload, context, split, config->parity, layers)) {
        cdc_context_destroy(&context);
        return 1;
    }
    size_t largest = 1;
    for (int i = 0; i < workload->count; i++)
        if (workload->layers[i].out_count > largest)
            largest = workload->layers[i].out_count;
    float *y = cdc_bench_xmalloc(largest * sizeof *y);
    cdc_request_record_t scratch;
    for (int i = 0; i < warmup; i++)
        run_request(workload, context, layers, y, &scratch);
    for (int i = 0; i < requests; i++)
        run_request(workload, context, layers, y, &run->records[i]);
    cdc_context_stats(context, &run->stats);
    free(y);
    for (int i = 0; i < workload->count; i++)
        cdc_layer_destroy(&layers[i]);
    cdc_context_destroy(&context);
    return 0;
}
