/* server.c - the worker's ROUTER: validated requests in, budgeted zero-copy replies out.
 *
 * A ROUTER names each connection by a routing id (the first frame of every
 * message). The server keeps one peer record per routing id it has seen: the
 * connection number it exposes as the peer's identity, the CANCELs that peer
 * sent, and the bytes of replies to it that are still in flight. Requests and
 * replies hold a reference to their peer, so a reply built on the compute
 * thread can be addressed and charged without touching the socket.
 *
 * The budget: a reply's bytes are charged to its peer when it is built and
 * released when libzmq frees the last of the payload's slices (a payload
 * travels as chunk frames, protocol.h, each a zmq_msg_init_data frame over a
 * slice of the one buffer; the free function runs on libzmq's I/O thread once
 * the bytes are written, or dropped because the peer left). So a peer that
 * stops reading, or a worker holding replies back by a fault, can hold at
 * most peer_budget bytes; a reply that would exceed it is dropped and counted
 * instead of queued. The reply's own hold (hold.h, one reference per slice,
 * taken by cdc__wire_slices_build as for the coordinator's WEIGHTS) is every
 * slice's hint, so nothing else tracks it in flight.
 *
 * The peer table is bounded (MAX_PEERS, least recently seen dropped): ROUTER
 * cannot tell us when a connection closes (ZMQ_ROUTER_NOTIFY is a draft API in
 * libzmq 4.3), and reconnecting coordinators get fresh routing ids.
 *
 * What a peer is owed (its CANCELs, its budget of reply bytes in flight)
 * belongs to a principal, not to a connection: with CURVE the principal is
 * the client's public key (the ZAP User-Id zauth returns), so a coordinator's
 * data and heartbeat connections, and its reconnections, share one record;
 * without authentication every connection is its own principal.
 *
 * The ROUTER socket itself (its context, CURVE with zauth, its limits) is
 * made in server_socket.c; the server's state (struct cdc_server, peers,
 * principals) is in server_internal.h. */
#include "server_internal.h"

#include "error.h"
#include "footprint.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <czmq.h>
#include <zmq.h>

#include "keys.h"
#include "wire.h"

#define ZMQ_CONTENT_BYTES 40 /* libzmq's content_t ahead of a large frame's data */

struct cdc_request {
    peer_t *peer;
    cdc_peer_identity_t identity;
    cdc_wire_msg_t wire; /* routing id, header, every payload's chunks; msg's
                            payload views point into wire.frames            */
    int taken[CDC_PROTO_MAX_PAYLOADS];
    cdc_msg_t msg;
    size_t copy_below;
};

struct cdc_payload {
    void *data;
    size_t size, footprint;
    int is_frame;    /* data lives in frame (zero copy), else malloc'd */
    zmq_msg_t frame;
};

struct cdc_reply {
    peer_t *peer;
    cdc_msg_header_t header;
    cdc_payload_t *payload;
    size_t charge;
    cdc_hold_t hold; /* the owner's reference (the compute thread's, then the
                        sender's) and one per payload slice libzmq holds: the
                        last one released frees the reply                  */
};

/* ---- peers -------------------------------------------------------------- */

static void principal_unref(principal_t *principal)
{
    if (principal && atomic_fetch_sub(&principal->refs, 1) == 1)
        free(principal);
}

static principal_t *principal_ref(principal_t *principal)
{
    atomic_fetch_add(&principal->refs, 1);
    return principal;
}

static principal_t *principal_new(const char *user_id)
{
    principal_t *principal = calloc(1, sizeof *principal);
    if (!principal)
        return NULL;
    atomic_init(&principal->refs, 1);
    atomic_init(&principal->in_flight, 0);
    snprintf(principal->user_id, sizeof principal->user_id, "%s", user_id);
    return principal;
}

/* A new reference to the principal of user_id: a fresh one for "" (no
   authentication), else the table's (made on first sight; table full: the
   least recently seen leaves it). NULL only when out of memory. */
