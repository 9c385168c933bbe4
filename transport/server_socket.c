/* server_socket.c - the worker's ROUTER socket: its context, CURVE with
 * zauth, its options and limits (server.c uses it; server_internal.h).
 *
 * CURVE (options->curve_secret): the ROUTER is a CURVE server on CZMQ's
 * process context, where a zauth actor answers ZAP requests from a directory
 * of allowed client certificates. libzmq only consults the ZAP handler bound
 * in the socket's own context, and a CURVE server with no handler accepts
 * every client key: hence the shared context. A client whose key is not in
 * the directory fails the handshake; the socket never delivers a message from
 * it, so it gets no reply and costs no more than libzmq's handshake. */
#include "server_internal.h"

#include "error.h"
#include "keys.h"
#include "wire.h"

#include <czmq.h>
#include <string.h>
#include <zmq.h>

/* CURVE: load the worker's secret certificate into *cert and start zauth on
   CZMQ's process context (which becomes the server's) with the directory of
   allowed client certificates. */
static int start_auth(cdc_server_t *self, const cdc_server_options_t *options,
                      cdc_curve_cert_t *cert)
{
    if (!options->curve_allow || cdc__curve_path_is_dir(options->curve_allow) != 1)
        return cdc__fail(CDC_ECONFIG, "allowed certificates '%s': not a directory",
                         options->curve_allow ? options->curve_allow : "(none given)");
    int rc = cdc__curve_load_secret(options->curve_secret, cert);
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
    return cdc__server_reload_allowed(self);
}

int cdc__server_reload_allowed(cdc_server_t *self)
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

/* Bounds on what peers cost (issue 9): a peer that does not read gets at
   most send_hwm replies queued, then the ROUTER refuses more (MANDATORY:
   an error to count, not a silent drop); a connection that does not finish
   its handshake within handshake_ms is closed, so idle connections, which
   libzmq cannot cap, do not accumulate. */
static int set_limits(void *router, const cdc_server_options_t *options)
{
    int hwm = options->send_hwm > 0 ? options->send_hwm : CDC_SERVER_DEFAULT_SEND_HWM;
    int handshake = options->handshake_ms > 0 ? options->handshake_ms
                                              : CDC_SERVER_DEFAULT_HANDSHAKE_MS;
    int mandatory = 1;
    if (zmq_setsockopt(router, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0 ||
        zmq_setsockopt(router, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof mandatory) != 0 ||
        zmq_setsockopt(router, ZMQ_HANDSHAKE_IVL, &handshake, sizeof handshake) != 0)
        return cdc__fail(CDC_ETRANSPORT, "socket limits: %s", zmq_strerror(zmq_errno()));
    return CDC_OK;
}

int cdc__server_open_socket(cdc_server_t *self, const cdc_server_options_t *options)
{
    cdc_curve_cert_t cert;
    memset(&cert, 0, sizeof cert);
    int rc = open_context(self, options, &cert);
    if (rc == CDC_OK && !(self->router = zmq_socket(self->context, ZMQ_ROUTER)))
        rc = cdc__fail(CDC_ETRANSPORT, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    if (rc == CDC_OK && options->curve_secret)
        rc = make_curve_server(self->router, &cert);
    cdc__curve_cert_clear(&cert);
    if (rc != CDC_OK)
        return rc;
    int linger = 0;
    /* No valid frame is larger than a chunk: what a stranger can make libzmq
       allocate for one frame before the handshake completes (wire.h). */
    int64_t max_message =
        options->max_message ? (int64_t) options->max_message : CDC_WIRE_MAX_FRAME_BYTES;
    int buffer = options->buffer_bytes > 0 ? options->buffer_bytes
                                           : 4 << 20; /* weight shards are tens of MB */
    zmq_setsockopt(self->router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(self->router, ZMQ_MAXMSGSIZE, &max_message, sizeof max_message);
    zmq_setsockopt(self->router, ZMQ_SNDBUF, &buffer, sizeof buffer);
    zmq_setsockopt(self->router, ZMQ_RCVBUF, &buffer, sizeof buffer);
    if ((rc = set_limits(self->router, options)) != CDC_OK)
        return rc;
    if (zmq_bind(self->router, options->bind) != 0)
        return cdc__fail(CDC_ETRANSPORT, "bind %s: %s", options->bind,
                         zmq_strerror(zmq_errno()));
    return CDC_OK;
}
