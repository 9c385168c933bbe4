/* testutil.h - helpers shared by the Check suites: deterministic random data,
   error norms, files, configuration checks, and running one suite. */
#ifndef CDC_TESTUTIL_H_INCLUDED
#define CDC_TESTUTIL_H_INCLUDED

#include "cdcgemm.h"

#include <check.h>
#include <stddef.h>
#include <stdint.h>

/* xorshift64* generator: same seed, same sequence, on every machine. */
typedef struct {
    uint64_t state;
} cdc_test_rng_t;

void cdc_test_rng_seed(cdc_test_rng_t *rng, uint64_t seed);
uint64_t cdc_test_rng_next(cdc_test_rng_t *rng);
/* Uniform in [lo, hi). */
double cdc_test_rng_uniform(cdc_test_rng_t *rng, double lo, double hi);
/* Uniform integer in [lo, hi]. */
int64_t cdc_test_rng_int(cdc_test_rng_t *rng, int64_t lo, int64_t hi);
/* Standard normal (Box-Muller). */
double cdc_test_rng_normal(cdc_test_rng_t *rng);
/* Fill with uniform [-1, 1). */
void cdc_test_fill_uniform(cdc_test_rng_t *rng, float *x, size_t count);

/* ||got - want||_F / ||want||_F over count values (0 when both are zero). */
double cdc_test_rel_error(const float *got, const double *want, size_t count);
/* Same for two float arrays. */
double cdc_test_rel_error_ff(const float *got, const float *want, size_t count);

/* Allocate or abort the test (Check marks it failed). Zeroed. */
void *cdc_test_alloc(size_t bytes);

/* Monotonic clock in seconds. */
double cdc_test_now_s(void);
/* Sleep ms milliseconds, resuming after signals. */
void cdc_test_sleep_ms(long ms);

/* A new empty file from template (ending in XXXXXX, as mkstemp), its name
   left in template; fails the test when it cannot be made. */
void cdc_test_temp_file(char *template_path);

/* path's text (at most size - 1 bytes, NUL-terminated) into text; fails the
   test when it cannot be opened. */
void cdc_test_read_text(const char *path, char *text, size_t size);

/* The environment variable var: set to bad, cdc_config_from_env refuses it
   (CDC_ECONFIG, the error naming var); set to good, it is taken into
   *config; var is unset again either way. */
void cdc_test_env_refused(const char *var, const char *bad, const char *good,
                          cdc_config_t *config);

/* Run a suite with CK_NORMAL output; the process exit status for main(). */
int cdc_test_run_suite(Suite *suite);

#endif
