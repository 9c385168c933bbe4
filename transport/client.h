/* client.h - the coordinator's side of the wire: one DEALER per worker.
 *
 * Plain C (no zmq types) so src/executor_zmq.c can use it. */
#ifndef CDC_CLIENT_H_INCLUDED
#define CDC_CLIENT_H_INCLUDED

#include "discovery.h"
#include "keys.h"
#include "slots.h"
#include "status.h"
#include "task.h"

#include <stdint.h>

/* What the client did since it was created. */
typedef struct {
    uint64_t tasks_sent;      /* TASK messages sent (retries included)       */
    uint64_t send_failures;   /* tasks not dispatched: worker unreachable    */
    uint64_t results;         /* RESULT messages accepted                    */
    uint64_t weights_sent;    /* WEIGHTS messages sent                       */
    uint64_t weight_bytes;    /* payload bytes of those                      */
    uint64_t misses;          /* MISS replies (weights re-sent)              */
    uint64_t late_replies;    /* replies to an earlier request, dropped      */
    uint64_t late_blocks;     /* of those, RESULTs (whole, or a streamed
                                 part) that came after their call was over */
    uint64_t error_replies;   /* ERROR replies from workers                  */
    uint64_t invalid_replies; /* malformed or unmatched replies, dropped     */
    uint64_t timeouts;        /* calls that hit timeout_ms                   */
    uint64_t bytes_out;       /* payload bytes sent (weights included)       */
    uint64_t bytes_in;        /* payload bytes of accepted results           */
    uint64_t heartbeats_missed; /* PINGs to a live worker unanswered at the next */
    uint64_t worker_deaths;   /* live -> dead: connection dropped or silent  */
    uint64_t worker_rejoins;  /* dead -> live again (answered a PING)        */
    uint64_t worker_goodbyes; /* live workers that left on purpose (GOODBYE) */
    uint64_t dead_skipped;    /* tasks not sent or given up: worker dead     */
    uint64_t oversized_skipped; /* tasks not sent: over the worker's
                                 --max-task-memory (its PONG), an erasure  */
    uint64_t cancels_sent;    /* CANCELs for a finished call's shards still
                                 pending on a live worker (one per worker)  */
    uint64_t background_weight_bytes; /* weights sent between calls (slots.h) */
    uint64_t redundancy_repairs; /* full redundancy regained after a loss    */
    uint64_t repair_us_sum;   /* loss to full redundancy, summed, us         */
    uint64_t repair_us_max;   /* the longest, us                             */
    uint64_t stored_asked;    /* STORED sent: a worker asked to load a shard
                                 from its own store instead of being sent it */
    uint64_t stored_missing;  /* of those, MISSed (its store lacked it)      */
    uint64_t live_mask;       /* bit w: worker w answers heartbeats now      */
} cdc_remote_counters_t;

typedef struct cdc_client cdc_client_t;

/* Connect to the comma-separated endpoints (at most CDC_MAX_WORKERS), start
   the heartbeat thread, and wait up to connect_wait_ms for each worker to
   answer a PING. Unanswered workers are kept (libzmq reconnects in the
   background) and join when they answer. Caller owns *client_p and must
   destroy it with cdc__client_destroy. */
int cdc__client_new(const char *endpoints, int connect_wait_ms, cdc_client_t **client_p);

/* Same over CURVE: every DEALER (data and heartbeat) is a CURVE client with
   client_cert's keys (it must hold the secret one) that expects
   server_certs[w]'s public key from endpoint w (one certificate per endpoint,
   in order). A worker whose key differs never completes the handshake, so it
   never turns live and is never sent anything. client_cert NULL: plaintext,
   as cdc__client_new. The certificates are copied. */
int cdc__client_new_curve(const char *endpoints, int connect_wait_ms,
                          const cdc_curve_cert_t *client_cert,
                          const cdc_curve_cert_t *server_certs, cdc_client_t **client_p);

/* Workers found by their beacons (discovery.h) instead of an endpoint list,
   over CURVE with client_cert's keys: a beacon's worker is added when it
   speaks this protocol version and its key is in trusted (a certificate file
   or a directory of them: CDCGEMM_CURVE_SERVER). Listens up to wait_ms for
   the first set (ending sooner once one was heard and no new one for two
   beacon periods), then keeps listening on the heartbeat thread: a worker
   announcing itself later is added between calls and joins the plan when it
   answers a PING. With none found, calls run locally until one is. Returns
   CDC_OK, CDC_EINVAL (no certificate or trusted path) or CDC_ETRANSPORT (no
   broadcast interface). */
