/* report.h - summaries of benchmark runs: JSON, CSV, a latency histogram. */
#ifndef CDC_REPORT_H_INCLUDED
#define CDC_REPORT_H_INCLUDED

#include "run.h"

#include <stdio.h>

typedef struct {
    int requests, ok, wrong, lost, recovered, fallbacks;
    double p50, p95, p99, max, mean;      /* latency_ms                  */
    double oracle_p50, oracle_p99;        /* oracle_ms                   */
    double max_rel_error;
} cdc_run_summary_t;

/* Summary of records [first, last) of a run. */
void cdc_run_summarize(const cdc_run_t *run, int first, int last, cdc_run_summary_t *out);

/* The JSON object of design.md (workers, parity, split, requests, ok, wrong,
   lost, recovered, fallbacks, latency_ms{}, max_rel_error, oracle_ms{}) plus
   label, faults, counters, when a crash was injected, before/after medians,
   and at the end the workers' profiles (profile, coordinator_profile). */
void cdc_run_write_json(FILE *out, const cdc_run_t *run, const char *model);

/* Write every run as one JSON array to path; nonzero on I/O failure. */
int cdc_report_json(const char *path, const cdc_run_t *runs, int count, const char *model);

/* One row per request: run,request,latency_ms,oracle_ms,outcome,decoded,rel_error. */
int cdc_report_csv(const char *path, const cdc_run_t *runs, int count);

/* As a PNG drawn by gnuplot: latency over request number (a line per run,
   fault and chaos events marked, redundancy shaded) above the latency
   histogram of every run, overlaid.
   Nonzero (with a message) when gnuplot is missing or fails. */
int cdc_report_plot(const char *path, const cdc_run_t *runs, int count, const char *title);

#endif
