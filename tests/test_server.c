/* test_server.c - the worker's transport server: requests, identity, replies, budget, CANCEL,
   payloads in chunks both ways. */
#include "protocol.h"
#include "server.h"
#include "testutil.h"
#include "wire.h"

#include "cdcgemm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

static char dir[64], endpoint[128];
static void *zmq_context;
static cdc_server_t *server;

static void start_server(size_t peer_budget)
{
    snprintf(dir, sizeof dir, "/tmp/cdc-server-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(endpoint, sizeof endpoint, "ipc://%s/s", dir);
    cdc_server_options_t options;
    cdc__server_options_init(&options);
    options.bind = endpoint;
    options.peer_budget = peer_budget;
    ck_assert_int_eq(cdc__server_new(&options, &server), CDC_OK);
    zmq_context = zmq_ctx_new();
}

static void stop_server(void)
{
    cdc__server_destroy(&server);
    ck_assert_ptr_null(server);
    zmq_ctx_term(zmq_context);
    char path[160];
    snprintf(path, sizeof path, "%s/s", dir);
    unlink(path);
    rmdir(dir);
}

static void *dealer(void)
{
    void *socket = zmq_socket(zmq_context, ZMQ_DEALER);
    int linger = 0, timeout = 5000;
    zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(socket, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    ck_assert_int_eq(zmq_connect(socket, endpoint), 0);
    return socket;
}

static void send_msg(void *socket, const cdc_msg_header_t *h, const void *payload, size_t size,
                     int with_payload)
{
    uint8_t packed[CDC_PROTO_HEADER_SIZE];
    cdc__msg_header_pack(h, packed);
    ck_assert_int_ge(zmq_send(socket, packed, sizeof packed, with_payload ? ZMQ_SNDMORE : 0), 0);
    if (with_payload)
        ck_assert_int_ge(zmq_send(socket, payload, size, 0), 0);
}

/* Receive one message at the dealer: its header; *payload_size gets the size
   of a second frame (0 when none). */
static cdc_msg_header_t recv_msg(void *socket, size_t *payload_size)
{
    uint8_t packed[CDC_PROTO_HEADER_SIZE];
    ck_assert_int_eq(zmq_recv(socket, packed, sizeof packed, 0), CDC_PROTO_HEADER_SIZE);
    cdc_msg_header_t h;
    ck_assert_int_eq(cdc__msg_header_unpack(packed, sizeof packed, &h), CDC_OK);
    *payload_size = 0;
    int more = 0;
    size_t more_size = sizeof more;
    zmq_getsockopt(socket, ZMQ_RCVMORE, &more, &more_size);
    if (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        ck_assert_int_ge(zmq_msg_recv(&part, socket, 0), 0);
        *payload_size = zmq_msg_size(&part);
        zmq_msg_close(&part);
    }
    return h;
}

/* The next valid request at the server (waits up to 5 s). */
static cdc_request_t *next_request(void)
{
    double deadline = cdc_test_now_s() + 5.0;
    for (;;) {
        cdc_request_t *request = NULL;
        int rc = cdc__server_recv(server, &request);
        if (rc == CDC_OK)
            return request;
        ck_assert_int_eq(rc, CDC_ETIMEDOUT);
        ck_assert_msg(cdc_test_now_s() < deadline, "no request within 5 s");
        cdc__server_wait(server, 100);
    }
}

static void send_ping(void *socket, uint64_t id)
{
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_PING);
    h.request_id = id;
    send_msg(socket, &h, NULL, 0, 0);
}

START_TEST(test_request_and_identity)
{
    start_server(0);
    void *a = dealer(), *b = dealer();
    send_ping(a, 11);
    cdc_request_t *from_a = next_request();
    ck_assert_uint_eq(cdc__request_msg(from_a)->header.type, CDC_MSG_PING);
    ck_assert_uint_eq(cdc__request_msg(from_a)->header.request_id, 11);
    const cdc_peer_identity_t *id_a = cdc__request_peer(from_a);
    ck_assert_uint_ne(id_a->connection, 0);
    ck_assert_str_eq(id_a->user_id, ""); /* no security mechanism yet */
    send_ping(b, 12);
    cdc_request_t *from_b = next_request();
    ck_assert_uint_ne(cdc__request_peer(from_b)->connection, id_a->connection);
    send_ping(a, 13);
    cdc_request_t *again = next_request();
    ck_assert_uint_eq(cdc__request_peer(again)->connection, id_a->connection);

    /* The reply goes to the request's sender only. */
    cdc_msg_header_t pong;
    cdc__msg_header_init(&pong, CDC_MSG_PONG);
    pong.request_id = 12;
    cdc_reply_t *reply = NULL;
    ck_assert_int_eq(cdc__server_reply_new(server, from_b, &pong, NULL, &reply), CDC_OK);
    ck_assert_int_eq(cdc__server_send(server, &reply), CDC_OK);
    ck_assert_ptr_null(reply);
    size_t size;
    cdc_msg_header_t got = recv_msg(b, &size);
    ck_assert_uint_eq(got.type, CDC_MSG_PONG);
    ck_assert_uint_eq(got.request_id, 12);
    ck_assert_uint_eq(size, 0);
    cdc_server_counters_t counters;
    cdc__server_counters(server, &counters);
    ck_assert_uint_eq(counters.received, 3);
    ck_assert_uint_eq(counters.peers, 2);
    ck_assert_uint_eq(counters.replies_sent, 1);
    cdc__request_destroy(&from_a);
    cdc__request_destroy(&from_b);
    cdc__request_destroy(&again);
    ck_assert_ptr_null(again);
    zmq_close(a);
    zmq_close(b);
    stop_server();
}
END_TEST

START_TEST(test_invalid_answered)
{
    start_server(0);
    void *a = dealer();
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_WEIGHTS); /* key 0 and no shape: invalid */
    h.request_id = 99;
    send_msg(a, &h, "abcd", 4, 1);
    double deadline = cdc_test_now_s() + 5.0;
    cdc_request_t *request = NULL;
    int rc;
    while ((rc = cdc__server_recv(server, &request)) == CDC_ETIMEDOUT &&
           cdc_test_now_s() < deadline)
        cdc__server_wait(server, 100);
    ck_assert_int_eq(rc, CDC_EPROTO);
    ck_assert_ptr_null(request);
    size_t size;
    cdc_msg_header_t got = recv_msg(a, &size);
    ck_assert_uint_eq(got.type, CDC_MSG_ERROR);
    ck_assert_uint_eq(got.request_id, 99);
    ck_assert_int_eq(got.error_code, CDC_EPROTO);
    ck_assert_uint_gt(size, 0);

    /* A valid message the caller does not accept: rejected on request. */
    cdc__msg_header_init(&h, CDC_MSG_PONG);
    h.request_id = 5;
    send_msg(a, &h, "", 0, 1); /* an empty status text */
    request = next_request();
    cdc__server_reject(server, request, CDC_EPROTO, "no PONG here");
    cdc__request_destroy(&request);
    got = recv_msg(a, &size);
    ck_assert_uint_eq(got.type, CDC_MSG_ERROR);
    ck_assert_uint_eq(got.request_id, 5);
    ck_assert_uint_eq(size, strlen("no PONG here"));
    cdc_server_counters_t counters;
    cdc__server_counters(server, &counters);
    ck_assert_uint_eq(counters.invalid, 2);
    zmq_close(a);
    stop_server();
}
END_TEST

