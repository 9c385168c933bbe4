/* test_wire.c - transport/wire.c sends whole messages or nothing, even when a part cannot be
   allocated; payloads go in chunks; over-long messages are read to their end and refused;
   held payloads go without a copy and every reference taken for them comes back. */
#include "cdcgemm.h"
#include "protocol.h"
#include "testutil.h"
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

/* An inproc pair: *out sends, *in receives (ROUTER when router, else PAIR). */
static void *pair_open(void **out, void **in, int router)
{
    void *zmq = zmq_ctx_new();
    *out = zmq_socket(zmq, router ? ZMQ_ROUTER : ZMQ_PAIR);
    *in = zmq_socket(zmq, router ? ZMQ_DEALER : ZMQ_PAIR);
    ck_assert_int_eq(zmq_bind(*out, "inproc://test-wire"), 0);
    ck_assert_int_eq(zmq_connect(*in, "inproc://test-wire"), 0);
    return zmq;
}

static void pair_close(void *zmq, void *out, void *in)
{
    int linger = 0;
    zmq_setsockopt(out, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(in, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(out);
    zmq_close(in);
    zmq_ctx_term(zmq);
}

/* A GEMM task of 2 x 3 x 4 with both operands inline. */
static void task_header(cdc_msg_header_t *h, uint64_t id)
{
    cdc__msg_header_init(h, CDC_MSG_TASK_GEMM);
    h->request_id = id;
    h->rows = 2;
    h->k = 3;
    h->cols = 4;
}

/* The next message on in must be exactly a PING with request id 7: a
   message of 1 part, no leftover of the failed send merged into it. */
static void expect_ping_alone(void *in)
{
    cdc_wire_msg_t wire;
    ck_assert_int_eq(cdc__wire_recv(in, &wire, 0), CDC_OK);
    ck_assert_int_eq(wire.count, 1);
    cdc_msg_t msg;
    ck_assert_msg(cdc__wire_decode(&wire, 0, &msg) == CDC_OK, "%s", cdc_last_error());
    ck_assert_int_eq(msg.header.type, CDC_MSG_PING);
    ck_assert_uint_eq(msg.header.request_id, 7);
    cdc__wire_msg_close(&wire);
    ck_assert_int_eq(cdc__wire_recv(in, &wire, ZMQ_DONTWAIT), CDC_ETIMEDOUT);
    cdc__wire_msg_close(&wire);
}

/* Part _i (header, a, bt) of a task cannot be allocated: nothing is sent,
   and the next message arrives alone (issue 9, finding 7: the header went
   out with "more" and merged with the next message). */
START_TEST(test_failed_part_sends_nothing)
{
    void *out, *in;
    void *zmq = pair_open(&out, &in, 0);
    float a[6] = {1, 2, 3, 4, 5, 6}, bt[12] = {0};
    cdc_frame_t payloads[2] = {{a, sizeof a}, {bt, sizeof bt}};
    cdc_msg_header_t task, ping;
    task_header(&task, 5);
    cdc__msg_header_init(&ping, CDC_MSG_PING);
    ping.request_id = 7;

    cdc__wire_fail_alloc_at = _i;
    ck_assert_int_eq(cdc__wire_send(out, NULL, &task, payloads, 2, 0), CDC_ENOMEM);
    cdc__wire_fail_alloc_at = -1;
    ck_assert_int_eq(cdc__wire_send(out, NULL, &ping, NULL, 0, 0), CDC_OK);
    expect_ping_alone(in);

    /* And a whole task still goes through afterwards. */
    ck_assert_int_eq(cdc__wire_send(out, NULL, &task, payloads, 2, 0), CDC_OK);
    cdc_wire_msg_t wire;
    ck_assert_int_eq(cdc__wire_recv(in, &wire, 0), CDC_OK);
    cdc_msg_t msg;
    ck_assert_msg(cdc__wire_decode(&wire, 0, &msg) == CDC_OK, "%s", cdc_last_error());
    ck_assert_uint_eq(msg.header.request_id, 5);
    ck_assert_mem_eq(msg.payload[0].frames[0].data, a, sizeof a);
    cdc__wire_msg_close(&wire);
    pair_close(zmq, out, in);
}
END_TEST

/* The same on the ROUTER side: a part after the routing id fails, nothing
   reaches the peer. */
START_TEST(test_failed_part_after_routing_id)
{
    void *out, *in;
    void *zmq = pair_open(&out, &in, 1);
    cdc_msg_header_t ping;
    cdc__msg_header_init(&ping, CDC_MSG_PING);
    ping.request_id = 1;
    ck_assert_int_eq(cdc__wire_send(in, NULL, &ping, NULL, 0, 0), CDC_OK);
    cdc_wire_msg_t request;
    ck_assert_int_eq(cdc__wire_recv(out, &request, 0), CDC_OK);
    ck_assert_int_eq(request.count, 2); /* routing id + header */

    float a[6] = {0}, bt[12] = {0};
    cdc_frame_t payloads[2] = {{a, sizeof a}, {bt, sizeof bt}};
    cdc_msg_header_t task;
    task_header(&task, 5);
    for (int part = 1; part <= 3; part++) { /* header, a, bt */
        cdc__wire_fail_alloc_at = part;
        ck_assert_int_eq(cdc__wire_send(out, &request.parts[0], &task, payloads, 2, 0),
                         CDC_ENOMEM);
    }
    cdc__wire_fail_alloc_at = -1;
    ping.request_id = 7;
    ck_assert_int_eq(cdc__wire_send(out, &request.parts[0], &ping, NULL, 0, 0), CDC_OK);
    expect_ping_alone(in);
    cdc__wire_msg_close(&request);
    pair_close(zmq, out, in);
}
END_TEST

START_TEST(test_too_many_payloads_refused)
{
    void *out, *in;
    void *zmq = pair_open(&out, &in, 0);
    cdc_frame_t payloads[CDC_WIRE_MAX_PARTS] = {{NULL, 0}};
    cdc_msg_header_t ping;
    cdc__msg_header_init(&ping, CDC_MSG_PING);
    ck_assert_int_eq(cdc__wire_send(out, NULL, &ping, payloads, CDC_WIRE_MAX_PARTS, 0),
                     CDC_EINVAL);
    ping.request_id = 7;
    ck_assert_int_eq(cdc__wire_send(out, NULL, &ping, NULL, 0, 0), CDC_OK);
    expect_ping_alone(in);
    pair_close(zmq, out, in);
}
END_TEST


/* Payloads that would need more parts than a message may have are refused
   before anything is built (no data is read: only the sizes matter). */
START_TEST(test_oversized_payloads_refused)
{
    void *out, *in;
    void *zmq = pair_open(&out, &in, 0);
    size_t half = (size_t) (CDC_PROTO_MAX_PAYLOAD_FRAMES + 1) * CDC_PROTO_CHUNK_BYTES;
    cdc_frame_t payloads[2] = {{NULL, half}, {NULL, half}};
    cdc_msg_header_t task, ping;
    task_header(&task, 5);
    ck_assert_int_eq(cdc__wire_send(out, NULL, &task, payloads, 2, 0), CDC_EINVAL);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "more than"));
    cdc__msg_header_init(&ping, CDC_MSG_PING);
    ping.request_id = 7;
    ck_assert_int_eq(cdc__wire_send(out, NULL, &ping, NULL, 0, 0), CDC_OK);
    expect_ping_alone(in);
    pair_close(zmq, out, in);
}
END_TEST

