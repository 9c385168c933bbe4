/* executor.h - runs shard tasks somewhere: in process, or on ZeroMQ workers.
 *
 * The coordinator hands an executor a batch of shard tasks and learns which
 * results arrived; it never knows how or where they ran. The math (encode,
 * decode, fallback) stays in engine.c whatever the transport. Everything
 * the coordinator asks of an executor is in its ops table: no caller looks
 * at which kind it is. */
#ifndef CDC_EXECUTOR_H_INCLUDED
#define CDC_EXECUTOR_H_INCLUDED

#include "cdcgemm.h"
#include "client.h"
#include "profile.h"
#include "task.h"

#include <stdint.h>

typedef struct cdc_executor cdc_executor_t;

typedef struct {
    const char *name;
    /* Run count tasks; set bit t of *arrived for each task t whose result is
       complete. n: the code's data shards (shard < n; it names the split
       in the weights' wire keys). needed: the results that suffice, n less
       the empty data shards the caller did not send (their result is
       zero): once any needed results are in, a remote executor may stop
       waiting for the rest (after the configured wait for data shards).
       goal (NULL: the needed rule) is what a call of streamed tasks waits
       for instead (task.h): each task's parts_in says which of its parts
       came back, the goal says when they are enough, and a remote executor
       cancels the parts still due then.
       Returns CDC_OK even when some results did not arrive; the caller
       decodes or falls back. */
    int (*run)(cdc_executor_t *self, cdc_shard_task_t *tasks, int count, int n, int needed,
               const cdc_call_goal_t *goal, uint64_t *arrived);
    void (*destroy)(cdc_executor_t *self);
    /* Workers in the plan now (live by heartbeats, or silent for less than
       a grace period); NULL = every worker, always. *mask (may be NULL) gets
       bit w for each. Thread-safe. */
    int (*live)(cdc_executor_t *self, uint64_t *mask);
    /* What an executor with remote workers also answers (each NULL for one
       without: the cdc__executor_* functions below say what that means).
       Each is the function below of the same name. */
    int (*heartbeat_live)(cdc_executor_t *self, uint64_t *mask);
    int (*free_workers)(cdc_executor_t *self, uint64_t *mask);
    int (*repairing)(cdc_executor_t *self);
    int (*worker_moved)(cdc_executor_t *self, int w, const char *endpoint);
    int (*set_homes)(cdc_executor_t *self, const int *home_of_slot, int slots);
    int (*stage)(cdc_executor_t *self, uint64_t token, int needed,
                 const cdc_slot_weight_t *block, int count, const int *order);
    void (*unstage)(cdc_executor_t *self, uint64_t token);
    void (*last_call)(cdc_executor_t *self, int *sent_to, int *answered_by, int max);
    int (*worker_count)(cdc_executor_t *self);
    int (*worker_status)(cdc_executor_t *self, cdc_worker_status_t *out, int max);
    int (*profile)(cdc_executor_t *self, cdc_worker_profile_t *out, int max,
                   cdc_worker_profile_t *coordinator);
    void (*remote_counters)(cdc_executor_t *self, cdc_remote_counters_t *counters);
} cdc_executor_ops_t;

struct cdc_executor {
    const cdc_executor_ops_t *ops;
};

/* In-process executor: every task on this thread with OpenBLAS.
   Caller owns the result and destroys it with ops->destroy. NULL on OOM. */
cdc_executor_t *cdc__executor_local_new(void);

/* ZeroMQ executor over the comma-separated endpoints (W = their count; NULL
   = config->workers): a background thread heartbeats every worker; shards are
   placed stably over the workers in the plan (client.h). Waits
   up to connect_wait_ms for the workers to answer a first PING; workers that
   do not are used once they come up. Caller owns *executor_p and destroys it
   with ops->destroy. */
int cdc__executor_zmq_new(const cdc_config_t *config, const char *endpoints,
                          int connect_wait_ms, cdc_executor_t **executor_p);

