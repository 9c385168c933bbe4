/* client.c - dispatch shard tasks to workers over DEALER sockets, collect results:
 * the sockets, a client's lifetime (new, destroy), what it reports (status, counters).
 *
 * One DEALER per worker rather than one DEALER connected to all: a DEALER
 * round-robins over its peers, so it cannot address "worker i"; per-worker
 * sockets give each worker its own ordered pipe (WEIGHTS before the TASK that
 * needs them), its own reconnection, and a reply's origin without routing ids.
 * ZMQ_IMMEDIATE makes a send to a worker with no live connection fail at once
 * (EAGAIN) instead of queueing for a peer that may never come back.
 *
 * The client is five files, one concern each, sharing its state
 * (struct cdc_client) and their cdc__client_ functions through
 * client_internal.h:
 * - client.c: the sockets, creating and destroying a client, its status
 *   and counters, the observer;
 * - client_heartbeat.c: liveness (the heartbeat thread: PING/PONG, monitors);
 * - client_discovery.c: workers that announce themselves (beacons, admission);
 * - client_restore.c: workers at new endpoints, weights between calls (the
 *   restore pass), staging, the slots' homes;
 * - client_call.c: a call (place, dispatch, collect, settle, cancel). */
#include "client_internal.h"

#include "bits.h"
#include "clock.h"
#include "error.h"
#include "hash.h"
#include "log.h"
#include "slots.h"
#include "wire.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PLAN_GRACE_MS 1000        /* a silent worker stays in the plan (its shard
                                     erased, not sent) this long before n shrinks */

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
int cdc__client_data_socket_open(cdc_client_t *self, const uint8_t *key, const char *endpoint,
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
void cdc__client_heartbeat_socket_close(void *socket, void *monitor)
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
int cdc__client_heartbeat_socket_open(cdc_client_t *self, int w, const uint8_t *key,
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
    cdc__client_heartbeat_socket_close(socket, monitor);
    return rc;
}

/* Both sockets of worker w (data, heartbeat + monitor), connected to endpoint. */
int cdc__client_worker_connect(cdc_client_t *self, int w, const char *endpoint)
{
    heartbeat_peer_t *peer = &self->peers[w];
    size_t len = strlen(endpoint);
    if (len >= sizeof self->endpoints[w]) /* named in logs and status: whole */
        return cdc__fail(CDC_EINVAL, "worker endpoint of %zu bytes, at most %zu: %.64s...", len,
                         sizeof self->endpoints[w] - 1, endpoint);
    memcpy(self->endpoints[w], endpoint, len + 1);
    int rc = cdc__client_data_socket_open(self, self->curve_servers[w], endpoint,
                                          &self->workers[w].socket);
    if (rc == CDC_OK)
        rc = cdc__client_heartbeat_socket_open(self, w, self->curve_servers[w], endpoint,
                                               &peer->socket, &peer->monitor);
    return rc;
}

static void close_sockets(cdc_client_t *self)
{
    for (int w = 0; w < CDC_MAX_WORKERS; w++) {
        if (self->workers[w].socket)
            zmq_close(self->workers[w].socket);
        cdc__client_heartbeat_socket_close(self->peers[w].socket, self->peers[w].monitor);
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
        if (len >= CDC_CURVE_ENDPOINT_MAX)
            return cdc__fail(CDC_ECONFIG, "workers: endpoint %d is %zu bytes, at most %d",
                             self->count, len, CDC_CURVE_ENDPOINT_MAX - 1);
        memcpy(endpoint, item, len);
        endpoint[len] = '\0';
        int w = self->count;
        if (self->curve)
            memcpy(self->curve_servers[w], servers[w].public_key, CDC_CURVE_KEY_BYTES);
        int rc = cdc__client_worker_connect(self, w, endpoint);
        self->count++; /* its sockets exist now, and close_sockets closes them */
        if (rc != CDC_OK)
            return rc;
        item += len + (comma ? 1 : 0);
    }
    return CDC_OK;
}

/* Until every worker answers heartbeats and its data socket is connected
   too (a DEALER of its own, connecting on its own: with ZMQ_IMMEDIATE a
   task sent before it is refused, and the first call would lose that
   shard), or connect_wait_ms. A PING the data socket takes proves it. */
void cdc__client_wait_for_workers(cdc_client_t *self, int connect_wait_ms)
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
                cdc__client_send_data_ping(self, w, 0) == CDC_OK)
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
void cdc__client_free(cdc_client_t *self)
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
    cdc__build_meter_release(self->build_meter);
    pthread_mutex_destroy(&self->state_lock);
    pthread_mutex_destroy(&self->lock);
    cdc__curve_cert_clear(&self->curve_client);
    free(self);
}

/* A client with its context and locks and no worker yet; CURVE with
   client_cert's keys (it must hold the secret one) when not NULL. */
int cdc__client_alloc(const cdc_curve_cert_t *client_cert, cdc_client_t **self_p)
{
    if (client_cert && !client_cert->has_secret)
        return cdc__fail(CDC_EINVAL, "CURVE: the client certificate needs its secret key");
    cdc_client_t *self = calloc(1, sizeof *self);
    if (self && (!(self->slots = malloc(sizeof *self->slots)) ||
                 !(self->build_meter = cdc__build_meter_new(CDC_CLIENT_BUILT_BUDGET)))) {
        free(self->slots);
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
        cdc__client_free(self);
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
    int rc = cdc__client_alloc(client_cert, &self);
    if (rc == CDC_OK && (rc = connect_workers(self, endpoints, server_certs)) == CDC_OK)
        rc = cdc__client_heartbeat_start(self);
    if (rc != CDC_OK) {
        if (self)
            cdc__client_free(self);
        return rc;
    }
    cdc__client_wait_for_workers(self, connect_wait_ms);
    *client_p = self;
    return CDC_OK;
}

void cdc__client_destroy(cdc_client_t **client_p)
{
    if (!client_p || !*client_p)
        return;
    cdc__client_free(*client_p);
    *client_p = NULL;
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

void cdc__client_observe(cdc_client_t *self, const cdc_client_observer_t *observer)
{
    pthread_mutex_lock(&self->state_lock);
    self->observer = *observer;
    pthread_mutex_unlock(&self->state_lock);
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
