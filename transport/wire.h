/* wire.h - sending and receiving protocol messages as zmq multipart messages.
 *
 * Only transport/ includes this (it names libzmq types). */
#ifndef CDC_WIRE_H_INCLUDED
#define CDC_WIRE_H_INCLUDED

#include "protocol.h"

#include <zmq.h>

/* Frames kept per received message: a routing id, the protocol frames, and one
   spare so an over-long message is seen as such rather than silently cut. */
#define CDC_WIRE_MAX_PARTS (CDC_PROTO_MAX_FRAMES + 2)

typedef struct {
    zmq_msg_t parts[CDC_WIRE_MAX_PARTS];
    int count;     /* parts held (initialised) in parts[]                  */
    int truncated; /* the message had more parts than CDC_WIRE_MAX_PARTS   */
} cdc_wire_msg_t;

/* Send header + payloads as one multipart message. routing_id (ROUTER side)
   may be NULL. flags may hold ZMQ_DONTWAIT. Payloads are copied. Returns
   CDC_OK; CDC_ETIMEDOUT when the socket cannot take the message now (EAGAIN:
   no connected peer or queue full); CDC_ENOMEM when a part cannot be
   allocated (every part is built before the first is sent, so nothing is
   sent then); CDC_ETRANSPORT on any other zmq error. */
int cdc_wire_send(void *socket, zmq_msg_t *routing_id, const cdc_msg_header_t *header,
                  const cdc_frame_t *payloads, int payload_count, int flags);

/* Test hook: when >= 0, building part number cdc__wire_fail_alloc_at of the
   next messages (0: the routing id or header) fails as out of memory. -1 in
   production. Not thread-safe; tests only. */
extern int cdc__wire_fail_alloc_at;

/* Receive one whole multipart message into *msg (which the caller must later
   release with cdc_wire_msg_close even on failure). Returns CDC_OK,
   CDC_ETIMEDOUT when none is waiting (with ZMQ_DONTWAIT), CDC_ETRANSPORT. */
int cdc_wire_recv(void *socket, cdc_wire_msg_t *msg, int flags);

/* Release every part of *msg. Accepts a message already closed. */
void cdc_wire_msg_close(cdc_wire_msg_t *msg);

/* Validate parts[first..count-1] of *msg as a protocol message. CDC_EPROTO when
   the message was truncated or fails cdc_msg_decode. */
int cdc_wire_decode(const cdc_wire_msg_t *msg, int first, cdc_msg_t *decoded);

#endif