/* Workers in an executor's plan and their bits in *mask (may be NULL); -1
   with every bit set for an executor without heartbeats (all its workers
   always count). Thread-safe. */
int cdc__executor_live(cdc_executor_t *executor, uint64_t *mask);

/* Workers of a ZeroMQ executor's plan ready for some slot
   (cdc__client_free_workers): a task sent now would not wait behind a
   background restore or staging. Their bits in *mask (may be NULL); -1
   for any other executor (none of its workers ever waits). */
int cdc__executor_free_workers(cdc_executor_t *executor, uint64_t *mask);

/* 1 while a ZeroMQ executor's full redundancy is lost to a failure and not
   back yet (cdc__client_repairing: not a planned staging); 0 otherwise and
   for any other executor. */
int cdc__executor_repairing(cdc_executor_t *executor);

/* Workers a ZeroMQ executor hears now (answering heartbeats; not the plan,
   which keeps a silent worker for a grace period), their bits in *mask (may
   be NULL); -1 for any other executor. Thread-safe. */
int cdc__executor_heartbeat_live(cdc_executor_t *executor, uint64_t *mask);

/* Worker w of a ZeroMQ executor is a new process at endpoint (a respawned
   embedded worker): its sockets are reconnected there (cdc__client_move).
   CDC_EINVAL for any other executor or an unknown worker. Thread-safe. */
int cdc__executor_worker_moved(cdc_executor_t *executor, int w, const char *endpoint);

/* Where the plan's slots live (cdc__client_set_homes): slot s's home is
   worker home_of_slot[s] for s < slots, the other slots on the other
   workers; slots 0: slot s on worker s. CDC_OK without effect for an
   executor without slots (in process); CDC_EINVAL naming what is wrong.
   Thread-safe: a call in flight keeps the map it began with. */
int cdc__executor_set_homes(cdc_executor_t *executor, const int *home_of_slot, int slots);

/* New blocks of a cached operand sent to the slots' homes in the
   background (cdc__client_stage) while the calls use the old: 1 once every
   home holds them, 0 while under way. 1 for an executor without slots (in
   process: nothing to send). Thread-safe. */
int cdc__executor_stage(cdc_executor_t *executor, uint64_t token, int needed,
                        const cdc_slot_weight_t *block, int count, const int *order);

/* Staging token is no longer wanted (cdc__client_unstage): the plan chose
   other lengths before every home held it. Nothing for an executor without
   slots. Thread-safe. */
void cdc__executor_unstage(cdc_executor_t *executor, uint64_t token);

/* Per shard s < max of a ZeroMQ executor's last call: the worker it was sent
   to and the one that answered (cdc__client_last_call; -1: none). CDC_EINVAL
   for another executor. Thread-safe. */
int cdc__executor_last_call(cdc_executor_t *executor, int *sent_to, int *answered_by,
                            int max);

/* Workers a ZeroMQ executor may plan over (endpoints given, or discovered
   workers that have answered at least once: cdc__client_admitted); -1 for
   any other executor. */
int cdc__executor_worker_count(cdc_executor_t *executor);

/* Up to max workers' status (a ZeroMQ executor's heartbeats: endpoint,
   liveness, round trip, what their PONGs report); returns how many, 0 for
   any other executor. */
int cdc__executor_worker_status(cdc_executor_t *executor, cdc_worker_status_t *out, int max);

/* A ZeroMQ executor's live profile of its workers (profile.h): up to max
   into out[0..] (live from the heartbeats now), returning how many, and the
   coordinator's own into *coordinator (may be NULL); -1 for any other
   executor. Thread-safe. */
int cdc__executor_profile(cdc_executor_t *executor, cdc_worker_profile_t *out, int max,
                          cdc_worker_profile_t *coordinator);

/* The transport counters of a ZeroMQ executor; CDC_EINVAL for another kind.
   Thread-safe. */
int cdc__executor_remote_counters(cdc_executor_t *executor,
                                  cdc_remote_counters_t *counters);

#endif
