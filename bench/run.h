/* run.h - one benchmark run: a workload, a configuration, N requests. */
#ifndef CDC_RUN_H_INCLUDED
#define CDC_RUN_H_INCLUDED

#include "cdcgemm_testing.h"
#include "chaos_actor.h"
#include "workload.h"

typedef enum {
    CDC_OUTCOME_OK,        /* every shard in time, nothing to rebuild        */
    CDC_OUTCOME_RECOVERED, /* some data shard rebuilt from parity            */
    CDC_OUTCOME_FALLBACK,  /* some data shard computed on the coordinator    */
    CDC_OUTCOME_LOST,      /* a call failed                                  */
    CDC_OUTCOME_WRONG      /* an output differs from the uncoded reference   */
} cdc_outcome_t;

typedef struct {
    double start_ms;   /* when it began, from the first timed request's start */
    double latency_ms; /* the whole request: every layer                     */
    double oracle_ms;  /* sum over layers of the n-th fastest shard response */
    double rel_error;  /* worst layer output error vs the reference          */
    int decoded;       /* data shards rebuilt from parity                    */
    int shards;        /* most shards (n + r) a layer of it was cut into: the
                          workers it used                                   */
    int r;             /* fewest parity shards a layer of it was cut with   */
    int redundancy;    /* fewest parity shards a layer of it could use
                          (cdc_call_report_t.redundancy)                    */
    cdc_outcome_t outcome;
} cdc_request_record_t;

/* The bench process itself, every CDC_RUN_SAMPLE_EVERY requests. */
typedef struct {
    int request;  /* requests done when it was taken */
    long rss_kib;
    int fds, threads;
} cdc_run_sample_t;

#define CDC_RUN_SAMPLE_EVERY 1000

/* One layer's calls over the timed requests (cdcgemm-bench plan). */
typedef struct {
    char name[32];          /* the layer's                                 */
    cdc_testing_plan_t last; /* the plan of its last call                  */
    double *expected_ms;    /* per timed request: the model's prediction (< 0:
                               none), and the layer call's wall time      */
    double *measured_ms;
    int count;
} cdc_layer_plan_t;

typedef struct {
    /* Set by the caller before cdc_run_execute: */
    int plan_table;        /* 1: record every layer's plan (layer_plans)   */
    const char *label;     /* "coded", "uncoded", "local"                  */
    int crash_at;          /* request index of an injected crash, or -1    */
    int crash_worker;      /* the worker --crash-at crashes                */
    int crash_kill;        /* 1: the bench SIGKILLs it before request
                              crash_at (else the caller's fault plan crashes
                              it after a count of tasks)                  */
    double settle_s;       /* > 0: after the warm-up, more warm-up requests
                              until the plan has staged and confirmed no
                              re-sized blocks (cdc_testing_plan_settling)
                              for 10 requests in a row, at most this long */
    const cdc_chaos_spec_t *chaos; /* outside chaos during the timed requests,
                              or NULL                                      */
    int external;          /* > 0: the bench starts this many workers itself
                              and gives them to the library as endpoints  */
    int progress;          /* 1: progress on stderr when it is a terminal  */
    /* Filled by cdc_run_execute (cdc_run_free releases): */
    cdc_config_t config;   /* the configuration the run used               */
    int requests;
    int settle_requests;   /* warm-up requests settle_s added               */
    cdc_request_record_t *records;
    cdc_stats_t stats;     /* context counters at the end of the run       */
    char *profile_json;    /* the workers' live profiles then: JSON members
                              (cdc_testing_profile_json); NULL: none       */
    cdc_chaos_event_t *events; /* chaos events and the --crash-at fault,
                              in time order                                */
    int event_count;
    cdc_run_sample_t *samples; /* at the start, every 1,000 requests, end  */
    int sample_count;
    cdc_layer_plan_t *layer_plans; /* one per layer, with plan_table      */
    int layer_count;
} cdc_run_t;

/* Wrong when a layer's relative Frobenius error exceeds this. */
#define CDC_BENCH_WRONG_TOLERANCE 1e-4

/* Run requests (after warmup unrecorded ones) of the workload on a context made
   from config; layers use split and the config's parity. Fills *run (caller
   frees run->records). Nonzero when the context or layers cannot be made. */
int cdc_run_execute(const cdc_workload_t *workload, const cdc_config_t *config,
                    cdc_split_t split, int requests, int warmup, cdc_run_t *run);

/* Free what cdc_run_execute allocated in *run. */
void cdc_run_free(cdc_run_t *run);

const char *cdc_outcome_name(cdc_outcome_t outcome);

#endif
