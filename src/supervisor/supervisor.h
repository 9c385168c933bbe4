/* supervisor.h - keeps the embedded local workers alive: reaps, respawns,
   kills the hung. It drives a set of local workers (local_workers.h), which
   knows nothing of it; the context owns both. */
#ifndef CDC_SUPERVISOR_H_INCLUDED
#define CDC_SUPERVISOR_H_INCLUDED

#include "local_workers.h"

#include <stdint.h>

typedef struct cdc_supervisor cdc_supervisor_t;

/* Start a thread that every 20 ms, for each slot of workers:
   - reaps it if it exited (waitpid WNOHANG on its pid: the library installs
     no SIGCHLD handler, it lives in the user's program) and respawns it on
     the same slot after a backoff (20 ms, doubling per death up to 2 s; back
     to 20 ms once an incarnation lived 10 s), on a fresh ipc path, and
     calls moved(arg, slot, endpoint) once the new process has bound it (or
     a second after its start, whichever comes first);
   - gives the slot up (warn, counted) after more than 5 deaths within 10 s;
   - SIGKILLs (SIGCONT first) a worker that live says is silent for more
     than 1 s after it was live (hung, stopped), or that never became live
     within 5 s of its start; it is then respawned like a dead one.
   live may be NULL (no hang detection), moved too (nobody told). Caller
   owns *self_p. */
int cdc__supervisor_start(cdc_local_workers_t *workers, cdc_live_fn live, cdc_moved_fn moved,
                          void *arg, cdc_supervisor_t **self_p);

/* Stop and join the thread; nothing is respawned after it returns. Its
   counters go to *respawns and *given_up (either may be NULL; untouched
   when there was none). In a forked child (not the process that started
   it) only *self_p is nulled: the thread and its lock are the parent's.
   Accepts NULL and *NULL; nulls *self_p. */
void cdc__supervisor_stop(cdc_supervisor_t **self_p, uint64_t *respawns, uint64_t *given_up);

/* Workers respawned, slots given up. Thread-safe. */
void cdc__supervisor_counters(cdc_supervisor_t *self, uint64_t *respawns,
                              uint64_t *given_up);

#endif