/* Streamed partial results: any number of replies share one request id. */
START_TEST(test_several_replies)
{
    start_server(0);
    void *a = dealer();
    send_ping(a, 21);
    cdc_request_t *request = next_request();
    for (int part = 0; part < 3; part++) {
        cdc_msg_header_t h;
        cdc__msg_header_init(&h, CDC_MSG_RESULT);
        h.request_id = 21;
        h.rows = part + 1;
        h.cols = 2;
        size_t bytes = (size_t) h.rows * 2 * sizeof(float);
        cdc_payload_t *payload = cdc__payload_adopt(calloc(1, bytes), bytes);
        cdc_reply_t *reply = NULL;
        ck_assert_int_eq(cdc__server_reply_new(server, request, &h, &payload, &reply), CDC_OK);
        ck_assert_ptr_null(payload); /* adopted */
        ck_assert_int_eq(cdc__server_send(server, &reply), CDC_OK);
    }
    cdc__request_destroy(&request);
    for (int part = 0; part < 3; part++) {
        size_t size;
        cdc_msg_header_t got = recv_msg(a, &size);
        ck_assert_uint_eq(got.type, CDC_MSG_RESULT);
        ck_assert_uint_eq(got.request_id, 21);
        ck_assert_int_eq(got.rows, part + 1);
        ck_assert_uint_eq(size, (size_t) (part + 1) * 2 * sizeof(float));
    }
    zmq_close(a);
    stop_server();
}
END_TEST