int cdc__client_new_discover(const cdc_discovery_where_t *where, int wait_ms,
                             int connect_wait_ms, const cdc_curve_cert_t *client_cert,
                             const char *trusted, cdc_client_t **client_p);

/* Close every socket; accepts NULL and *NULL; nulls *client_p. */
void cdc__client_destroy(cdc_client_t **client_p);

/* W, the number of endpoints. */
int cdc__client_worker_count(const cdc_client_t *self);

/* The workers the plan may count: W with an endpoint list; with discovery,
   the entries that have answered a PING at least once (an entry that never
   did, such as a replayed beacon's, takes no slot). Thread-safe. */
int cdc__client_admitted(cdc_client_t *self);

/* Send tasks[t] to a worker of the plan (cdc__client_planned) by stable
   placement (placement.h): shard s goes to its slot's home (worker s unless
   cdc__client_set_homes moved it) while that worker is live and ready, so a
   re-plan moves only the shards of workers that left, to workers that hold
   their weights and no shard of the call. A planned worker that is
   not live now gets nothing (its shard is an erasure); with no live worker
   nothing is sent and the call returns at once. Weights go once per worker
   per key (re-sent on MISS). Results are collected into tasks[t].result;
   bit t of *arrived marks each result that came back whole. A task whose
   worker dies while it is pending is given up at once. Returns once every
   dispatched task has answered; or once needed results are in (n, the
   code's data shards, less the empty data shards the caller did not send;
   n also names the split in the weights' keys) and either the data shards
   (shard < n) are all in or wait_ms more have passed; or when
   timeout_ms has passed since the call began. Replies to earlier calls are
   dropped and counted. CDC_OK even when results are missing (the caller
   decodes or computes them); another status only for a broken socket or OOM.
   Thread-safe (calls are serialised). */
int cdc__client_run(cdc_client_t *self, cdc_shard_task_t *tasks, int count, int n, int needed,
                    int wait_ms, int timeout_ms, uint64_t *arrived);

/* The same for a call of streamed tasks (task.h): each task's parts come
   back into result and tail as they are computed (parts_in says which),
   and the call waits for goal->enough (not needed results) before it
   cancels the parts still due; wait_ms then runs while lead rows are
   pending. goal NULL: cdc__client_run. */
int cdc__client_run_goal(cdc_client_t *self, cdc_shard_task_t *tasks, int count, int n,
                         int needed, const cdc_call_goal_t *goal, int wait_ms, int timeout_ms,
                         uint64_t *arrived);

/* Where the plan's slots live: slot s's home is worker home_of_slot[s] for
   s < slots (distinct workers; the slots after them take the other workers
   in ascending order); slots 0 (home_of_slot may be NULL): slot s on worker
   s, the default. Takes the call lock: a call in flight keeps the map it
   began with. A new home is not sent a slot's tasks until it holds the
   slot's weights, shipped in the background (slots.h); meanwhile a worker
   that holds them (the slot's previous home) serves it. CDC_EINVAL naming
   what is wrong (a worker out of range, one given twice, more slots than
   workers), the map unchanged. Thread-safe. */
int cdc__client_set_homes(cdc_client_t *self, const int *home_of_slot, int slots);

/* New blocks of a cached operand, for a re-sized layout, sent to the slots'
   homes in the background (cdc__slots_stage: one slot at a time, its home an
   erasure meanwhile; order[0..count-1] the slots, the most urgent first)
   while the calls go on with the blocks the homes hold. block[s] is slot
   s's: key as a task names it (a_key or bt_key), rows x k at data (or, with
   no data, built by its source when sent), kept alive by hold (retained
   while staged); needed is the calls' n (the executor's, as the wire
   keys mix it in, as for tasks). Staging the same token again only asks.
   1 when every slot's home holds its block, acknowledged (the next call may
   use them), else 0. Thread-safe. */
int cdc__client_stage(cdc_client_t *self, uint64_t token, int needed,
                      const cdc_slot_weight_t *block, int count, const int *order);

/* Forget staging token (cdc__slots_unstage): the plan chose other lengths
   before its blocks were all sent. Thread-safe. */
void cdc__client_unstage(cdc_client_t *self, uint64_t token);

/* The last call, per shard s < max: the worker its task was sent to
   (sent_to[s]) and the one whose result was taken (answered_by[s]); -1 for
   none (not in the call, not sent, no result). Either may be NULL. Waits
   for a call in progress. Thread-safe. */