/* A chunk of a 10 MB payload (parts: header, chunk 1..3, bt) cannot be
   allocated: nothing at all is sent. */
START_TEST(test_failed_chunk_sends_nothing)
{
    void *out, *in;
    void *zmq = pair_open(&out, &in, 0);
    size_t bytes = (size_t) 2500 * 1000 * sizeof(float);
    uint8_t *a = calloc(1, bytes);
    float bt[1000] = {0};
    cdc_frame_t payloads[2] = {{a, bytes}, {bt, sizeof bt}};
    cdc_msg_header_t task, ping;
    cdc__msg_header_init(&task, CDC_MSG_TASK_GEMM);
    task.rows = 2500;
    task.k = 1000;
    task.cols = 1;
    cdc__wire_fail_alloc_at = 2 + _i; /* chunk 2, chunk 3, bt */
    ck_assert_int_eq(cdc__wire_send(out, NULL, &task, payloads, 2, 0), CDC_ENOMEM);
    cdc__wire_fail_alloc_at = -1;
    cdc__msg_header_init(&ping, CDC_MSG_PING);
    ping.request_id = 7;
    ck_assert_int_eq(cdc__wire_send(out, NULL, &ping, NULL, 0, 0), CDC_OK);
    expect_ping_alone(in);
    free(a);
    pair_close(zmq, out, in);
}
END_TEST

