/* wire.c - protocol messages over zmq multipart (copying sends, owned receives). */
#include "wire.h"

#include "error.h"

#include <errno.h>
#include <string.h>

static int map_errno(const char *what)
{
    int err = zmq_errno();
    if (err == EAGAIN)
        return CDC_ETIMEDOUT; /* callers treat this as "peer not reachable now" */
    return cdc__fail(CDC_ETRANSPORT, "%s: %s", what, zmq_strerror(err));
}

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

static void parts_close(zmq_msg_t *parts, int from, int count)
{
    for (int i = from; i < count; i++)
        zmq_msg_close(&parts[i]);
}

int cdc_wire_send(void *socket, zmq_msg_t *routing_id, const cdc_msg_header_t *header,
                  const cdc_frame_t *payloads, int payload_count, int flags)
{
    if (payload_count < 0 || payload_count > CDC_WIRE_MAX_PARTS - 2)
        return cdc__fail(CDC_EINVAL, "send: %d payloads, at most %d", payload_count,
                         CDC_WIRE_MAX_PARTS - 2);
    /* Every part is built before the first is sent: a part that cannot be
       allocated once the first left with "more" would leave half a message
       that merges with the next one (issue 9, finding 7). */
    zmq_msg_t parts[CDC_WIRE_MAX_PARTS];
    int count = 0, rc = CDC_OK;
    if (routing_id) {
        zmq_msg_init(&parts[count]);
        zmq_msg_copy(&parts[count++], routing_id);
    }
    uint8_t packed[CDC_PROTO_HEADER_SIZE];
    cdc_msg_header_pack(header, packed);
    rc = part_build(&parts[count], count, packed, sizeof packed);
    for (int i = 0; rc == CDC_OK && i < payload_count; i++) {
        count++;
        rc = part_build(&parts[count], count, payloads[i].data, payloads[i].size);
    }
    if (rc != CDC_OK) {
        parts_close(parts, 0, count); /* part `count` was not initialised */
        return rc;
    }
    count++;
    /* Once the first part is accepted zmq queues the rest atomically, so a
       later EAGAIN cannot leave half a message on the wire. */
    for (int i = 0; i < count; i++) {
        if (zmq_msg_send(&parts[i], socket, flags | (i + 1 < count ? ZMQ_SNDMORE : 0)) < 0) {
            parts_close(parts, i, count);
            return map_errno(i == 0 ? "send" : "send part");
        }
    }
    return CDC_OK;
}

int cdc_wire_recv(void *socket, cdc_wire_msg_t *msg, int flags)
{
    msg->count = 0;
    msg->truncated = 0;
    int more = 1;
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        /* Only the first part may wait; the rest are already here. */
        if (zmq_msg_recv(&part, socket, msg->count == 0 && !msg->truncated ? flags : 0) < 0) {
            zmq_msg_close(&part);
            return map_errno("receive");
        }
        more = zmq_msg_more(&part);
        if (msg->count < CDC_WIRE_MAX_PARTS) {
            msg->parts[msg->count++] = part;
        } else {
            msg->truncated = 1;
            zmq_msg_close(&part);
        }
    }
    return CDC_OK;
}

void cdc_wire_msg_close(cdc_wire_msg_t *msg)
{
    for (int i = 0; i < msg->count; i++)
        zmq_msg_close(&msg->parts[i]);
    msg->count = 0;
}

int cdc_wire_decode(const cdc_wire_msg_t *msg, int first, cdc_msg_t *decoded)
{
    if (msg->truncated)
        return cdc__fail(CDC_EPROTO, "message has more than %d frames", CDC_WIRE_MAX_PARTS);
    int count = msg->count - first;
    if (count < 1)
        return cdc__fail(CDC_EPROTO, "message has no protocol frames");
    cdc_frame_t frames[CDC_WIRE_MAX_PARTS];
    for (int i = 0; i < count; i++) {
        /* zmq_msg_data is not const-qualified; the frames are only read. */
        zmq_msg_t *part = (zmq_msg_t *) &msg->parts[first + i];
        frames[i].data = zmq_msg_data(part);
        frames[i].size = zmq_msg_size(part);
    }
    if (count > CDC_PROTO_MAX_FRAMES)
        return cdc__fail(CDC_EPROTO, "message has %d frames, at most %d", count,
                         CDC_PROTO_MAX_FRAMES);
    return cdc_msg_decode(frames, count, decoded);
}