START_TEST(test_cancel_recorded)
{
    start_server(0);
    void *a = dealer(), *b = dealer();
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_CANCEL);
    h.request_id = 5;
    send_msg(a, &h, NULL, 0, 0);
    send_ping(a, 6);
    cdc_request_t *from_a = next_request(); /* the CANCEL is not returned */
    ck_assert_uint_eq(cdc__request_msg(from_a)->header.type, CDC_MSG_PING);
    ck_assert(cdc__server_cancelled(server, from_a, 5));
    ck_assert(!cdc__server_cancelled(server, from_a, 6));
    send_ping(b, 7);
    cdc_request_t *from_b = next_request();
    ck_assert(!cdc__server_cancelled(server, from_b, 5)); /* another peer's request 5 */
    cdc_server_counters_t counters;
    cdc__server_counters(server, &counters);
    ck_assert_uint_eq(counters.cancels, 1);
    cdc__request_destroy(&from_a);
    cdc__request_destroy(&from_b);
    zmq_close(a);
    zmq_close(b);
    stop_server();
}
END_TEST

/* The cancel record is bounded (the last 64 distinct request ids per peer):
   a repeated CANCEL takes no second slot, an unknown id costs one slot,
   and a reply built for a cancelled request says so. */
START_TEST(test_cancel_bounded)
{
    start_server(0);
    void *a = dealer();
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_CANCEL);
    h.request_id = 1;
    for (int i = 0; i < 200; i++)
        send_msg(a, &h, NULL, 0, 0); /* the same id 200 times */
    for (uint64_t id = 1000; id < 1063; id++) { /* 63 more: 64 in all */
        h.request_id = id;
        send_msg(a, &h, NULL, 0, 0);
    }
    send_ping(a, 2);
    cdc_request_t *request = next_request();
    ck_assert(cdc__server_cancelled(server, request, 1)); /* not pushed out by repeats */
    ck_assert(cdc__server_cancelled(server, request, 1062));
    cdc__msg_header_init(&h, CDC_MSG_RESULT);
    h.request_id = 1;
    h.rows = h.cols = 1;
    cdc_payload_t *payload = cdc__payload_adopt(calloc(1, sizeof(float)), sizeof(float));
    cdc_reply_t *reply = NULL;
    ck_assert_int_eq(cdc__server_reply_new(server, request, &h, &payload, &reply), CDC_OK);
    ck_assert(cdc__server_reply_cancelled(server, reply));
    cdc__reply_destroy(&reply);
    cdc__request_destroy(&request);
    cdc__msg_header_init(&h, CDC_MSG_CANCEL);
    h.request_id = 5000; /* a 65th distinct id: the oldest (1) is forgotten */
    send_msg(a, &h, NULL, 0, 0);
    send_ping(a, 3);
    request = next_request();
    ck_assert(!cdc__server_cancelled(server, request, 1));
    ck_assert(cdc__server_cancelled(server, request, 1000));
    ck_assert(cdc__server_cancelled(server, request, 5000));
    payload = NULL;
    cdc__msg_header_init(&h, CDC_MSG_PONG);
    h.request_id = 3;
    ck_assert_int_eq(cdc__server_reply_new(server, request, &h, &payload, &reply), CDC_OK);
    ck_assert(!cdc__server_reply_cancelled(server, reply));
    cdc__reply_destroy(&reply);
    cdc__request_destroy(&request);
    cdc_server_counters_t counters;
    cdc__server_counters(server, &counters);
    ck_assert_uint_eq(counters.cancels, 200 + 63 + 1);
    zmq_close(a);
    stop_server();
}
END_TEST