/* A message of more parts than CDC_WIRE_MAX_PARTS is read to its end (the
   rest closed, not kept), refused with the count, and the next message
   arrives whole: it is never cut into two. */
START_TEST(test_over_long_message_read_to_end)
{
    void *out, *in;
    void *zmq = pair_open(&out, &in, 0);
    int parts = CDC_WIRE_MAX_PARTS + 40;
    for (int i = 0; i < parts; i++)
        ck_assert_int_ge(zmq_send(out, "x", 1, i + 1 < parts ? ZMQ_SNDMORE : 0), 0);
    cdc_msg_header_t ping;
    cdc__msg_header_init(&ping, CDC_MSG_PING);
    ping.request_id = 7;
    ck_assert_int_eq(cdc__wire_send(out, NULL, &ping, NULL, 0, 0), CDC_OK);
    cdc_wire_msg_t wire;
    ck_assert_int_eq(cdc__wire_recv(in, &wire, 0), CDC_OK);
    ck_assert(wire.truncated);
    ck_assert_int_eq(wire.count, CDC_WIRE_MAX_PARTS);
    ck_assert_int_eq(wire.count + wire.dropped, parts);
    cdc_msg_t msg;
    ck_assert_int_eq(cdc__wire_decode(&wire, 0, &msg), CDC_EPROTO);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "frames, at most"));
    cdc__wire_msg_close(&wire);
    expect_ping_alone(in);
    pair_close(zmq, out, in);
}
END_TEST

/* Send a 2 x 3 x 4 TASK_GEMM whose bt frame is empty, then 10 more empty
   frames, then a PING; routing id route first when route_size > 0. */
static void send_bad_task_then_ping(void *out, const void *route, size_t route_size)
{
    uint8_t packed[CDC_PROTO_HEADER_SIZE];
    float a[6] = {0};
    cdc_msg_header_t h;
    task_header(&h, 9);
    cdc__msg_header_pack(&h, packed);
    if (route_size)
        ck_assert_int_ge(zmq_send(out, route, route_size, ZMQ_SNDMORE), 0);
    ck_assert_int_ge(zmq_send(out, packed, sizeof packed, ZMQ_SNDMORE), 0);
    ck_assert_int_ge(zmq_send(out, a, sizeof a, ZMQ_SNDMORE), 0);
    for (int i = 0; i < 11; i++)
        ck_assert_int_ge(zmq_send(out, "", 0, i + 1 < 11 ? ZMQ_SNDMORE : 0), 0);
    cdc__msg_header_init(&h, CDC_MSG_PING);
    h.request_id = 7;
    cdc__msg_header_pack(&h, packed);
    if (route_size)
        ck_assert_int_ge(zmq_send(out, route, route_size, ZMQ_SNDMORE), 0);
    ck_assert_int_ge(zmq_send(out, packed, sizeof packed, 0), 0);
}

/* The bad task on in (protocol frames from part first): refused at its
   empty bt frame, nothing after it kept, the reason and the count given;
   then the PING whole. */
static void expect_refused_then_ping(void *in, int first)
{
    cdc_wire_msg_t wire;
    ck_assert_int_eq(cdc__wire_recv(in, &wire, 0), CDC_OK);
    ck_assert(wire.refused);
    ck_assert_int_eq(wire.count, first + 2); /* header and a: bt broke it */
    ck_assert_int_eq(wire.dropped, 11);
    cdc_msg_t msg;
    ck_assert_int_eq(cdc__wire_decode(&wire, first, &msg), CDC_EPROTO);
    ck_assert_msg(strstr(cdc_last_error(), "TASK_GEMM: bt frame is 0 bytes, expected 48 "
                                           "(13 frames in all)"),
                  "%s", cdc_last_error());
    cdc__wire_msg_close(&wire);
    ck_assert_int_eq(cdc__wire_recv(in, &wire, 0), CDC_OK);
    ck_assert(!wire.refused);
    ck_assert_msg(cdc__wire_decode(&wire, first, &msg) == CDC_OK, "%s", cdc_last_error());
    ck_assert_int_eq(msg.header.type, CDC_MSG_PING);
    cdc__wire_msg_close(&wire);
}