static principal_t *principal_for(cdc_server_t *self, const char *user_id, uint64_t clock)
{
    if (!*user_id)
        return principal_new("");
    int oldest = 0;
    for (int i = 0; i < self->principal_count; i++) {
        principal_t *p = self->principals[i];
        if (strcmp(p->user_id, user_id) == 0) {
            p->last_seen = clock;
            return principal_ref(p);
        }
        if (p->last_seen < self->principals[oldest]->last_seen)
            oldest = i;
    }
    principal_t *principal = principal_new(user_id);
    if (!principal)
        return NULL;
    principal->last_seen = clock;
    if (self->principal_count == MAX_PEERS) {
        principal_unref(self->principals[oldest]);
        self->principals[oldest] = principal;
    } else {
        self->principals[self->principal_count++] = principal;
    }
    return principal_ref(principal);
}

static void peer_unref(peer_t *peer)
{
    if (peer && atomic_fetch_sub(&peer->refs, 1) == 1) {
        principal_unref(peer->principal);
        free(peer);
    }
}

static peer_t *peer_ref(peer_t *peer)
{
    atomic_fetch_add(&peer->refs, 1);
    return peer;
}

/* The record for a routing id, made on first sight (table full: the least
   recently seen is dropped from it) with the principal of user_id. NULL only
   when out of memory. */
static peer_t *peer_for(cdc_server_t *self, const void *route, size_t size,
                        const char *user_id)
{
    self->clock++;
    int oldest = 0;
    for (int i = 0; i < self->peer_count; i++) {
        peer_t *p = self->peers[i];
        if (p->route_size == size && memcmp(p->route, route, size) == 0) {
            p->last_seen = self->clock;
            return p;
        }
        if (p->last_seen < self->peers[oldest]->last_seen)
            oldest = i;
    }
    peer_t *peer = calloc(1, sizeof *peer);
    if (!peer || size > sizeof peer->route ||
        !(peer->principal = principal_for(self, user_id, self->clock))) {
        free(peer);
        return NULL;
    }
    atomic_init(&peer->refs, 1);
    memcpy(peer->route, route, size);
    peer->route_size = size;
    peer->last_seen = self->clock;
    pthread_mutex_lock(&self->lock);
    peer->connection = ++self->counters.peers;
    pthread_mutex_unlock(&self->lock);
    if (self->peer_count == MAX_PEERS) {
        peer_unref(self->peers[oldest]);
        self->peers[oldest] = peer;
    } else {
        self->peers[self->peer_count++] = peer;
    }
    return peer;
}

static void count(cdc_server_t *self, uint64_t *counter)
{
    pthread_mutex_lock(&self->lock);
    (*counter)++;
    pthread_mutex_unlock(&self->lock);
}

/* ---- lifetime and waiting ----------------------------------------------- */

void cdc__server_options_init(cdc_server_options_t *options)
{
    memset(options, 0, sizeof *options);
}

static int open_wake_pipe(cdc_server_t *self)
{
    if (pipe(self->wake) != 0) {
        self->wake[0] = self->wake[1] = -1;
        return cdc__fail(CDC_ETRANSPORT, "pipe: %s", strerror(errno));
    }
    for (int i = 0; i < 2; i++) {
        fcntl(self->wake[i], F_SETFL, fcntl(self->wake[i], F_GETFL) | O_NONBLOCK);
        fcntl(self->wake[i], F_SETFD, FD_CLOEXEC);
    }
    return CDC_OK;
}

int cdc__server_new(const cdc_server_options_t *options, cdc_server_t **server_p)
{
    *server_p = NULL;
    if (!options || !options->bind)
        return cdc__fail(CDC_EINVAL, "server: no endpoint to bind");
    cdc_server_t *self = calloc(1, sizeof *self);
    if (!self)
        return cdc__fail(CDC_ENOMEM, "server");
    pthread_mutex_init(&self->lock, NULL);
    self->wake[0] = self->wake[1] = -1;
    self->peer_budget = options->peer_budget ? options->peer_budget
                                             : CDC_SERVER_DEFAULT_PEER_BUDGET;
    self->copy_below = options->copy_below ? options->copy_below : (size_t) 64 << 10;
    int rc = open_wake_pipe(self);
    if (rc == CDC_OK)
        rc = cdc__server_open_socket(self, options);
    if (rc != CDC_OK) {
        cdc__server_destroy(&self);
        return rc;
    }
    *server_p = self;
    return CDC_OK;
}