static int result_reply(const cdc_request_t *request, size_t floats, cdc_reply_t **reply)
{
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_RESULT);
    h.request_id = 1;
    h.rows = (int64_t) floats;
    h.cols = 1;
    cdc_payload_t *payload = cdc__payload_adopt(calloc(floats, sizeof(float)),
                                                floats * sizeof(float));
    return cdc__server_reply_new(server, request, &h, &payload, reply);
}

START_TEST(test_peer_budget)
{
    size_t one = CDC_PROTO_HEADER_SIZE + 1000 * sizeof(float);
    start_server(2 * one + 10); /* two such replies in flight, not three */
    void *a = dealer(), *b = dealer();
    send_ping(a, 1);
    cdc_request_t *from_a = next_request();
    send_ping(b, 2);
    cdc_request_t *from_b = next_request();
    cdc_reply_t *r1 = NULL, *r2 = NULL, *r3 = NULL, *other = NULL;
    ck_assert_int_eq(result_reply(from_a, 1000, &r1), CDC_OK);
    ck_assert_int_eq(result_reply(from_a, 1000, &r2), CDC_OK);
    ck_assert_int_eq(result_reply(from_a, 1000, &r3), CDC_ETIMEDOUT); /* dropped, counted */
    ck_assert_ptr_null(r3);
    ck_assert_int_eq(result_reply(from_b, 1000, &other), CDC_OK); /* per peer */
    cdc_server_counters_t counters;
    cdc__server_counters(server, &counters);
    ck_assert_uint_eq(counters.over_budget, 1);
    /* A destroyed reply gives its bytes back. */
    cdc__reply_destroy(&r2);
    ck_assert_ptr_null(r2);
    ck_assert_int_eq(result_reply(from_a, 1000, &r2), CDC_OK);
    /* Sent replies give them back once the socket is done with them. */
    ck_assert_int_eq(cdc__server_send(server, &r1), CDC_OK);
    ck_assert_int_eq(cdc__server_send(server, &r2), CDC_OK);
    size_t size;
    recv_msg(a, &size);
    recv_msg(a, &size);
    double deadline = cdc_test_now_s() + 5.0;
    int rc;
    while ((rc = result_reply(from_a, 1000, &r1)) != CDC_OK && cdc_test_now_s() < deadline)
        cdc_test_sleep_ms(5);
    ck_assert_int_eq(rc, CDC_OK);
    ck_assert_int_eq(result_reply(from_a, 1000, &r2), CDC_OK);
    cdc__reply_destroy(&r1);
    cdc__reply_destroy(&r2);
    cdc__reply_destroy(&other);
    cdc__request_destroy(&from_a);
    cdc__request_destroy(&from_b);
    zmq_close(a);
    zmq_close(b);
    stop_server();
}
END_TEST

/* A large WEIGHTS frame is kept as received; a small one is copied out of
   libzmq's shared receive buffer. */
START_TEST(test_payload_taken)
{
    start_server(0);
    void *a = dealer();
    size_t sizes[2] = {(size_t) 1 << 20, 1024};
    for (int i = 0; i < 2; i++) {
        size_t floats = sizes[i] / sizeof(float);
        float *data = cdc_test_alloc(sizes[i]);
        for (size_t f = 0; f < floats; f++)
            data[f] = (float) f;
        cdc_msg_header_t h;
        cdc__msg_header_init(&h, CDC_MSG_WEIGHTS);
        h.a_key = 77;
        h.rows = (int64_t) floats;
        h.k = 1;
        send_msg(a, &h, data, sizes[i], 1);
        cdc_request_t *request = next_request();
        ck_assert_int_eq(cdc__request_msg(request)->payload[0].count, 1);
        const void *frame = cdc__request_msg(request)->payload[0].frames[0].data;
        cdc_payload_t *payload = cdc__request_take_payload(request, 0);
        ck_assert_ptr_nonnull(payload);
        ck_assert_ptr_null(cdc__request_take_payload(request, 0)); /* taken once */
        ck_assert_ptr_null(cdc__request_take_payload(request, 1)); /* not a payload */
        ck_assert_uint_eq(cdc__request_msg(request)->payload[0].size, 0);
        cdc__request_destroy(&request); /* the payload outlives its request */
        if (i == 0)
            ck_assert_ptr_eq(cdc__payload_data(payload), frame); /* zero copy */
        else
            ck_assert_ptr_ne(cdc__payload_data(payload), frame);
        ck_assert_uint_eq(cdc__payload_size(payload), sizes[i]);
        ck_assert_uint_gt(cdc__payload_footprint(payload), sizes[i]);
        ck_assert_uint_eq((uintptr_t) cdc__payload_data(payload) % 8, 0);
        ck_assert_int_eq(memcmp(cdc__payload_data(payload), data, sizes[i]), 0);
        cdc__payload_destroy(&payload);
        ck_assert_ptr_null(payload);
        free(data);
    }
    zmq_close(a);
    stop_server();
}
END_TEST


