/* client_heartbeat.c - the client's heartbeat thread: which workers are live.
 *
 * Liveness: a heartbeat thread owns a second DEALER per worker (zmq sockets
 * are not thread-safe, so it never touches the data sockets) and a monitor
 * socket on each. It PINGs every worker every CDC_HEARTBEAT_MS; a worker is
 * dead when its connection drops (ZMQ_EVENT_DISCONNECTED, at once) or when
 * it has been silent for CDC_HEARTBEAT_DEAD_MS, and live again when it
 * answers. Nothing is sent to a dead worker. The plan (which workers the
 * shards are spread over) drops a crashed worker at once, a silent one only
 * after PLAN_GRACE_MS more (cdc__client_planned, client.c): on a loaded
 * machine a live worker can miss 300 ms of heartbeats, and re-planning (new
 * weight shards for the new n, shipped to every worker) is what would turn
 * that hiccup into real load. Meanwhile its shard is simply erased and
 * decoded from parity.
 *
 * The same thread, between its PINGs, reads discovery's beacons
 * (client_discovery.c), replaces a moved worker's heartbeat socket, and runs
 * the restore pass between calls (client_restore.c). Each PONG's round trip
 * and status go to the observer (the coordinator's live profile). */
#include "client_internal.h"

#include "clock.h"
#include "discovery.h"
#include "error.h"
#include "log.h"
#include "status.h"
#include "wire.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define RESTORE_PASS_MS 20        /* the heartbeat thread's restore pass, between
                                     calls, at most this often                   */

/* silent: dead because it stopped answering (else: its connection dropped). */
void cdc__client_set_live(cdc_client_t *self, int w, int live, int silent, const char *why)
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
            cdc__client_set_live(self, w, 0, 1, "no PONG");
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
            cdc__client_set_live(self, w, 0, 0, "connection dropped");
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
            cdc__client_set_live(self, w, 1, 0, "answered a PING");
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

/* The listener's poll item: not polled while discovery rests after a full
   pass (cdc__client_discovery_poll); returns next, brought forward to the rest's end. */
static int64_t discovery_arm(cdc_client_t *self, zmq_pollitem_t *item, int64_t now,
                             int64_t next)
{
    int resting = now < self->discovery_rest_ms;
    item->events = resting ? 0 : ZMQ_POLLIN;
    return resting && self->discovery_rest_ms < next ? self->discovery_rest_ms : next;
}

/* Between calls, the restore pass runs here (a call runs it at its start),
   unless a call holds the lock. */
static void restore_between_calls(cdc_client_t *self, int64_t now)
{
    if (pthread_mutex_trylock(&self->lock) != 0)
        return;
    cdc__client_data_moves(self);
    /* Before the first call there is no plan (last_pass_ms is 0). */
    if (self->last_pass_ms > 0 && now - self->last_pass_ms >= RESTORE_PASS_MS)
        cdc__client_restore_pass(self);
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
        if (cdc__client_heartbeat_moves(self, now))
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
            cdc__client_discovery_poll(self, now);
        restore_between_calls(self, now);
        if (self->count != count)
            n = heartbeat_items(self, items, &count); /* a worker was discovered */
    }
    return NULL;
}

/* The heartbeat thread and the pipe that stops it. */
int cdc__client_heartbeat_start(cdc_client_t *self)
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
