/* wire.c - protocol messages over zmq multipart (copying or zero-copy sends,
   owned receives). */
#include "wire.h"

#include "error.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int map_errno(const char *what)
{
    int err = zmq_errno();
    if (err == EAGAIN)
        return CDC_ETIMEDOUT; /* callers treat this as "peer not reachable now" */
    return cdc__fail(CDC_ETRANSPORT, "%s: %s", what, zmq_strerror(err));
}

/* Dropped parts of one message worth giving memory back for: far more
   than any valid message drops (none), little enough that a flood of
   empty frames is returned at once. */
#define CDC_WIRE_TRIM_BYTES ((size_t) 1 << 20)

int cdc__wire_fail_alloc_at = -1;

/* Part i of a message: a copy of size bytes of data (NULL: empty). */
static int part_build(zmq_msg_t *part, int i, const void *data, size_t size)
{
    if (i == cdc__wire_fail_alloc_at || zmq_msg_init_size(part, size) != 0)
        return cdc__fail(CDC_ENOMEM, "zmq message part %d of %zu bytes", i, size);
    if (size)
        memcpy(zmq_msg_data(part), data, size);
    return CDC_OK;
}

/* libzmq is done with a slice: its reference goes. Any thread (libzmq's I/O
   thread, a receiver's over inproc, the sender's for a slice not sent). */
static void slice_release(void *data, void *hint)
{
    (void) data;
    cdc__hold_release(hint);
}

int cdc__wire_slices_build(zmq_msg_t *parts, int *count, const void *data, size_t size,
                           cdc_hold_t *hold)
{
    int frames = cdc__msg_payload_frames(size);
    for (int j = 0; j < frames; j++) {
        size_t at = (size_t) j * CDC_PROTO_CHUNK_BYTES, left = size - at;
        size_t chunk = left < CDC_PROTO_CHUNK_BYTES ? left : CDC_PROTO_CHUNK_BYTES;
        /* Before libzmq could let go of the slice (and free what it holds). */
        cdc__hold_retain(hold);
        if (*count == cdc__wire_fail_alloc_at ||
            zmq_msg_init_data(&parts[*count], data ? (uint8_t *) data + at : NULL, chunk,
                              slice_release, hold) != 0) {
            cdc__hold_release(hold); /* not the last: the caller holds one */
            return cdc__fail(CDC_ENOMEM, "zmq message part %d: slice %d of %d", *count,
                             j + 1, frames);
        }
        (*count)++;
    }
    return CDC_OK;
}

static void parts_close(zmq_msg_t *parts, int from, int count)
{
    for (int i = from; i < count; i++)
        zmq_msg_close(&parts[i]);
}

/* Parts the message will have: routing id, header, every payload's chunks;
   -1 when the protocol frames would be more than any receiver accepts. */
static int parts_needed(int routed, const cdc_frame_t *payloads, int payload_count)
{
    int frames = 1;
    for (int i = 0; i < payload_count; i++) {
        int chunks = cdc__msg_payload_frames(payloads[i].size);
        if (chunks > CDC_PROTO_MAX_FRAMES - frames)
            return -1;
        frames += chunks;
    }
    return frames + (routed ? 1 : 0);
}

/* Header, then each payload cut into chunks (copies, or slices of a held
   payload), into parts[*count...]. On failure the part at *count was not
   initialised. */
static int build_protocol_parts(zmq_msg_t *parts, int *count, const cdc_msg_header_t *header,
                                const cdc_frame_t *payloads, cdc_hold_t *const *holds,
                                int payload_count)
{
    uint8_t packed[CDC_PROTO_HEADER_SIZE];
    cdc__msg_header_pack(header, packed);
    int rc = part_build(&parts[*count], *count, packed, sizeof packed);
    if (rc == CDC_OK)
        (*count)++;
    for (int i = 0; rc == CDC_OK && i < payload_count; i++) {
        if (holds && holds[i]) {
            rc = cdc__wire_slices_build(parts, count, payloads[i].data, payloads[i].size,
                                        holds[i]);
            continue;
        }
        int frames = cdc__msg_payload_frames(payloads[i].size);
        const uint8_t *data = payloads[i].data;
        for (int j = 0; rc == CDC_OK && j < frames; j++) {
            size_t at = (size_t) j * CDC_PROTO_CHUNK_BYTES, left = payloads[i].size - at;
            rc = part_build(&parts[*count], *count, data ? data + at : NULL,
                            left < CDC_PROTO_CHUNK_BYTES ? left : CDC_PROTO_CHUNK_BYTES);
            if (rc == CDC_OK)
                (*count)++;
        }
    }
    return rc;
}