/* ---- payloads in chunks (protocol version 2) ------------------------------ */

#define BIG_FLOATS ((size_t) 2500 * 1000) /* 10 MB: chunks of 4 MiB, 4 MiB, 1.5 MiB */

static float *ramp(size_t floats, float scale)
{
    float *data = cdc_test_alloc(floats * sizeof(float));
    for (size_t f = 0; f < floats; f++)
        data[f] = (float) f * scale;
    return data;
}

/* A 10 MB WEIGHTS arrives as three chunks and is taken as one buffer (the
   one gather copy), identical, aligned, the chunks released. */
START_TEST(test_chunked_payload_gathered)
{
    start_server(0);
    void *a = dealer();
    float *data = ramp(BIG_FLOATS, 0.5f);
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_WEIGHTS);
    h.a_key = 78;
    h.rows = 2500;
    h.k = 1000;
    cdc_frame_t payload = {data, BIG_FLOATS * sizeof(float)};
    ck_assert_int_eq(cdc__wire_send(a, NULL, &h, &payload, 1, 0), CDC_OK);
    cdc_request_t *request = next_request();
    const cdc_msg_payload_t *view = &cdc__request_msg(request)->payload[0];
    ck_assert_int_eq(view->count, 3);
    ck_assert_uint_eq(view->size, payload.size);
    const void *chunks[3];
    for (int j = 0; j < 3; j++)
        chunks[j] = view->frames[j].data;
    cdc_payload_t *taken = cdc__request_take_payload(request, 0);
    ck_assert_ptr_nonnull(taken);
    ck_assert_int_eq(view->count, 0); /* reads as empty now */
    ck_assert_ptr_null(cdc__request_take_payload(request, 0));
    cdc__request_destroy(&request);
    for (int j = 0; j < 3; j++)
        ck_assert_ptr_ne(cdc__payload_data(taken), chunks[j]);
    ck_assert_uint_eq(cdc__payload_size(taken), payload.size);
    ck_assert_uint_eq((uintptr_t) cdc__payload_data(taken) % 8, 0);
    ck_assert_int_eq(memcmp(cdc__payload_data(taken), data, payload.size), 0);
    cdc__payload_destroy(&taken);
    free(data);
    zmq_close(a);
    stop_server();
}
END_TEST

/* A RESULT reply of rows x 1000 floats, its payload a ramp. */
static int big_result(const cdc_request_t *request, uint64_t id, cdc_reply_t **reply)
{
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_RESULT);
    h.request_id = id;
    h.rows = 2500;
    h.cols = 1000;
    cdc_payload_t *payload = cdc__payload_adopt(ramp(BIG_FLOATS, 0.25f), BIG_FLOATS * 4);
    return cdc__server_reply_new(server, request, &h, &payload, reply);
}

/* The whole message at the dealer: a RESULT in three chunks, the bytes as
   the worker computed them. */