void cdc__server_destroy(cdc_server_t **server_p)
{
    if (!server_p || !*server_p)
        return;
    cdc_server_t *self = *server_p;
    if (self->router)
        zmq_close(self->router);
    /* Frees every reply still queued in libzmq (their free functions run).
       CZMQ's process context (CURVE) is terminated at exit by CZMQ; replies
       still queued there are freed by its I/O thread, and they hold their
       own references to what they touch. */
    if (self->context && self->own_context)
        zmq_ctx_term(self->context);
    zactor_destroy(&self->auth);
    free(self->curve_allow);
    for (int i = 0; i < self->peer_count; i++)
        peer_unref(self->peers[i]);
    for (int i = 0; i < self->principal_count; i++)
        principal_unref(self->principals[i]);
    for (int i = 0; i < 2; i++)
        if (self->wake[i] >= 0)
            close(self->wake[i]);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *server_p = NULL;
}

int cdc__server_wait(cdc_server_t *self, long timeout_ms)
{
    zmq_pollitem_t items[2] = {{self->router, 0, ZMQ_POLLIN, 0},
                               {NULL, self->wake[0], ZMQ_POLLIN, 0}};
    int n = zmq_poll(items, 2, timeout_ms);
    if (n < 0) {
        if (zmq_errno() == EINTR)
            return CDC_ETIMEDOUT;
        return cdc__fail(CDC_ETRANSPORT, "poll: %s", zmq_strerror(zmq_errno()));
    }
    if (items[1].revents & ZMQ_POLLIN) {
        char drain[64];
        while (read(self->wake[0], drain, sizeof drain) > 0)
            ;
    }
    return n > 0 ? CDC_OK : CDC_ETIMEDOUT;
}

void cdc__server_wake(cdc_server_t *self)
{
    ssize_t ignored = write(self->wake[1], "w", 1); /* full pipe: a wake is pending */
    (void) ignored;
}

void cdc__server_counters(cdc_server_t *self, cdc_server_counters_t *counters)
{
    pthread_mutex_lock(&self->lock);
    *counters = self->counters;
    pthread_mutex_unlock(&self->lock);
}

/* ---- sending ------------------------------------------------------------ */

/* The last reference to the reply let go: by libzmq when it frees a
   payload slice (on its I/O thread, once the bytes are written or dropped),
   or by the sender when it is done. The reply's budget goes back to its
   peer. Any thread. */
static void reply_free(cdc_hold_t *hold)
{
    cdc_reply_t *reply = (cdc_reply_t *) ((char *) hold - offsetof(cdc_reply_t, hold));
    atomic_fetch_sub(&reply->peer->principal->in_flight, reply->charge);
    peer_unref(reply->peer);
    cdc__payload_destroy(&reply->payload);
    free(reply);
}