int cdc__wire_send(void *socket, zmq_msg_t *routing_id, const cdc_msg_header_t *header,
                   const cdc_frame_t *payloads, int payload_count, int flags)
{
    return cdc__wire_send_held(socket, routing_id, header, payloads, NULL, payload_count,
                               flags);
}

int cdc__wire_send_held(void *socket, zmq_msg_t *routing_id, const cdc_msg_header_t *header,
                        const cdc_frame_t *payloads, cdc_hold_t *const *holds,
                        int payload_count, int flags)
{
    if (payload_count < 0 || payload_count > CDC_PROTO_MAX_PAYLOADS)
        return cdc__fail(CDC_EINVAL, "send: %d payloads, at most %d", payload_count,
                         CDC_PROTO_MAX_PAYLOADS);
    int total = parts_needed(routing_id != NULL, payloads, payload_count);
    if (total < 0)
        return cdc__fail(CDC_EINVAL, "send: payloads need more than %d frames",
                         CDC_PROTO_MAX_FRAMES);
    /* Every part is built before the first is sent: a part that cannot be
       allocated once the first left with "more" would leave half a message
       that merges with the next one (issue 9, finding 7). */
    zmq_msg_t *parts = malloc((size_t) total * sizeof *parts);
    if (!parts)
        return cdc__fail(CDC_ENOMEM, "send: %d message parts", total);
    int count = 0;
    if (routing_id) {
        zmq_msg_init(&parts[count]);
        zmq_msg_copy(&parts[count++], routing_id);
    }
    int rc = build_protocol_parts(parts, &count, header, payloads, holds, payload_count);
    if (rc != CDC_OK) {
        /* Part `count` was not initialised; closing a slice releases its
           reference. */
        parts_close(parts, 0, count);
        free(parts);
        return rc;
    }
    /* Once the first part is accepted zmq queues the rest atomically (its
       high-water mark counts whole messages), so a later EAGAIN cannot leave
       half a message on the wire. A part not sent is closed (a slice's
       reference goes with it); a sent one is libzmq's to let go. */
    for (int i = 0; i < count; i++) {
        if (zmq_msg_send(&parts[i], socket, flags | (i + 1 < count ? ZMQ_SNDMORE : 0)) < 0) {
            parts_close(parts, i, count);
            rc = map_errno(i == 0 ? "send" : "send part");
            break;
        }
    }
    free(parts);
    return rc;
}

void cdc__wire_msg_init(cdc_wire_msg_t *msg)
{
    memset(msg, 0, sizeof *msg);
}

int cdc__wire_msg_reserve(cdc_wire_msg_t *msg, int parts)
{
    if (parts <= msg->capacity)
        return CDC_OK;
    if (parts > CDC_WIRE_MAX_PARTS)
        return cdc__fail(CDC_EINVAL, "message of %d parts, at most %d", parts,
                         CDC_WIRE_MAX_PARTS);
    zmq_msg_t *grown = realloc(msg->parts, (size_t) parts * sizeof *grown);
    if (!grown)
        return cdc__fail(CDC_ENOMEM, "message of %d parts", parts);
    msg->parts = grown; /* zmq_msg_t is moved as bytes, as zmq_msg_move does */
    cdc_frame_t *frames = realloc(msg->frames, (size_t) parts * sizeof *frames);
    if (!frames)
        return cdc__fail(CDC_ENOMEM, "message of %d parts", parts);
    msg->frames = frames;
    msg->capacity = parts;
    return CDC_OK;
}

/* Where the protocol frames start on socket: after the routing id on a
   ROUTER, at once on a DEALER; -1 on a socket that carries no protocol
   messages (a monitor's PAIR), whose parts are not checked. */
static int protocol_first(void *socket)
{
    int type = -1;
    size_t size = sizeof type;
    if (zmq_getsockopt(socket, ZMQ_TYPE, &type, &size) != 0)
        return -1;
    return type == ZMQ_ROUTER ? 1 : type == ZMQ_DEALER ? 0 : -1;
}

