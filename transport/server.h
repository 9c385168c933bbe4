/* server.h - the worker's side of the wire: one ROUTER, validated requests, replies.
 *
 * Plain C (no zmq types) so the worker daemon in src/worker/ needs no zmq. The
 * server binds the socket, receives and validates messages (invalid ones are
 * answered with ERROR here), records CANCELs, tells who sent each request,
 * and sends replies under a per-peer budget of bytes in flight.
 *
 * Threads: cdc__server_wait, _recv, _send and _reject belong to the one thread
 * that created the server (zmq sockets are not thread-safe). Building replies,
 * reading requests, payloads, _cancelled, _wake and _counters are safe from
 * any thread, so a compute thread can prepare replies the socket thread sends.
 * Destroy every request, reply and payload before the server. */
#ifndef CDC_SERVER_H_INCLUDED
#define CDC_SERVER_H_INCLUDED

#include "protocol.h"

#include <stddef.h>
#include <stdint.h>

/* Largest routing id (libzmq's bound) and authenticated user id kept. */
#define CDC_PEER_USER_ID_MAX 255
/* Default per-peer bound on reply bytes in flight: one largest possible
   RESULT (2^28 floats) plus room for small replies beside it. */
#define CDC_SERVER_DEFAULT_PEER_BUDGET ((size_t) CDC_PROTO_MAX_FLOATS * 4 + ((size_t) 1 << 20))

/* Default send high-water mark: libzmq's 1000 let a peer that does not read
   hold 1000 replies (issue 9); the worker sets its own from --max-peer-tasks. */
#define CDC_SERVER_DEFAULT_SEND_HWM 128
/* Default handshake interval: libzmq cannot cap connections (libzmq issue
   2877), so idle ones that never handshake are closed soon; a CURVE
   handshake takes milliseconds even over a slow WiFi link. */
#define CDC_SERVER_DEFAULT_HANDSHAKE_MS 2000

typedef struct cdc_server cdc_server_t;
typedef struct cdc_request cdc_request_t;
typedef struct cdc_reply cdc_reply_t;
typedef struct cdc_payload cdc_payload_t;

typedef struct {
    const char *bind;   /* endpoint: tcp://HOST:PORT or ipc://PATH (required)   */
    size_t max_message; /* ZMQ_MAXMSGSIZE; 0: a chunk + 4 KiB (wire.h)     */
    size_t peer_budget; /* reply bytes in flight per peer; 0: the default   */
    int buffer_bytes;   /* SO_SNDBUF/SO_RCVBUF; 0: 4 MiB                      */
    size_t copy_below;  /* payloads smaller than this are copied when taken;
                           0: 64 KiB (see cdc__request_take_payload)          */
    int send_hwm;       /* ZMQ_SNDHWM: replies queued per connection before
                           the socket refuses more (counted in send_failures);
                           0: CDC_SERVER_DEFAULT_SEND_HWM                     */
    int handshake_ms;   /* ZMQ_HANDSHAKE_IVL: a connection that has not
                           finished its handshake by then is closed;
                           0: CDC_SERVER_DEFAULT_HANDSHAKE_MS                 */
    const char *curve_secret; /* CURVE: this server's secret certificate file
                                 (cdcgemm-keygen's PATH_secret); NULL: none  */
    const char *curve_allow;  /* CURVE: directory of the public certificates
                                 of the clients allowed (required with
                                 curve_secret); every other key is refused  */
} cdc_server_options_t;

/* Who sent a request. connection is the server's name for the connection
   (from its routing id): nonzero, never reused while the server lives.
   user_id is the "User-Id" the security handshake (ZAP) authenticated: with
   CURVE, the client's public key in Z85 (40 characters); "" when the
   connection is not authenticated (no CURVE). Per-peer state (CANCELs, the
   reply budget) is kept per user_id when there is one, so every connection
   of one client key shares it; per connection otherwise. */
typedef struct {
    uint64_t connection;
    char user_id[CDC_PEER_USER_ID_MAX + 1];
} cdc_peer_identity_t;

