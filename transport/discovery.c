/* discovery.c - worker beacons over CZMQ's zbeacon (see discovery.h).
 *
 * zbeacon is an actor on CZMQ's process context; starting it runs zsys_init,
 * which would install SIGINT and SIGTERM handlers in the host program (with
 * the coordinator, the user's program): zsys_handler_set(NULL) first, as the
 * worker's zauth does. */
#include "discovery.h"

#include "error.h"
#include "protocol.h"

#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC "CDCG"

struct cdc_announcer {
    zactor_t *beacon;
};

struct cdc_listener {
    zactor_t *beacon;
};

/* A zbeacon on where's port and interface; NULL (with the error set) when
   the system has no usable broadcast interface. */
static zactor_t *beacon_open(const cdc_discovery_where_t *where)
{
    zsys_handler_set(NULL);
    if (where->interface && *where->interface)
        zsys_set_interface(where->interface);
    zactor_t *beacon = zactor_new(zbeacon, NULL);
    if (!beacon) {
        cdc__fail(CDC_ETRANSPORT, "discovery: cannot start a beacon");
        return NULL;
    }
    int port = where->udp_port > 0 ? where->udp_port : CDC_DISCOVERY_DEFAULT_PORT;
    zsock_send(beacon, "si", "CONFIGURE", port);
    char *hostname = zstr_recv(beacon);
    int usable = hostname && *hostname;
    zstr_free(&hostname);
    if (!usable) {
        zactor_destroy(&beacon);
        cdc__fail(CDC_ETRANSPORT,
                  "discovery: no broadcast interface%s%s for UDP port %d (name one with "
                  "the interface setting)",
                  where->interface && *where->interface ? " named " : "",
                  where->interface ? where->interface : "", port);
        return NULL;
    }
    return beacon;
}

int cdc__announcer_new(const cdc_discovery_where_t *where, int tcp_port, const char *public_txt,
                       int interval_ms, cdc_announcer_t **announcer_p)
{
    *announcer_p = NULL;
    if (tcp_port < 1 || tcp_port > 65535 || !public_txt ||
        strlen(public_txt) != CDC_CURVE_KEY_TEXT - 1)
        return cdc__fail(CDC_EINVAL, "announce: needs a tcp port and a CURVE public key");
    cdc_announcer_t *self = calloc(1, sizeof *self);
    if (!self)
        return cdc__fail(CDC_ENOMEM, "announcer");
    if (!(self->beacon = beacon_open(where))) {
        free(self);
        return CDC_ETRANSPORT;
    }
    uint8_t beacon[CDC_DISCOVERY_BEACON_BYTES];
    memcpy(beacon, MAGIC, 4);
    beacon[4] = (uint8_t) (CDC_PROTO_VERSION & 0xff);
    beacon[5] = (uint8_t) (CDC_PROTO_VERSION >> 8);
    beacon[6] = (uint8_t) (tcp_port & 0xff);
    beacon[7] = (uint8_t) (tcp_port >> 8);
    memcpy(beacon + 8, public_txt, CDC_CURVE_KEY_TEXT - 1);
    zsock_send(self->beacon, "sbi", "PUBLISH", beacon, sizeof beacon,
               interval_ms > 0 ? interval_ms : CDC_DISCOVERY_INTERVAL_MS);
    *announcer_p = self;
    return CDC_OK;
}

void cdc__announcer_destroy(cdc_announcer_t **announcer_p)
{
    if (!announcer_p || !*announcer_p)
        return;
    zactor_destroy(&(*announcer_p)->beacon);
    free(*announcer_p);
    *announcer_p = NULL;
}

int cdc__listener_new(const cdc_discovery_where_t *where, cdc_listener_t **listener_p)
{
    *listener_p = NULL;
    cdc_listener_t *self = calloc(1, sizeof *self);
    if (!self)
        return cdc__fail(CDC_ENOMEM, "listener");
    if (!(self->beacon = beacon_open(where))) {
        free(self);
        return CDC_ETRANSPORT;
    }
    zsock_send(self->beacon, "sb", "SUBSCRIBE", MAGIC, (size_t) 4);
    *listener_p = self;
    return CDC_OK;
}