/* Routing id, then the packed header; more: a payload frame follows. */
static int send_head(cdc_server_t *self, const peer_t *peer, const cdc_msg_header_t *h,
                     int more)
{
    uint8_t packed[CDC_PROTO_HEADER_SIZE];
    cdc__msg_header_pack(h, packed);
    /* Once the first part is accepted zmq queues the rest atomically. */
    if (zmq_send(self->router, peer->route, peer->route_size, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(self->router, packed, sizeof packed, ZMQ_DONTWAIT | (more ? ZMQ_SNDMORE : 0)) < 0)
        return cdc__fail(CDC_ETIMEDOUT, "send to connection %llu: %s",
                         (unsigned long long) peer->connection, zmq_strerror(zmq_errno()));
    return CDC_OK;
}

/* The payload as zmq frames over its chunks, without a copy: each slice
   points into the one buffer and holds the reply (cdc__wire_slices_build).
   Every slice is built before anything is sent, so a failure here sends
   nothing (no half message to merge with the next). *count_p is 0 for a
   header-only reply. */
static int build_slices(cdc_reply_t *reply, zmq_msg_t **slices_p, int *count_p)
{
    *slices_p = NULL;
    *count_p = 0;
    cdc_payload_t *p = reply->payload;
    if (!p)
        return CDC_OK;
    int n = cdc__msg_payload_frames(p->size), built = 0;
    zmq_msg_t *slices = malloc((size_t) n * sizeof *slices);
    if (!slices)
        return cdc__fail(CDC_ENOMEM, "reply: %d payload slices", n);
    int rc = cdc__wire_slices_build(slices, &built, p->data, p->size, &reply->hold);
    if (rc != CDC_OK) {
        for (int j = 0; j < built; j++)
            zmq_msg_close(&slices[j]); /* the sender's reference keeps the reply */
        free(slices);
        return rc;
    }
    *slices_p = slices;
    *count_p = n;
    return CDC_OK;
}

int cdc__server_send(cdc_server_t *self, cdc_reply_t **reply_p)
{
    cdc_reply_t *reply = *reply_p;
    *reply_p = NULL;
    /* The owner's reference is the sender's own, until the end here. */
    zmq_msg_t *slices = NULL;
    int n = 0;
    int rc = build_slices(reply, &slices, &n);
    if (rc == CDC_OK)
        rc = send_head(self, reply->peer, &reply->header, n > 0);
    /* After the head, zmq takes the remaining parts of the message whole (its
       queue limit counts messages), so a slice is refused only when the
       head was: each unsent slice is closed, which lets go of its hold. */
    for (int j = 0; j < n; j++) {
        int flags = ZMQ_DONTWAIT | (j + 1 < n ? ZMQ_SNDMORE : 0);
        if (rc == CDC_OK && zmq_msg_send(&slices[j], self->router, flags) >= 0)
            continue;
        if (rc == CDC_OK) {
            rc = cdc__fail(CDC_ETIMEDOUT, "send payload slice %d of %d: %s", j + 1, n,
                           zmq_strerror(zmq_errno()));
            zmq_send(self->router, "", 0, ZMQ_DONTWAIT); /* end the message begun */
        }
        zmq_msg_close(&slices[j]);
    }
    free(slices);
    count(self, rc == CDC_OK ? &self->counters.replies_sent : &self->counters.send_failures);
    cdc__hold_release(&reply->hold); /* freed now, or when libzmq frees the last slice */
    return rc;
}

static void send_error(cdc_server_t *self, peer_t *peer, uint64_t request_id, int32_t shard,
                       int code, const char *text)
{
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_ERROR);
    h.request_id = request_id;
    h.shard = shard;
    h.error_code = code;
    size_t len = strlen(text);
    if (len > CDC_PROTO_MAX_TEXT)
        len = CDC_PROTO_MAX_TEXT;
    if (send_head(self, peer, &h, 1) != CDC_OK ||
        zmq_send(self->router, text, len, ZMQ_DONTWAIT) < 0)
        count(self, &self->counters.send_failures);
    else
        count(self, &self->counters.replies_sent);
}

void cdc__server_goodbye(cdc_server_t *self)
{
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_GOODBYE);
    for (int i = 0; i < self->peer_count; i++)
        send_head(self, self->peers[i], &h, 0); /* a peer gone: nothing to tell */
    int linger = 200;
    zmq_setsockopt(self->router, ZMQ_LINGER, &linger, sizeof linger);
}

void cdc__server_reject(cdc_server_t *self, const cdc_request_t *request, int code,
                        const char *text)
{
    count(self, &self->counters.invalid);
    send_error(self, request->peer, request->msg.header.request_id, request->msg.header.shard,
               code, text);
}

/* ---- replies ------------------------------------------------------------ */

