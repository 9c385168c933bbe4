/* client.c - dispatch shard tasks to workers over DEALER sockets, collect results.
 *
 * One DEALER per worker rather than one DEALER connected to all: a DEALER
 * round-robins over its peers, so it cannot address "worker i"; per-worker
 * sockets give each worker its own ordered pipe (WEIGHTS before the TASK that
 * needs them), its own reconnection, and a reply's origin without routing ids.
 * ZMQ_IMMEDIATE makes a send to a worker with no live connection fail at once
 * (EAGAIN) instead of queueing for a peer that may never come back.
 *
 * Liveness: a heartbeat thread owns a second DEALER per worker (zmq sockets
 * are not thread-safe, so it never touches the data sockets) and a monitor
 * socket on each. It PINGs every worker every CDC_HEARTBEAT_MS; a worker is
 * dead when its connection drops (ZMQ_EVENT_DISCONNECTED, at once) or when
 * it has been silent for CDC_HEARTBEAT_DEAD_MS, and live again when it
 * answers. Nothing is sent to a dead worker. A worker respawned at a new
 * endpoint (cdc__client_move) gets new sockets: the data one from whoever holds
 * the call lock next, the heartbeat one from that thread; the old ones are
 * closed with what they held. The plan (which workers the
 * shards are spread over) drops a crashed worker at once, a silent one only
 * after PLAN_GRACE_MS more: on a loaded machine a live worker can miss 300 ms
 * of heartbeats, and re-planning (new weight shards for the new n, shipped to
 * every worker) is what would turn that hiccup into real load. Meanwhile its
 * shard is simply erased and decoded from parity.
 *
 * Placement: shard s of a call runs on its slot's home (worker s unless
 * cdc__client_set_homes moved it) while that worker is live and holds the
 * slot's weights (placement.c, slots.c). Weight shards are cached per worker
 * under keys that name the shard and n, so when a worker leaves and the
 * re-plan keeps n (the default keep-shards re-plan drops parity instead),
 * every survivor's cache stays warm and weights travel only for the shards
 * that moved.
 *
 * A call (client_call_t) tracks each task as IDLE (not sent, or given up),
 * PENDING (sent, no answer yet) or DONE (result copied), with pending and
 * done counting the last two; it waits only while pending > 0. Requests get
 * growing ids, so a reply with an older id is a late answer to an earlier
 * call and is dropped, never mistaken for this call's.
 *
 * Profile: an observer (cdc__client_observe) hears every heartbeat PONG (the
 * round trip of the latest PING and the worker's status: busy_us, flops,
 * memory) and, at the end of each call, each worker's completed tasks
 * (elapsed, flops, bytes): the coordinator's live profile of its workers
 * (src/coordinator/profile.h) is made of these. */
#include "client.h"

#include "bits.h"
#include "clock.h"
#include "error.h"
#include "hash.h"
#include "log.h"
#include "discovery.h"
#include "placement.h"
#include "slots.h"
#include "status.h"
#include "wire.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_MISS_RETRIES 2
#define CDC_HEARTBEAT_MS 100      /* PING period to a live worker                */
#define CDC_HEARTBEAT_DEAD_MS 300 /* silence that makes a live worker dead       */
#define CDC_HEARTBEAT_RETRY_MS 20 /* PING period to a worker not (yet) live      */
#define LIVENESS_SLICE_MS 5       /* a waiting call re-reads liveness this often */
#define PLAN_GRACE_MS 1000        /* a silent worker stays in the plan (its shard
                                     erased, not sent) this long before n shrinks */
#define RESTORE_PASS_MS 20        /* the heartbeat thread's restore pass, between
                                     calls, at most this often                   */
/* Discovery (see its section): beacons handled per pass, a pass at most
   every DISCOVERY_REST_MS (25,600 a second; the rest dropped unread), how
   long a discovered entry may stay never-live before its sockets close and
   it is free, how often that is looked at, and the refusals remembered so
   each is logged once. */
#define DISCOVERY_BEACONS_PER_PASS 256
#define DISCOVERY_DRAIN_MAX 4096
#define DISCOVERY_NEVER_LIVE_MS (5 * CDC_HEARTBEAT_DEAD_MS)
#define DISCOVERY_AGE_PASS_MS 100
#define DISCOVERY_REST_MS 10
#define DISCOVERY_FAILED 64        /* (key, host) pairs that never answered */
#define DISCOVERY_FAILED_MS 10000  /* ... are not taken again for this long  */
#define DISCOVERY_REFUSALS 256
#define DISCOVERY_REFUSALS_RESET_MS 60000
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
    uint64_t homes_answered;  /* the entries discovery_homes placed slots on */
    uint64_t first_request;   /* request ids start past it: a random point, not 0 */
    uint64_t next_request;
    pthread_mutex_t lock; /* serialises calls; guards counters, slots and
                             the data sockets (a restore pass between calls
                             takes it too) */
    cdc_remote_counters_t counters;
    cdc_slots_t *slots;   /* slots and homes: who holds what (slots.h)   */
    int last_sent_to[64];     /* the last call's shard s went to this worker  */
    int last_answered_by[64]; /* and its result came from this one (-1: none) */
    uint64_t deaths_seen[CDC_MAX_WORKERS]; /* departures[w] at the last pass */
    /* Re-sends after a worker came back empty, rate-limited (restore_pass). */
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

typedef enum { TASK_IDLE, TASK_PENDING, TASK_DONE } task_state_t;

/* The key a shard operand is cached under on a worker. The layer's key names
   the whole weight matrix; its shard s differs with the shard index, the
   split (needed = n) and the code, so mix those in, plus a 16-value sample of
   the operand itself to tell apart codes that give the same shapes. */
static uint64_t wire_key(uint64_t key, int shard, int needed, int64_t rows, int64_t k,
                         const float *data)
{
    uint64_t h = cdc__hash_mix(key, (uint64_t) shard);
    h = cdc__hash_mix(h, (uint64_t) needed);
    h = cdc__hash_mix(h, (uint64_t) rows);
    h = cdc__hash_mix(h, (uint64_t) k);
    size_t total = (size_t) rows * (size_t) k;
    for (int i = 0; i < 16 && total > 0; i++) { /* an empty block has no sample */
        uint32_t bits;
        memcpy(&bits, data + (total - 1) * (size_t) i / 15, sizeof bits);
        h = cdc__hash_mix(h, bits);
    }
    return h ? h : 1; /* 0 means "inline" on the wire */
}

/* silent: dead because it stopped answering (else: its connection dropped). */
static void set_live(cdc_client_t *self, int w, int live, int silent, const char *why)
{
    uint64_t bit = UINT64_C(1) << w;
    pthread_mutex_lock(&self->state_lock);
    int was = (self->live & bit) != 0;
    if (live && !was) {
        self->live |= bit;
        self->silent &= ~bit;
        self->left &= ~bit; /* a new departure counts again */
        if (self->peers[w].ever_live)
            self->worker_rejoins++;
        self->peers[w].ever_live = 1;
    } else if (!live && was) {
        self->live &= ~bit;
        self->worker_deaths++;
        self->departures[w]++;
        self->last_departure_us = (int64_t) (cdc__clock_ms() * 1000.0);
        self->dead_since[w] = (int64_t) cdc__clock_ms();
        if (silent)
            self->silent |= bit;
    } else if (!live && !silent) {
        self->silent &= ~bit; /* a silent worker whose connection dropped: crashed */
    }
    pthread_mutex_unlock(&self->state_lock);
    if (live != was && self->peers[w].ever_live)
        CDC_LOG_INFOF("worker %d %s (%s)", w, live ? "live" : "dead", why);
}

static void heartbeat_ping(cdc_client_t *self, int w, int64_t now)
{
    heartbeat_peer_t *peer = &self->peers[w];
    int live = (self->live & (UINT64_C(1) << w)) != 0; /* only this thread writes it */
    if (live && peer->outstanding) {
        pthread_mutex_lock(&self->state_lock);
        self->heartbeats_missed++;
        pthread_mutex_unlock(&self->state_lock);
    }
    cdc_msg_header_t ping;
    cdc__msg_header_init(&ping, CDC_MSG_PING);
    /* In us: a round trip on loopback is well under a ms. */
    ping.request_id = (uint64_t) (cdc__clock_ms() * 1000.0);
    if (cdc__wire_send(peer->socket, NULL, &ping, NULL, 0, ZMQ_DONTWAIT) == CDC_OK) {
        peer->outstanding = 1;
        peer->last_ping = ping.request_id;
    }
    /* Keep the PINGs on their grid when this thread wakes a little late (a
       loaded machine): drifting later would let the 300 ms silence verdict
       come before the second missed PING. Re-anchor only past a whole period. */
    int64_t period = live ? CDC_HEARTBEAT_MS : CDC_HEARTBEAT_RETRY_MS;
    peer->next_ping = peer->next_ping + period > now ? peer->next_ping + period : now + period;
}

/* PINGs due and silence verdicts; returns when the thread must next wake. */
static int64_t heartbeat_tick(cdc_client_t *self, int count, int64_t now)
{
    int64_t next = now + CDC_HEARTBEAT_MS;
    for (int w = 0; w < count; w++) {
        heartbeat_peer_t *peer = &self->peers[w];
        if (now >= peer->next_ping)
            heartbeat_ping(self, w, now);
        int live = (self->live & (UINT64_C(1) << w)) != 0;
        if (live && now - peer->last_pong > CDC_HEARTBEAT_DEAD_MS)
            set_live(self, w, 0, 1, "no PONG");
        live = (self->live & (UINT64_C(1) << w)) != 0;
        if (peer->next_ping < next)
            next = peer->next_ping;
        if (live && peer->last_pong + CDC_HEARTBEAT_DEAD_MS + 1 < next)
            next = peer->last_pong + CDC_HEARTBEAT_DEAD_MS + 1;
    }
    return next;
}

/* Worker w's monitor: a dropped connection makes it dead at once. */
static void heartbeat_monitor(cdc_client_t *self, int w, int64_t now)
{
    heartbeat_peer_t *peer = &self->peers[w];
    cdc_wire_msg_t event;
    if (cdc__wire_recv(peer->monitor, &event, ZMQ_DONTWAIT) == CDC_OK && event.count >= 1 &&
        zmq_msg_size(&event.parts[0]) >= 2) {
        uint16_t id;
        memcpy(&id, zmq_msg_data(&event.parts[0]), sizeof id);
        if (id == ZMQ_EVENT_DISCONNECTED) {
            peer->outstanding = 0;
            peer->next_ping = now; /* probe the reconnection at once */
            set_live(self, w, 0, 0, "connection dropped");
        }
    }
    cdc__wire_msg_close(&event);
}

/* Worker w said GOODBYE (it stops on purpose): out of the plan at once,
   its pending tasks given up, and no death counted. */
static void set_left(cdc_client_t *self, int w)
{
    uint64_t bit = UINT64_C(1) << w;
    pthread_mutex_lock(&self->state_lock);
    int was = (self->live & bit) != 0;
    /* Counted once per departure, even when a missed heartbeat had already
       made it dead (a loaded machine): it did leave on purpose. Both of its
       connections bring a GOODBYE; the second finds it left. */
    int counted = !(self->left & bit);
    self->live &= ~bit;
    self->silent &= ~bit;
    self->left |= bit;
    self->worker_goodbyes += counted;
    if (was) {
        self->departures[w]++;
        self->last_departure_us = (int64_t) (cdc__clock_ms() * 1000.0);
    }
    pthread_mutex_unlock(&self->state_lock);
    if (counted)
        CDC_LOG_INFOF("worker %d left (said goodbye)%s", w, was ? "" : " while silent");
}

/* A reply whose header is ours but for its version: say so once per worker
   (it is never used: every message it sends fails validation). */
