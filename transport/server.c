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
 * released when libzmq frees the payload (zmq_msg_init_data's free function,
 * called on libzmq's I/O thread once the bytes are written, or dropped because
 * the peer left). So a peer that stops reading, or a worker holding replies
 * back by a fault, can hold at most peer_budget bytes; a reply that would
 * exceed it is dropped and counted instead of queued. The reply object itself
 * is the free function's hint, so nothing else tracks it in flight.
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
 * CURVE (options->curve_secret): the ROUTER is a CURVE server on CZMQ's
 * process context, where a zauth actor answers ZAP requests from a directory
 * of allowed client certificates. libzmq only consults the ZAP handler bound
 * in the socket's own context, and a CURVE server with no handler accepts
 * every client key: hence the shared context. A client whose key is not in
 * the directory fails the handshake; the socket never delivers a message from
 * it, so it gets no reply and costs no more than libzmq's handshake. */
#include "server.h"

#include "error.h"
#include "footprint.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <czmq.h>
#include <zmq.h>

#include "keys.h"

#define MAX_PEERS 256
#define MAX_CANCELS 64 /* remembered per peer; an older cancel is forgotten */
#define ZMQ_CONTENT_BYTES 40 /* libzmq's content_t ahead of a large frame's data */

/* Who is owed what: see the header comment. */
typedef struct {
    atomic_int refs;
    atomic_size_t in_flight; /* reply bytes built and not yet freed by libzmq */
    uint64_t last_seen;
    char user_id[CDC_PEER_USER_ID_MAX + 1]; /* "" : one connection's own   */
    uint64_t cancelled[MAX_CANCELS]; /* ring, guarded by the server's lock */
    int cancel_count, cancel_next;
} principal_t;

typedef struct {
    atomic_int refs;
    uint64_t connection;
    uint64_t last_seen;
    uint8_t route[256];
    size_t route_size;
    principal_t *principal; /* owned reference */
} peer_t;

struct cdc_server {
    void *context, *router;
    int own_context;  /* context made here (no CURVE), terminated at destroy */
    zactor_t *auth;   /* zauth, with CURVE                                    */
    char *curve_allow;
    principal_t *principals[MAX_PEERS]; /* authenticated, by User-Id */
    int principal_count;
    int wake[2]; /* pipe: cdc_server_wake writes, cdc_server_wait drains */
    size_t peer_budget, copy_below;
    peer_t *peers[MAX_PEERS];
    int peer_count;
    uint64_t clock;
    pthread_mutex_t lock; /* counters and cancel rings */
    cdc_server_counters_t counters;
};