/* Issue 24: each part is checked as it arrives, on a ROUTER (the worker)
   and on a DEALER (the coordinator): an empty frame where the protocol
   sends none refuses the message there, the rest is drained unkept. */
START_TEST(test_frames_checked_as_they_arrive)
{
    void *zmq = zmq_ctx_new();
    void *router = zmq_socket(zmq, ZMQ_ROUTER), *dealer = zmq_socket(zmq, ZMQ_DEALER);
    ck_assert_int_eq(zmq_bind(router, "inproc://test-wire-arrive"), 0);
    ck_assert_int_eq(zmq_connect(dealer, "inproc://test-wire-arrive"), 0);
    cdc_msg_header_t ping;
    cdc__msg_header_init(&ping, CDC_MSG_PING);
    ck_assert_int_eq(cdc__wire_send(dealer, NULL, &ping, NULL, 0, 0), CDC_OK);
    cdc_wire_msg_t hello; /* the dealer's routing id, for the way back */
    ck_assert_int_eq(cdc__wire_recv(router, &hello, 0), CDC_OK);
    uint8_t route[256];
    size_t route_size = zmq_msg_size(&hello.parts[0]);
    memcpy(route, zmq_msg_data(&hello.parts[0]), route_size);
    cdc__wire_msg_close(&hello);
    send_bad_task_then_ping(dealer, NULL, 0);
    expect_refused_then_ping(router, 1);
    send_bad_task_then_ping(router, route, route_size);
    expect_refused_then_ping(dealer, 0);
    pair_close(zmq, router, dealer);
}
END_TEST

/* ---- zero-copy sends of held memory -------------------------------------------- */

/* 9 MiB of weights: three chunk frames (4 MiB, 4 MiB, 1 MiB). */
enum { HELD_ROWS = 2304, HELD_K = 1024 };

static cdc_hold_t *held_weights(float **data_p)
{
    void *data = NULL;
    cdc_hold_t *hold = cdc__hold_alloc((size_t) HELD_ROWS * HELD_K * sizeof(float), &data);
    ck_assert_ptr_nonnull(hold);
    float *w = data;
    for (size_t i = 0; i < (size_t) HELD_ROWS * HELD_K; i++)
        w[i] = (float) (i % 9973) - 4000.0f;
    *data_p = w;
    return hold;
}

static void weights_header(cdc_msg_header_t *h)
{
    cdc__msg_header_init(h, CDC_MSG_WEIGHTS);
    h->a_key = 0x5eed;
    h->rows = HELD_ROWS;
    h->k = HELD_K;
}

/* Receive the WEIGHTS message on in (after `first` routing parts) and
   check it holds exactly w, in three chunks. The message is left open. */
static void expect_weights(void *in, int first, const float *w, cdc_wire_msg_t *wire)
{
    ck_assert_int_eq(cdc__wire_recv(in, wire, 0), CDC_OK);
    ck_assert_int_eq(wire->count, first + 4); /* header + 3 chunks */
    ck_assert_uint_eq(zmq_msg_size(&wire->parts[first + 1]), CDC_PROTO_CHUNK_BYTES);
    ck_assert_uint_eq(zmq_msg_size(&wire->parts[first + 2]), CDC_PROTO_CHUNK_BYTES);
    ck_assert_uint_eq(zmq_msg_size(&wire->parts[first + 3]), (size_t) 1 << 20);
    cdc_msg_t msg;
    ck_assert_msg(cdc__wire_decode(wire, first, &msg) == CDC_OK, "%s", cdc_last_error());
    ck_assert_int_eq(msg.header.type, CDC_MSG_WEIGHTS);
    ck_assert_uint_eq(msg.payload[0].size, (size_t) HELD_ROWS * HELD_K * sizeof(float));
    const uint8_t *want = (const uint8_t *) w;
    for (int c = 0; c < msg.payload[0].count; c++) {
        const cdc_frame_t *f = &msg.payload[0].frames[c];
        ck_assert_int_eq(memcmp(f->data, want, f->size), 0);
        want += f->size;
    }
}

/* A held 9 MiB payload over inproc (PAIR, and DEALER to ROUTER as the
   client sends WEIGHTS): the receiver gets exactly the bytes, in frames
   that are the sender's memory (no copy anywhere on inproc); each of the
   three slices holds one reference until the receiver closes the message,
   then the count is back where it was. */
