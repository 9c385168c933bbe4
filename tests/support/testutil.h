/* testutil.h - helpers shared by the Check suites: deterministic random data,
   error norms, files, worker processes, configuration checks, and running one
   suite. The clock, the generator and the Check-free process helpers are
   harness.h's (shared with the bench). */
#ifndef CDC_TESTUTIL_H_INCLUDED
#define CDC_TESTUTIL_H_INCLUDED

#include "cdcgemm.h"
#include "harness.h"

#include <check.h>
#include <stddef.h>
#include <stdint.h>

/* ||got - want||_F / ||want||_F over count values (0 when both are zero). */
double cdc_test_rel_error(const float *got, const double *want, size_t count);
/* Same for two float arrays. */
double cdc_test_rel_error_ff(const float *got, const float *want, size_t count);

/* Allocate or abort the test (Check marks it failed). Zeroed. */
void *cdc_test_alloc(size_t bytes);

/* A new empty file from template (ending in XXXXXX, as mkstemp), its name
   left in template; fails the test when it cannot be made. */
void cdc_test_temp_file(char *template_path);

/* A private directory /tmp/NAME-XXXXXX into dir; and dir removed with all
   below it. Each fails the test when it cannot. */
void cdc_test_temp_dir(char *dir, size_t size, const char *name);
void cdc_test_temp_dir_remove(const char *dir);

/* Spawn w; fails the test when it cannot. */
pid_t cdc_test_worker_run(const cdc_test_worker_t *w);
/* Spawn w and wait until it has bound w->endpoint (5 s); fails the test
   when it cannot be spawned, exits first or does not bind. */
pid_t cdc_test_worker_start(const cdc_test_worker_t *w);

/* cdc_test_worker_start for a worker named name in dir: on ipc://DIR/NAME
   (port 0) or tcp://127.0.0.1:PORT (its endpoint into endpoint), stderr into
   DIR/NAME.log, and with curve: --curve-secret DIR/NAME_secret and
   --curve-allow DIR/allow. w: the other options (NULL: none). */
pid_t cdc_test_worker_start_in(const char *dir, const char *name, int port, int curve,
                               const cdc_test_worker_t *w, char *endpoint, size_t size);

/* A DEALER (linger 0) connected to endpoint: plaintext when client is NULL,
   else a CURVE client with client's keys expecting server_key. */
void *cdc_test_dealer(void *zmq, const char *endpoint, const cdc_curve_cert_t *client,
                      const uint8_t *server_key);

/* The number after name in text (a worker's log: its counters line); fails
   the test when name is not there. */
unsigned long long cdc_test_counter(const char *text, const char *name);

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