struct cdc_request {
    peer_t *peer;
    cdc_peer_identity_t identity;
    zmq_msg_t parts[CDC_PROTO_MAX_FRAMES]; /* header, payloads              */
    int count;
    int taken[CDC_PROTO_MAX_FRAMES];
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

void cdc_server_options_init(cdc_server_options_t *options)
{
    memset(options, 0, sizeof *options);
}

/* CURVE: load the worker's secret certificate into *cert and start zauth on
   CZMQ's process context (which becomes the server's) with the directory of
   allowed client certificates. */
static int start_auth(cdc_server_t *self, const cdc_server_options_t *options,
                      cdc_curve_cert_t *cert)
{
    if (!options->curve_allow || cdc_curve_path_is_dir(options->curve_allow) != 1)
        return cdc__fail(CDC_ECONFIG, "allowed certificates '%s': not a directory",
                         options->curve_allow ? options->curve_allow : "(none given)");
    int rc = cdc_curve_load_secret(options->curve_secret, cert);
    if (rc != CDC_OK)
        return rc;
    self->curve_allow = strdup(options->curve_allow);
    if (!self->curve_allow)
        return cdc__fail(CDC_ENOMEM, "allowed certificates");
    /* The worker handles SIGINT and SIGTERM itself: CZMQ must not take them. */
    zsys_handler_set(NULL);
    /* CURVE decryption runs on the I/O threads (about 45 MB/s here): with two,
       a coordinator's heartbeat connection need not wait behind a weight
       shard being decrypted on its data connection (libzmq gives each new
       connection the least loaded thread). */
    zsys_set_io_threads(2);
    self->context = zsys_init();
    if (!self->context)
        return cdc__fail(CDC_ETRANSPORT, "zsys_init: %s", zmq_strerror(zmq_errno()));
    self->auth = zactor_new(zauth, NULL);
    if (!self->auth)
        return cdc__fail(CDC_ETRANSPORT, "zauth: %s", zmq_strerror(zmq_errno()));
    return cdc_server_reload_allowed(self);
}

int cdc_server_reload_allowed(cdc_server_t *self)
{
    if (!self->auth)
        return CDC_OK;
    /* zauth replaces its certificate store with a fresh load of the directory. */
    if (zstr_sendx(self->auth, "CURVE", self->curve_allow, NULL) != 0 ||
        zsock_wait(self->auth) != 0)
        return cdc__fail(CDC_ETRANSPORT, "zauth CURVE %s: %s", self->curve_allow,
                         zmq_strerror(zmq_errno()));
    return CDC_OK;
}

/* The ROUTER a CURVE server with the worker's secret key (zauth decides
   which clients pass). */
static int make_curve_server(void *router, const cdc_curve_cert_t *cert)
{
    int server = 1;
    if (zmq_setsockopt(router, ZMQ_CURVE_SERVER, &server, sizeof server) != 0 ||
        zmq_setsockopt(router, ZMQ_CURVE_SECRETKEY, cert->secret_key,
                       CDC_CURVE_KEY_BYTES) != 0 ||
        zmq_setsockopt(router, ZMQ_ZAP_DOMAIN, "cdcgemm", strlen("cdcgemm")) != 0)
        return cdc__fail(CDC_ETRANSPORT, "CURVE server: %s (libzmq without CURVE?)",
                         zmq_strerror(zmq_errno()));
    return CDC_OK;
}

static int open_context(cdc_server_t *self, const cdc_server_options_t *options,
                        cdc_curve_cert_t *cert)
{
    if (options->curve_secret)
        return start_auth(self, options, cert);
    self->context = zmq_ctx_new();
    if (!self->context)
        return cdc__fail(CDC_ETRANSPORT, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    self->own_context = 1;
    return CDC_OK;
}

static int open_socket(cdc_server_t *self, const cdc_server_options_t *options)
{
    cdc_curve_cert_t cert;
    memset(&cert, 0, sizeof cert);
    int rc = open_context(self, options, &cert);
    if (rc == CDC_OK && !(self->router = zmq_socket(self->context, ZMQ_ROUTER)))
        rc = cdc__fail(CDC_ETRANSPORT, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    if (rc == CDC_OK && options->curve_secret)
        rc = make_curve_server(self->router, &cert);
    cdc_curve_cert_clear(&cert);
    if (rc != CDC_OK)
        return rc;
    int linger = 0;
    /* Refuse absurd messages before libzmq allocates them: the largest valid
       one is two CDC_PROTO_MAX_FLOATS matrices plus headers. */
    int64_t max_message = options->max_message
                              ? (int64_t) options->max_message
                              : CDC_PROTO_MAX_FLOATS * (int64_t) sizeof(float) + 4096;
    int buffer = options->buffer_bytes > 0 ? options->buffer_bytes
                                           : 4 << 20; /* weight shards are tens of MB */
    zmq_setsockopt(self->router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(self->router, ZMQ_MAXMSGSIZE, &max_message, sizeof max_message);
    zmq_setsockopt(self->router, ZMQ_SNDBUF, &buffer, sizeof buffer);
    zmq_setsockopt(self->router, ZMQ_RCVBUF, &buffer, sizeof buffer);
    if (zmq_bind(self->router, options->bind) != 0)
        return cdc__fail(CDC_ETRANSPORT, "bind %s: %s", options->bind,
                         zmq_strerror(zmq_errno()));
    return CDC_OK;
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

int cdc_server_new(const cdc_server_options_t *options, cdc_server_t **server_p)
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
        rc = open_socket(self, options);
    if (rc != CDC_OK) {
        cdc_server_destroy(&self);
        return rc;
    }
    *server_p = self;
    return CDC_OK;
}

void cdc_server_destroy(cdc_server_t **server_p)
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

int cdc_server_wait(cdc_server_t *self, long timeout_ms)
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

void cdc_server_wake(cdc_server_t *self)
{
    ssize_t ignored = write(self->wake[1], "w", 1); /* full pipe: a wake is pending */
    (void) ignored;
}

void cdc_server_counters(cdc_server_t *self, cdc_server_counters_t *counters)
{
    pthread_mutex_lock(&self->lock);
    *counters = self->counters;
    pthread_mutex_unlock(&self->lock);
}

/* ---- sending ------------------------------------------------------------ */

/* The reply is the free function's hint: once libzmq is done with the
   payload, the reply's budget goes back to its peer. Any thread. */
static void reply_release(cdc_reply_t *reply)
{
    atomic_fetch_sub(&reply->peer->principal->in_flight, reply->charge);
    peer_unref(reply->peer);
    cdc_payload_destroy(&reply->payload);
    free(reply);
}

static void payload_sent(void *data, void *hint)
{
    (void) data;
    reply_release(hint);
}

/* Routing id, then the packed header; more: a payload frame follows. */
static int send_head(cdc_server_t *self, const peer_t *peer, const cdc_msg_header_t *h,
                     int more)
{
    uint8_t packed[CDC_PROTO_HEADER_SIZE];
    cdc_msg_header_pack(h, packed);
    /* Once the first part is accepted zmq queues the rest atomically. */
    if (zmq_send(self->router, peer->route, peer->route_size, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(self->router, packed, sizeof packed, ZMQ_DONTWAIT | (more ? ZMQ_SNDMORE : 0)) < 0)
        return cdc__fail(CDC_ETIMEDOUT, "send to connection %llu: %s",
                         (unsigned long long) peer->connection, zmq_strerror(zmq_errno()));
    return CDC_OK;
}

int cdc_server_send(cdc_server_t *self, cdc_reply_t **reply_p)
{
    cdc_reply_t *reply = *reply_p;
    *reply_p = NULL;
    int has_payload = reply->payload != NULL;
    int rc = send_head(self, reply->peer, &reply->header, has_payload);
    if (rc == CDC_OK && has_payload) {
        zmq_msg_t part;
        cdc_payload_t *p = reply->payload;
        if (zmq_msg_init_data(&part, p->data, p->size, payload_sent, reply) != 0) {
            rc = cdc__fail(CDC_ENOMEM, "reply frame");
            zmq_send(self->router, "", 0, ZMQ_DONTWAIT); /* end the message begun */
        } else {
            reply = NULL; /* libzmq owns it now: payload_sent releases it */
            if (zmq_msg_send(&part, self->router, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&part);
                rc = cdc__fail(CDC_ETIMEDOUT, "send payload: %s", zmq_strerror(zmq_errno()));
            }
        }
    }
    if (reply)
        reply_release(reply);
    count(self, rc == CDC_OK ? &self->counters.replies_sent : &self->counters.send_failures);
    return rc;
}

static void send_error(cdc_server_t *self, peer_t *peer, uint64_t request_id, int32_t shard,
                       int code, const char *text)
{
    cdc_msg_header_t h;
    cdc_msg_header_init(&h, CDC_MSG_ERROR);
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

void cdc_server_goodbye(cdc_server_t *self)
{
    cdc_msg_header_t h;
    cdc_msg_header_init(&h, CDC_MSG_GOODBYE);
    for (int i = 0; i < self->peer_count; i++)
        send_head(self, self->peers[i], &h, 0); /* a peer gone: nothing to tell */
    int linger = 200;
    zmq_setsockopt(self->router, ZMQ_LINGER, &linger, sizeof linger);
}

void cdc_server_reject(cdc_server_t *self, const cdc_request_t *request, int code,
                       const char *text)
{
    count(self, &self->counters.invalid);
    send_error(self, request->peer, request->msg.header.request_id, request->msg.header.shard,
               code, text);
}

/* ---- replies ------------------------------------------------------------ */

int cdc_server_reply_new(cdc_server_t *self, const cdc_request_t *request,
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
        cdc_payload_destroy(&payload);
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
        cdc_payload_destroy(&payload);
        return cdc__fail(CDC_ENOMEM, "reply");
    }
    reply->peer = peer_ref(peer);
    reply->header = *header;
    reply->payload = payload;
    reply->charge = charge;
    *reply_p = reply;
    return CDC_OK;
}

const cdc_msg_header_t *cdc_reply_header(const cdc_reply_t *reply)
{
    return &reply->header;
}

cdc_payload_t *cdc_reply_payload(cdc_reply_t *reply)
{
    return reply->payload;
}

void cdc_reply_destroy(cdc_reply_t **reply_p)
{
    if (!reply_p || !*reply_p)
        return;
    reply_release(*reply_p);
    *reply_p = NULL;
}

/* ---- receiving ---------------------------------------------------------- */

/* Best effort: the request id of a message that failed validation, so the
   sender can match the ERROR to its request. */
static uint64_t salvage_request_id(zmq_msg_t *header, int32_t *shard)
{
    cdc_msg_header_t h;
    *shard = 0;
    if (cdc_msg_header_unpack(zmq_msg_data(header), zmq_msg_size(header), &h) != CDC_OK ||
        h.magic != CDC_PROTO_MAGIC)
        return 0;
    *shard = h.shard >= 0 && h.shard < 64 ? h.shard : 0;
    return h.request_id;
}

/* Read the rest of a message whose routing id is in *route: up to
   CDC_PROTO_MAX_FRAMES frames into request->parts; *extra counts the frames
   beyond (which are closed). */
static int recv_frames(cdc_server_t *self, zmq_msg_t *route, cdc_request_t *request,
                       int *extra)
{
    *extra = 0;
    int more = zmq_msg_more(route);
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, self->router, 0) < 0) {
            zmq_msg_close(&part);
            return cdc__fail(CDC_ETRANSPORT, "receive: %s", zmq_strerror(zmq_errno()));
        }
        more = zmq_msg_more(&part);
        if (request->count < CDC_PROTO_MAX_FRAMES) {
            request->parts[request->count++] = part;
        } else {
            (*extra)++;
            zmq_msg_close(&part);
        }
    }
    return CDC_OK;
}

static int decode(cdc_request_t *request, int extra)
{
    if (request->count < 1)
        return cdc__fail(CDC_EPROTO, "message has no protocol frames");
    if (extra > 0)
        return cdc__fail(CDC_EPROTO, "message has %d frames, at most %d",
                         request->count + extra, CDC_PROTO_MAX_FRAMES);
    cdc_frame_t frames[CDC_PROTO_MAX_FRAMES];
    for (int i = 0; i < request->count; i++) {
        frames[i].data = zmq_msg_data(&request->parts[i]);
        frames[i].size = zmq_msg_size(&request->parts[i]);
    }
    return cdc_msg_decode(frames, request->count, &request->msg);
}

static void record_cancel(cdc_server_t *self, peer_t *from, uint64_t request_id)
{
    principal_t *peer = from->principal;
    pthread_mutex_lock(&self->lock);
    peer->cancelled[peer->cancel_next] = request_id;
    peer->cancel_next = (peer->cancel_next + 1) % MAX_CANCELS;
    if (peer->cancel_count < MAX_CANCELS)
        peer->cancel_count++;
    self->counters.cancels++;
    pthread_mutex_unlock(&self->lock);
}

int cdc_server_cancelled(cdc_server_t *self, const cdc_request_t *request,
                         uint64_t request_id)
{
    const principal_t *peer = request->peer->principal;
    int found = 0;
    pthread_mutex_lock(&self->lock);
    for (int i = 0; i < peer->cancel_count && !found; i++)
        found = peer->cancelled[i] == request_id;
    pthread_mutex_unlock(&self->lock);
    return found;
}

static void set_identity(cdc_request_t *request)
{
    request->identity.connection = request->peer->connection;
    snprintf(request->identity.user_id, sizeof request->identity.user_id, "%s",
             request->peer->principal->user_id);
}

/* One message off the socket: CDC_OK with a request (maybe a CANCEL), or a
   status (the invalid ones answered). */
static int recv_one(cdc_server_t *self, cdc_request_t **request_p)
{
    zmq_msg_t route;
    zmq_msg_init(&route);
    if (zmq_msg_recv(&route, self->router, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&route);
        if (zmq_errno() == EAGAIN)
            return CDC_ETIMEDOUT;
        return cdc__fail(CDC_ETRANSPORT, "receive: %s", zmq_strerror(zmq_errno()));
    }
    /* Out of memory, the rest of the message is still read (into a scratch
       request) so that the next receive starts at a message boundary. */
    static _Thread_local cdc_request_t scratch;
    cdc_request_t *request = calloc(1, sizeof *request);
    int extra = 0;
    int rc = recv_frames(self, &route, request ? request : &scratch, &extra);
    if (!request) {
        for (int i = 0; i < scratch.count; i++)
            zmq_msg_close(&scratch.parts[i]);
        scratch.count = 0;
        rc = cdc__fail(CDC_ENOMEM, "request");
    }
    /* Present only when a security mechanism authenticated the connection;
       libzmq attaches it to the frames the peer sent, not the routing id. */
    const char *user_id = rc == CDC_OK && request->count > 0
                              ? zmq_msg_gets(&request->parts[0], "User-Id")
                              : NULL;
    peer_t *peer = rc == CDC_OK ? peer_for(self, zmq_msg_data(&route), zmq_msg_size(&route),
                                           user_id ? user_id : "")
                                : NULL;
    zmq_msg_close(&route);
    if (rc == CDC_OK && !peer)
        rc = cdc__fail(CDC_ENOMEM, "peer record");
    if (rc != CDC_OK) {
        cdc_request_destroy(&request); /* the rest of the message is dropped */
        return rc;
    }
    count(self, &self->counters.received);
    request->peer = peer_ref(peer);
    request->copy_below = self->copy_below;
    set_identity(request);
    if ((rc = decode(request, extra)) != CDC_OK) {
        int32_t shard = 0;
        uint64_t id = request->count > 0 ? salvage_request_id(&request->parts[0], &shard) : 0;
        count(self, &self->counters.invalid);
        send_error(self, peer, id, shard, CDC_EPROTO, cdc_last_error());
        cdc_request_destroy(&request);
        return CDC_EPROTO;
    }
    *request_p = request;
    return CDC_OK;
}

int cdc_server_recv(cdc_server_t *self, cdc_request_t **request_p)
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
        cdc_request_destroy(&request);
    }
}