START_TEST(test_held_send_without_copy)
{
    int routed = _i;
    void *out, *in;
    void *zmq = pair_open(&out, &in, routed);
    void *sender = routed ? in : out, *receiver = routed ? out : in;
    float *w;
    cdc_hold_t *hold = held_weights(&w);
    cdc_msg_header_t h;
    weights_header(&h);
    cdc_frame_t payload = {w, (size_t) HELD_ROWS * HELD_K * sizeof(float)};
    ck_assert_int_eq(cdc__hold_refs(hold), 1);
    ck_assert_msg(cdc__wire_send_held(sender, NULL, &h, &payload, &hold, 1, 0) == CDC_OK, "%s",
                  cdc_last_error());
    ck_assert_int_eq(cdc__hold_refs(hold), 4); /* the owner's + one per slice */

    cdc_wire_msg_t wire;
    int first = routed ? 1 : 0;
    expect_weights(receiver, first, w, &wire);
    for (int c = 0; c < 3; c++)
        ck_assert_ptr_eq(zmq_msg_data(&wire.parts[first + 1 + c]),
                         (uint8_t *) w + (size_t) c * CDC_PROTO_CHUNK_BYTES);
    ck_assert_int_eq(cdc__hold_refs(hold), 4);
    cdc__wire_msg_close(&wire);
    ck_assert_int_eq(cdc__hold_refs(hold), 1);
    cdc__hold_retire(hold);
    pair_close(zmq, out, in);
}
END_TEST

/* Over ipc libzmq's I/O thread writes the slices and releases them there:
   the count comes back to one once the message is out. */