/* Protocol frame index of part (0: the header) against the message so far;
   the first one that breaks the protocol refuses the message (issue 24:
   millions of empty frames must not be kept before anything looks at
   them). */
static void check_part(cdc_wire_msg_t *msg, int index, zmq_msg_t *part)
{
    cdc_frame_t frame = {zmq_msg_data(part), zmq_msg_size(part)};
    int rc = index == 0 ? cdc__msg_shape(&frame, &msg->shape)
                        : cdc__msg_shape_frame(&msg->shape, index, frame.size);
    if (rc != CDC_OK) {
        /* The detail alone: cdc__wire_decode fails with it again. */
        const char *why = cdc_last_error(), *status = cdc_strerror(rc);
        size_t skip = strlen(status);
        if (strncmp(why, status, skip) == 0 && strncmp(why + skip, ": ", 2) == 0)
            why += skip + 2;
        msg->refused = 1;
        snprintf(msg->reason, sizeof msg->reason, "%s", why);
    }
}

/* Keep part as the next of *msg, or close it (counted) when the message is
   refused (the routing id and header are kept: the ERROR names the
   request), past CDC_WIRE_MAX_PARTS, or there is no memory to keep it. */
static void keep_part(cdc_wire_msg_t *msg, zmq_msg_t *part)
{
    int index = msg->count + msg->dropped - msg->first;
    if (msg->first >= 0 && index >= 0 && !msg->refused)
        check_part(msg, index, part);
    int keep = !(msg->refused && index > 0);
    if (keep && msg->count == msg->capacity && !msg->truncated && !msg->out_of_memory) {
        int want = msg->capacity < 4 ? 4 : 2 * msg->capacity;
        want = want > CDC_WIRE_MAX_PARTS ? CDC_WIRE_MAX_PARTS : want;
        if (msg->count == CDC_WIRE_MAX_PARTS)
            msg->truncated = 1;
        else if (cdc__wire_msg_reserve(msg, want) != CDC_OK)
            msg->out_of_memory = 1;
    }
    if (keep && msg->count < msg->capacity && !msg->truncated && !msg->out_of_memory) {
        msg->parts[msg->count++] = *part;
        return;
    }
    msg->dropped++;
    msg->dropped_bytes += zmq_msg_size(part) + sizeof *part;
    zmq_msg_close(part);
}

int cdc__wire_recv(void *socket, cdc_wire_msg_t *msg, int flags)
{
    cdc__wire_msg_init(msg);
    msg->first = protocol_first(socket);
    int more = 1, first = 1;
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        /* Only the first part may wait; the rest are already here. */
        if (zmq_msg_recv(&part, socket, first ? flags : 0) < 0) {
            zmq_msg_close(&part);
            return map_errno("receive");
        }
        first = 0;
        more = zmq_msg_more(&part);
        keep_part(msg, &part);
    }
    /* libzmq held the whole message before its first part could be read
       (64 bytes a part even for empty ones, in its I/O thread's heap); once
       those parts are freed glibc keeps the pages unless asked. */
    if (msg->dropped_bytes >= CDC_WIRE_TRIM_BYTES)
        malloc_trim(0);
    return CDC_OK;
}

void cdc__wire_msg_close(cdc_wire_msg_t *msg)
{
    parts_close(msg->parts, 0, msg->count);
    free(msg->parts);
    free(msg->frames);
    cdc__wire_msg_init(msg);
}

int cdc__wire_decode(cdc_wire_msg_t *msg, int first, cdc_msg_t *decoded)
{
    int count = msg->count + msg->dropped - first;
    if (msg->refused)
        return cdc__fail(CDC_EPROTO, "%s (%d frames in all)", msg->reason, count);
    if (msg->truncated)
        return cdc__fail(CDC_EPROTO, "message has %d frames, at most %d", count,
                         CDC_PROTO_MAX_FRAMES);
    if (msg->out_of_memory)
        return cdc__fail(CDC_ENOMEM, "no memory to keep a message of %d frames", count);
    if (count < 1)
        return cdc__fail(CDC_EPROTO, "message has no protocol frames");
    for (int i = 0; i < count; i++) {
        zmq_msg_t *part = &msg->parts[first + i];
        msg->frames[i] = (cdc_frame_t){zmq_msg_data(part), zmq_msg_size(part)};
    }
    return cdc__msg_decode(msg->frames, count, decoded);
}