const cdc_msg_t *cdc_request_msg(const cdc_request_t *request)
{
    return &request->msg;
}

const cdc_peer_identity_t *cdc_request_peer(const cdc_request_t *request)
{
    return &request->identity;
}

void cdc_request_destroy(cdc_request_t **request_p)
{
    if (!request_p || !*request_p)
        return;
    cdc_request_t *request = *request_p;
    for (int i = 0; i < request->count; i++)
        if (!request->taken[i])
            zmq_msg_close(&request->parts[i]);
    peer_unref(request->peer);
    free(request);
    *request_p = NULL;
}

/* ---- payloads ----------------------------------------------------------- */

cdc_payload_t *cdc_request_take_payload(cdc_request_t *request, int i)
{
    if (i < 0 || i + 1 >= request->count || request->taken[i + 1])
        return NULL;
    zmq_msg_t *frame = &request->parts[i + 1];
    size_t size = zmq_msg_size(frame);
    const void *data = zmq_msg_data(frame);
    cdc_payload_t *payload;
    if (size < request->copy_below || (uintptr_t) data % 8 != 0) {
        payload = cdc_payload_copy(data, size);
        if (!payload)
            return NULL;
        zmq_msg_close(frame);
    } else {
        payload = calloc(1, sizeof *payload);
        if (!payload)
            return NULL;
        payload->is_frame = 1;
        zmq_msg_init(&payload->frame);
        zmq_msg_move(&payload->frame, frame); /* the frame itself: no copy */
        zmq_msg_close(frame);
        payload->data = zmq_msg_data(&payload->frame);
        payload->size = size;
        payload->footprint = cdc__alloc_footprint(sizeof *payload) +
                             cdc__alloc_footprint(size + ZMQ_CONTENT_BYTES);
    }
    request->taken[i + 1] = 1;
    request->msg.payload[i] = (cdc_frame_t){NULL, 0};
    return payload;
}

cdc_payload_t *cdc_payload_adopt(void *data, size_t size)
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

cdc_payload_t *cdc_payload_copy(const void *data, size_t size)
{
    void *copy = malloc(size ? size : 1);
    if (!copy)
        return NULL;
    if (size)
        memcpy(copy, data, size);
    return cdc_payload_adopt(copy, size);
}

void *cdc_payload_data(const cdc_payload_t *payload)
{
    return payload->data;
}

size_t cdc_payload_size(const cdc_payload_t *payload)
{
    return payload->size;
}

size_t cdc_payload_footprint(const cdc_payload_t *payload)
{
    return payload->footprint;
}

void cdc_payload_destroy(cdc_payload_t **payload_p)
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
