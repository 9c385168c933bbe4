/* chaos_actor.h - the thread that carries out a --chaos schedule (chaos.h) on
   real worker processes during a bench run's timed requests: SIGKILL,
   SIGSTOP then SIGCONT, restart. Bounded: it acts only between start and
   stop, and records at most CDC_CHAOS_MAX_EVENTS events. */
#ifndef CDC_CHAOS_ACTOR_H_INCLUDED
#define CDC_CHAOS_ACTOR_H_INCLUDED

#include "chaos.h"

#include <stdatomic.h>
#include <sys/types.h>

#define CDC_CHAOS_MAX_EVENTS 100000

/* One thing done to a worker (or a fault the bench injected). */
typedef struct {
    double t_ms;        /* since the timed run began                      */
    int request;        /* the request being served when it fired         */
    char action[12];    /* kill, stop, cont, restart, crash (--crash-at)  */
    int worker;
    long pid;           /* the process acted on; -1 unknown               */
} cdc_chaos_event_t;

/* How the actor reaches the workers. Both callbacks run on the actor's
   thread and must be safe there. */
typedef struct {
    int workers;
    /* The process serving worker i now; <= 0 when none (dead, not respawned
       yet). Looked up at every firing: a respawned worker has a new pid. */
    pid_t (*pid)(void *arg, int worker);
    /* Kill worker i and start it again on its endpoint; the new pid, or <= 0
       on failure. NULL when restart is not possible. */
    pid_t (*restart)(void *arg, int worker);
    void *arg;
} cdc_chaos_targets_t;

typedef struct cdc_chaos_actor cdc_chaos_actor_t;

/* Start the actor's thread; times count from start_ms (cdc_bench_now_ms's
   clock) and *request is the index being served (read at each firing).
   Nonzero when the thread cannot start. */
int cdc_chaos_actor_start(const cdc_chaos_spec_t *spec, const cdc_chaos_targets_t *targets,
                          double start_ms, const atomic_int *request,
                          cdc_chaos_actor_t **actor);

/* Stop and join the thread, SIGCONT every worker it left stopped, and hand
   over its events (*events malloc'd, caller frees; *count of them). Accepts
   NULL (no events). */
void cdc_chaos_actor_stop(cdc_chaos_actor_t *actor, cdc_chaos_event_t **events, int *count);

#endif