typedef struct {
    uint64_t received;       /* messages read from the socket               */
    uint64_t invalid;        /* of those, answered with ERROR here          */
    uint64_t cancels;        /* CANCEL messages recorded                    */
    uint64_t replies_sent;   /* replies handed to the socket                */
    uint64_t send_failures;  /* replies the socket refused: the peer is gone,
                                or its queue is at the send high-water mark */
    uint64_t over_budget;    /* replies dropped: the peer's budget was full */
    uint64_t peers;          /* connections seen                            */
} cdc_server_counters_t;

/* Defaults: no endpoint, limits as described above. */
void cdc__server_options_init(cdc_server_options_t *options);

/* Bind a ROUTER to options->bind. With options->curve_secret the ROUTER is
   a CURVE server on CZMQ's process context, guarded by a zauth actor that
   allows the keys in options->curve_allow only; a refused client never
   reaches cdc__server_recv. Returns CDC_OK, CDC_ECONFIG (a certificate or the
   directory unusable) or CDC_ETRANSPORT with the zmq error, the detail in
   cdc_last_error(). Caller owns *server_p and must destroy it with
   cdc__server_destroy. */
int cdc__server_new(const cdc_server_options_t *options, cdc_server_t **server_p);

/* Re-read the directory of allowed client certificates (CURVE; without it a
   no-op). Connections already authenticated stay. Returns CDC_OK or
   CDC_ETRANSPORT. Socket thread only. */
int cdc__server_reload_allowed(cdc_server_t *self);

/* Close the socket (pending replies are discarded); accepts NULL and *NULL;
   nulls *server_p. */
void cdc__server_destroy(cdc_server_t **server_p);

/* Wait up to timeout_ms (< 0: for ever) for a message or a cdc__server_wake.
   Returns CDC_OK when either may have happened, CDC_ETIMEDOUT otherwise
   (also when a signal interrupted the wait), CDC_ETRANSPORT on a socket
   error. Socket thread only. */
int cdc__server_wait(cdc_server_t *self, long timeout_ms);

/* Make a cdc__server_wait in progress (or the next one) return at once.
   Thread-safe and async-signal-safe. */
void cdc__server_wake(cdc_server_t *self);

/* Take one waiting message without blocking. CDC_OK: *request_p is a valid
   request; caller owns it and must destroy it with cdc__request_destroy.
   CDC_ETIMEDOUT: nothing waiting. CDC_EPROTO: the message was invalid; it has
   been answered with ERROR (its request id echoed when readable) and counted,
   and *request_p is NULL. CANCEL messages are recorded (cdc__server_cancelled)
   and never returned. Socket thread only. */
int cdc__server_recv(cdc_server_t *self, cdc_request_t **request_p);

/* Answer request with ERROR (code, text cut to CDC_PROTO_MAX_TEXT) now and
   count it as invalid: for valid messages the caller does not accept.
   Socket thread only. */
void cdc__server_reject(cdc_server_t *self, const cdc_request_t *request, int code,
                        const char *text);

/* Whether the sender of request has cancelled request_id (one of the last
   64 distinct request ids it cancelled; a repeated CANCEL is not recorded
   twice). Thread-safe. */
int cdc__server_cancelled(cdc_server_t *self, const cdc_request_t *request,
                          uint64_t request_id);

/* Whether the peer a reply goes to has cancelled the reply's request id (as
   cdc__server_cancelled): a held reply nobody wants any more. Thread-safe. */
int cdc__server_reply_cancelled(cdc_server_t *self, const cdc_reply_t *reply);

/* Tell every peer seen (the last 256 connections) that this worker is
   leaving on purpose: a header-only GOODBYE each, so a coordinator takes it
   out of its plan at once without counting a death. The socket then keeps
   unsent messages up to 200 ms at destroy (instead of dropping them) so the
   GOODBYEs leave. Socket thread only. */
void cdc__server_goodbye(cdc_server_t *self);

/* Copy the counters. Thread-safe. */
void cdc__server_counters(cdc_server_t *self, cdc_server_counters_t *counters);

/* ---- requests ---------------------------------------------------------- */

/* The validated message: header and payload frames (pointing into the
   request; valid until it is destroyed or the frame is taken). */
const cdc_msg_t *cdc__request_msg(const cdc_request_t *request);

/* Who sent it (see cdc_peer_identity_t); valid while the request lives. */
const cdc_peer_identity_t *cdc__request_peer(const cdc_request_t *request);