void cdc__listener_destroy(cdc_listener_t **listener_p)
{
    if (!listener_p || !*listener_p)
        return;
    /* zactor_destroy waits for the actor's end on its pipe, with the pipe's
       receive timeout: cdc__listener_next leaves it at 0, and then the wait
       returned at once, the pipe was destroyed under the running actor, and
       CZMQ's shutdown at exit met that thread still using its sockets
       (libzmq "Assertion failed: pfd.revents & POLLIN", 1 exit in ~8 of the
       netns discovery runs). Wait for it. */
    zsock_set_rcvtimeo((*listener_p)->beacon, -1);
    zactor_destroy(&(*listener_p)->beacon);
    free(*listener_p);
    *listener_p = NULL;
}

static int is_z85(const char *text, size_t len)
{
    static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                   ".-:+=^!/*?&<>()[]{}@%$#";
    for (size_t i = 0; i < len; i++)
        if (!text[i] || !strchr(alphabet, text[i]))
            return 0;
    return 1;
}

/* A beacon's bytes from address into *found; 0 when malformed. */
static int beacon_parse(const char *address, const uint8_t *data, size_t size,
                        cdc_discovered_t *found)
{
    if (size != CDC_DISCOVERY_BEACON_BYTES || memcmp(data, MAGIC, 4) != 0 ||
        !is_z85((const char *) data + 8, CDC_CURVE_KEY_TEXT - 1) || strlen(address) > 64)
        return 0;
    int port = data[6] | data[7] << 8;
    if (port < 1)
        return 0;
    found->version = data[4] | data[5] << 8;
    memcpy(found->public_txt, data + 8, CDC_CURVE_KEY_TEXT - 1);
    found->public_txt[CDC_CURVE_KEY_TEXT - 1] = '\0';
    snprintf(found->endpoint, sizeof found->endpoint, "tcp://%s:%d", address, port);
    return 1;
}

int cdc__listener_next(cdc_listener_t *self, int timeout_ms, cdc_discovered_t *found)
{
    zsock_set_rcvtimeo(self->beacon, timeout_ms);
    /* Bounded: a flood of malformed beacons arriving as fast as they are
       skipped must not keep the caller (the heartbeat thread) here. */
    for (int skipped = 0; skipped <= CDC_DISCOVERY_SKIP_MAX; skipped++) {
        char *address = zstr_recv(self->beacon);
        if (!address)
            return CDC_ETIMEDOUT;
        zframe_t *content = zframe_recv(self->beacon);
        int ok = content && beacon_parse(address, zframe_data(content), zframe_size(content),
                                         found);
        zstr_free(&address);
        zframe_destroy(&content);
        if (ok)
            return CDC_OK;
        zsock_set_rcvtimeo(self->beacon, 0); /* skip malformed ones already waiting */
    }
    return CDC_ETIMEDOUT;
}

int cdc__listener_drain(cdc_listener_t *self, int max)
{
    void *socket = zsock_resolve(self->beacon);
    int dropped = 0;
    while (dropped < max) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, socket, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&part);
            break;
        }
        int more = zmq_msg_more(&part);
        zmq_msg_close(&part);
        dropped += !more; /* a beacon is two parts: its sender, its bytes */
    }
    return dropped;
}

void *cdc__listener_socket(const cdc_listener_t *self)
{
    return zsock_resolve(self->beacon);
}

int cdc__discovery_parse(const char *text, int *udp_port)
{
    *udp_port = 0;
    if (strncmp(text, "discover", 8) != 0)
        return 0;
    if (text[8] == '\0')
        return 1;
    if (text[8] != ':')
        return 0;
    char *end = NULL;
    long port = strtol(text + 9, &end, 10);
    if (text[9] < '1' || text[9] > '9' || *end != '\0' || port > 65535)
        return -1;
    *udp_port = (int) port;
    return 1;
}