int cdc__server_reply_new(cdc_server_t *self, const cdc_request_t *request,
                          const cdc_msg_header_t *header, cdc_payload_t **payload_p,
                          cdc_reply_t **reply_p)
{
    *reply_p = NULL;
    cdc_payload_t *payload = payload_p ? *payload_p : NULL;
    if (payload_p)
        *payload_p = NULL;
    peer_t *peer = request->peer;
    principal_t *principal = peer->principal;
    size_t charge = CDC_PROTO_HEADER_SIZE + (payload ? payload->size : 0);
    size_t before = atomic_fetch_add(&principal->in_flight, charge);
    if (before + charge > self->peer_budget) {
        atomic_fetch_sub(&principal->in_flight, charge);
        cdc__payload_destroy(&payload);
        count(self, &self->counters.over_budget);
        return cdc__fail(CDC_ETIMEDOUT,
                         "connection %llu: %zu reply bytes in flight, %zu more exceed its "
                         "budget of %zu",
                         (unsigned long long) peer->connection, before, charge,
                         self->peer_budget);
    }
    cdc_reply_t *reply = malloc(sizeof *reply);
    if (!reply) {
        atomic_fetch_sub(&principal->in_flight, charge);
        cdc__payload_destroy(&payload);
        return cdc__fail(CDC_ENOMEM, "reply");
    }
    reply->peer = peer_ref(peer);
    reply->header = *header;
    reply->payload = payload;
    reply->charge = charge;
    cdc__hold_init(&reply->hold, reply_free);
    *reply_p = reply;
    return CDC_OK;
}

int cdc__server_error_new(cdc_server_t *self, const cdc_request_t *request, int code,
                          const char *text, cdc_reply_t **reply_p)
{
    *reply_p = NULL;
    const cdc_msg_header_t *asked = &request->msg.header;
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_ERROR);
    h.request_id = asked->request_id;
    h.shard = asked->shard;
    h.error_code = code;
    size_t len = strlen(text);
    cdc_payload_t *payload = cdc__payload_copy(text, len > CDC_PROTO_MAX_TEXT ? CDC_PROTO_MAX_TEXT
                                                                             : len);
    if (!payload)
        return cdc__fail(CDC_ENOMEM, "ERROR reply text");
    return cdc__server_reply_new(self, request, &h, &payload, reply_p);
}

const cdc_msg_header_t *cdc__reply_header(const cdc_reply_t *reply)
{
    return &reply->header;
}

cdc_payload_t *cdc__reply_payload(cdc_reply_t *reply)
{
    return reply->payload;
}

void cdc__reply_destroy(cdc_reply_t **reply_p)
{
    if (!reply_p || !*reply_p)
        return;
    cdc__hold_release(&(*reply_p)->hold); /* the owner's: a reply never sent */
    *reply_p = NULL;
}

/* ---- receiving ---------------------------------------------------------- */

/* Best effort: the request id of a message that failed validation, so the
   sender can match the ERROR to its request. */
static uint64_t salvage_request_id(zmq_msg_t *header, int32_t *shard)
{
    cdc_msg_header_t h;
    *shard = 0;
    if (cdc__msg_header_unpack(zmq_msg_data(header), zmq_msg_size(header), &h) != CDC_OK ||
        h.magic != CDC_PROTO_MAGIC)
        return 0;
    *shard = h.shard >= 0 && h.shard < 64 ? h.shard : 0;
    return h.request_id;
}

/* Under the lock: whether principal has request_id among its cancels. */
static int has_cancel(const principal_t *peer, uint64_t request_id)
{
    for (int i = 0; i < peer->cancel_count; i++)
        if (peer->cancelled[i] == request_id)
            return 1;
    return 0;
}

/* A request id already recorded is not recorded again (a repeated CANCEL
   would otherwise push older ones out of the ring); any id is accepted,
   one never sent included: the ring is all it costs. */
static void record_cancel(cdc_server_t *self, peer_t *from, uint64_t request_id)
{
    principal_t *peer = from->principal;
    pthread_mutex_lock(&self->lock);
    if (!has_cancel(peer, request_id)) {
        peer->cancelled[peer->cancel_next] = request_id;
        peer->cancel_next = (peer->cancel_next + 1) % MAX_CANCELS;
        if (peer->cancel_count < MAX_CANCELS)
            peer->cancel_count++;
    }
    self->counters.cancels++;
    pthread_mutex_unlock(&self->lock);
}

static int principal_cancelled(cdc_server_t *self, const principal_t *peer,
                               uint64_t request_id)
{
    pthread_mutex_lock(&self->lock);
    int found = has_cancel(peer, request_id);
    pthread_mutex_unlock(&self->lock);
    return found;
}

