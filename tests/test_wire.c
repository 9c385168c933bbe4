/* test_wire.c - transport/wire.c sends whole messages or nothing, even when a part cannot be
   allocated; payloads go in chunks; over-long messages are read to their end and refused. */
#include "cdcgemm.h"
#include "protocol.h"
#include "testutil.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>
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
    cdc_msg_header_init(h, CDC_MSG_TASK_GEMM);
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
    ck_assert_int_eq(cdc_wire_recv(in, &wire, 0), CDC_OK);
    ck_assert_int_eq(wire.count, 1);
    cdc_msg_t msg;
    ck_assert_msg(cdc_wire_decode(&wire, 0, &msg) == CDC_OK, "%s", cdc_last_error());
    ck_assert_int_eq(msg.header.type, CDC_MSG_PING);
    ck_assert_uint_eq(msg.header.request_id, 7);
    cdc_wire_msg_close(&wire);
    ck_assert_int_eq(cdc_wire_recv(in, &wire, ZMQ_DONTWAIT), CDC_ETIMEDOUT);
    cdc_wire_msg_close(&wire);
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
    cdc_msg_header_init(&ping, CDC_MSG_PING);
    ping.request_id = 7;

    cdc__wire_fail_alloc_at = _i;
    ck_assert_int_eq(cdc_wire_send(out, NULL, &task, payloads, 2, 0), CDC_ENOMEM);
    cdc__wire_fail_alloc_at = -1;
    ck_assert_int_eq(cdc_wire_send(out, NULL, &ping, NULL, 0, 0), CDC_OK);
    expect_ping_alone(in);

    /* And a whole task still goes through afterwards. */
    ck_assert_int_eq(cdc_wire_send(out, NULL, &task, payloads, 2, 0), CDC_OK);
    cdc_wire_msg_t wire;
    ck_assert_int_eq(cdc_wire_recv(in, &wire, 0), CDC_OK);
    cdc_msg_t msg;
    ck_assert_msg(cdc_wire_decode(&wire, 0, &msg) == CDC_OK, "%s", cdc_last_error());
    ck_assert_uint_eq(msg.header.request_id, 5);
    ck_assert_mem_eq(msg.payload[0].frames[0].data, a, sizeof a);
    cdc_wire_msg_close(&wire);
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
    cdc_msg_header_init(&ping, CDC_MSG_PING);
    ping.request_id = 1;
    ck_assert_int_eq(cdc_wire_send(in, NULL, &ping, NULL, 0, 0), CDC_OK);
    cdc_wire_msg_t request;
    ck_assert_int_eq(cdc_wire_recv(out, &request, 0), CDC_OK);
    ck_assert_int_eq(request.count, 2); /* routing id + header */

    float a[6] = {0}, bt[12] = {0};
    cdc_frame_t payloads[2] = {{a, sizeof a}, {bt, sizeof bt}};
    cdc_msg_header_t task;
    task_header(&task, 5);
    for (int part = 1; part <= 3; part++) { /* header, a, bt */
        cdc__wire_fail_alloc_at = part;
        ck_assert_int_eq(cdc_wire_send(out, &request.parts[0], &task, payloads, 2, 0),
                         CDC_ENOMEM);
    }
    cdc__wire_fail_alloc_at = -1;
    ping.request_id = 7;
    ck_assert_int_eq(cdc_wire_send(out, &request.parts[0], &ping, NULL, 0, 0), CDC_OK);
    expect_ping_alone(in);
    cdc_wire_msg_close(&request);
    pair_close(zmq, out, in);
}
END_TEST

START_TEST(test_too_many_payloads_refused)
{
    void *out, *in;
    void *zmq = pair_open(&out, &in, 0);
    cdc_frame_t payloads[CDC_WIRE_MAX_PARTS] = {{NULL, 0}};
    cdc_msg_header_t ping;
    cdc_msg_header_init(&ping, CDC_MSG_PING);
    ck_assert_int_eq(cdc_wire_send(out, NULL, &ping, payloads, CDC_WIRE_MAX_PARTS, 0),
                     CDC_EINVAL);
    ping.request_id = 7;
    ck_assert_int_eq(cdc_wire_send(out, NULL, &ping, NULL, 0, 0), CDC_OK);
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
    ck_assert_int_eq(cdc_wire_send(out, NULL, &task, payloads, 2, 0), CDC_EINVAL);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "more than"));
    cdc_msg_header_init(&ping, CDC_MSG_PING);
    ping.request_id = 7;
    ck_assert_int_eq(cdc_wire_send(out, NULL, &ping, NULL, 0, 0), CDC_OK);
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
    cdc_msg_header_init(&task, CDC_MSG_TASK_GEMM);
    task.rows = 2500;
    task.k = 1000;
    task.cols = 1;
    cdc__wire_fail_alloc_at = 2 + _i; /* chunk 2, chunk 3, bt */
    ck_assert_int_eq(cdc_wire_send(out, NULL, &task, payloads, 2, 0), CDC_ENOMEM);
    cdc__wire_fail_alloc_at = -1;
    cdc_msg_header_init(&ping, CDC_MSG_PING);
    ping.request_id = 7;
    ck_assert_int_eq(cdc_wire_send(out, NULL, &ping, NULL, 0, 0), CDC_OK);
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
    cdc_msg_header_init(&ping, CDC_MSG_PING);
    ping.request_id = 7;
    ck_assert_int_eq(cdc_wire_send(out, NULL, &ping, NULL, 0, 0), CDC_OK);
    cdc_wire_msg_t wire;
    ck_assert_int_eq(cdc_wire_recv(in, &wire, 0), CDC_OK);
    ck_assert(wire.truncated);
    ck_assert_int_eq(wire.count, CDC_WIRE_MAX_PARTS);
    ck_assert_int_eq(wire.count + wire.dropped, parts);
    cdc_msg_t msg;
    ck_assert_int_eq(cdc_wire_decode(&wire, 0, &msg), CDC_EPROTO);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "frames, at most"));
    cdc_wire_msg_close(&wire);
    expect_ping_alone(in);
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
    TCase *recv = tcase_create("receive");
    tcase_add_test(recv, test_over_long_message_read_to_end);
    suite_add_tcase(suite, recv);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(wire_suite());
}
