/* harness.h - what the Check suites and the bench both need, without Check:
   one clock, one random generator, temporary directories, loopback ports,
   a process's resident memory, and cdcgemm-worker processes (spawn, wait
   until bound, stop, kill). Failures are return values; testutil.h adds the
   asserting forms the suites use. */
#ifndef CDC_HARNESS_H_INCLUDED
#define CDC_HARNESS_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* transport/keys.h's certificate, by pointer only: this header includes no
   internal one, so the bench's driver (bench/, public headers only) can use
   it. */
typedef struct cdc_curve_cert cdc_curve_cert_t;

/* ---- clock ---------------------------------------------------------------- */

/* Monotonic clock in seconds. */
double cdc_test_now_s(void);
/* Sleep ms milliseconds, resuming after signals. */
void cdc_test_sleep_ms(long ms);

/* ---- random numbers --------------------------------------------------------- */

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

/* ---- files, keys, ports, memory ---------------------------------------------------- */

/* A new private directory /tmp/NAME-XXXXXX into dir: 0, or -1 (errno). */
int cdc_test_dir_make(char *dir, size_t size, const char *name);
/* dir and everything below it removed (0 too when it is gone already), or
   -1 (errno). */
int cdc_test_dir_remove(const char *dir);

/* An unused tcp port on 127.0.0.1 (the kernel's choice), or -1. */
int cdc_test_free_port(void);

/* A CURVE certificate pair DIR/NAME and DIR/NAME_secret (naming endpoint
   when given), loaded back into *cert (secret): CDC_OK or the error. */
int cdc_test_keygen(const char *dir, const char *name, const char *endpoint,
                    cdc_curve_cert_t *cert);

/* VmRSS of process pid in KiB (/proc/PID/status), or -1 when unknown. */
long cdc_test_rss_kib(pid_t pid);
/* Its peak resident set (VmHWM: file-backed pages included), KiB; -1 unknown. */
long cdc_test_peak_rss_kib(pid_t pid);

/* ---- worker processes ------------------------------------------------------------ */

/* How to run one cdcgemm-worker; zero for every option not wanted. */
typedef struct {
    const char *bin;          /* NULL: found as the library finds it
                                 (CDCGEMM_WORKER_BIN, beside this program)  */
    const char *endpoint;     /* --bind                                      */
    int index;                /* --index when > 0 (the worker's default: 0) */
    int threads;              /* --threads when > 0                          */
    int parent;               /* --parent-pid of this process when set       */
    const char *log;          /* --log LEVEL when set                        */
    const char *faults;       /* --faults SPEC when set                      */
    const char *curve_secret; /* --curve-secret when set                     */
    const char *curve_allow;  /* --curve-allow when set                      */
    const char *const *args;  /* more arguments, NULL-terminated             */
    const char *stderr_path;  /* stderr into this file (truncated)           */
    const char *shell_prefix; /* run as sh -c 'PREFIX; exec WORKER ARGS'     */
    char *const *envp;        /* NULL: this process's environment            */
} cdc_test_worker_t;

/* posix_spawn (never fork: BLAS threads may exist) the worker: its pid, or
   -1 with a message in error (when given). */
pid_t cdc_test_worker_spawn(const cdc_test_worker_t *w, char *error, size_t size);

/* Until pid has bound endpoint (ipc://PATH: the socket file exists;
   tcp://HOST:PORT: a connection to 127.0.0.1:PORT is accepted), limit_s at
   most: 0 once bound, 1 when it exited first (reaped), -1 on timeout. */
int cdc_test_worker_wait_bound(pid_t pid, const char *endpoint, double limit_s);

/* Up to limit_s for pid to exit: its wait status, or -1 while it still runs. */
int cdc_test_worker_wait(pid_t pid, double limit_s);

/* SIGCONT and SIGTERM, up to limit_s for it to exit, then SIGKILL; reaped:
   its wait status (-1 when pid was not a child). */
int cdc_test_worker_stop(pid_t pid, double limit_s);

/* SIGCONT and SIGKILL, reaped. */
void cdc_test_worker_kill(pid_t pid);

/* The pid of a live cdcgemm-worker that is a child of this process started
   with --index index: an embedded worker of a context this process created,
   one the test has no handle on (the BLAS entry points' process-wide
   context), found in /proc. -1 when there is none. Not reaped here: its
   parent's library reaps it. */
pid_t cdc_test_worker_child(int index);

#endif