static void expect_big_result(void *socket, uint64_t id)
{
    cdc_wire_msg_t wire;
    ck_assert_int_eq(cdc__wire_recv(socket, &wire, 0), CDC_OK);
    ck_assert_int_eq(wire.count, 4);
    cdc_msg_t msg;
    ck_assert_msg(cdc__wire_decode(&wire, 0, &msg) == CDC_OK, "%s", cdc_last_error());
    ck_assert_uint_eq(msg.header.request_id, id);
    ck_assert_int_eq(msg.payload[0].count, 3);
    float *want = ramp(BIG_FLOATS, 0.25f), *got = cdc_test_alloc(BIG_FLOATS * 4);
    cdc__msg_payload_gather(&msg.payload[0], got);
    ck_assert_int_eq(memcmp(got, want, BIG_FLOATS * 4), 0);
    free(want);
    free(got);
    cdc__wire_msg_close(&wire);
}

START_TEST(test_chunked_result_sent)
{
    start_server(0);
    void *a = dealer();
    send_ping(a, 41);
    cdc_request_t *request = next_request();
    cdc_reply_t *reply = NULL;
    ck_assert_int_eq(big_result(request, 41, &reply), CDC_OK);
    ck_assert_int_eq(cdc__server_send(server, &reply), CDC_OK);
    ck_assert_ptr_null(reply);
    cdc__request_destroy(&request);
    expect_big_result(a, 41);
    zmq_close(a);
    stop_server();
}
END_TEST

/* The budget of a chunked reply comes back only when libzmq has freed its
   last slice: with the peer's queue full (RCVHWM 1, nothing read), a
   second 10 MB reply cannot all leave, and its bytes stay charged. */
