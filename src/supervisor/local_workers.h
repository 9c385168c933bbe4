/* local_workers.h - the embedded default: cdcgemm-worker processes spawned on this machine. */
#ifndef CDC_LOCAL_WORKERS_H_INCLUDED
#define CDC_LOCAL_WORKERS_H_INCLUDED

#include "cdcgemm.h"

#include <stddef.h>
#include <sys/types.h>

typedef struct cdc_local_workers cdc_local_workers_t;

/* The cdcgemm-worker binary: $CDCGEMM_WORKER_BIN if set (CDC_ECONFIG when it
   is not an executable file), else next to the library or executable holding
   this code (its directory, then the install layout's bindir relative to it,
   CDC_LIBDIR_TO_BINDIR from GNUInstallDirs), else the first on $PATH. Writes the
   path into path (size bytes). CDC_ECONFIG when none is found. Thread-safe. */
int cdc__worker_binary_find(char *path, size_t size);

/* Spawn count workers with posix_spawn (never fork: OpenBLAS is not fork-safe
   once its threads exist) on ipc:// endpoints in a private mkdtemp directory,
   each with --index i, --parent-pid (so it exits if this process dies),
   --faults when faults is non-empty, and --threads max(1, cores / count).
   Returns once every worker has bound its endpoint (bounded: 5 s); a worker
   that exits first fails the call with its status. The workers are also
   stopped at process exit (atexit) if not destroyed before. Caller owns
   *self_p and must destroy it with cdc__local_workers_destroy. */
int cdc__local_workers_new(int count, const char *faults, cdc_log_level_t log_level,
                           cdc_local_workers_t **self_p);

/* Comma-separated endpoints, in worker order (owned by *self). */
const char *cdc__local_workers_endpoints(const cdc_local_workers_t *self);

/* The private directory holding the endpoints (owned by *self). */
const char *cdc__local_workers_dir(const cdc_local_workers_t *self);

/* Process id of worker i (for tests and benchmarks that kill workers); 0 if
   i is out of range. */
pid_t cdc__local_workers_pid(const cdc_local_workers_t *self, int i);

/* SIGTERM every worker, wait for them (at most 1 s together), SIGKILL the
   rest, reap them all, remove the directory. Accepts NULL and *NULL; nulls
   *self_p. */
void cdc__local_workers_destroy(cdc_local_workers_t **self_p);

#endif