int cdc__server_cancelled(cdc_server_t *self, const cdc_request_t *request,
                          uint64_t request_id)
{
    return principal_cancelled(self, request->peer->principal, request_id);
}

int cdc__server_reply_cancelled(cdc_server_t *self, const cdc_reply_t *reply)
{
    return principal_cancelled(self, reply->peer->principal, reply->header.request_id);
}

static void set_identity(cdc_request_t *request)
{
    request->identity.connection = request->peer->connection;
    snprintf(request->identity.user_id, sizeof request->identity.user_id, "%s",
             request->peer->principal->user_id);
}

/* The request for a whole message read off the socket (routing id first):
   NULL when out of memory (the message is then dropped unanswered). */
static cdc_request_t *request_for(cdc_server_t *self, cdc_wire_msg_t *wire)
{
    cdc_request_t *request = calloc(1, sizeof *request);
    /* Present only when a security mechanism authenticated the connection;
       libzmq attaches it to the frames the peer sent, not the routing id. */
    const char *user_id = wire->count > 1 ? zmq_msg_gets(&wire->parts[1], "User-Id") : NULL;
    peer_t *peer = request && wire->count > 0
                       ? peer_for(self, zmq_msg_data(&wire->parts[0]),
                                  zmq_msg_size(&wire->parts[0]), user_id ? user_id : "")
                       : NULL;
    if (!peer) {
        cdc__fail(CDC_ENOMEM, request ? "peer record" : "request");
        free(request);
        cdc__wire_msg_close(wire);
        return NULL;
    }
    request->wire = *wire; /* the request owns the parts from here */
    cdc__wire_msg_init(wire);
    request->peer = peer_ref(peer);
    request->copy_below = self->copy_below;
    set_identity(request);
    return request;
}

/* One message off the socket: CDC_OK with a request (maybe a CANCEL), or a
   status (the invalid ones answered). The whole message is read first, a
   message over CDC_WIRE_MAX_PARTS to its end, so the next starts at a
   message boundary whatever happens to this one. */
static int recv_one(cdc_server_t *self, cdc_request_t **request_p)
{
    cdc_wire_msg_t wire;
    int rc = cdc__wire_recv(self->router, &wire, ZMQ_DONTWAIT);
    if (rc != CDC_OK) {
        cdc__wire_msg_close(&wire);
        return rc;
    }
    cdc_request_t *request = request_for(self, &wire);
    if (!request)
        return CDC_ENOMEM;
    count(self, &self->counters.received);
    /* Frame 0 is the routing id; the protocol frames follow. */
    if ((rc = cdc__wire_decode(&request->wire, 1, &request->msg)) != CDC_OK) {
        int32_t shard = 0;
        uint64_t id = request->wire.count > 1 ? salvage_request_id(&request->wire.parts[1], &shard)
                                              : 0;
        count(self, &self->counters.invalid);
        send_error(self, request->peer, id, shard, CDC_EPROTO, cdc_last_error());
        cdc__request_destroy(&request);
        return CDC_EPROTO;
    }
    *request_p = request;
    return CDC_OK;
}

int cdc__server_recv(cdc_server_t *self, cdc_request_t **request_p)
{
    *request_p = NULL;
    for (;;) {
        cdc_request_t *request = NULL;
        int rc = recv_one(self, &request);
        if (rc != CDC_OK)
            return rc;
        if (request->msg.header.type != CDC_MSG_CANCEL) {
            *request_p = request;
            return CDC_OK;
        }
        record_cancel(self, request->peer, request->msg.header.request_id);
        cdc__request_destroy(&request);
    }
}

const cdc_msg_t *cdc__request_msg(const cdc_request_t *request)
{
    return &request->msg;
}

const cdc_peer_identity_t *cdc__request_peer(const cdc_request_t *request)
{
    return &request->identity;
}

void cdc__request_destroy(cdc_request_t **request_p)
{
    if (!request_p || !*request_p)
        return;
    cdc_request_t *request = *request_p;
    cdc__wire_msg_close(&request->wire);
    peer_unref(request->peer);
    free(request);
    *request_p = NULL;
}

