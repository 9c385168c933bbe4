/* fuzz_worker_msg.c - libFuzzer target: the worker's message decoder.
 *
 * The input is a list of frames (fuzz_frames.h) that arrives as one message
 * after its routing id, as transport/server.c receives it: at most
 * CDC_PROTO_MAX_FRAMES kept, the rest counted and the message refused, a
 * refused message's request id salvaged from its header, an accepted one
 * decoded by cdc__msg_decode. Every frame gets its own heap block so a read
 * past a frame's end is an ASan finding, not a read of the next frame.
 *
 * What a decoded message promises the worker is checked, then used as the
 * worker uses it: each inline operand copied into a buffer sized from the
 * header, and a small task (inline operands, at most 2^16 floats in any
 * matrix, im2col included) run with cdc__task_run_local, which is what
 * src/worker/compute.c does with it. No socket is opened. */
#include "fuzz_frames.h"
#include "geometry.h"
#include "protocol.h"
#include "task_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUN_LIMIT_FLOATS (INT64_C(1) << 16)

static void fail(const char *what, const cdc_msg_header_t *h)
{
    fprintf(stderr, "fuzz_worker_msg: decoded %s violates: %s\n",
            cdc__msg_type_name(h->type), what);
    abort();
}

#define EXPECT(cond, h)                                                                   \
    do {                                                                                  \
        if (!(cond))                                                                      \
            fail(#cond, h);                                                               \
    } while (0)

/* An operand as the worker takes it: its chunks gathered into a buffer of
   rows x k floats. */
static float *operand_copy(const cdc_msg_payload_t *payload, int64_t rows, int64_t k)
{
    size_t bytes = (size_t) rows * (size_t) k * sizeof(float);
    float *copy = malloc(bytes);
    if (copy)
        cdc__msg_payload_gather(payload, copy);
    return copy;
}

static int64_t checked_floats(int64_t a, int64_t b, const cdc_msg_header_t *h)
{
    EXPECT(a >= 1 && a <= CDC_PROTO_MAX_DIM && b >= 1 && b <= CDC_PROTO_MAX_DIM, h);
    EXPECT(a * b <= CDC_PROTO_MAX_FLOATS, h);
    return a * b;
}

/* a x b for sizes the decoder formed as products (each factor >= 1 and at
   most CDC_PROTO_MAX_FLOATS, so the product cannot overflow). */
static int64_t checked_product(int64_t a, int64_t b, const cdc_msg_header_t *h)
{
    EXPECT(a >= 1 && a <= CDC_PROTO_MAX_FLOATS && b >= 1 && b <= CDC_PROTO_MAX_FLOATS, h);
    EXPECT(a * b <= CDC_PROTO_MAX_FLOATS, h);
    return a * b;
}

/* A payload as the decoder promises it: a cached operand is one empty
   frame; an inline one its exact size in chunks, each but the last full. */
static void check_inline(uint64_t key, const cdc_msg_payload_t *payload, int64_t floats,
                         const cdc_msg_header_t *h)
{
    size_t want = key != 0 ? 0 : (size_t) floats * sizeof(float);
    EXPECT(payload->size == want, h);
    EXPECT(payload->count == cdc__msg_payload_frames(want), h);
    size_t total = 0;
    for (int j = 0; j < payload->count; j++) {
        EXPECT(payload->frames[j].size <= CDC_PROTO_CHUNK_BYTES, h);
        EXPECT(j + 1 == payload->count || payload->frames[j].size == CDC_PROTO_CHUNK_BYTES, h);
        total += payload->frames[j].size;
    }
    EXPECT(total == want, h);
}

/* The geometry of a decoded TASK_CONV and the sizes it implies. */
static void check_conv(const cdc_msg_header_t *h, cdc_conv_geometry_t *g)
{
    *g = h->geometry;
    EXPECT(cdc__conv_geometry_finish(g) == CDC_OK, h);
    EXPECT(h->k == g->channels * g->kernel_h * g->kernel_w, h);
    EXPECT(h->cols == h->batch * g->out_h * g->out_w, h);
    EXPECT(h->bt_key == 0, h);
    checked_product(h->k, h->cols, h); /* the im2col buffer */
}

static void run_small_task(const cdc_msg_t *msg)
{
    const cdc_msg_header_t *h = &msg->header;
    int is_conv = h->type == CDC_MSG_TASK_CONV;
    cdc_conv_geometry_t g;
    if (is_conv)
        check_conv(h, &g);
    int64_t second_floats = is_conv ? (int64_t) (msg->payload[1].size / sizeof(float))
                                    : checked_floats(h->cols, h->k, h);
    if (h->a_key != 0 || h->bt_key != 0 || h->rows * h->k > RUN_LIMIT_FLOATS ||
        second_floats > RUN_LIMIT_FLOATS || h->rows * h->cols > RUN_LIMIT_FLOATS ||
        h->k * h->cols > RUN_LIMIT_FLOATS)
        return;
    float *a = operand_copy(&msg->payload[0], h->rows, h->k);
    float *second = operand_copy(&msg->payload[1], second_floats, 1);
    float *result = malloc((size_t) (h->rows * h->cols) * sizeof(float));
    if (a && second && result) {
        cdc_shard_task_t task = cdc__msg_task(h, a, second, &g, result);
        if (cdc_task_parts(&task) > 1) /* streamed: the parts after the lead rows */
            task.tail = result + task.lead_rows * task.cols;
        cdc__task_run_local(&task);
    }
    free(a);
    free(second);
    free(result);
}

static void check_decoded(const cdc_msg_t *msg, int count)
{
    const cdc_msg_header_t *h = &msg->header;
    EXPECT(msg->payload_count == cdc__msg_payload_count((cdc_msg_type_t) h->type), h);
    int frames = 1;
    for (int i = 0; i < msg->payload_count; i++)
        frames += msg->payload[i].count;
    EXPECT(frames == count, h);
    EXPECT(h->shard >= 0 && h->shard < 64, h);
    switch ((cdc_msg_type_t) h->type) {
    case CDC_MSG_TASK_GEMM:
        check_inline(h->a_key, &msg->payload[0], checked_floats(h->rows, h->k, h), h);
        check_inline(h->bt_key, &msg->payload[1], checked_floats(h->cols, h->k, h), h);
        checked_floats(h->rows, h->cols, h);
        run_small_task(msg);
        break;
    case CDC_MSG_TASK_CONV: {
        cdc_conv_geometry_t g;
        check_conv(h, &g);
        check_inline(h->a_key, &msg->payload[0], checked_floats(h->rows, h->k, h), h);
        int64_t image = checked_product(checked_product(g.h, g.w, h), g.channels, h);
        check_inline(0, &msg->payload[1], checked_product(image, h->batch, h), h);
        checked_floats(h->rows, h->cols, h);
        run_small_task(msg);
        break;
    }
    case CDC_MSG_WEIGHTS: {
        EXPECT(h->a_key != 0, h);
        check_inline(0, &msg->payload[0], checked_floats(h->rows, h->k, h), h);
        free(operand_copy(&msg->payload[0], h->rows, h->k));
        break;
    }
    case CDC_MSG_RESULT:
        check_inline(0, &msg->payload[0], checked_floats(h->rows, h->cols, h), h);
        break;
    case CDC_MSG_ERROR:
    case CDC_MSG_PONG: /* text: the error, or the worker's status */
        EXPECT(msg->payload[0].size <= CDC_PROTO_MAX_TEXT && msg->payload[0].count == 1, h);
        break;
    case CDC_MSG_MISS:
        EXPECT(h->a_key != 0, h);
        break;
    case CDC_MSG_STORED:
        EXPECT(h->a_key != 0, h);
        checked_floats(h->rows, h->k, h);
        break;
    case CDC_MSG_PING:
    case CDC_MSG_CANCEL:
    case CDC_MSG_GOODBYE:
        break;
    default:
        fail("known type", h);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cdc_fuzz_frame_t cut[CDC_PROTO_MAX_FRAMES];
    int extra = 0;
    int count = cdc_fuzz_split(data, size, cut, CDC_PROTO_MAX_FRAMES, &extra);
    cdc_frame_t frames[CDC_PROTO_MAX_FRAMES];
    void *blocks[CDC_PROTO_MAX_FRAMES] = {NULL};
    for (int i = 0; i < count; i++) {
        blocks[i] = malloc(cut[i].size ? cut[i].size : 1);
        if (!blocks[i])
            goto done;
        memcpy(blocks[i], cut[i].data, cut[i].size);
        frames[i] = (cdc_frame_t){blocks[i], cut[i].size};
    }
    cdc_msg_t msg;
    if (count >= 1 && extra == 0 && cdc__msg_decode(frames, count, &msg) == CDC_OK) {
        check_decoded(&msg, count);
    } else if (count >= 1) {
        /* The server's salvage of a refused message's request id and shard. */
        cdc_msg_header_t h;
        (void) cdc__msg_header_unpack(frames[0].data, frames[0].size, &h);
    }
done:
    for (int i = 0; i < count; i++)
        free(blocks[i]);
    return 0;
}
