/* client_internal.h - what the files of the client share: its state
 * (struct cdc_client), the constants more than one of them reads, and the
 * functions one of them calls in another (cdc__client_, non-static; the rest
 * stay static in their file). Which file holds which concern: client.c's head
 * comment. Only those files include this; everyone else has client.h. */
#ifndef CDC_CLIENT_INTERNAL_H_INCLUDED
#define CDC_CLIENT_INTERNAL_H_INCLUDED

#include "build_meter.h"
#include "client.h"
#include "discovery.h"
#include "keys.h"
#include "protocol.h"
#include "slots.h"
#include "status.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define CDC_HEARTBEAT_MS 100      /* PING period to a live worker                */
#define CDC_HEARTBEAT_DEAD_MS 300 /* silence that makes a live worker dead       */
#define CDC_HEARTBEAT_RETRY_MS 20 /* PING period to a worker not (yet) live      */
/* Operands built to be sent (build_meter.h): bytes libzmq may hold before
   the next build waits, and how long it waits at most. */
#define CDC_CLIENT_BUILT_BUDGET ((size_t) 32 << 20)
#define CDC_CLIENT_BUILT_WAIT_MS 500
/* Discovery's memories (client_discovery.c, where its other constants are):
   the (key, host) pairs that never answered, and the refusals logged. */
#define DISCOVERY_FAILED 64
#define DISCOVERY_REFUSALS 256
/* Messages (libzmq counts whole messages, not frames) a data socket queues
   before libzmq stops reading the connection. A call gives a worker one task
   (several only when it has more tasks than planned workers), answered by
   one reply per send, and the call reads continuously, so 32 never slows a
   call; past it the worker's bytes wait in TCP (backpressure), nothing is
   dropped here. What it bounds is what a peer can park between calls. */
#define DATA_RCVHWM 32
/* Stale messages read (and counted) per worker at the start of a call; a
   peer still sending then is read by the call itself. */
#define DRAIN_MAX (2 * DATA_RCVHWM)

typedef struct {
    void *socket;
} remote_worker_t;

/* The heartbeat thread's view of one worker (its sockets are that thread's). */
typedef struct {
    void *socket;       /* DEALER for PING/PONG only                         */
    void *monitor;      /* PAIR receiving the socket's DISCONNECTED events   */
    int64_t last_pong;  /* ms; 0 = never                                     */
    int64_t next_ping;  /* ms                                                */
    int outstanding;    /* a PING is unanswered                              */
    int ever_live;
    int version_warned; /* its protocol version differs: said once           */
    uint64_t last_ping; /* the latest PING's id: its send time in us         */
    /* From its last PONG (read by cdc__client_status under state_lock): */
    double rtt_ms;              /* PING to PONG; < 0 before the first      */
    cdc_status_report_t status; /* what it said about itself               */
    int has_status;
} heartbeat_peer_t;

/* Keys one worker process's store was found to lack; past them it is no
   longer asked (its store holds little of what it needs). */
#define CDC_CLIENT_STORE_LACKS 64

/* The slowest link the weights' arrival is waited for (weights_clear_ms). */
#define CDC_CLIENT_FLOOR_MBIT 10.0