/* ---- payloads ----------------------------------------------------------- */

/* Free a part's memory now; the slot stays closable (the request closes
   every part when it is destroyed). */
static void part_release(zmq_msg_t *part)
{
    zmq_msg_close(part);
    zmq_msg_init(part);
}

/* A one-frame payload: the frame itself when large and aligned, else a copy
   (see cdc__request_take_payload). */
static cdc_payload_t *take_frame(cdc_request_t *request, zmq_msg_t *frame)
{
    size_t size = zmq_msg_size(frame);
    const void *data = zmq_msg_data(frame);
    cdc_payload_t *payload;
    if (size < request->copy_below || (uintptr_t) data % 8 != 0) {
        payload = cdc__payload_copy(data, size);
        if (!payload)
            return NULL;
        part_release(frame);
        return payload;
    }
    payload = calloc(1, sizeof *payload);
    if (!payload)
        return NULL;
    payload->is_frame = 1;
    zmq_msg_init(&payload->frame);
    zmq_msg_move(&payload->frame, frame); /* the frame itself: no copy */
    payload->data = zmq_msg_data(&payload->frame);
    payload->size = size;
    payload->footprint =
        cdc__alloc_footprint(sizeof *payload) + cdc__alloc_footprint(size + ZMQ_CONTENT_BYTES);
    return payload;
}

/* A payload of several chunks gathered into one buffer (the one copy a
   chunked payload costs), each chunk freed as soon as it is copied so the
   peak stays about one payload plus one chunk. */
static cdc_payload_t *gather_chunks(zmq_msg_t *chunks, const cdc_msg_payload_t *view)
{
    cdc_payload_t *payload = cdc__payload_adopt(malloc(view->size), view->size);
    if (!payload || !payload->data) {
        cdc__payload_destroy(&payload);
        return NULL;
    }
    size_t at = 0;
    for (int j = 0; j < view->count; j++) {
        size_t size = zmq_msg_size(&chunks[j]);
        memcpy((uint8_t *) payload->data + at, zmq_msg_data(&chunks[j]), size);
        at += size;
        part_release(&chunks[j]);
    }
    return payload;
}

cdc_payload_t *cdc__request_take_payload(cdc_request_t *request, int i)
{
    if (i < 0 || i >= request->msg.payload_count || request->taken[i])
        return NULL;
    cdc_msg_payload_t *view = &request->msg.payload[i];
    /* wire.frames[f] views wire.parts[1 + f] (part 0 is the routing id). */
    zmq_msg_t *first = &request->wire.parts[1 + (view->frames - request->wire.frames)];
    cdc_payload_t *payload =
        view->count == 1 ? take_frame(request, first) : gather_chunks(first, view);
    if (!payload)
        return NULL;
    request->taken[i] = 1;
    *view = (cdc_msg_payload_t){NULL, 0, 0};
    return payload;
}

cdc_payload_t *cdc__payload_adopt(void *data, size_t size)
{
    cdc_payload_t *payload = calloc(1, sizeof *payload);
    if (!payload) {
        free(data);
        return NULL;
    }
    payload->data = data;
    payload->size = size;
    payload->footprint = cdc__alloc_footprint(sizeof *payload) + cdc__alloc_footprint(size);
    return payload;
}

cdc_payload_t *cdc__payload_copy(const void *data, size_t size)
{
    void *copy = malloc(size ? size : 1);
    if (!copy)
        return NULL;
    if (size)
        memcpy(copy, data, size);
    return cdc__payload_adopt(copy, size);
}

void *cdc__payload_data(const cdc_payload_t *payload)
{
    return payload->data;
}

size_t cdc__payload_size(const cdc_payload_t *payload)
{
    return payload->size;
}

size_t cdc__payload_footprint(const cdc_payload_t *payload)
{
    return payload->footprint;
}

void cdc__payload_destroy(cdc_payload_t **payload_p)
{
    if (!payload_p || !*payload_p)
        return;
    cdc_payload_t *payload = *payload_p;
    if (payload->is_frame)
        zmq_msg_close(&payload->frame);
    else
        free(payload->data);
    free(payload);
    *payload_p = NULL;
}
