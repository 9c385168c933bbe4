/* discovery.h - workers announce themselves on the LAN; coordinators listen.
 *
 * Plain C (no zmq or czmq types). Built on CZMQ's zbeacon (UDP broadcast,
 * IPv4): a worker started with --announce broadcasts one small beacon every
 * interval; a coordinator with CDCGEMM_WORKERS=discover listens and admits
 * the workers whose public key it trusts (CDCGEMM_CURVE_SERVER). A beacon
 * proves nothing by itself: the CURVE handshake with the announced key does.
 *
 * Beacon (48 bytes): "CDCG", u16 wire protocol version, u16 tcp port (both
 * little-endian), the worker's CURVE public key in Z85 (40 characters). The
 * endpoint is tcp://SENDER-ADDRESS:PORT, the sender address as the coordinator
 * saw it (a worker bound to every interface need not know its own address). */
#ifndef CDC_DISCOVERY_H_INCLUDED
#define CDC_DISCOVERY_H_INCLUDED

#include "keys.h"

#define CDC_DISCOVERY_DEFAULT_PORT 47474 /* UDP port of the beacons          */
#define CDC_DISCOVERY_INTERVAL_MS 500    /* a worker's beacon period         */
#define CDC_DISCOVERY_BEACON_BYTES 48
#define CDC_DISCOVERY_SKIP_MAX 256       /* malformed beacons skipped per
                                            cdc__listener_next             */

typedef struct cdc_announcer cdc_announcer_t;
typedef struct cdc_listener cdc_listener_t;

/* One worker heard. */
typedef struct {
    char endpoint[CDC_CURVE_ENDPOINT_MAX]; /* tcp://ADDRESS:PORT              */
    char public_txt[CDC_CURVE_KEY_TEXT];   /* its CURVE public key, Z85       */
    int version;                           /* its wire protocol version       */
} cdc_discovered_t;

/* Where beacons go: udp_port (0: the default) on interface (NULL or "":
   CZMQ's choice, the first broadcast interface or ZSYS_INTERFACE; else an
   interface name such as eth0, which pins it; CZMQ keeps this choice
   process-wide). */
typedef struct {
    int udp_port;
    const char *interface;
} cdc_discovery_where_t;

/* Start broadcasting this worker: tcp_port and public_txt (Z85) every
   interval_ms (0: CDC_DISCOVERY_INTERVAL_MS). Returns CDC_OK or
   CDC_ETRANSPORT when no broadcast interface exists (the detail names the
   interface). Caller owns *announcer_p; stop it with cdc__announcer_destroy. */
int cdc__announcer_new(const cdc_discovery_where_t *where, int tcp_port, const char *public_txt,
                       int interval_ms, cdc_announcer_t **announcer_p);

/* Stop broadcasting; accepts NULL and *NULL; nulls *announcer_p. */
void cdc__announcer_destroy(cdc_announcer_t **announcer_p);

/* Start listening for beacons. Returns CDC_OK or CDC_ETRANSPORT as above.
   Caller owns *listener_p; stop it with cdc__listener_destroy. */
int cdc__listener_new(const cdc_discovery_where_t *where, cdc_listener_t **listener_p);

/* Stop listening; accepts NULL and *NULL; nulls *listener_p. */
void cdc__listener_destroy(cdc_listener_t **listener_p);

/* The next well-formed beacon heard within timeout_ms (0: only one already
   waiting). CDC_OK with *found filled; CDC_ETIMEDOUT when none, or after
   CDC_DISCOVERY_SKIP_MAX malformed beacons (wrong size or magic, a key that
   is not Z85), which are skipped. Not
   thread-safe: one thread per listener. */
int cdc__listener_next(cdc_listener_t *self, int timeout_ms, cdc_discovered_t *found);

/* Drop up to max beacons waiting, unread: what is past a pass's bound. Returns
   how many were dropped. */
int cdc__listener_drain(cdc_listener_t *self, int max);

/* The libzmq socket (a void * as zmq_poll takes it) that turns readable
   when a beacon is waiting: for a poll loop beside other sockets. */
void *cdc__listener_socket(const cdc_listener_t *self);

/* Parse "discover" or "discover:PORT" (CDCGEMM_WORKERS). Returns 1 and sets
   *udp_port (0: default) when text asks for discovery, 0 when it does not,
   -1 when it starts with "discover" but the port is not 1..65535. */
int cdc__discovery_parse(const char *text, int *udp_port);

#endif