struct cdc_client {
    void *zmq;
    int curve;                  /* CURVE client keys on every DEALER          */
    cdc_curve_cert_t curve_client;
    uint8_t curve_servers[CDC_MAX_WORKERS][CDC_CURVE_KEY_BYTES];
    remote_worker_t workers[CDC_MAX_WORKERS];
    char endpoints[CDC_MAX_WORKERS][CDC_CURVE_ENDPOINT_MAX]; /* worker w's     */
    atomic_int count; /* grows (discovery) only under lock and state_lock    */
    cdc_listener_t *listener; /* discovery: beacons, read by the heartbeat
                                 thread; NULL with an endpoint list          */
    char *trusted;            /* discovery: CDCGEMM_CURVE_SERVER (keys admitted) */
    atomic_int pending;       /* discovery: worker number count has its sockets
                                 and waits to be counted (state_lock)        */
    cdc_trust_t *trust;       /* discovery: the trusted keys, in memory (keys.h) */
    /* Discovery's table, the heartbeat thread's (before it starts, the
       creator's): one entry per key; never-live entries age out and are
       reused in place. */
    char entry_keys[CDC_MAX_WORKERS][CDC_CURVE_KEY_TEXT]; /* "" when free    */
    int64_t entry_since[CDC_MAX_WORKERS]; /* ms: admitted or moved then      */
    uint64_t vacant;          /* bit w: entry w aged out, free for reuse     */
    int64_t discovery_age_ms; /* the next ageing pass                        */
    int64_t discovery_rest_ms; /* beacons are not read before (a flood)       */
    uint64_t refused[DISCOVERY_REFUSALS]; /* refusals logged (endpoint, reason) */
    int refused_count;
    int64_t refused_reset_ms;
    uint64_t beacons_dropped; /* past a pass's bound, unread                  */
    uint64_t failed[DISCOVERY_FAILED]; /* (key, host) that never answered     */
    int64_t failed_ms[DISCOVERY_FAILED];
    int failed_next;
    int homes_given;          /* cdc__client_set_homes was called (under lock) */
    uint64_t homes_answered;  /* the entries cdc__client_discovery_homes placed slots on */
    uint64_t first_request;   /* request ids start past it: a random point, not 0 */
    uint64_t next_request;
    cdc_build_meter_t *build_meter; /* operands built to be sent that libzmq
                             still holds (send_weights, client_restore.c) */
    pthread_mutex_t lock; /* serialises calls; guards counters, slots and
                             the data sockets (a restore pass between calls
                             takes it too) */
    cdc_remote_counters_t counters;
    cdc_slots_t *slots;   /* slots and homes: who holds what (slots.h)   */
    /* Weights on their way (under lock): bumped per WEIGHTS message sent to
       worker w; drained: the value at the dispatch of w's latest task that
       came back, so everything sent to w before it has arrived; clear_ms:
       when they would have arrived over a CDC_CLIENT_FLOOR_MBIT link (a
       device that never returns a task is measured again after it). A task
       cut while w's link may still carry earlier weights says nothing of the
       link (client_call.c, call_observe). */
    uint64_t weights_epoch[CDC_MAX_WORKERS], drained_epoch[CDC_MAX_WORKERS];
    double weights_clear_ms[CDC_MAX_WORKERS];
    int last_sent_to[64];     /* the last call's shard s went to this worker  */
    int last_answered_by[64]; /* and its result came from this one (-1: none) */
    uint64_t task_memory_warned; /* bit w: a task over worker w's
                                    --max-task-memory was logged            */
    int lagging_calls[CDC_MAX_WORKERS]; /* > 0: worker w's data task lagged
                                    the others in a recent call with
                                    on-demand tasks; the next this many such
                                    calls with a task on w send them as soon
                                    as a worker is free (client_call.c)     */
    uint64_t deaths_seen[CDC_MAX_WORKERS]; /* departures[w] at the last pass */
    /* Worker processes with a store on their disk (status.h, stored): each
       shard is first asked of it (CDC_MSG_STORED), and sent only if its
       store lacks it (a MISS with request id 0). Under lock. */
    int store_asked[CDC_MAX_WORKERS];   /* ask worker w's current process   */
    uint64_t store_lacks[CDC_MAX_WORKERS][CDC_CLIENT_STORE_LACKS];
    int store_lack_count[CDC_MAX_WORKERS];
    /* Re-sends after a worker came back empty, rate-limited (cdc__client_restore_pass). */
    int empty_returns[CDC_MAX_WORKERS];    /* in a row, each < a minute apart */
    int64_t empty_at_ms[CDC_MAX_WORKERS];  /* the latest                      */
    int64_t restore_after_ms[CDC_MAX_WORKERS]; /* no background re-send before */
    int64_t degraded_since_us; /* full redundancy lost then; -1: it is full */
    int64_t last_pass_ms;      /* the last restore pass                     */
    atomic_int restoring;      /* a slot lacks its worker, or weights are not
                                  yet acknowledged: the heartbeat thread
                                  passes every RESTORE_PASS_MS             */
    atomic_uint monitor_seq;   /* makes every monitor's inproc name new     */

    pthread_mutex_t state_lock; /* guards live, the heartbeat counters and
                                   the observer                          */
    cdc_client_observer_t observer; /* the profile's feed (cdc__client_observe) */
    uint64_t live;              /* bit w: worker w is live               */
    uint64_t silent;            /* bit w: dead by silence, not by a drop */
    uint64_t left;              /* bit w: said GOODBYE since it was last live */
    uint64_t moved_data;        /* bit w: worker w is a new process at a new
                                   endpoint (cdc__client_move); its data socket
                                   is to be replaced (under lock)           */
    uint64_t moved_heartbeat;   /* and its heartbeat socket (by that thread) */
    int64_t dead_since[CDC_MAX_WORKERS]; /* ms, for the plan's grace   */
    uint64_t heartbeats_missed, worker_deaths, worker_rejoins, heartbeat_invalid;
    uint64_t worker_goodbyes; /* live workers that left on purpose          */
    uint64_t departures[CDC_MAX_WORKERS]; /* live -> dead or left, per worker */
    int64_t last_departure_us;  /* when the latest departure was seen      */
    heartbeat_peer_t peers[CDC_MAX_WORKERS];
    void *stop_pipe;            /* main side of the heartbeat thread's stop pipe */
    void *thread_pipe;          /* thread side                            */
    pthread_t thread;
    int thread_started;
};

