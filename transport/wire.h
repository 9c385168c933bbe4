/* wire.h - sending and receiving protocol messages as zmq multipart messages.
 *
 * Only transport/ includes this (it names libzmq types). */
#ifndef CDC_WIRE_H_INCLUDED
#define CDC_WIRE_H_INCLUDED

#include "hold.h"
#include "protocol.h"

#include <zmq.h>

/* Parts kept per received message: a routing id, the protocol frames, and one
   spare so an over-long message is seen as such rather than silently cut. */
#define CDC_WIRE_MAX_PARTS (CDC_PROTO_MAX_FRAMES + 2)

/* ZMQ_MAXMSGSIZE of every socket that talks the protocol: the largest frame
   a valid message has (a chunk; the header is 192 bytes, ERROR text at most
   1 KiB) plus a margin. libzmq allocates a frame as soon as it has read its
   length, before the CURVE handshake completes: this is what one connection
   can make a process allocate per frame. */
#define CDC_WIRE_MAX_FRAME_BYTES ((int64_t) CDC_PROTO_CHUNK_BYTES + 4096)

/* A received message: its parts, grown as they arrive (most messages have
   one to three), and the frame views cdc__wire_decode hands to
   cdc__msg_decode, kept here so a decoded message's payloads stay valid as
   long as this message. */
typedef struct {
    zmq_msg_t *parts;    /* parts[0..count-1] held (initialised)             */
    cdc_frame_t *frames; /* room for capacity views, filled by decoding     */
    int count, capacity;
    int dropped;         /* parts read and closed: past CDC_WIRE_MAX_PARTS,
                            after the message was refused, or no memory to
                            keep them                                        */
    int truncated;       /* the message had more than CDC_WIRE_MAX_PARTS    */
    int out_of_memory;   /* a part could not be kept for want of memory     */
    /* Checked as parts arrive (cdc__wire_recv on a ROUTER or DEALER): */
    int first;           /* part the protocol frames start at (ROUTER 1,
                            DEALER 0); -1: another socket, nothing checked  */
    cdc_msg_shape_t shape; /* the header's, once its part has arrived       */
    int refused;         /* a part broke the protocol: it and every later
                            part closed unkept (the header part is kept)   */
    char reason[256];    /* why, for cdc__wire_decode                       */
    size_t dropped_bytes; /* what the dropped parts held, with their zmq_msg_t */
} cdc_wire_msg_t;

/* Send header + payloads as one multipart message, each payload split into
   chunk frames (CDC_PROTO_CHUNK_BYTES; an empty payload is one empty frame).
   routing_id (ROUTER side) may be NULL. flags may hold ZMQ_DONTWAIT.
   Payloads are copied (cdc__wire_send_held sends held memory without).
   Returns CDC_OK; CDC_ETIMEDOUT when the socket cannot take the message now
   (EAGAIN: no connected peer or queue full); CDC_ENOMEM when a part cannot
   be allocated (every part is built before the first is sent, so nothing is
   sent then); CDC_EINVAL when the payloads need more parts than a message
   may have; CDC_ETRANSPORT on any other zmq error. */
int cdc__wire_send(void *socket, zmq_msg_t *routing_id, const cdc_msg_header_t *header,
                   const cdc_frame_t *payloads, int payload_count, int flags);

/* cdc__wire_send, but a payload i with holds[i] != NULL goes without a copy:
   its chunk frames are slices over payloads[i].data (cdc__wire_slices_build)
   that libzmq reads after this returns, so that memory must stay valid and
   unchanged while holds[i] lives (the owner retires it instead of freeing
   it). holds may be NULL, and holds[i] NULL copies payload i. The hold's
   count is back where it was once libzmq has let go of every slice
   (written out; over inproc, once the receiver closes the message). On
   any failure every reference taken for a part not sent is released before
   this returns: nothing stays retained for a message that did not go. */
int cdc__wire_send_held(void *socket, zmq_msg_t *routing_id, const cdc_msg_header_t *header,
                        const cdc_frame_t *payloads, cdc_hold_t *const *holds,
                        int payload_count, int flags);

/* One payload as zmq frames over the caller's memory: data[0..size) cut
   into chunk frames (CDC_PROTO_CHUNK_BYTES; an empty payload is one empty
   frame) appended at parts[*count...], *count advanced past each. Every
   slice is a zmq_msg_init_data frame holding one reference to hold:
   retained before the slice is built, released when libzmq lets go of the
   frame (on its I/O thread once the bytes are written or the peer is gone,
   on the receiver's close over inproc, or by zmq_msg_close of a frame not
   sent). On failure (CDC_ENOMEM) the slice that failed holds nothing and
   parts[0..*count) are initialised: closing them releases their
   references. Shared by cdc__wire_send_held and the worker's replies. */
int cdc__wire_slices_build(zmq_msg_t *parts, int *count, const void *data, size_t size,
                           cdc_hold_t *hold);

/* Test hook: when >= 0, building part number cdc__wire_fail_alloc_at of the
   next messages (0: the routing id or header) fails as out of memory. -1 in
   production. Not thread-safe; tests only. */
extern int cdc__wire_fail_alloc_at;

/* An empty message (nothing held): what cdc__wire_recv starts from. */
void cdc__wire_msg_init(cdc_wire_msg_t *msg);

/* Room for parts parts (at most CDC_WIRE_MAX_PARTS) in *msg. CDC_OK, or
   CDC_ENOMEM / CDC_EINVAL; *msg is unchanged then. */
int cdc__wire_msg_reserve(cdc_wire_msg_t *msg, int parts);

/* Receive one whole multipart message into *msg (which the caller must later
   release with cdc__wire_msg_close even on failure). A message with more
   parts than CDC_WIRE_MAX_PARTS is still read to its end (the parts past
   the limit closed at once) and marked truncated, so the next receive
   starts at a message boundary.
   On a ROUTER (routing id, then the protocol frames) or a DEALER (the
   protocol frames) each part is checked as it is read: the header part
   against cdc__msg_shape, every later one against the header's shape (its
   count, each chunk's exact size: an empty frame where the protocol sends
   none breaks it). The first part that breaks it refuses the message: that
   part and the rest are read and closed at once, never kept, and
   cdc__wire_decode gives the reason. So a message of millions of frames
   costs this process nothing past what libzmq held before it was readable
   (libzmq queues a multipart message whole before the first part can be
   read; docs/protocol.md), and that memory is handed back to the system
   (malloc_trim) once such a message is drained. Other sockets (a monitor's
   PAIR) are not checked. Returns CDC_OK, CDC_ETIMEDOUT when none is
   waiting (with ZMQ_DONTWAIT), CDC_ETRANSPORT. */
int cdc__wire_recv(void *socket, cdc_wire_msg_t *msg, int flags);

/* Release every part of *msg and its arrays. Accepts a message already
   closed. */
void cdc__wire_msg_close(cdc_wire_msg_t *msg);

/* Validate parts[first..count-1] of *msg as a protocol message; *decoded's
   payloads point into *msg (valid until it is closed). CDC_EPROTO when the
   message was refused as it arrived, was truncated or fails cdc__msg_decode,
   CDC_ENOMEM when a part could not be kept. */
int cdc__wire_decode(cdc_wire_msg_t *msg, int first, cdc_msg_t *decoded);

#endif
