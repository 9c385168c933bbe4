/* local_workers.h - the embedded default: cdcgemm-worker processes spawned on this machine. */
#ifndef CDC_LOCAL_WORKERS_H_INCLUDED
#define CDC_LOCAL_WORKERS_H_INCLUDED

#include "cdcgemm.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct cdc_local_workers cdc_local_workers_t;

/* Room for every worker's endpoint, comma-separated (each fits a
   sockaddr_un, 107 bytes, plus "ipc://"). */
#define CDC_LOCAL_ENDPOINTS_MAX (CDC_MAX_WORKERS * 128)

/* The coordinator's view of the workers for the supervisor: bit w of *mask
   set when worker w answers heartbeats now; returns their count, or < 0
   when unknown. Called from the supervisor's thread: must be thread-safe. */
typedef int (*cdc_live_fn)(void *arg, uint64_t *mask);

/* Slot (worker) w is a new process now listening on endpoint (a respawn's
   fresh ipc path): the coordinator must stop talking to the old path and
   connect to this one, keeping w's place in the plan. Called from the
   supervisor's thread once the new process has bound (or failing that, a
   second after it started): must be thread-safe. */
typedef void (*cdc_moved_fn)(void *arg, int w, const char *endpoint);

/* The cdcgemm-worker binary: $CDCGEMM_WORKER_BIN if set (CDC_ECONFIG when it
   is not an executable file), else next to the library or executable holding
   this code (its directory, then the install layout's bindir relative to it,
   CDC_LIBDIR_TO_BINDIR from GNUInstallDirs), else the first on $PATH. Writes the
   path into path (size bytes). CDC_ECONFIG when none is found. Thread-safe. */
int cdc__worker_binary_find(char *path, size_t size);

/* Spawn count workers with posix_spawn (never fork: OpenBLAS is not fork-safe
   once its threads exist) on ipc:// endpoints in a private mkdtemp directory
   (worker i's first incarnation on ipc://DIR/wI.0; CDC_ECONFIG when a path,
   with room for any incarnation's suffix, would not fit a sockaddr_un),
   each with --index i, --parent-pid (so it exits if this process dies),
   --faults when faults is non-empty, and --threads max(1, cores / count).
   Returns once every worker has bound its endpoint (bounded: 5 s); a worker
   that exits first fails the call with its status. The workers are also
   stopped at process exit (atexit) if not destroyed before. Caller owns
   *self_p and must destroy it with cdc__local_workers_destroy. */
int cdc__local_workers_new(int count, const char *faults, cdc_log_level_t log_level,
                           cdc_local_workers_t **self_p);

/* The current comma-separated endpoints, in worker order, copied into out
   (size bytes; returns out). They change as workers are respawned.
   Thread-safe. */
const char *cdc__local_workers_endpoints(cdc_local_workers_t *self, char *out, size_t size);

/* Worker i's current endpoint (its incarnation's) into out. CDC_EINVAL for
   no such slot. Thread-safe. */
int cdc__local_workers_endpoint(cdc_local_workers_t *self, int i, char *out, size_t size);

/* Whether worker i's current endpoint has its socket file (the process
   bound it). Thread-safe. */
int cdc__local_workers_bound(cdc_local_workers_t *self, int i);

/* The private directory holding the endpoints (owned by *self). */
const char *cdc__local_workers_dir(const cdc_local_workers_t *self);

/* Process id of worker i (for tests and benchmarks that kill workers); 0 if
   i is out of range or its slot has no process now (dead, not respawned
   yet, or given up). Thread-safe. */
pid_t cdc__local_workers_pid(cdc_local_workers_t *self, int i);

/* How many workers the set has (slots). */
int cdc__local_workers_count(const cdc_local_workers_t *self);

/* Reap worker i if it exited: waitpid(WNOHANG) on its pid only, never on
   the host's other children; a reaped worker's socket file (a killed one
   leaves it) is removed. Returns 1 when slot i has no process now
   (*status: waitpid's, or -1 when unknown), 0 while it runs. Thread-safe. */
int cdc__local_workers_reap(cdc_local_workers_t *self, int i, int *status);

/* SIGCONT then SIGKILL worker i (a hung or stopped one); reaped later by
   cdc__local_workers_reap. Thread-safe. */
void cdc__local_workers_kill(cdc_local_workers_t *self, int i);

/* Start slot i again as incarnation (> 0) on a fresh ipc path,
   ipc://DIR/wI.<incarnation> (the coordinator is told by the supervisor's
   moved callback), with --incarnation so one-shot fault rules do not fire
   again. The slot must have no process (the old one reaped). */
int cdc__local_workers_respawn(cdc_local_workers_t *self, int i, int incarnation);

/* fn(arg) is called before the workers are stopped at the program's exit
   (an atexit handler stops the workers of a set never destroyed): the
   owner stops whatever respawns them (the context: its supervisor). NULL:
   nothing. */
void cdc__local_workers_before_stop(cdc_local_workers_t *self, void (*fn)(void *arg),
                                   void *arg);

/* SIGTERM every worker (the caller stopped its supervisor first, if any), wait for them (at most 1 s together), SIGKILL the
   rest, reap them all, remove the directory. Accepts NULL and *NULL; nulls
   *self_p. */
void cdc__local_workers_destroy(cdc_local_workers_t **self_p);

#endif