/* ---- client.c: sockets and the client's lifetime ------------------------- */

/* A client with its context and locks and no worker yet (client_alloc). */
int cdc__client_alloc(const cdc_curve_cert_t *client_cert, cdc_client_t **self_p);
/* Everything a client owns; safe on a half-built one. */
void cdc__client_free(cdc_client_t *self);
/* A data DEALER for a worker with key (CURVE), connected to endpoint. */
int cdc__client_data_socket_open(cdc_client_t *self, const uint8_t *key, const char *endpoint,
                                 void **socket_p);
/* A heartbeat DEALER for worker w with its monitor, connected to endpoint. */
int cdc__client_heartbeat_socket_open(cdc_client_t *self, int w, const uint8_t *key,
                                      const char *endpoint, void **socket_p, void **monitor_p);
/* Close a heartbeat DEALER and its monitor (either may be NULL). */
void cdc__client_heartbeat_socket_close(void *socket, void *monitor);
/* Both sockets of worker w, connected to endpoint. */
int cdc__client_worker_connect(cdc_client_t *self, int w, const char *endpoint);
/* Until every worker answers heartbeats and its data socket is connected. */
void cdc__client_wait_for_workers(cdc_client_t *self, int connect_wait_ms);

/* ---- client_heartbeat.c: liveness ---------------------------------------- */

/* The heartbeat thread and the pipe that stops it. */
int cdc__client_heartbeat_start(cdc_client_t *self);
/* Worker w live or dead (silent: by silence, not a dropped connection). */
void cdc__client_set_live(cdc_client_t *self, int w, int live, int silent, const char *why);

/* ---- client_discovery.c -------------------------------------------------- */

/* The heartbeat thread's discovery pass: beacons, ageing, admission. */
void cdc__client_discovery_poll(cdc_client_t *self, int64_t now);
/* Count a prepared (discovered) worker; under self->lock. */
void cdc__client_discovery_publish(cdc_client_t *self);
/* With discovery and no homes given, the slots' homes: entries that answered. */
void cdc__client_discovery_homes(cdc_client_t *self);

/* ---- client_restore.c: moves, weights between calls ---------------------- */

/* The key a shard operand is cached under on a worker; sample: the
   operand's (cdc__operand_sample). A whole operand (task.h a_whole) passes
   shard -1 and needed 0: the same key for every shard. */
uint64_t cdc__client_wire_key(uint64_t key, int shard, int needed, int64_t rows, int64_t k,
                              const uint32_t *sample);
/* Under the call lock: moved workers' data sockets replaced. */
void cdc__client_data_moves(cdc_client_t *self);
/* The heartbeat thread: moved workers' heartbeat sockets replaced; whether
   any changed. */
int cdc__client_heartbeat_moves(cdc_client_t *self, int64_t now);
/* Make sure worker w holds the keyed operand (weight->key), sending it if
   not: its data, or what its source builds. */
int cdc__client_ensure_weights(cdc_client_t *self, int w, const cdc_slot_weight_t *weight);
/* A barrier PING on client ctx's data socket to worker w (token 0: only
   proves the connection). */
int cdc__client_send_data_ping(void *ctx, int w, uint64_t token);
/* Under the call lock: stale replies read, weights restored, repair timed. */
void cdc__client_restore_pass(cdc_client_t *self);

/* ---- client_store.c: workers that keep a store on their disk ------------- */

/* Under the call lock: worker w's status named a process not seen before,
   with `stored` matrices in its store: ask it before sending (stored > 0). */
void cdc__client_store_new_process(cdc_client_t *self, int w, uint64_t stored);
/* Under the call lock: whether worker w's process is asked for the shard
   under key before it is sent it (it has a store that may hold it). */
int cdc__client_store_ask(const cdc_client_t *self, int w, uint64_t key);
/* Under the call lock: STORED for weight to worker w (no payload). */
int cdc__client_store_send(cdc_client_t *self, int w, const cdc_slot_weight_t *weight);
/* Under the call lock: worker w MISSed key (asked: a STORED's answer, its
   store lacks it; else a task's, its cache lacks it): remembered, so the
   shard is sent next time, not asked for, and forgotten by the slots, so
   the next restore pass or call sends it. */
void cdc__client_store_lacks(cdc_client_t *self, int w, uint64_t key, int asked);

/* ---- client_call.c: a call ----------------------------------------------- */

/* A reply to a call that is over (or a task given up): counted as late. */
void cdc__client_count_late(cdc_client_t *self, const cdc_msg_header_t *h);

#endif
