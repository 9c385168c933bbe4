/* bench_util.h - small helpers shared by the benchmark commands. */
#ifndef CDC_BENCH_UTIL_H_INCLUDED
#define CDC_BENCH_UTIL_H_INCLUDED

#include "cdcgemm.h"
#include "harness.h" /* the clock, sleeps, worker processes (tests/support) */

#include <stddef.h>
#include <stdio.h>

/* Monotonic clock in milliseconds (cdc_test_now_s). */
double cdc_bench_now_ms(void);

/* Deterministic uniform fill in [-0.5, 0.5) from *seed (an LCG). */
void cdc_bench_fill(float *x, size_t count, unsigned *seed);

/* malloc or exit(1) with a message: benchmarks have no partial results. */
void *cdc_bench_xmalloc(size_t bytes);

/* ||got - want|| / ||want|| (Frobenius). */
double cdc_bench_rel_error(const float *got, const float *want, size_t count);

/* p-th percentile (0..100, nearest rank) of count values; sorts a copy. */
double cdc_bench_percentile(const double *values, size_t count, double p);

/* Entries of /proc/self/fd (open descriptors, the one counting them
   included) and of /proc/self/task (threads); -1 if unknown. */
int cdc_bench_self_fds(void);
int cdc_bench_self_threads(void);

/* The workers' live profile now, as the JSON members of
   cdc_testing_profile_json, in a string the caller frees; NULL when it
   cannot be had. */
char *cdc_bench_profile_json(cdc_context_t *context);

/* text as a JSON string, quoted, its quotes and backslashes escaped and
   control characters left out. */
void cdc_bench_json_string(FILE *out, const char *text);

/* The cdcgemm-worker beside this program (its own directory) into out. */
void cdc_bench_worker_path(char *out, size_t size);

#endif