START_TEST(test_held_send_released_by_io_thread)
{
    char endpoint[128];
    snprintf(endpoint, sizeof endpoint, "ipc:///tmp/cdc-test-wire-%d", (int) getpid());
    void *zmq = zmq_ctx_new();
    void *router = zmq_socket(zmq, ZMQ_ROUTER), *dealer = zmq_socket(zmq, ZMQ_DEALER);
    ck_assert_int_eq(zmq_bind(router, endpoint), 0);
    ck_assert_int_eq(zmq_connect(dealer, endpoint), 0);
    float *w;
    cdc_hold_t *hold = held_weights(&w);
    cdc_msg_header_t h;
    weights_header(&h);
    cdc_frame_t payload = {w, (size_t) HELD_ROWS * HELD_K * sizeof(float)};
    ck_assert_int_eq(cdc__wire_send_held(dealer, NULL, &h, &payload, &hold, 1, 0), CDC_OK);
    /* The owner lets go at once: the slices keep the memory. */
    cdc_hold_t *mine = cdc__hold_retain(hold);
    cdc__hold_retire(hold);
    cdc_wire_msg_t wire;
    expect_weights(router, 1, w, &wire);
    cdc__wire_msg_close(&wire);
    double deadline = cdc_test_now_s() + 10.0;
    while (cdc__hold_refs(mine) > 1 && cdc_test_now_s() < deadline)
        cdc_test_sleep_ms(1);
    ck_assert_int_eq(cdc__hold_refs(mine), 1);
    cdc__hold_release(mine);
    int linger = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(dealer, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(router);
    zmq_close(dealer);
    zmq_ctx_term(zmq);
    unlink(endpoint + strlen("ipc://"));
}
END_TEST

/* A slice (chunk 1, 2 or 3) or the copied part after it cannot be built:
   nothing is sent and every reference taken is released. */
START_TEST(test_held_send_failure_releases)
{
    void *out, *in;
    void *zmq = pair_open(&out, &in, 0);
    float *w, bt[4] = {1, 2, 3, 4};
    cdc_hold_t *hold = held_weights(&w);
    cdc_msg_header_t task, ping;
    cdc__msg_header_init(&task, CDC_MSG_TASK_GEMM);
    task.rows = HELD_ROWS;
    task.k = HELD_K;
    task.cols = 1;
    cdc_frame_t payloads[2] = {{w, (size_t) HELD_ROWS * HELD_K * sizeof(float)},
                               {bt, sizeof bt}};
    cdc_hold_t *holds[2] = {hold, NULL};
    cdc__wire_fail_alloc_at = 1 + _i; /* chunk 1, 2, 3, then bt */
    ck_assert_int_eq(cdc__wire_send_held(out, NULL, &task, payloads, holds, 2, 0), CDC_ENOMEM);
    cdc__wire_fail_alloc_at = -1;
    ck_assert_int_eq(cdc__hold_refs(hold), 1);
    cdc__msg_header_init(&ping, CDC_MSG_PING);
    ping.request_id = 7;
    ck_assert_int_eq(cdc__wire_send(out, NULL, &ping, NULL, 0, 0), CDC_OK);
    expect_ping_alone(in);
    cdc__hold_retire(hold);
    pair_close(zmq, out, in);
}
END_TEST

/* No peer to take it (EAGAIN with ZMQ_DONTWAIT): refused, nothing held. */
START_TEST(test_held_send_refused_releases)
{
    void *zmq = zmq_ctx_new();
    void *dealer = zmq_socket(zmq, ZMQ_DEALER); /* connected to nobody */
    float *w;
    cdc_hold_t *hold = held_weights(&w);
    cdc_msg_header_t h;
    weights_header(&h);
    cdc_frame_t payload = {w, (size_t) HELD_ROWS * HELD_K * sizeof(float)};
    ck_assert_int_eq(cdc__wire_send_held(dealer, NULL, &h, &payload, &hold, 1, ZMQ_DONTWAIT),
                     CDC_ETIMEDOUT);
    ck_assert_int_eq(cdc__hold_refs(hold), 1);
    cdc__hold_retire(hold);
    zmq_close(dealer);
    zmq_ctx_term(zmq);
}
END_TEST

/* A held payload beside a copied one (a task's cached a, its inline bt):
   both arrive whole; only the held one's frames are the sender's memory. */
START_TEST(test_held_beside_copied)
{
    void *out, *in;
    void *zmq = pair_open(&out, &in, 0);
    void *data = NULL;
    cdc_hold_t *hold = cdc__hold_alloc(6 * sizeof(float), &data);
    float *a = data, bt[12];
    for (int i = 0; i < 6; i++)
        a[i] = (float) i;
    for (int i = 0; i < 12; i++)
        bt[i] = (float) -i;
    cdc_frame_t payloads[2] = {{a, 6 * sizeof(float)}, {bt, sizeof bt}};
    cdc_hold_t *holds[2] = {hold, NULL};
    cdc_msg_header_t task;
    task_header(&task, 5);
    ck_assert_int_eq(cdc__wire_send_held(out, NULL, &task, payloads, holds, 2, 0), CDC_OK);
    ck_assert_int_eq(cdc__hold_refs(hold), 2);
    cdc_wire_msg_t wire;
    ck_assert_int_eq(cdc__wire_recv(in, &wire, 0), CDC_OK);
    cdc_msg_t msg;
    ck_assert_msg(cdc__wire_decode(&wire, 0, &msg) == CDC_OK, "%s", cdc_last_error());
    ck_assert_ptr_eq(msg.payload[0].frames[0].data, a);
    ck_assert_ptr_ne(msg.payload[1].frames[0].data, bt);
    ck_assert_mem_eq(msg.payload[1].frames[0].data, bt, sizeof bt);
    cdc__wire_msg_close(&wire);
    ck_assert_int_eq(cdc__hold_refs(hold), 1);
    cdc__hold_retire(hold);
    pair_close(zmq, out, in);
}
END_TEST

static Suite *wire_suite(void)
{
    Suite *suite = suite_create("wire");
    TCase *send = tcase_create("send");
    tcase_add_loop_test(send, test_failed_part_sends_nothing, 0, 3);
    tcase_add_test(send, test_failed_part_after_routing_id);
    tcase_add_test(send, test_too_many_payloads_refused);
    tcase_add_test(send, test_oversized_payloads_refused);
    tcase_add_loop_test(send, test_failed_chunk_sends_nothing, 0, 3);
    suite_add_tcase(suite, send);
    TCase *held = tcase_create("held");
    tcase_add_loop_test(held, test_held_send_without_copy, 0, 2);
    tcase_add_test(held, test_held_send_released_by_io_thread);
    tcase_add_loop_test(held, test_held_send_failure_releases, 0, 4);
    tcase_add_test(held, test_held_send_refused_releases);
    tcase_add_test(held, test_held_beside_copied);
    suite_add_tcase(suite, held);
    TCase *recv = tcase_create("receive");
    tcase_add_test(recv, test_over_long_message_read_to_end);
    tcase_add_test(recv, test_frames_checked_as_they_arrive);
    suite_add_tcase(suite, recv);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(wire_suite());
}