START_TEST(test_chunked_budget_held_until_last_slice)
{
    size_t one = CDC_PROTO_HEADER_SIZE + BIG_FLOATS * 4;
    start_server(2 * one + 100); /* two such replies in flight, not three */
    void *a = zmq_socket(zmq_context, ZMQ_DEALER);
    int linger = 0, hwm = 1, timeout = 5000, buffer = 64 << 10;
    zmq_setsockopt(a, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(a, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(a, ZMQ_RCVBUF, &buffer, sizeof buffer);
    zmq_setsockopt(a, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    ck_assert_int_eq(zmq_connect(a, endpoint), 0);
    send_ping(a, 51);
    cdc_request_t *request = next_request();
    cdc_reply_t *r1 = NULL, *r2 = NULL, *r3 = NULL, *r4 = NULL;
    ck_assert_int_eq(big_result(request, 1, &r1), CDC_OK);
    ck_assert_int_eq(big_result(request, 2, &r2), CDC_OK);
    ck_assert_int_eq(cdc__server_send(server, &r1), CDC_OK);
    ck_assert_int_eq(cdc__server_send(server, &r2), CDC_OK);
    /* Reply 1 fits the peer's queue and is released; reply 2 waits behind it. */
    double deadline = cdc_test_now_s() + 5.0;
    int rc;
    while ((rc = big_result(request, 3, &r3)) != CDC_OK && cdc_test_now_s() < deadline)
        cdc_test_sleep_ms(5);
    ck_assert_int_eq(rc, CDC_OK);
    cdc_test_sleep_ms(200);
    ck_assert_int_eq(big_result(request, 4, &r4), CDC_ETIMEDOUT); /* 2 still charged */
    /* Once the peer reads, the last slice of reply 2 is freed: budget back. */
    expect_big_result(a, 1);
    expect_big_result(a, 2);
    deadline = cdc_test_now_s() + 5.0;
    while ((rc = big_result(request, 4, &r4)) != CDC_OK && cdc_test_now_s() < deadline)
        cdc_test_sleep_ms(5);
    ck_assert_int_eq(rc, CDC_OK);
    cdc__reply_destroy(&r3);
    cdc__reply_destroy(&r4);
    cdc__request_destroy(&request);
    zmq_close(a);
    stop_server();
}
END_TEST

/* A frame over ZMQ_MAXMSGSIZE (a chunk + 4 KiB) never reaches the server:
   libzmq drops the connection on the frame's length, before allocating it.
   The peer's next connection is served as usual. */
START_TEST(test_frame_over_limit_dropped)
{
    start_server(0);
    void *a = dealer();
    size_t size = CDC_PROTO_CHUNK_BYTES + 8192;
    float *data = ramp(size / sizeof(float), 1.0f);
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_WEIGHTS);
    h.a_key = 79;
    h.rows = (int64_t) (size / sizeof(float));
    h.k = 1;
    send_msg(a, &h, data, size, 1); /* one frame, as protocol version 1 sent it */
    cdc_request_t *request = NULL;
    double until = cdc_test_now_s() + 0.5;
    while (cdc_test_now_s() < until) {
        ck_assert_int_eq(cdc__server_recv(server, &request), CDC_ETIMEDOUT);
        cdc__server_wait(server, 50);
    }
    cdc_server_counters_t counters;
    cdc__server_counters(server, &counters);
    ck_assert_uint_eq(counters.received, 0);
    send_ping(a, 61); /* on the connection libzmq makes again */
    request = next_request();
    ck_assert_uint_eq(cdc__request_msg(request)->header.request_id, 61);
    cdc__request_destroy(&request);
    free(data);
    zmq_close(a);
    stop_server();
}
END_TEST

START_TEST(test_wake)
{
    start_server(0);
    ck_assert_int_eq(cdc__server_wait(server, 0), CDC_ETIMEDOUT);
    cdc__server_wake(server);
    double start = cdc_test_now_s();
    ck_assert_int_eq(cdc__server_wait(server, 5000), CDC_OK);
    ck_assert_double_lt(cdc_test_now_s() - start, 1.0);
    ck_assert_int_eq(cdc__server_wait(server, 10), CDC_ETIMEDOUT); /* drained */
    stop_server();
    cdc_server_options_t options;
    cdc__server_options_init(&options);
    options.bind = "ipc:///nonexistent-dir/x";
    cdc_server_t *bad = NULL;
    ck_assert_int_eq(cdc__server_new(&options, &bad), CDC_ETRANSPORT);
    ck_assert_ptr_null(bad);
    cdc__server_destroy(&bad);
}
END_TEST

/* ZMQ_ROUTER_MANDATORY: a reply the socket cannot take (here: its peer has
   left) is refused and counted, not dropped silently as a ROUTER does by
   default; the worker counts these as replies dropped. */
START_TEST(test_refused_reply_counted)
{
    start_server(0);
    void *a = dealer();
    send_ping(a, 1);
    cdc_request_t *request = next_request();
    zmq_close(a);
    double deadline = cdc_test_now_s() + 5.0;
    int rc = CDC_OK;
    while (rc == CDC_OK && cdc_test_now_s() < deadline) {
        cdc_test_sleep_ms(10); /* until the server has seen the peer go */
        cdc_msg_header_t h;
        cdc__msg_header_init(&h, CDC_MSG_PONG);
        cdc_reply_t *reply = NULL;
        ck_assert_int_eq(cdc__server_reply_new(server, request, &h, NULL, &reply), CDC_OK);
        rc = cdc__server_send(server, &reply);
        ck_assert_ptr_null(reply);
    }
    ck_assert_int_eq(rc, CDC_ETIMEDOUT);
    cdc_server_counters_t counters;
    cdc__server_counters(server, &counters);
    ck_assert_uint_eq(counters.send_failures, 1);
    cdc__request_destroy(&request);
    stop_server();
}
END_TEST

static Suite *server_suite(void)
{
    Suite *suite = suite_create("server");
    TCase *requests = tcase_create("requests");
    tcase_add_test(requests, test_request_and_identity);
    tcase_add_test(requests, test_invalid_answered);
    tcase_add_test(requests, test_cancel_recorded);
    tcase_add_test(requests, test_cancel_bounded);
    tcase_add_test(requests, test_payload_taken);
    tcase_add_test(requests, test_wake);
    suite_add_tcase(suite, requests);
    TCase *replies = tcase_create("replies");
    tcase_add_test(replies, test_several_replies);
    tcase_add_test(replies, test_peer_budget);
    tcase_add_test(replies, test_refused_reply_counted);
    suite_add_tcase(suite, replies);
    TCase *chunks = tcase_create("chunks");
    tcase_set_timeout(chunks, 30);
    tcase_add_test(chunks, test_chunked_payload_gathered);
    tcase_add_test(chunks, test_chunked_result_sent);
    tcase_add_test(chunks, test_chunked_budget_held_until_last_slice);
    tcase_add_test(chunks, test_frame_over_limit_dropped);
    suite_add_tcase(suite, chunks);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(server_suite());
}