/* Move payload i out of the request as an owned buffer. A payload of one
   frame is taken without a copy when the frame has its own allocation and
   8-byte aligned data (large frames); one below copy_below bytes is copied
   into a buffer of its own size: libzmq packs small frames into shared 8 KiB
   receive buffers, so keeping the frame would keep the whole buffer alive.
   A payload of several chunks is gathered into one buffer (one copy), each
   chunk freed as soon as it is copied. msg->payload[i] reads as empty
   afterwards. Returns NULL when out of memory or when i is not a payload
   (or was taken). Caller owns the result and must destroy it with
   cdc__payload_destroy. Thread-safe for distinct requests. */
cdc_payload_t *cdc__request_take_payload(cdc_request_t *request, int i);

/* Release the request and every frame not taken; accepts NULL and *NULL;
   nulls *request_p. */
void cdc__request_destroy(cdc_request_t **request_p);

/* ---- payloads ---------------------------------------------------------- */

/* Adopt data (size bytes from malloc) as a payload: free(data) runs when the
   payload is released, after the socket has sent it. Returns NULL (and frees
   data) when out of memory. Caller owns the result. */
cdc_payload_t *cdc__payload_adopt(void *data, size_t size);

/* A payload holding a copy of size bytes. NULL when out of memory. */
cdc_payload_t *cdc__payload_copy(const void *data, size_t size);

/* The bytes (8-byte aligned, writable) and their count. */
void *cdc__payload_data(const cdc_payload_t *payload);
size_t cdc__payload_size(const cdc_payload_t *payload);

/* What holding the payload really costs in memory: its allocation as the
   allocator rounds it, plus libzmq's and this object's bookkeeping. */
size_t cdc__payload_footprint(const cdc_payload_t *payload);

/* Release; accepts NULL and *NULL; nulls *payload_p. Thread-safe. */
void cdc__payload_destroy(cdc_payload_t **payload_p);

/* ---- replies ----------------------------------------------------------- */

/* A reply to request's sender: header plus *payload_p (adopted: the call
   takes it and nulls *payload_p, even on failure; may be NULL or point to
   NULL for a header-only reply). A request may get any number of replies
   (streamed partial results share its request id). The reply's bytes count
   against the peer's budget from now until the socket has sent them or the
   reply is destroyed; when they do not fit, nothing is built, the drop is
   counted (over_budget) and CDC_ETIMEDOUT returned. CDC_ENOMEM when out of
   memory. Caller owns *reply_p and must send or destroy it. Thread-safe. */
int cdc__server_reply_new(cdc_server_t *self, const cdc_request_t *request,
                          const cdc_msg_header_t *header, cdc_payload_t **payload_p,
                          cdc_reply_t **reply_p);

/* An ERROR reply to request: its request id and shard echoed, code, and
   text cut to CDC_PROTO_MAX_TEXT bytes. Built and charged as
   cdc__server_reply_new builds any reply (same statuses; CDC_ENOMEM also
   when the text cannot be copied). Thread-safe. */
int cdc__server_error_new(cdc_server_t *self, const cdc_request_t *request, int code,
                          const char *text, cdc_reply_t **reply_p);

/* The reply's header and payload (NULL when none), for a last look or
   change before it is sent (the worker's fault injection). */
const cdc_msg_header_t *cdc__reply_header(const cdc_reply_t *reply);
cdc_payload_t *cdc__reply_payload(cdc_reply_t *reply);

/* Send *reply_p without blocking and null *reply_p. The payload goes
   without a copy, as chunk frames over slices of its buffer; the reply (its
   budget, its payload) is released when libzmq frees the last slice. CDC_OK
   once the socket took it; CDC_ETIMEDOUT when the socket refused it: the
   peer has left, or has send_hwm replies queued that it is not reading
   (ZMQ_ROUTER_MANDATORY makes the ROUTER say so instead of dropping
   silently). Counted in send_failures; the reply is released. CDC_ENOMEM
   when the slices cannot be built (nothing is sent). Socket thread only. */
int cdc__server_send(cdc_server_t *self, cdc_reply_t **reply_p);

/* Release an unsent reply (its budget returns to the peer); accepts NULL and
   *NULL; nulls *reply_p. Thread-safe. */
void cdc__reply_destroy(cdc_reply_t **reply_p);

#endif