static void version_mismatch(cdc_client_t *self, int w, const cdc_wire_msg_t *wire)
{
    cdc_msg_header_t h;
    if (self->peers[w].version_warned || wire->count < 1 ||
        cdc__msg_header_unpack(zmq_msg_data((zmq_msg_t *) &wire->parts[0]),
                               zmq_msg_size((zmq_msg_t *) &wire->parts[0]), &h) != CDC_OK ||
        h.magic != CDC_PROTO_MAGIC || h.version == CDC_PROTO_VERSION)
        return;
    self->peers[w].version_warned = 1;
    char endpoint[CDC_CURVE_ENDPOINT_MAX];
    pthread_mutex_lock(&self->state_lock); /* cdc__client_move writes it */
    snprintf(endpoint, sizeof endpoint, "%s", self->endpoints[w]);
    pthread_mutex_unlock(&self->state_lock);
    CDC_LOG_ERRORF("worker %d (%s) speaks wire protocol version %u, this coordinator version "
                   "%d: it is not used (upgrade one of them; docs/deploy.md)",
                   w, endpoint, (unsigned) h.version, CDC_PROTO_VERSION);
}

/* A PONG's round trip (its id is the PING's send time, us) and status
   text, also told to the observer. */
static void record_status(cdc_client_t *self, int w, const cdc_msg_t *pong)
{
    cdc_status_report_t status; /* text: one frame of at most 1024 bytes */
    const cdc_frame_t *text = &pong->payload[0].frames[0];
    int parsed = cdc__status_parse(text->data, text->size, &status) == CDC_OK;
    heartbeat_peer_t *peer = &self->peers[w];
    double rtt_ms = cdc__clock_ms() - (double) pong->header.request_id / 1000.0;
    pthread_mutex_lock(&self->state_lock);
    peer->rtt_ms = rtt_ms;
    if (parsed) {
        peer->status = status;
        peer->has_status = 1;
    } else {
        self->heartbeat_invalid++; /* a malformed status: the PONG still counts */
    }
    cdc_client_observer_t observer = self->observer;
    pthread_mutex_unlock(&self->state_lock);
    int latest = pong->header.request_id == peer->last_ping;
    if (observer.pong)
        observer.pong(observer.ctx, w, latest ? rtt_ms : -1.0, parsed ? &status : NULL);
}

/* Worker w's heartbeat socket: PONGs make it live, GOODBYE takes it out. */
static void heartbeat_pongs(cdc_client_t *self, int w, int64_t now)
{
    heartbeat_peer_t *peer = &self->peers[w];
    cdc_wire_msg_t wire;
    while (cdc__wire_recv(peer->socket, &wire, ZMQ_DONTWAIT) == CDC_OK) {
        cdc_msg_t msg;
        int valid = cdc__wire_decode(&wire, 0, &msg) == CDC_OK;
        if (valid && msg.header.type == CDC_MSG_PONG) {
            peer->last_pong = now;
            peer->outstanding = 0;
            record_status(self, w, &msg);
            set_live(self, w, 1, 0, "answered a PING");
        } else if (valid && msg.header.type == CDC_MSG_GOODBYE) {
            peer->outstanding = 0;
            set_left(self, w);
        } else {
            if (!valid)
                version_mismatch(self, w, &wire);
            /* Never self->lock here: a call holds it for its whole
               duration and heartbeats must not wait for calls. */
            pthread_mutex_lock(&self->state_lock);
            self->heartbeat_invalid++;
            pthread_mutex_unlock(&self->state_lock);
        }
        cdc__wire_msg_close(&wire);
    }
    cdc__wire_msg_close(&wire);
}

static void discovery_poll(cdc_client_t *self, int64_t now);

/* The listener's poll item: not polled while discovery rests after a full
   pass (discovery_poll); returns next, brought forward to the rest's end. */
static int64_t discovery_arm(cdc_client_t *self, zmq_pollitem_t *item, int64_t now,
                             int64_t next)
{
    int resting = now < self->discovery_rest_ms;
    item->events = resting ? 0 : ZMQ_POLLIN;
    return resting && self->discovery_rest_ms < next ? self->discovery_rest_ms : next;
}

static void restore_pass(cdc_client_t *self);
static void data_moves(cdc_client_t *self);
static int heartbeat_moves(cdc_client_t *self, int64_t now);

/* Between calls, the restore pass runs here (a call runs it at its start),
   unless a call holds the lock. */
static void restore_between_calls(cdc_client_t *self, int64_t now)
{
    if (pthread_mutex_trylock(&self->lock) != 0)
        return;
    data_moves(self);
    /* Before the first call there is no plan (last_pass_ms is 0). */
    if (self->last_pass_ms > 0 && now - self->last_pass_ms >= RESTORE_PASS_MS)
        restore_pass(self);
    pthread_mutex_unlock(&self->lock);
}

/* The poll set: the stop pipe, every worker's heartbeat socket, their
   monitors, then the discovery listener (when there is one). Returns the
   items; *count is the workers they cover. */
static int heartbeat_items(cdc_client_t *self, zmq_pollitem_t *items, int *count)
{
    *count = self->count;
    items[0] = (zmq_pollitem_t){self->thread_pipe, 0, ZMQ_POLLIN, 0};
    for (int w = 0; w < *count; w++) {
        items[1 + w] = (zmq_pollitem_t){self->peers[w].socket, 0, ZMQ_POLLIN, 0};
        items[1 + *count + w] = (zmq_pollitem_t){self->peers[w].monitor, 0, ZMQ_POLLIN, 0};
    }
    int n = 1 + 2 * *count;
    if (self->listener)
        items[n++] = (zmq_pollitem_t){cdc__listener_socket(self->listener), 0, ZMQ_POLLIN, 0};
    return n;
}

static void *heartbeat_main(void *arg)
{
    cdc_client_t *self = arg;
    zmq_pollitem_t items[2 + 2 * CDC_MAX_WORKERS];
    int count, n = heartbeat_items(self, items, &count);
    for (;;) {
        int64_t now = (int64_t) cdc__clock_ms();
        if (heartbeat_moves(self, now))
            n = heartbeat_items(self, items, &count); /* new sockets to poll */
        int64_t next = heartbeat_tick(self, count, now);
        if (atomic_load(&self->restoring) && next > now + RESTORE_PASS_MS)
            next = now + RESTORE_PASS_MS;
        if (self->listener)
            next = discovery_arm(self, &items[n - 1], now, next);
        long timeout = next > now ? (long) (next - now) : 0;
        if (zmq_poll(items, n, timeout) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            break; /* the context is terminating */
        }
        if (items[0].revents & ZMQ_POLLIN)
            break; /* stop */
        now = (int64_t) cdc__clock_ms();
        for (int w = 0; w < count; w++) {
            /* Messages first: a stopping worker's GOODBYE is in the pipe
               before libzmq sees its connection close, and must win over
               the DISCONNECTED event that would count a death. */
            if (items[1 + w].revents & ZMQ_POLLIN)
                heartbeat_pongs(self, w, now);
            if (items[1 + count + w].revents & ZMQ_POLLIN)
                heartbeat_monitor(self, w, now);
        }
        if (self->listener && (items[n - 1].revents & ZMQ_POLLIN || self->pending ||
                               now >= self->discovery_age_ms))
            discovery_poll(self, now);
        restore_between_calls(self, now);
        if (self->count != count)
            n = heartbeat_items(self, items, &count); /* a worker was discovered */
    }
    return NULL;
}

/* Reconnection over a real network (tests/netns/cluster.sh partitions a host
   for 3 s and wants it back within 2 s of its link returning):
   - a reconnect attempt every CDC_RECONNECT_MS, no exponential back-off
     (ZMQ_RECONNECT_IVL_MAX equal to the interval);
   - ZMQ_TCP_MAXRT (TCP_USER_TIMEOUT): a connection whose sent bytes stay
     unacknowledged this long is dropped by the kernel. Without it a connection
     across a partition survives, and its first bytes after the link returns
     wait for TCP's retransmission back-off (0.2, 0.6, 1.4, 3.0, 6.2 s ...), so
     a host partitioned for 3 s could stay silent for 3 more. Only unanswered
     segments count (a busy or stopped worker's kernel still acknowledges), so
     this cannot fire on a loaded machine; the heartbeat has called such a
     worker dead long before (300 ms);
   - ZMQ_CONNECT_TIMEOUT: a connect() whose SYN goes unanswered (the host is
     still cut off) is abandoned after this long and retried, instead of
     waiting for the SYN's own 1 s, 3 s back-off.
   None of them matters to ipc:// endpoints. */
#define CDC_RECONNECT_MS 100
#define CDC_TCP_MAXRT_MS 1000
#define CDC_CONNECT_TIMEOUT_MS 250

static void *dealer_new(void *zmq, int sndhwm)
{
    void *socket = zmq_socket(zmq, ZMQ_DEALER);
    if (!socket)
        return NULL;
    int linger = 0, immediate = 1, reconnect_ms = CDC_RECONNECT_MS;
    int maxrt_ms = CDC_TCP_MAXRT_MS, connect_ms = CDC_CONNECT_TIMEOUT_MS;
    /* A worker (or anything posing as one) cannot make libzmq allocate more
       than a chunk per frame here (wire.h); results come in chunks. */
    int64_t max_frame = CDC_WIRE_MAX_FRAME_BYTES;
    zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(socket, ZMQ_IMMEDIATE, &immediate, sizeof immediate);
    zmq_setsockopt(socket, ZMQ_RECONNECT_IVL, &reconnect_ms, sizeof reconnect_ms);
    zmq_setsockopt(socket, ZMQ_RECONNECT_IVL_MAX, &reconnect_ms, sizeof reconnect_ms);
    zmq_setsockopt(socket, ZMQ_TCP_MAXRT, &maxrt_ms, sizeof maxrt_ms);
    zmq_setsockopt(socket, ZMQ_CONNECT_TIMEOUT, &connect_ms, sizeof connect_ms);
    zmq_setsockopt(socket, ZMQ_MAXMSGSIZE, &max_frame, sizeof max_frame);
    if (sndhwm > 0) {
        zmq_setsockopt(socket, ZMQ_SNDHWM, &sndhwm, sizeof sndhwm);
    } else {
        int rcvhwm = DATA_RCVHWM;
        zmq_setsockopt(socket, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm);
        /* Data sockets carry weight shards of tens of MB: with the kernel's
           default 200 KB socket buffers the two processes take turns in
           small chunks (measured: 67 MB/s on 2 cores); 4 MB buffers (the
           usual net.core.wmem_max) cut the switches. */
        int buffer = 4 << 20;
        zmq_setsockopt(socket, ZMQ_SNDBUF, &buffer, sizeof buffer);
        zmq_setsockopt(socket, ZMQ_RCVBUF, &buffer, sizeof buffer);
    }
    return socket;
}

/* CURVE: this coordinator's keys and worker w's public key, before connecting.
   Encryption runs on libzmq's I/O threads at about 45 MB/s here (a 37 MB
   weight shard: ~0.8 s), and a heartbeat waiting behind it on the same
   thread would miss the 300 ms liveness bound: with CURVE the context has two
   I/O threads, data connections on the first and heartbeats on the second
   (affinity is the thread mask). */
static int curve_apply(const cdc_client_t *self, const uint8_t *server_key, void *socket,
                       int heartbeat)
{
    if (!self->curve)
        return CDC_OK;
    uint64_t affinity = heartbeat ? 2 : 1;
    zmq_setsockopt(socket, ZMQ_AFFINITY, &affinity, sizeof affinity);
    if (zmq_setsockopt(socket, ZMQ_CURVE_SERVERKEY, server_key, CDC_CURVE_KEY_BYTES) != 0 ||
        zmq_setsockopt(socket, ZMQ_CURVE_PUBLICKEY, self->curve_client.public_key,
                       CDC_CURVE_KEY_BYTES) != 0 ||
        zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, self->curve_client.secret_key,
                       CDC_CURVE_KEY_BYTES) != 0)
        return cdc__fail(CDC_ETRANSPORT, "CURVE client keys: %s (libzmq without CURVE?)",
                         zmq_strerror(zmq_errno()));
    return CDC_OK;
}

