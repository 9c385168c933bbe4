/* fuzz_reply.c - libFuzzer target: the coordinator's reply decoding.
 *
 * The input is a list of frames (fuzz_frames.h): what a worker (or anything
 * posing as one) sends to the coordinator's DEALER. They are put in zmq
 * messages as cdc__wire_recv leaves them (with its "truncated" mark and the
 * parts it dropped past CDC_WIRE_MAX_PARTS) and decoded by
 * cdc__wire_decode(msg, 0, ...) as
 * transport/client_call.c's call_receive does. zmq_msg_init_size needs no
 * context or socket: nothing touches the network.
 *
 * A decoded reply is then held to what client_call.c relies on when it matches
 * (request id, shard, worker) and applies it: a RESULT whose shape matches a
 * task is gathered whole into that task's rows x cols result buffer (done
 * here into a buffer of exactly that size), an ERROR's text is printed with
 * "%.*s" and an int length, a MISS names a nonzero key to forget. */
#include "fuzz_frames.h"
#include "protocol.h"
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what, const cdc_msg_header_t *h)
{
    fprintf(stderr, "fuzz_reply: decoded %s violates: %s\n", cdc__msg_type_name(h->type),
            what);
    abort();
}

#define EXPECT(cond, h)                                                                   \
    do {                                                                                  \
        if (!(cond))                                                                      \
            fail(#cond, h);                                                               \
    } while (0)

/* What call_apply_reply does with a reply that matched a pending task. */
static void apply_reply(const cdc_msg_t *msg)
{
    const cdc_msg_header_t *h = &msg->header;
    EXPECT(h->shard >= 0 && h->shard < 64, h);
    switch ((cdc_msg_type_t) h->type) {
    case CDC_MSG_RESULT: {
        EXPECT(msg->payload_count == 1, h);
        EXPECT(h->rows >= 1 && h->rows <= CDC_PROTO_MAX_DIM, h);
        EXPECT(h->cols >= 1 && h->cols <= CDC_PROTO_MAX_DIM, h);
        EXPECT(h->rows * h->cols <= CDC_PROTO_MAX_FLOATS, h);
        /* The task's result buffer: a_rows x cols, the shape the reply must
           match to be taken. */
        size_t bytes = (size_t) (h->rows * h->cols) * sizeof(float);
        EXPECT(msg->payload[0].size == bytes, h);
        EXPECT(msg->payload[0].count == cdc__msg_payload_frames(bytes), h);
        float *result = malloc(bytes);
        if (result)
            cdc__msg_payload_gather(&msg->payload[0], result);
        free(result);
        break;
    }
    case CDC_MSG_ERROR: {
        EXPECT(msg->payload_count == 1, h);
        EXPECT(msg->payload[0].size <= CDC_PROTO_MAX_TEXT, h);
        EXPECT(msg->payload[0].count == 1, h);
        char text[CDC_PROTO_MAX_TEXT + 64];
        snprintf(text, sizeof text, "%s: %.*s", cdc_err_name(h->error_code),
                 (int) msg->payload[0].size, (const char *) msg->payload[0].frames[0].data);
        break;
    }
    case CDC_MSG_MISS:
        EXPECT(h->a_key != 0, h);
        break;
    default:
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cdc_fuzz_frame_t cut[CDC_WIRE_MAX_PARTS];
    int extra = 0;
    int count = cdc_fuzz_split(data, size, cut, CDC_WIRE_MAX_PARTS, &extra);
    cdc_wire_msg_t wire;
    cdc__wire_msg_init(&wire);
    wire.truncated = extra > 0;
    wire.dropped = extra;
    if (count > 0 && cdc__wire_msg_reserve(&wire, count) != CDC_OK)
        return 0;
    for (int i = 0; i < count; i++) {
        if (zmq_msg_init_size(&wire.parts[i], cut[i].size) != 0)
            break;
        wire.count++;
        if (cut[i].size)
            memcpy(zmq_msg_data(&wire.parts[i]), cut[i].data, cut[i].size);
    }
    cdc_msg_t msg;
    if (cdc__wire_decode(&wire, 0, &msg) == CDC_OK)
        apply_reply(&msg);
    cdc__wire_msg_close(&wire);
    return 0;
}