void cdc__client_last_call(cdc_client_t *self, int *sent_to, int *answered_by, int max);

/* Worker w is a new process listening at endpoint (an embedded worker
   respawned on a fresh ipc path): every socket the client has for it is
   replaced by one connected there (the data socket under the call lock, at
   the next call or restore pass; the heartbeat socket by the heartbeat
   thread), so nothing queued for or sent by the old process crosses over;
   its slots state is that of an empty process; w keeps its place in the
   plan. Returns at once. CDC_EINVAL for an unknown worker or an endpoint
   too long. Thread-safe. */
int cdc__client_move(cdc_client_t *self, int w, const char *endpoint);

/* Live workers now (bit w of *mask, which may be NULL): answering heartbeats.
   Returns their count. Thread-safe; never waits for a call in progress. */
int cdc__client_live(cdc_client_t *self, uint64_t *mask);

/* Workers in the plan (bit w of *mask, may be NULL): the live ones, plus
   those dead by silence for less than the grace period (1 s; a crashed
   worker leaves the plan at once). Calls spread their shards over these.
   Returns their count. Thread-safe. */
int cdc__client_planned(cdc_client_t *self, uint64_t *mask);

/* Workers in the plan (cdc__client_planned) ready for some slot
   (cdc__slots_ready): not a returning process still being sent its slots'
   weights, a spare taking them in, or a home taking in staged blocks, so
   a task sent to them now would not queue behind weights. Bit w of *mask
   (may be NULL); returns their count. Thread-safe; waits for a call in
   progress. */
int cdc__client_free_workers(cdc_client_t *self, uint64_t *mask);

/* 1 while full redundancy is lost to a failure and not back yet (a slot
   with no ready worker that is not being staged: the repair clock of
   client_restore.c runs), else 0. Thread-safe; waits for a call in
   progress. */
int cdc__client_repairing(cdc_client_t *self);

/* One worker as the heartbeats see it. */
typedef struct {
    char endpoint[CDC_CURVE_ENDPOINT_MAX];
    int live;                   /* answers heartbeats now                     */
    double rtt_ms;              /* its last PING round trip; < 0: never      */
    int version;                /* wire protocol version it speaks (0: not
                                   heard yet; another version never answers) */
    int has_status;             /* status below came from its PONGs          */
    cdc_status_report_t status; /* cache, memory budget, tasks, load         */
} cdc_worker_status_t;

/* Up to max workers' status into out[0..]; returns how many were written.
   Thread-safe; never waits for a call. */
int cdc__client_status(cdc_client_t *self, cdc_worker_status_t *out, int max);

/* Copy the counters. Thread-safe. */
void cdc__client_counters(cdc_client_t *self, cdc_remote_counters_t *counters);

/* What the client learns about each worker's speed as it learns it, for a
   profile (src/coordinator/profile/profile.h). pong: on the heartbeat thread, for
   every PONG: rtt_ms its round trip when it answers the latest PING (else
   -1: a worker that stalled answers a backlog of them), status what it said
   about itself (NULL when malformed). call_done: on the calling thread, once
   per call and worker whose every task of the call came back (no MISS
   re-send): elapsed_ms from the call's dispatch to its last result, their
   flops (2*rows*k*cols each), the operand bytes their GEMMs stream
   ((rows + cols)*k floats each) and the bytes that moved for them
   (operands and weights sent in the call, results). call_cut (may be
   NULL): likewise once per call and worker whose tasks were still pending
   when the call ended without them (cancelled: decoded, or not needed):
   elapsed_ms from the dispatch to that end, a lower bound on what they
   would have taken, with their flops, streamed bytes and bytes both ways;
   not for a worker that weights sent earlier may still have been reaching
   (no task sent after them has come back yet, and they would not have
   arrived over 10 Mbit/s), whose task may have queued behind them. All
   must be quick, must not call the client, and may run at the same time;
   ctx must outlive the client. */
typedef struct {
    void (*pong)(void *ctx, int w, double rtt_ms, const cdc_status_report_t *status);
    void (*call_done)(void *ctx, int w, double elapsed_ms, double flops, double streamed,
                      double bytes);
    void (*call_cut)(void *ctx, int w, double elapsed_ms, double flops, double streamed,
                     double bytes);
    void *ctx;
} cdc_client_observer_t;

/* Report to *observer (copied) from now on. Thread-safe. */
void cdc__client_observe(cdc_client_t *self, const cdc_client_observer_t *observer);

#endif