/* A data DEALER for a worker with key (CURVE) into *socket_p, connected to
   endpoint ("": to none, a discovered entry set free). CDC_OK, or an error
   with nothing left open. */
static int data_socket_open(cdc_client_t *self, const uint8_t *key, const char *endpoint,
                            void **socket_p)
{
    void *socket = dealer_new(self->zmq, 0);
    if (!socket)
        return cdc__fail(CDC_ETRANSPORT, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    int rc = curve_apply(self, key, socket, 0);
    if (rc == CDC_OK && *endpoint && zmq_connect(socket, endpoint) != 0)
        rc = cdc__fail(CDC_ECONFIG, "connect %s: %s", endpoint, zmq_strerror(zmq_errno()));
    if (rc != CDC_OK) {
        zmq_close(socket);
        return rc;
    }
    *socket_p = socket;
    return CDC_OK;
}

/* Close a heartbeat DEALER and its monitor (either may be NULL). */
static void heartbeat_socket_close(void *socket, void *monitor)
{
    if (socket) {
        zmq_socket_monitor(socket, NULL, 0);
        zmq_close(socket);
    }
    if (monitor)
        zmq_close(monitor);
}

/* A heartbeat DEALER for worker w with its monitor (a PAIR receiving its
   DISCONNECTED events, on an inproc name never used before), key its CURVE
   server key, connected to endpoint ("": to none). CDC_OK, or an error with
   nothing left open. */
static int heartbeat_socket_open(cdc_client_t *self, int w, const uint8_t *key,
                                 const char *endpoint, void **socket_p, void **monitor_p)
{
    char name[96];
    void *socket = dealer_new(self->zmq, 16), *monitor = NULL; /* pings to a stopped worker stay few */
    if (!socket)
        return cdc__fail(CDC_ETRANSPORT, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    int rc = curve_apply(self, key, socket, 1);
    if (rc != CDC_OK)
        goto fail;
    snprintf(name, sizeof name, "inproc://cdc-monitor-%p-%d-%u", (void *) self, w,
             atomic_fetch_add(&self->monitor_seq, 1));
    if (zmq_socket_monitor(socket, name, ZMQ_EVENT_DISCONNECTED) != 0 ||
        !(monitor = zmq_socket(self->zmq, ZMQ_PAIR)) || zmq_connect(monitor, name) != 0) {
        rc = cdc__fail(CDC_ETRANSPORT, "monitor %s: %s", endpoint, zmq_strerror(zmq_errno()));
        goto fail;
    }
    int linger = 0;
    zmq_setsockopt(monitor, ZMQ_LINGER, &linger, sizeof linger);
    if (*endpoint && zmq_connect(socket, endpoint) != 0) {
        rc = cdc__fail(CDC_ECONFIG, "connect %s: %s", endpoint, zmq_strerror(zmq_errno()));
        goto fail;
    }
    *socket_p = socket;
    *monitor_p = monitor;
    return CDC_OK;
fail:
    heartbeat_socket_close(socket, monitor);
    return rc;
}

/* Both sockets of worker w (data, heartbeat + monitor), connected to endpoint. */
static int worker_connect(cdc_client_t *self, int w, const char *endpoint)
{
    heartbeat_peer_t *peer = &self->peers[w];
    snprintf(self->endpoints[w], sizeof self->endpoints[w], "%s", endpoint);
    int rc = data_socket_open(self, self->curve_servers[w], endpoint, &self->workers[w].socket);
    if (rc == CDC_OK)
        rc = heartbeat_socket_open(self, w, self->curve_servers[w], endpoint, &peer->socket,
                                   &peer->monitor);
    return rc;
}

static void close_sockets(cdc_client_t *self)
{
    for (int w = 0; w < CDC_MAX_WORKERS; w++) {
        if (self->workers[w].socket)
            zmq_close(self->workers[w].socket);
        heartbeat_socket_close(self->peers[w].socket, self->peers[w].monitor);
    }
    if (self->stop_pipe)
        zmq_close(self->stop_pipe);
    if (self->thread_pipe)
        zmq_close(self->thread_pipe);
}

/* Connect both sockets of every worker named in the comma-separated list
   (with CURVE, servers[w] is worker w's certificate). */
static int connect_workers(cdc_client_t *self, const char *endpoints,
                           const cdc_curve_cert_t *servers)
{
    const char *item = endpoints;
    while (*item) {
        const char *comma = strchr(item, ',');
        size_t len = comma ? (size_t) (comma - item) : strlen(item);
        char endpoint[CDC_CONFIG_STR];
        if (len == 0 || len >= sizeof endpoint || self->count == CDC_MAX_WORKERS)
            return cdc__fail(CDC_ECONFIG, "workers: bad endpoint list '%s'", endpoints);
        memcpy(endpoint, item, len);
        endpoint[len] = '\0';
        int w = self->count;
        if (self->curve)
            memcpy(self->curve_servers[w], servers[w].public_key, CDC_CURVE_KEY_BYTES);
        int rc = worker_connect(self, w, endpoint);
        self->count++; /* its sockets exist now, and close_sockets closes them */
        if (rc != CDC_OK)
            return rc;
        item += len + (comma ? 1 : 0);
    }
    return CDC_OK;
}

/* The heartbeat thread and the pipe that stops it. */
static int heartbeat_start(cdc_client_t *self)
{
    char name[64];
    snprintf(name, sizeof name, "inproc://cdc-heartbeat-stop-%p", (void *) self);
    self->stop_pipe = zmq_socket(self->zmq, ZMQ_PAIR);
    self->thread_pipe = zmq_socket(self->zmq, ZMQ_PAIR);
    if (!self->stop_pipe || !self->thread_pipe || zmq_bind(self->thread_pipe, name) != 0 ||
        zmq_connect(self->stop_pipe, name) != 0)
        return cdc__fail(CDC_ETRANSPORT, "heartbeat pipe: %s", zmq_strerror(zmq_errno()));
    int started = pthread_create(&self->thread, NULL, heartbeat_main, self);
    if (started != 0)
        return cdc__fail(CDC_ENOMEM, "heartbeat thread: %s", strerror(started));
    self->thread_started = 1;
    return CDC_OK;
}

/* Connections come up in the background; wait (bounded) until every worker
   has answered a PING so the first call finds them live. */
static int send_data_ping(void *ctx, int w, uint64_t token);

/* Until every worker answers heartbeats and its data socket is connected
   too (a DEALER of its own, connecting on its own: with ZMQ_IMMEDIATE a
   task sent before it is refused, and the first call would lose that
   shard), or connect_wait_ms. A PING the data socket takes proves it. */
static void wait_for_workers(cdc_client_t *self, int connect_wait_ms)
{
    int64_t deadline = (int64_t) cdc__clock_ms() + connect_wait_ms;
    uint64_t all = cdc__low_bits(self->count);
    uint64_t connected = 0;
    while ((int64_t) cdc__clock_ms() < deadline) {
        uint64_t mask;
        cdc__client_live(self, &mask);
        pthread_mutex_lock(&self->lock); /* the data sockets */
        for (int w = 0; w < self->count; w++)
            if ((mask & (UINT64_C(1) << w)) && !(connected & (UINT64_C(1) << w)) &&
                send_data_ping(self, w, 0) == CDC_OK)
                connected |= UINT64_C(1) << w;
        pthread_mutex_unlock(&self->lock);
        if (mask == all && connected == all)
            break;
        cdc__sleep_ms(2);
    }
    int live = cdc__client_live(self, NULL);
    if (live < self->count)
        CDC_LOG_WARNF("%d of %d workers answered within %d ms", live, self->count,
                      connect_wait_ms);
}

int cdc__client_new(const char *endpoints, int connect_wait_ms, cdc_client_t **client_p)
{
    return cdc__client_new_curve(endpoints, connect_wait_ms, NULL, NULL, client_p);
}

/* Everything a client owns; safe on a half-built one. */
static void client_free(cdc_client_t *self)
{
    if (self->thread_started) {
        zmq_send(self->stop_pipe, "", 0, 0);
        pthread_join(self->thread, NULL);
    }
    cdc__listener_destroy(&self->listener);
    cdc__trust_destroy(&self->trust);
    free(self->trusted);
    if (self->zmq) {
        close_sockets(self);
        zmq_ctx_term(self->zmq);
    }
    /* After the context: libzmq has let go of every weight sent. */
    if (self->slots) {
        cdc__slots_fini(self->slots);
        free(self->slots);
    }
    pthread_mutex_destroy(&self->state_lock);
    pthread_mutex_destroy(&self->lock);
    cdc__curve_cert_clear(&self->curve_client);
    free(self);
}

/* A client with its context and locks and no worker yet; CURVE with
   client_cert's keys (it must hold the secret one) when not NULL. */
static int client_alloc(const cdc_curve_cert_t *client_cert, cdc_client_t **self_p)
{
    if (client_cert && !client_cert->has_secret)
        return cdc__fail(CDC_EINVAL, "CURVE: the client certificate needs its secret key");
    cdc_client_t *self = calloc(1, sizeof *self);
    if (self && !(self->slots = malloc(sizeof *self->slots))) {
        free(self);
        self = NULL;
    }
    if (!self)
        return cdc__fail(CDC_ENOMEM, "client");
    cdc__slots_init(self->slots);
    for (int s = 0; s < 64; s++)
        self->last_sent_to[s] = self->last_answered_by[s] = -1;
    self->degraded_since_us = -1;
    /* A worker remembers the request ids a coordinator's key cancelled, past
       that coordinator's exit (server.c: per principal, so a coordinator's
       connections share them). Ids counted from 1 by every process made a
       later coordinator with the same key reuse ids its predecessor had
       cancelled: the workers dropped those tasks unanswered, and the call
       waited for its timeout (netns suite: 2 s stalls fault-free). So each
       client starts at a random point of a 2^62 range. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t seed = cdc__hash_mix((uint64_t) now.tv_sec * UINT64_C(1000000000) +
                                      (uint64_t) now.tv_nsec,
                                  (uint64_t) getpid() ^ (uint64_t) (uintptr_t) self);
    self->first_request = (seed >> 2) | (UINT64_C(1) << 32);
    self->next_request = self->first_request;
    pthread_mutex_init(&self->lock, NULL);
    pthread_mutex_init(&self->state_lock, NULL);
    atomic_init(&self->count, 0);
    atomic_init(&self->pending, 0);
    atomic_init(&self->restoring, 0);
    atomic_init(&self->monitor_seq, 0);
    if (client_cert) {
        self->curve_client = *client_cert;
        self->curve = 1;
    }
    if (!(self->zmq = zmq_ctx_new())) {
        client_free(self);
        return cdc__fail(CDC_ETRANSPORT, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    }
    if (self->curve)
        zmq_ctx_set(self->zmq, ZMQ_IO_THREADS, 2); /* see curve_apply */
    *self_p = self;
    return CDC_OK;
}

int cdc__client_new_curve(const char *endpoints, int connect_wait_ms,
                          const cdc_curve_cert_t *client_cert,
                          const cdc_curve_cert_t *server_certs, cdc_client_t **client_p)
{
    if (!endpoints || !*endpoints || !client_p)
        return cdc__fail(CDC_EINVAL, "cdc__client_new: no endpoints");
    if (client_cert && !server_certs)
        return cdc__fail(CDC_EINVAL, "CURVE: every worker needs a certificate");
    cdc_client_t *self = NULL;
    int rc = client_alloc(client_cert, &self);
    if (rc == CDC_OK && (rc = connect_workers(self, endpoints, server_certs)) == CDC_OK)
        rc = heartbeat_start(self);
    if (rc != CDC_OK) {
        if (self)
            client_free(self);
        return rc;
    }
    wait_for_workers(self, connect_wait_ms);
    *client_p = self;
    return CDC_OK;
}

void cdc__client_destroy(cdc_client_t **client_p)
{
    if (!client_p || !*client_p)
        return;
    client_free(*client_p);
    *client_p = NULL;
}

/* ---- a worker at a new endpoint -------------------------------------------- */

int cdc__client_move(cdc_client_t *self, int w, const char *endpoint)
{
    if (!self || !endpoint || w < 0 || w >= self->count)
        return cdc__fail(CDC_EINVAL, "cdc__client_move: no worker %d", w);
    if (strlen(endpoint) >= CDC_CURVE_ENDPOINT_MAX)
        return cdc__fail(CDC_EINVAL, "cdc__client_move: endpoint '%s' too long", endpoint);
    uint64_t bit = UINT64_C(1) << w;
    pthread_mutex_lock(&self->state_lock);
    snprintf(self->endpoints[w], sizeof self->endpoints[w], "%s", endpoint);
    self->moved_data |= bit;
    self->moved_heartbeat |= bit;
    pthread_mutex_unlock(&self->state_lock);
    CDC_LOG_INFOF("worker %d: a new process at %s", w, endpoint);
    return CDC_OK;
}

/* The moves that bits in *pending (state_lock) ask for: the bits are taken
   and the workers' endpoints and keys copied (discovery may give an entry
   another key). Returns the bits. */
static uint64_t moves_take(cdc_client_t *self, uint64_t *pending,
                           char endpoints[][CDC_CURVE_ENDPOINT_MAX],
                           uint8_t keys[][CDC_CURVE_KEY_BYTES])
{
    pthread_mutex_lock(&self->state_lock);
    uint64_t moved = *pending;
    *pending = 0;
    for (int w = 0; w < self->count; w++)
        if (moved & (UINT64_C(1) << w)) {
            memcpy(endpoints[w], self->endpoints[w], sizeof endpoints[w]);
            memcpy(keys[w], self->curve_servers[w], sizeof keys[w]);
        }
    pthread_mutex_unlock(&self->state_lock);
    return moved;
}

/* A move that could not be made now (no socket: out of descriptors) is
   tried again at the next chance; the old socket is kept meanwhile. */
static void move_retry(cdc_client_t *self, uint64_t *pending, int w)
{
    CDC_LOG_WARNF("worker %d: new endpoint not taken yet: %s", w, cdc_last_error());
    pthread_mutex_lock(&self->state_lock);
    *pending |= UINT64_C(1) << w;
    pthread_mutex_unlock(&self->state_lock);
}

/* Under the call lock: a moved worker's data socket is replaced by one
   connected to its new endpoint. Closing the old one (ZMQ_LINGER 0: at
   once) drops whatever it still queued for the old process, or received
   from it; none of that can reach the new one. The new process holds no
   weights, and no ack from the old one counts. */
static void data_moves(cdc_client_t *self)
{
    char endpoints[CDC_MAX_WORKERS][CDC_CURVE_ENDPOINT_MAX];
    uint8_t keys[CDC_MAX_WORKERS][CDC_CURVE_KEY_BYTES];
    uint64_t moved = moves_take(self, &self->moved_data, endpoints, keys);
    for (int w = 0; moved; w++, moved >>= 1) {
        void *socket;
        if (!(moved & 1))
            continue;
        if (data_socket_open(self, keys[w], endpoints[w], &socket) != CDC_OK) {
            move_retry(self, &self->moved_data, w);
            continue;
        }
        zmq_close(self->workers[w].socket);
        self->workers[w].socket = socket;
        cdc__slots_new_process(self->slots, w);
    }
}

/* The heartbeat thread: a moved worker's heartbeat socket and monitor are
   replaced likewise; the worker is dead (its process is) until the new one
   answers. Returns whether a socket changed (the poll set must be redone). */
static int heartbeat_moves(cdc_client_t *self, int64_t now)
{
    char endpoints[CDC_MAX_WORKERS][CDC_CURVE_ENDPOINT_MAX];
    uint8_t keys[CDC_MAX_WORKERS][CDC_CURVE_KEY_BYTES];
    uint64_t moved = moves_take(self, &self->moved_heartbeat, endpoints, keys);
    int changed = 0;
    for (int w = 0; moved; w++, moved >>= 1) {
        heartbeat_peer_t *peer = &self->peers[w];
        void *socket, *monitor;
        if (!(moved & 1))
            continue;
        if (heartbeat_socket_open(self, w, keys[w], endpoints[w], &socket, &monitor) != CDC_OK) {
            move_retry(self, &self->moved_heartbeat, w);
            continue;
        }
        heartbeat_socket_close(peer->socket, peer->monitor);
        peer->socket = socket;
        peer->monitor = monitor;
        peer->outstanding = 0;
        peer->next_ping = now; /* PING the new process at once */
        set_live(self, w, 0, 0, "a new process");
        changed = 1;
    }
    return changed;
}

/* ---- discovery ------------------------------------------------------------ */

/* A beacon proves nothing: anyone on the LAN can replay a trusted worker's
   beacon with its own address, or send beacons of random keys; only the
   CURVE handshake proves a key. So the table is guarded by what costs
   nothing to check (measured before: a replay took a planned slot that
   never turned live, 70 replayed ports filled the table, a flood of random
   keys scanned the certificate directory per beacon):
   - one endpoint per key: a key already in the table at another endpoint
     moves there only once its entry has not been live for longer than the
     death verdict (CDC_HEARTBEAT_DEAD_MS); a replay of a live worker's
     beacon elsewhere is ignored;
   - an entry that never answered a PING is not planned (cdc__client_admitted)
     and is set free after DISCOVERY_NEVER_LIVE_MS, its sockets replaced by
     unconnected ones (no more connection attempts); a new key reuses a free
     entry, and a full table the never-live entry admitted longest ago, in
     place (the slot tables are indexed by worker);
   - trusted keys are looked up in memory (cdc__trust_find); a pass reads at
     most DISCOVERY_BEACONS_PER_PASS beacons, drops the rest unread, and the
     listener then rests for DISCOVERY_REST_MS (a flood costs a pass per
     rest, not a heartbeat loop per beacon); each refusal is logged once. */

/* Log a refusal once per (endpoint, reason) in bounded memory: once
   DISCOVERY_REFUSALS are remembered, new ones go unlogged until the memory
   is cleared, at most once per DISCOVERY_REFUSALS_RESET_MS. */
static void discovery_refuse(cdc_client_t *self, const char *endpoint, const char *reason,
                             const char *detail, int64_t now)
{
    uint64_t h = cdc__hash_bytes(endpoint, strlen(endpoint), 0);
    h = cdc__hash_bytes(reason, strlen(reason), h);
    for (int i = 0; i < self->refused_count; i++)
        if (self->refused[i] == h)
            return;
    if (self->refused_count == DISCOVERY_REFUSALS) {
        if (now - self->refused_reset_ms < DISCOVERY_REFUSALS_RESET_MS)
            return;
        self->refused_count = 0;
    }
    if (self->refused_count == 0)
        self->refused_reset_ms = now;
    self->refused[self->refused_count++] = h;
    CDC_LOG_WARNF("discovery: %s refused: %s%s%s (logged once%s)", endpoint, reason,
                  detail ? ": " : "", detail ? detail : "",
                  self->refused_count == DISCOVERY_REFUSALS
                      ? "; further refusals are not logged for a minute"
                      : "");
}

/* The table entry (counted or pending) at endpoint text, or (by_key)
   holding key text; -1. */
static int entry_of(const cdc_client_t *self, const char *text, int by_key)
{
    for (int w = 0; w < self->count + self->pending; w++)
        if (strcmp(by_key ? self->entry_keys[w] : self->endpoints[w], text) == 0)
            return w;
    return -1;
}

/* Entry w (counted) to the key of cert at endpoint, or (cert NULL) free with
   no connection: its sockets are replaced as for a moved worker
   (cdc__client_move), keeping its index. */
static void entry_retarget(cdc_client_t *self, int w, const char *endpoint,
                           const cdc_curve_cert_t *cert, int64_t now)
{
    uint64_t bit = UINT64_C(1) << w;
    pthread_mutex_lock(&self->state_lock);
    snprintf(self->endpoints[w], sizeof self->endpoints[w], "%s", endpoint);
    if (cert)
        memcpy(self->curve_servers[w], cert->public_key, CDC_CURVE_KEY_BYTES);
    self->moved_data |= bit;
    self->moved_heartbeat |= bit;
    pthread_mutex_unlock(&self->state_lock);
    snprintf(self->entry_keys[w], sizeof self->entry_keys[w], "%s",
             cert ? cert->public_txt : "");
    self->vacant = cert ? self->vacant & ~bit : self->vacant | bit;
    self->entry_since[w] = now;
}

/* key at endpoint's host (tcp://HOST:PORT less :PORT), hashed: an address
   that sends beacons on many ports is one host. */
static uint64_t key_host(const char *key, const char *endpoint)
{
    const char *colon = strrchr(endpoint, ':');
    size_t len = colon ? (size_t) (colon - endpoint) : strlen(endpoint);
    return cdc__hash_bytes(endpoint, len, cdc__hash_bytes(key, strlen(key), 1));
}

/* Remember that key never answered from endpoint's host, so beacons from
   there with it are refused for DISCOVERY_FAILED_MS: without this, a
   replayer sending a key on many ports (or often) took the entry back from
   each new endpoint and the real worker's two beacons a second never won. */
static void failed_note(cdc_client_t *self, const char *key, const char *endpoint, int64_t now)
{
    self->failed[self->failed_next] = key_host(key, endpoint);
    self->failed_ms[self->failed_next] = now;
    self->failed_next = (self->failed_next + 1) % DISCOVERY_FAILED;
}

static int failed_recently(const cdc_client_t *self, const char *key, const char *endpoint,
                           int64_t now)
{
    uint64_t h = key_host(key, endpoint);
    for (int i = 0; i < DISCOVERY_FAILED; i++)
        if (self->failed[i] == h && self->failed_ms[i] > 0 &&
            now - self->failed_ms[i] < DISCOVERY_FAILED_MS)
            return 1;
    return 0;
}

/* A trusted key at entry w heard from another endpoint: the entry moves
   there once it has not been live for longer than the death verdict, and
   not to a host that never answered with this key. */
static void discovery_move(cdc_client_t *self, int w, const char *endpoint, int64_t now)
{
    if (w >= self->count)
        return; /* pending: counted first */
    int live = (self->live & (UINT64_C(1) << w)) != 0;
    int answered_here = live || (self->peers[w].ever_live &&
                                 self->dead_since[w] >= self->entry_since[w]);
    int64_t since = answered_here ? self->dead_since[w] : self->entry_since[w];
    char detail[CDC_CURVE_ENDPOINT_MAX + 48];
    snprintf(detail, sizeof detail, "worker %d holds it at %s", w, self->endpoints[w]);
    if (live || now - since <= CDC_HEARTBEAT_DEAD_MS) {
        discovery_refuse(self, endpoint, "its key is live at another endpoint (or was "
                                         "within the death verdict)", detail, now);
        return;
    }
    if (!answered_here)
        failed_note(self, self->entry_keys[w], self->endpoints[w], now);
    if (failed_recently(self, self->entry_keys[w], endpoint, now)) {
        discovery_refuse(self, endpoint, "its key never answered from this host", detail, now);
        return;
    }
    self->entry_since[w] = now;
    cdc__client_move(self, w, endpoint);
}

static void close_worker(cdc_client_t *self, int w)
{
    if (self->workers[w].socket)
        zmq_close(self->workers[w].socket);
    heartbeat_socket_close(self->peers[w].socket, self->peers[w].monitor);
    memset(&self->workers[w], 0, sizeof self->workers[w]);
    memset(&self->peers[w], 0, sizeof self->peers[w]);
}

/* Worker number count's sockets, connected to endpoint; not yet counted
   (discovery_publish does that). */
static int worker_prepare(cdc_client_t *self, const char *endpoint, const cdc_curve_cert_t *cert)
{
    int w = self->count;
    if (w == CDC_MAX_WORKERS)
        return cdc__fail(CDC_ECONFIG, "discovery: %s not added: %d workers already",
                         endpoint, CDC_MAX_WORKERS);
    memcpy(self->curve_servers[w], cert->public_key, CDC_CURVE_KEY_BYTES);
    int rc = worker_connect(self, w, endpoint);
    if (rc != CDC_OK) {
        close_worker(self, w);
        return rc;
    }
    self->peers[w].next_ping = 0; /* PINGed at once once counted */
    return CDC_OK;
}

/* Where a new key goes: the lowest free entry, else a new one, else (a full
   table) the never-live entry admitted longest ago; -1 when every entry
   has answered a PING. */
static int entry_for_new(const cdc_client_t *self)
{
    for (int w = 0; w < self->count; w++)
        if (self->vacant & (UINT64_C(1) << w))
            return w;
    if (self->count < CDC_MAX_WORKERS)
        return self->count;
    int oldest = -1;
    for (int w = 0; w < self->count; w++)
        if (!self->peers[w].ever_live &&
            (oldest < 0 || self->entry_since[w] < self->entry_since[oldest]))
            oldest = w;
    return oldest;
}

/* A trusted key not in the table: an entry reused in place, or a new one
   (sockets now, counted by discovery_publish; one at a time). */
static void discovery_add(cdc_client_t *self, const cdc_discovered_t *found,
                          const cdc_curve_cert_t *cert, int64_t now)
{
    if (failed_recently(self, cert->public_txt, found->endpoint, now)) {
        discovery_refuse(self, found->endpoint, "its key never answered from this host", NULL,
                         now);
        return;
    }
    int w = entry_for_new(self);
    if (w < 0) {
        discovery_refuse(self, found->endpoint, "not added",
                         "every entry of the table has answered PINGs", now);
        return;
    }
    if (w < self->count) {
        if (!(self->vacant & (UINT64_C(1) << w))) {
            CDC_LOG_WARNF("discovery: worker %d (%s) never answered; the full table gives "
                          "its entry to %s", w, self->endpoints[w], found->endpoint);
            failed_note(self, self->entry_keys[w], self->endpoints[w], now);
        }
        entry_retarget(self, w, found->endpoint, cert, now);
        CDC_LOG_INFOF("discovery: worker %d is %s", w, found->endpoint);
        return;
    }
    if (self->pending)
        return; /* the next beacon comes in 500 ms */
    if (worker_prepare(self, found->endpoint, cert) != CDC_OK) {
        discovery_refuse(self, found->endpoint, "not added", cdc_last_error(), now);
        return;
    }
    snprintf(self->entry_keys[w], sizeof self->entry_keys[w], "%s", cert->public_txt);
    self->entry_since[w] = now;
    pthread_mutex_lock(&self->state_lock);
    self->pending = 1;
    pthread_mutex_unlock(&self->state_lock);
}

/* One beacon: a known endpoint costs a table scan; another protocol
   version or an untrusted key (a lookup in memory) is refused; a key in the
   table may move its entry; a new trusted key gets one. */
static void discovery_take(cdc_client_t *self, const cdc_discovered_t *found, int64_t now)
{
    if (entry_of(self, found->endpoint, 0) >= 0)
        return;
    if (found->version != CDC_PROTO_VERSION) {
        char detail[80];
        snprintf(detail, sizeof detail, "it speaks protocol version %d, this coordinator %d",
                 found->version, CDC_PROTO_VERSION);
        discovery_refuse(self, found->endpoint, "another protocol version", detail, now);
        return;
    }
    cdc_curve_cert_t cert;
    if (cdc__trust_find(self->trust, found->public_txt, now, &cert) != CDC_OK) {
        discovery_refuse(self, found->endpoint, "not trusted", cdc_last_error(), now);
        return;
    }
    int w = entry_of(self, found->public_txt, 1);
    if (w >= 0)
        discovery_move(self, w, found->endpoint, now);
    else
        discovery_add(self, found, &cert, now);
}

/* Entries that never answered a PING within DISCOVERY_NEVER_LIVE_MS (a
   replayed beacon, a worker that cannot reach this coordinator): their
   sockets stop connecting and the entry is free for the next key. */
static void discovery_age(cdc_client_t *self, int64_t now)
{
    for (int w = 0; w < self->count; w++)
        if (!(self->vacant & (UINT64_C(1) << w)) && !self->peers[w].ever_live &&
            now - self->entry_since[w] > DISCOVERY_NEVER_LIVE_MS) {
            CDC_LOG_WARNF("discovery: worker %d (%s) never answered within %d ms: its entry "
                          "is free", w, self->endpoints[w], DISCOVERY_NEVER_LIVE_MS);
            failed_note(self, self->entry_keys[w], self->endpoints[w], now);
            entry_retarget(self, w, "", NULL, now);
        }
}

/* Count a prepared worker: calls and the heartbeat thread see it from now.
   The caller holds self->lock (no call runs) or no thread but its own runs
   yet. */
static void discovery_publish(cdc_client_t *self)
{
    pthread_mutex_lock(&self->state_lock);
    int added = self->pending;
    if (added) {
        /* Its never-live time counts from its first PING (the heartbeat
           thread reads it once it sees the new count). */
        self->entry_since[self->count] = (int64_t) cdc__clock_ms();
        self->count++;
        self->pending = 0;
    }
    pthread_mutex_unlock(&self->state_lock);
    if (added)
        CDC_LOG_INFOF("discovery: worker %d is %s", self->count - 1,
                      self->endpoints[self->count - 1]);
}

/* Under self->lock, with discovery and no homes given (cdc__client_set_homes):
   the plan's slots go to the entries that have answered a PING, in index
   order, so a never-live entry below them (a replayed beacon heard first)
   is home of no slot; the others come after (cdc__slots_set_homes). */
static void discovery_homes(cdc_client_t *self)
{
    if (!self->listener || self->homes_given)
        return;
    uint64_t answered = 0;
    pthread_mutex_lock(&self->state_lock);
    for (int w = 0; w < self->count; w++)
        if (self->peers[w].ever_live)
            answered |= UINT64_C(1) << w;
    pthread_mutex_unlock(&self->state_lock);
    if (answered == self->homes_answered)
        return;
    self->homes_answered = answered;
    int homes[CDC_MAX_WORKERS], k = 0;
    for (int w = 0; w < self->count; w++)
        if (answered & (UINT64_C(1) << w))
            homes[k++] = w;
    if (cdc__slots_set_homes(self->slots, homes, k, self->count) == CDC_OK)
        atomic_store(&self->restoring, 1); /* the new homes' weights, soon */
}

/* Heartbeat thread: at most DISCOVERY_BEACONS_PER_PASS beacons, the rest
   dropped unread, then the listener is left alone for DISCOVERY_REST_MS
   (a beacon waits at most that long); the ageing; a worker admitted gets
   its sockets here and is counted between calls (a call owns the worker
   count and the data sockets): by the next call, or here when no call
   runs. */
static void discovery_poll(cdc_client_t *self, int64_t now)
{
    cdc_discovered_t found;
    int heard = 0;
    while (now >= self->discovery_rest_ms && heard < DISCOVERY_BEACONS_PER_PASS &&
           cdc__listener_next(self->listener, 0, &found) == CDC_OK) {
        heard++;
        discovery_take(self, &found, now);
    }
    if (heard == DISCOVERY_BEACONS_PER_PASS) {
        int dropped = cdc__listener_drain(self->listener, DISCOVERY_DRAIN_MAX);
        if (dropped > 0 && self->beacons_dropped == 0)
            CDC_LOG_WARNF("discovery: more than %d beacons in %d ms: the rest dropped unread "
                          "(logged once)", DISCOVERY_BEACONS_PER_PASS, DISCOVERY_REST_MS);
        self->beacons_dropped += (uint64_t) dropped;
    }
    if (heard > 0)
        self->discovery_rest_ms = now + DISCOVERY_REST_MS;
    if (now >= self->discovery_age_ms) {
        discovery_age(self, now);
        self->discovery_age_ms = now + DISCOVERY_AGE_PASS_MS;
    }
    if (self->pending && pthread_mutex_trylock(&self->lock) == 0) {
        discovery_publish(self);
        pthread_mutex_unlock(&self->lock);
    }
}

/* The first set: beacons for up to wait_ms, ending sooner once a worker was
   heard and no new one for two beacon periods (every worker has beaconed
   by then). */
static void discovery_first_set(cdc_client_t *self, int wait_ms)
{
    int64_t deadline = (int64_t) cdc__clock_ms() + wait_ms, last_new = -1;
    const int64_t settle = 2 * CDC_DISCOVERY_INTERVAL_MS + 100;
    int64_t window = 0;
    for (int heard = 0;;) {
        int64_t now = (int64_t) cdc__clock_ms();
        if (now >= deadline || (last_new >= 0 && now - last_new >= settle))
            break;
        cdc_discovered_t found;
        int slice = deadline - now < 50 ? (int) (deadline - now) : 50;
        if (now - window >= DISCOVERY_REST_MS) {
            window = now;
            heard = 0;
        } else if (heard == DISCOVERY_BEACONS_PER_PASS) { /* a flood: as the thread does */
            cdc__listener_drain(self->listener, DISCOVERY_DRAIN_MAX);
            cdc__sleep_ms(DISCOVERY_REST_MS);
            continue;
        }
        if (cdc__listener_next(self->listener, slice, &found) != CDC_OK)
            continue;
        heard++;
        int before = self->count;
        discovery_take(self, &found, now);
        discovery_publish(self); /* no other thread yet */
        if (self->count != before)
            last_new = (int64_t) cdc__clock_ms();
    }
    if (self->count == 0)
        CDC_LOG_WARNF("discovery: no trusted worker announced itself within %d ms; calls "
                      "run locally until one does", wait_ms);
}

int cdc__client_new_discover(const cdc_discovery_where_t *where, int wait_ms,
                             int connect_wait_ms, const cdc_curve_cert_t *client_cert,
                             const char *trusted, cdc_client_t **client_p)
{
    if (!where || !client_cert || !trusted || !*trusted || !client_p)
        return cdc__fail(CDC_EINVAL, "discovery needs CURVE: a client certificate and the "
                                     "trusted worker certificates");
    cdc_client_t *self = NULL;
    int rc = client_alloc(client_cert, &self);
    if (rc != CDC_OK)
        return rc;
    if (!(self->trusted = strdup(trusted)))
        rc = cdc__fail(CDC_ENOMEM, "client");
    if (rc == CDC_OK)
        rc = cdc__trust_new(trusted, &self->trust);
    if (rc == CDC_OK)
        rc = cdc__listener_new(where, &self->listener);
    if (rc == CDC_OK) {
        discovery_first_set(self, wait_ms);
        /* No PING before the heartbeat thread: the first set's never-live
           time starts now (it aged real workers heard early). */
        for (int w = 0; w < self->count; w++)
            self->entry_since[w] = (int64_t) cdc__clock_ms();
        rc = heartbeat_start(self);
    }
    if (rc != CDC_OK) {
        client_free(self);
        return rc;
    }
    wait_for_workers(self, connect_wait_ms);
    *client_p = self;
    return CDC_OK;
}

int cdc__client_admitted(cdc_client_t *self)
{
    if (!self)
        return 0;
    if (!self->listener)
        return self->count;
    pthread_mutex_lock(&self->state_lock);
    int admitted = 0;
    for (int w = 0; w < self->count; w++)
        admitted += self->peers[w].ever_live != 0;
    pthread_mutex_unlock(&self->state_lock);
    return admitted;
}

int cdc__client_planned(cdc_client_t *self, uint64_t *mask)
{
    int64_t now = (int64_t) cdc__clock_ms();
    pthread_mutex_lock(&self->state_lock);
    uint64_t planned = self->live;
    for (int w = 0; w < self->count; w++)
        if ((self->silent & (UINT64_C(1) << w)) && now - self->dead_since[w] < PLAN_GRACE_MS)
            planned |= UINT64_C(1) << w;
    pthread_mutex_unlock(&self->state_lock);
    if (mask)
        *mask = planned;
    return cdc__popcount64(planned);
}

int cdc__client_live(cdc_client_t *self, uint64_t *mask)
{
    pthread_mutex_lock(&self->state_lock);
    uint64_t live = self->live;
    pthread_mutex_unlock(&self->state_lock);
    if (mask)
        *mask = live;
    return cdc__popcount64(live);
}

int cdc__client_status(cdc_client_t *self, cdc_worker_status_t *out, int max)
{
    pthread_mutex_lock(&self->state_lock);
    int count = self->count < max ? self->count : max;
    for (int w = 0; w < count; w++) {
        const heartbeat_peer_t *peer = &self->peers[w];
        cdc_worker_status_t *o = &out[w];
        memset(o, 0, sizeof *o);
        snprintf(o->endpoint, sizeof o->endpoint, "%s", self->endpoints[w]);
        o->live = (self->live & (UINT64_C(1) << w)) != 0;
        o->rtt_ms = peer->ever_live ? peer->rtt_ms : -1.0;
        o->version = peer->ever_live ? CDC_PROTO_VERSION : 0;
        o->has_status = peer->has_status;
        o->status = peer->status;
    }
    pthread_mutex_unlock(&self->state_lock);
    return count;
}

int cdc__client_worker_count(const cdc_client_t *self)
{
    return self ? self->count : 0;
}

void cdc__client_counters(cdc_client_t *self, cdc_remote_counters_t *counters)
{
    pthread_mutex_lock(&self->lock);
    *counters = self->counters;
    pthread_mutex_unlock(&self->lock);
    pthread_mutex_lock(&self->state_lock);
    counters->heartbeats_missed = self->heartbeats_missed;
    counters->worker_deaths = self->worker_deaths;
    counters->worker_rejoins = self->worker_rejoins;
    counters->worker_goodbyes = self->worker_goodbyes;
    counters->invalid_replies += self->heartbeat_invalid;
    counters->live_mask = self->live;
    pthread_mutex_unlock(&self->state_lock);
}

/* WEIGHTS for key to worker w. With a hold (the task's a_hold/bt_hold, a
   manifest's) the payload goes without a copy: libzmq reads data after this
   returns, each chunk holding a reference to hold (cdc__wire_send_held);
   NULL copies it. The caller remembers it as sent (slots.h). */
static int send_weights(cdc_client_t *self, int w, uint64_t key, int64_t rows, int64_t k,
                        const float *data, cdc_hold_t *hold)
{
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_WEIGHTS);
    h.a_key = key;
    h.rows = rows;
    h.k = k;
    cdc_frame_t payload = {data, (size_t) rows * (size_t) k * sizeof(float)};
    int rc = cdc__wire_send_held(self->workers[w].socket, NULL, &h, &payload, &hold, 1,
                                 ZMQ_DONTWAIT);
    if (rc != CDC_OK)
        return rc;
    self->counters.weights_sent++;
    self->counters.weight_bytes += payload.size;
    self->counters.bytes_out += payload.size;
    return CDC_OK;
}

/* Make sure worker w holds the keyed operand, sending it if not. */
static int ensure_weights(cdc_client_t *self, int w, uint64_t key, int64_t rows, int64_t k,
                          const float *data, cdc_hold_t *hold)
{
    if (cdc__slots_has(self->slots, w, key))
        return CDC_OK;
    int rc = send_weights(self, w, key, rows, k, data, hold);
    if (rc == CDC_OK)
        cdc__slots_sent(self->slots, w, key);
    return rc;
}

/* The restore pass's callbacks (slots.h): its sends count as background. */
static int restore_send_weights(void *ctx, int w, const cdc_slot_weight_t *weight)
{
    return send_weights(ctx, w, weight->key, weight->rows, weight->k, weight->data,
                        weight->hold);
}

/* A barrier PING on client ctx's data socket to worker w, behind the
   WEIGHTS sent before it: the worker answers it once those are cached
   (protocol.h), so its PONG (request id = token) proves they arrived and
   bounds what is in flight. Token 0 acknowledges nothing: a PING that only
   proves the connection (CDC_OK: the socket took it, so it is connected).
   ctx is the client (void: it is also the restore pass's send_ping, slots.h). */
static int send_data_ping(void *ctx, int w, uint64_t token)
{
    cdc_client_t *self = ctx;
    cdc_msg_header_t ping;
    cdc__msg_header_init(&ping, CDC_MSG_PING);
    ping.request_id = token;
    ping.shard = CDC_PING_BARRIER;
    return cdc__wire_send(self->workers[w].socket, NULL, &ping, NULL, 0, ZMQ_DONTWAIT);
}

/* A task's operands' wire keys (0: sent inline), computed once per call. */
typedef struct {
    uint64_t a, bt;
} task_keys_t;

static task_keys_t task_keys(const cdc_shard_task_t *task, int needed)
{
    task_keys_t keys = {0, 0};
    if (task->a_key)
        keys.a = wire_key(task->a_key, task->shard, needed, task->a_rows, task->k, task->a);
    if (task->kind == CDC_TASK_GEMM && task->bt_key)
        keys.bt = wire_key(task->bt_key, task->shard, needed, task->cols, task->k, task->bt);
    return keys;
}

static int send_task(cdc_client_t *self, int w, const cdc_shard_task_t *task,
                     task_keys_t keys, uint64_t request_id)
{
    cdc_msg_header_t h;
    int is_conv = task->kind == CDC_TASK_CONV;
    cdc__msg_header_init(&h, is_conv ? CDC_MSG_TASK_CONV : CDC_MSG_TASK_GEMM);
    h.request_id = request_id;
    h.shard = task->shard;
    h.rows = task->a_rows;
    h.k = task->k;
    h.cols = task->cols;
    if (cdc_task_parts(task) > 1) { /* streamed: the lead rows first, then parts */
        h.lead_rows = task->lead_rows;
        h.part_rows = task->part_rows;
    }
    cdc_frame_t payloads[2] = {{NULL, 0}, {NULL, 0}};
    int rc;
    if (keys.a) {
        h.a_key = keys.a;
        if ((rc = ensure_weights(self, w, h.a_key, task->a_rows, task->k, task->a,
                                 task->a_hold)))
            return rc;
    } else {
        payloads[0] = (cdc_frame_t){task->a, (size_t) task->a_rows * (size_t) task->k * 4};
    }
    if (is_conv) {
        const cdc_conv_geometry_t *g = task->geometry;
        h.batch = task->batch;
        h.geometry = *g;
        payloads[1] = (cdc_frame_t){
            task->input, (size_t) task->batch * (size_t) (g->channels * g->h * g->w) * 4};
    } else if (keys.bt) {
        h.bt_key = keys.bt;
        if ((rc = ensure_weights(self, w, h.bt_key, task->cols, task->k, task->bt,
                                 task->bt_hold)))
            return rc;
    } else {
        payloads[1] = (cdc_frame_t){task->bt, (size_t) task->cols * (size_t) task->k * 4};
    }
    rc = cdc__wire_send(self->workers[w].socket, NULL, &h, payloads, 2, ZMQ_DONTWAIT);
    if (rc != CDC_OK)
        return rc;
    self->counters.tasks_sent++;
    self->counters.bytes_out += payloads[0].size + payloads[1].size;
    return CDC_OK;
}

/* One call in flight: its tasks, where each went and what came back. */
typedef struct {
    cdc_shard_task_t *tasks;
    int count, n, needed;    /* n: the code's data shards (keys, shard < n);
                                needed: the results that suffice          */
    const cdc_call_goal_t *goal; /* streamed tasks: what suffices instead  */
    uint64_t request_id;
    double started_ms;       /* response times for the report             */
    int64_t deadline;        /* ms: timeout_ms after the call began       */
    int64_t wait_deadline;   /* ms: wait_ms after needed results, or -1   */
    int wait_ms, timeout_ms;
    task_state_t state[64];
    task_keys_t keys[64];    /* task t's wire keys                         */
    int worker_of[64];       /* placement: the worker task t went to       */
    int retries[64];         /* MISS re-sends of task t                    */
    uint64_t bytes_out[64];  /* payload bytes its dispatch sent (weights in) */
    int pending, done;
    uint64_t cover_mask;     /* data shards some task covers               */
    uint64_t covered;        /* those with a result in                     */
    uint64_t *arrived;       /* bit t: tasks[t].result came back whole     */
} client_call_t;

static void call_begin(cdc_client_t *self, client_call_t *call, cdc_shard_task_t *tasks,
                       int count, int n, int needed, const cdc_call_goal_t *goal,
                       int wait_ms, int timeout_ms, uint64_t *arrived)
{
    memset(call, 0, sizeof *call);
    int64_t started = (int64_t) cdc__clock_ms();
    call->started_ms = cdc__clock_ms();
    call->deadline = started + timeout_ms;
    call->wait_deadline = -1;
    call->wait_ms = wait_ms;
    call->timeout_ms = timeout_ms;
    call->request_id = ++self->next_request;
    call->tasks = tasks;
    call->count = count;
    call->n = n;
    call->needed = needed;
    call->goal = goal;
    call->arrived = arrived;
    for (int t = 0; t < count; t++) {
        tasks[t].parts_in = 0;
        call->keys[t] = task_keys(&tasks[t], n);
        if (tasks[t].cover >= 0 && tasks[t].cover < 64)
            call->cover_mask |= UINT64_C(1) << tasks[t].cover;
    }
}

/* Slots (placement.h): shard s on its slot's home when it is live and holds
   slot s's weights; else on another ready worker (a spare, or the slot's
   previous home after the homes moved); else an erasure while the
   background restores the home, unless the call could not be decoded
   without it. The homes are read once here: cdc__client_set_homes waits for
   the call lock, so a call in flight keeps its map. */
static void call_place(cdc_client_t *self, client_call_t *call)
{
    uint64_t live, ready[CDC_MAX_WORKERS];
    int shards[64];
    cdc__client_live(self, &live);
    cdc__slots_ready(self->slots, ready);
    for (int t = 0; t < call->count; t++)
        shards[t] = call->tasks[t].shard;
    cdc__placement_slots(shards, call->count, self->count, self->slots->home_of_slot, live,
                         ready, call->count - call->needed, call->worker_of);
    cdc__slots_placed(self->slots, shards, call->worker_of, call->count);
}

/* Remember the weights each slot used (slots.h), so a worker that returns
   empty can be sent them between calls. */
static void call_note_weights(cdc_client_t *self, const client_call_t *call)
{
    for (int t = 0; t < call->count; t++) {
        const cdc_shard_task_t *task = &call->tasks[t];
        int served_by = call->state[t] != TASK_IDLE ? call->worker_of[t] : -1;
        if (call->keys[t].a) {
            cdc_slot_weight_t weight = {call->keys[t].a, task->a_rows, task->k, task->a,
                                        task->a_hold, 0};
            cdc__slots_note(self->slots, task->shard, &weight, served_by);
        }
        if (call->keys[t].bt) {
            cdc_slot_weight_t weight = {call->keys[t].bt, task->cols, task->k, task->bt,
                                        task->bt_hold, 0};
            cdc__slots_note(self->slots, task->shard, &weight, served_by);
        }
    }
}

/* Shard s of the call went to (or came back from) worker w: the record
   cdc__client_last_call reads. */
static void call_note_worker(int *worker_of_shard, int s, int w)
{
    if (s >= 0 && s < 64)
        worker_of_shard[s] = w;
}

/* Send every placed task whose worker is live now; a planned worker that is
   not live gets nothing (its shard is an erasure). */
static void call_dispatch(cdc_client_t *self, client_call_t *call)
{
    uint64_t live_mask;
    cdc__client_live(self, &live_mask);
    for (int s = 0; s < 64; s++)
        self->last_sent_to[s] = self->last_answered_by[s] = -1;
    for (int t = 0; t < call->count; t++) {
        int w = call->worker_of[t];
        call->state[t] = TASK_IDLE;
        call->tasks[t].dispatched = 0;
        if (w < 0 || !(live_mask & (UINT64_C(1) << w))) {
            self->counters.dead_skipped++;
            continue;
        }
        uint64_t before = self->counters.bytes_out;
        int sent = send_task(self, w, &call->tasks[t], call->keys[t], call->request_id);
        call->bytes_out[t] = self->counters.bytes_out - before;
        if (sent == CDC_OK) {
            call->state[t] = TASK_PENDING;
            call->tasks[t].dispatched = 1;
            call->pending++;
            call_note_worker(self->last_sent_to, call->tasks[t].shard, w);
        } else {
            self->counters.send_failures++;
            if (sent != CDC_ETIMEDOUT)
                CDC_LOG_WARNF("shard %d not sent: %s", call->tasks[t].shard, cdc_last_error());
        }
    }
    call_note_weights(self, call);
}

/* Data still due: pending data shards; of streamed tasks, pending lead
   rows (their parts after the lead are parity). */
static int call_data_pending(const client_call_t *call)
{
    int pending = 0;
    for (int t = 0; t < call->count; t++)
        if (call->state[t] == TASK_PENDING)
            pending += call->goal ? !(call->tasks[t].parts_in & 1)
                                  : call->tasks[t].shard < call->n;
    return pending;
}

/* Whether the results in suffice: needed of them, or the goal's say. */
static int call_enough(const client_call_t *call)
{
    return call->goal ? call->goal->enough(call->goal->ctx, call->tasks, call->count)
                      : call->done >= call->needed;
}

/* Whether the call stops waiting at now: every covered data shard is in
   (first copy wins under replication); or the results in suffice and
   either no data is pending or wait_ms have passed since; or the deadline
   has passed (counted as a timeout). */
static int call_settled(cdc_client_t *self, client_call_t *call, int64_t now)
{
    if (!call->goal && call->cover_mask && call->covered == call->cover_mask)
        return 1; /* (a goal may want more: a parity to check with) */
    if (call_enough(call)) {
        if (call_data_pending(call) == 0)
            return 1;
        if (call->wait_deadline < 0)
            call->wait_deadline = now + call->wait_ms;
        if (now >= call->wait_deadline)
            return 1;
    }
    if (now >= call->deadline) {
        self->counters.timeouts++;
        CDC_LOG_INFOF("request %llu: %d of %d results after %d ms; giving up on the rest",
                      (unsigned long long) call->request_id, call->done, call->count,
                      call->timeout_ms);
        for (int t = 0; t < call->count; t++)
            if (call->state[t] == TASK_PENDING)
                CDC_LOG_INFOF("request %llu: task %d (shard %d) on worker %d: parts in 0x%x "
                              "of %d, %d MISS re-sends",
                              (unsigned long long) call->request_id, t, call->tasks[t].shard,
                              call->worker_of[t], (unsigned) call->tasks[t].parts_in,
                              cdc_task_parts(&call->tasks[t]), call->retries[t]);
        return 1;
    }
    return 0;
}

/* When a waiting call next wakes: the nearer deadline, but at least every
   LIVENESS_SLICE_MS, since a worker that died since dispatch will not answer
   and its task is given up at once. */
static int64_t call_next_wake(const client_call_t *call, int64_t now)
{
    int64_t until = call->wait_deadline >= 0 && call->wait_deadline < call->deadline
                        ? call->wait_deadline
                        : call->deadline;
    return until > now + LIVENESS_SLICE_MS ? now + LIVENESS_SLICE_MS : until;
}

/* The task of this call with this shard sent to worker w, or -1. */
static int match_task(const cdc_shard_task_t *tasks, const int *worker_of, int count, int w,
                      int shard)
{
    for (int t = 0; t < count; t++)
        if (tasks[t].shard == shard && worker_of[t] == w)
            return t;
    return -1;
}

/* A reply to a call that is over (or a task given up): dropped; a RESULT
   (a whole result or a streamed part) is a late block too. */
static void count_late(cdc_client_t *self, const cdc_msg_header_t *h)
{
    self->counters.late_replies++;
    self->counters.late_blocks += h->type == CDC_MSG_RESULT;
}

/* The pending task a reply from worker w answers, or -1 when it answers
   none (counted: late when meant for an earlier call or a task given up,
   invalid when it names a request or shard never sent). */
static int call_match_reply(cdc_client_t *self, const client_call_t *call, int w,
                            const cdc_msg_header_t *h)
{
    if (h->request_id != call->request_id) {
        /* An earlier call's answer (request ids only grow from
           first_request), or one that names a request never made: invalid. */
        if (h->request_id > self->first_request && h->request_id < call->request_id)
            count_late(self, h);
        else
            self->counters.invalid_replies++;
        return -1;
    }
    int t = match_task(call->tasks, call->worker_of, call->count, w, h->shard);
    if (t < 0 || call->state[t] != TASK_PENDING) {
        /* A shard this worker was not sent is invalid; one given up on (its
           worker was marked dead) is late. */
        if (t < 0)
            self->counters.invalid_replies++;
        else
            count_late(self, h);
        return -1;
    }
    return t;
}

/* The part of task t a RESULT carries (its first row and rows, task.h), or
   -1 when it is none of them or came already. */
static int result_part(const cdc_shard_task_t *task, const cdc_msg_header_t *h)
{
    if (h->cols != task->cols)
        return -1;
    for (int p = 0; p < cdc_task_parts(task); p++) {
        int64_t first;
        cdc_shard_task_t piece = cdc__task_part(task, p, &first);
        if (h->row_offset == first && h->rows == piece.a_rows)
            return task->parts_in & (UINT32_C(1) << p) ? -1 : p;
    }
    return -1;
}

/* A RESULT for task t, of part p: copied into its place. The task is done
   once every part is in; its time is its first part's (the data). */
static void call_take_result(cdc_client_t *self, client_call_t *call, int t, int p,
                             const cdc_msg_t *msg)
{
    cdc_shard_task_t *task = &call->tasks[t];
    int64_t first;
    cdc_shard_task_t piece = cdc__task_part(task, p, &first);
    cdc__msg_payload_gather(&msg->payload[0], piece.result); /* the one copy, chunk by chunk */
    self->counters.results++;
    self->counters.bytes_in += msg->payload[0].size;
    if (!task->parts_in) {
        task->elapsed_ms = cdc__clock_ms() - call->started_ms;
        call_note_worker(self->last_answered_by, task->shard, call->worker_of[t]);
    }
    task->parts_in |= UINT32_C(1) << p;
    if (task->parts_in != (UINT32_C(1) << cdc_task_parts(task)) - 1)
        return; /* more parts to come */
    call->state[t] = TASK_DONE;
    if (task->cover >= 0 && task->cover < 64)
        call->covered |= UINT64_C(1) << task->cover;
    *call->arrived |= UINT64_C(1) << t;
    call->done++;
    call->pending--;
}

/* Apply worker w's reply to pending task t: a result of the right shape is
   taken; a MISS re-sends the weights and the task (the worker restarted or
   evicted them), at most MAX_MISS_RETRIES times; anything else means this
   result will not come. */
static void call_apply_reply(cdc_client_t *self, client_call_t *call, int t, int w,
                             const cdc_msg_t *msg)
{
    const cdc_msg_header_t *h = &msg->header;
    int part = h->type == CDC_MSG_RESULT ? result_part(&call->tasks[t], h) : -1;
    if (part >= 0) {
        call_take_result(self, call, t, part, msg);
        return;
    }
    if (h->type == CDC_MSG_MISS && call->retries[t] < MAX_MISS_RETRIES) {
        self->counters.misses++;
        call->retries[t]++;
        cdc__slots_forget(self->slots, w, h->a_key);
        if (send_task(self, w, &call->tasks[t], call->keys[t], call->request_id) != CDC_OK) {
            call->state[t] = TASK_IDLE;
            call->pending--;
        }
        return;
    }
    if (h->type == CDC_MSG_ERROR) {
        self->counters.error_replies++;
        CDC_LOG_WARNF("worker %d: shard %d failed: %s: %.*s", w, h->shard,
                      cdc_err_name(h->error_code), (int) msg->payload[0].size,
                      (const char *) msg->payload[0].frames[0].data); /* one frame */
    } else {
        self->counters.invalid_replies++; /* e.g. a wrong shape */
    }
    call->state[t] = TASK_IDLE;
    call->pending--;
}

/* Read every message waiting on worker w's data socket into the call. */
static void call_receive(cdc_client_t *self, client_call_t *call, int w)
{
    cdc_wire_msg_t wire;
    while (cdc__wire_recv(self->workers[w].socket, &wire, ZMQ_DONTWAIT) == CDC_OK) {
        cdc_msg_t msg;
        if (cdc__wire_decode(&wire, 0, &msg) != CDC_OK) {
            self->counters.invalid_replies++;
            CDC_LOG_WARNF("worker %d: invalid reply: %s", w, cdc_last_error());
        } else if (msg.header.type == CDC_MSG_PONG) {
            cdc__slots_acked(self->slots, w, msg.header.request_id); /* send_data_ping */
        } else if (msg.header.type != CDC_MSG_GOODBYE) {
            /* (A GOODBYE reaches the heartbeat thread too, which acts on it.) */
            int t = call_match_reply(self, call, w, &msg.header);
            if (t >= 0)
                call_apply_reply(self, call, t, w, &msg);
        }
        cdc__wire_msg_close(&wire);
    }
    cdc__wire_msg_close(&wire);
}

/* Before a call: read what waits on the data sockets (answers to calls
   given up, or messages nobody asked for) and drop it, counted as late when
   it names a request already made, else as invalid, so nothing unsolicited
   is held from one call to the next. */
static void drain_stale(cdc_client_t *self)
{
    for (int w = 0; w < self->count; w++) {
        cdc_wire_msg_t wire;
        for (int n = 0; n < DRAIN_MAX &&
                        cdc__wire_recv(self->workers[w].socket, &wire, ZMQ_DONTWAIT) == CDC_OK;
             n++) {
            cdc_msg_t msg;
            int valid = cdc__wire_decode(&wire, 0, &msg) == CDC_OK;
            if (valid && msg.header.type == CDC_MSG_PONG)
                cdc__slots_acked(self->slots, w, msg.header.request_id); /* send_data_ping */
            else if (valid && msg.header.type == CDC_MSG_GOODBYE)
                ; /* harmless: the heartbeat thread acts on it */
            else if (valid && msg.header.request_id > self->first_request &&
                     msg.header.request_id <= self->next_request)
                count_late(self, &msg.header);
            else
                self->counters.invalid_replies++;
            cdc__wire_msg_close(&wire);
        }
        cdc__wire_msg_close(&wire);
    }
}

/* Full redundancy (every slot has a live worker holding its weights) lost
   and regained: the repair's time, from the departure that began it. */
static void track_redundancy(cdc_client_t *self, uint64_t live, int64_t last_departure_us)
{
    int full = cdc__slots_full(self->slots, live);
    int64_t now_us = (int64_t) (cdc__clock_ms() * 1000.0);
    /* A slot erased while its home takes in a re-sized layout's blocks
       (staging) is planned, not a loss to repair. */
    if (!full && self->degraded_since_us < 0 && self->slots->staging_slot < 0) {
        /* Seen at the pass after the departure: date it from the departure
           when that is recent, else from now (a slot that was never filled). */
        int recent = last_departure_us > 0 && now_us - last_departure_us < 1000000;
        self->degraded_since_us = recent ? last_departure_us : now_us;
    } else if (full && self->degraded_since_us >= 0) {
        uint64_t took = (uint64_t) (now_us - self->degraded_since_us);
        self->counters.redundancy_repairs++;
        self->counters.repair_us_sum += took;
        if (took > self->counters.repair_us_max)
            self->counters.repair_us_max = took;
        self->degraded_since_us = -1;
        CDC_LOG_INFOF("full redundancy again after %.1f ms", (double) took / 1000.0);
    }
    atomic_store(&self->restoring, !full || cdc__slots_busy(self->slots, live) ||
                                       cdc__slots_staging(self->slots));
}

/* Worker w's status named instance: a new process is taken only once the
   old one is gone (cdc__slots_instance; refused changes logged once per
   worker). Each one that comes back empty within a minute of its last
   return waits longer before it is sent its weights again: 0, then 1, 2,
   4 ... 30 s, so a process in a crash loop (or a worker that lies about
   its instance across reconnections) cannot keep the links busy. */
static void note_instance(cdc_client_t *self, int w, uint64_t instance)
{
    cdc_slot_worker_t *worker = &self->slots->workers[w];
    uint64_t was = worker->instance;
    if (cdc__slots_instance(self->slots, w, instance) && worker->instances_refused == 1)
        CDC_LOG_WARNF("worker %d names another process (instance) on a connection that "
                      "never dropped: ignored, its weights are not sent again (a bug or a "
                      "lie; logged once)", w);
    if (was == 0 || worker->instance == was)
        return;
    int64_t now = (int64_t) cdc__clock_ms();
    self->empty_returns[w] = now - self->empty_at_ms[w] < 60000 ? self->empty_returns[w] + 1 : 1;
    self->empty_at_ms[w] = now;
    int shift = self->empty_returns[w] - 2;
    int64_t backoff = shift < 0 ? 0 : shift >= 5 ? 30000 : (int64_t) 1000 << shift;
    self->restore_after_ms[w] = now + backoff;
    if (backoff > 0)
        CDC_LOG_INFOF("worker %d came back empty %d times within a minute of each other: "
                      "its weights are sent again in %.0f s", w, self->empty_returns[w],
                      (double) backoff / 1000.0);
}

/* Under the call lock, at a call's start or between calls (the heartbeat
   thread): read the data sockets (acks of restores, stale replies), learn
   which workers are new processes or lost their connection, send returning
   workers and spares the weights their slots need (slots.h), and time the
   repair. */
static void restore_pass(cdc_client_t *self)
{
    drain_stale(self);
    int count = self->count;
    uint64_t live, instance[CDC_MAX_WORKERS], departures[CDC_MAX_WORKERS];
    pthread_mutex_lock(&self->state_lock);
    live = self->live;
    int64_t last_departure_us = self->last_departure_us;
    for (int w = 0; w < count; w++) {
        instance[w] = self->peers[w].has_status ? self->peers[w].status.instance : 0;
        departures[w] = self->departures[w];
    }
    pthread_mutex_unlock(&self->state_lock);
    cdc_slots_t *slots = self->slots;
    slots->worker_count = count;
    uint64_t restorable = live;
    int64_t now_ms = (int64_t) cdc__clock_ms();
    for (int w = 0; w < count; w++) {
        if (departures[w] != self->deaths_seen[w]) {
            cdc__slots_connection_lost(slots, w);
            self->deaths_seen[w] = departures[w];
        }
        note_instance(self, w, instance[w]);
        if (now_ms < self->restore_after_ms[w])
            restorable &= ~(UINT64_C(1) << w);
    }
    uint64_t before = slots->background_bytes;
    cdc_slot_io_t io = {restore_send_weights, send_data_ping, self};
    cdc__slots_restore(slots, restorable, &io);
    self->counters.background_weight_bytes += slots->background_bytes - before;
    track_redundancy(self, live, last_departure_us);
    self->last_pass_ms = (int64_t) cdc__clock_ms();
}

/* Give up at once on tasks whose worker has died since dispatch. */
static void call_drop_dead(cdc_client_t *self, client_call_t *call)
{
    uint64_t now_live;
    cdc__client_live(self, &now_live);
    for (int t = 0; t < call->count && call->pending > 0; t++)
        if (call->state[t] == TASK_PENDING &&
            !(now_live & (UINT64_C(1) << call->worker_of[t]))) {
            call->state[t] = TASK_IDLE;
            call->pending--;
            self->counters.dead_skipped++;
        }
}

/* Wait until a reply may be in or the call's next wake-up; *interrupted is
   set when a signal cut the wait short (nothing was read). */
static int call_poll(cdc_client_t *self, zmq_pollitem_t *items, int64_t timeout_ms,
                     int *interrupted)
{
    *interrupted = 0;
    for (int w = 0; w < self->count; w++)
        items[w] = (zmq_pollitem_t){self->workers[w].socket, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(items, self->count, (long) timeout_ms) >= 0)
        return CDC_OK;
    if (zmq_errno() == EINTR) {
        *interrupted = 1;
        return CDC_OK;
    }
    return cdc__fail(CDC_ETRANSPORT, "poll: %s", zmq_strerror(zmq_errno()));
}

/* The call is over: every live worker still computing (or holding) one of
   its shards gets one CANCEL for the call's request id, which covers every
   shard of it (protocol.md), so a straggler drops work nobody needs instead
   of serving it ahead of the next call's. Best effort: a CANCEL the socket
   cannot take now is not sent (the reply is then late, as before). */
static void call_cancel_pending(cdc_client_t *self, const client_call_t *call)
{
    uint64_t live_mask, cancel_mask = 0;
    cdc__client_live(self, &live_mask);
    for (int t = 0; t < call->count; t++)
        if (call->state[t] == TASK_PENDING && call->worker_of[t] >= 0)
            cancel_mask |= UINT64_C(1) << call->worker_of[t];
    cancel_mask &= live_mask;
    for (int w = 0; w < self->count; w++) {
        if (!(cancel_mask & (UINT64_C(1) << w)))
            continue;
        cdc_msg_header_t h;
        cdc__msg_header_init(&h, CDC_MSG_CANCEL);
        h.request_id = call->request_id;
        if (cdc__wire_send(self->workers[w].socket, NULL, &h, NULL, 0, ZMQ_DONTWAIT) == CDC_OK)
            self->counters.cancels_sent++;
    }
}

void cdc__client_observe(cdc_client_t *self, const cdc_client_observer_t *observer)
{
    pthread_mutex_lock(&self->state_lock);
    self->observer = *observer;
    pthread_mutex_unlock(&self->state_lock);
}

/* The call is over: per worker whose every task of it came back (none
   re-sent after a MISS, which would blur its bytes), the observer learns
   the last result's time, their flops and bytes (what the profile's link
   estimate needs). A streamed task counts by its lead rows, timed by them:
   its parity parts are rarely wanted. */
static void call_observe(cdc_client_t *self, const client_call_t *call)
{
    pthread_mutex_lock(&self->state_lock);
    cdc_client_observer_t observer = self->observer;
    pthread_mutex_unlock(&self->state_lock);
    if (!observer.call_done)
        return;
    double elapsed[CDC_MAX_WORKERS] = {0}, flops[CDC_MAX_WORKERS] = {0};
    double bytes[CDC_MAX_WORKERS] = {0};
    uint64_t sent = 0, incomplete = 0;
    for (int t = 0; t < call->count; t++) {
        const cdc_shard_task_t *task = &call->tasks[t];
        int w = call->worker_of[t];
        if (!task->dispatched || w < 0)
            continue;
        sent |= UINT64_C(1) << w;
        int streamed = cdc_task_parts(task) > 1;
        if ((streamed ? !(task->parts_in & 1) : call->state[t] != TASK_DONE) ||
            call->retries[t] > 0)
            incomplete |= UINT64_C(1) << w;
        double rows = (double) (streamed ? task->lead_rows : task->a_rows);
        double result_bytes = rows * (double) task->cols * sizeof(float);
        elapsed[w] = task->elapsed_ms > elapsed[w] ? task->elapsed_ms : elapsed[w];
        flops[w] += 2.0 * rows * (double) task->k * (double) task->cols;
        bytes[w] += (double) call->bytes_out[t] + result_bytes;
    }
    for (int w = 0; w < self->count; w++)
        if ((sent & ~incomplete) & (UINT64_C(1) << w))
            observer.call_done(observer.ctx, w, elapsed[w], flops[w], bytes[w]);
}

int cdc__client_run(cdc_client_t *self, cdc_shard_task_t *tasks, int count, int n, int needed,
                    int wait_ms, int timeout_ms, uint64_t *arrived)
{
    return cdc__client_run_goal(self, tasks, count, n, needed, NULL, wait_ms, timeout_ms,
                                arrived);
}

int cdc__client_run_goal(cdc_client_t *self, cdc_shard_task_t *tasks, int count, int n,
                         int needed, const cdc_call_goal_t *goal, int wait_ms, int timeout_ms,
                         uint64_t *arrived)
{
    *arrived = 0;
    if (count < 1 || count > 64)
        return count == 0 ? CDC_OK : cdc__fail(CDC_EINVAL, "%d tasks, at most 64", count);
    pthread_mutex_lock(&self->lock);
    if (self->pending)
        discovery_publish(self); /* a worker discovered since the last call */
    discovery_homes(self);       /* none on a discovered entry never live */
    data_moves(self);            /* a respawned worker's new endpoint */
    cdc__slots_call(self->slots, count);
    restore_pass(self);
    client_call_t call;
    call_begin(self, &call, tasks, count, n, needed, goal, wait_ms, timeout_ms, arrived);
    call_place(self, &call);
    call_dispatch(self, &call);
    int rc = CDC_OK;
    while (call.pending > 0) {
        int64_t now = (int64_t) cdc__clock_ms();
        if (call_settled(self, &call, now))
            break;
        zmq_pollitem_t items[CDC_MAX_WORKERS];
        int interrupted;
        rc = call_poll(self, items, call_next_wake(&call, now) - now, &interrupted);
        if (rc != CDC_OK)
            break;
        if (interrupted)
            continue;
        for (int w = 0; w < self->count; w++)
            if (items[w].revents & ZMQ_POLLIN)
                call_receive(self, &call, w);
        call_drop_dead(self, &call);
    }
    call_cancel_pending(self, &call);
    call_observe(self, &call);
    pthread_mutex_unlock(&self->lock);
    return rc;
}

int cdc__client_set_homes(cdc_client_t *self, const int *home_of_slot, int slots)
{
    pthread_mutex_lock(&self->lock);
    int rc = cdc__slots_set_homes(self->slots, home_of_slot, slots, self->count);
    if (rc == CDC_OK) {
        self->homes_given = 1; /* discovery_homes leaves them alone */
        /* The new homes' weights go in the next restore pass, soon. */
        atomic_store(&self->restoring, 1);
        CDC_LOG_INFOF("homes of %d slots set; the rest on the other workers", slots);
    }
    pthread_mutex_unlock(&self->lock);
    return rc;
}

int cdc__client_stage(cdc_client_t *self, uint64_t token, int needed,
                      const cdc_slot_weight_t *block, int count, const int *order)
{
    if (count < 1 || count > CDC_MAX_WORKERS)
        return 0;
    cdc_slot_weight_t weight[CDC_MAX_WORKERS];
    for (int s = 0; s < count; s++) {
        weight[s] = block[s];
        weight[s].key = wire_key(block[s].key, s, needed, block[s].rows, block[s].k,
                                 block[s].data);
    }
    pthread_mutex_lock(&self->lock);
    cdc__slots_stage(self->slots, token, weight, count, order);
    int staged = cdc__slots_staged(self->slots, token) == 1;
    if (!staged)
        atomic_store(&self->restoring, 1); /* the heartbeat thread moves it on */
    pthread_mutex_unlock(&self->lock);
    return staged;
}

void cdc__client_last_call(cdc_client_t *self, int *sent_to, int *answered_by, int max)
{
    pthread_mutex_lock(&self->lock);
    for (int s = 0; s < max; s++) {
        if (sent_to)
            sent_to[s] = s < 64 ? self->last_sent_to[s] : -1;
        if (answered_by)
            answered_by[s] = s < 64 ? self->last_answered_by[s] : -1;
    }
    pthread_mutex_unlock(&self->lock);
}
