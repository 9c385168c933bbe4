/* test_protocol.c - wire header round trips (every message type, packed and
   decoded, and over a real zmq socket) and rejection of malformed messages. */
#include "protocol.h"
#include "status.h"
#include "testutil.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

static uint8_t packed[CDC_PROTO_HEADER_SIZE];

/* A valid TASK_GEMM with inline a (2 x 3) and bt (4 x 3). */
static float a_data[6], bt_data[12];

static void gemm_header(cdc_msg_header_t *h)
{
    cdc__msg_header_init(h, CDC_MSG_TASK_GEMM);
    h->request_id = 77;
    h->shard = 3;
    h->rows = 2;
    h->k = 3;
    h->cols = 4;
}

static int decode_gemm(const cdc_msg_header_t *h, size_t a_bytes, size_t bt_bytes)
{
    cdc__msg_header_pack(h, packed);
    cdc_frame_t frames[3] = {{packed, sizeof packed}, {a_data, a_bytes}, {bt_data, bt_bytes}};
    cdc_msg_t msg;
    return cdc__msg_decode(frames, 3, &msg);
}

static void conv_header(cdc_msg_header_t *h)
{
    cdc__msg_header_init(h, CDC_MSG_TASK_CONV);
    h->request_id = 5;
    h->rows = 4;
    h->batch = 2;
    cdc_conv_geometry_t g = {.channels = 3, .h = 8, .w = 8, .kernel_h = 3, .kernel_w = 3,
                             .stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 1,
                             .dilation_h = 1, .dilation_w = 1};
    h->geometry = g;
    h->k = 3 * 3 * 3;
    h->cols = 2 * 8 * 8;
}

static float conv_a[4 * 27], conv_input[2 * 3 * 8 * 8];

static int decode_conv(const cdc_msg_header_t *h, size_t input_bytes)
{
    cdc__msg_header_pack(h, packed);
    cdc_frame_t frames[3] = {
        {packed, sizeof packed}, {conv_a, sizeof conv_a}, {conv_input, input_bytes}};
    cdc_msg_t msg;
    return cdc__msg_decode(frames, 3, &msg);
}

START_TEST(test_header_round_trip)
{
    cdc_msg_header_t h, back;
    conv_header(&h);
    h.request_id = UINT64_C(0x0123456789abcdef);
    h.shard = 63;
    h.a_key = UINT64_C(0xfedcba9876543210);
    h.error_code = -10;
    h.geometry.pad_w = 2;
    cdc__msg_header_pack(&h, packed);
    ck_assert_int_eq(cdc__msg_header_unpack(packed, sizeof packed, &back), CDC_OK);
    ck_assert_uint_eq(back.magic, CDC_PROTO_MAGIC);
    ck_assert_uint_eq(back.version, CDC_PROTO_VERSION);
    ck_assert_uint_eq(back.type, CDC_MSG_TASK_CONV);
    ck_assert_uint_eq(back.request_id, h.request_id);
    ck_assert_int_eq(back.shard, 63);
    ck_assert_uint_eq(back.dtype, CDC_PROTO_DTYPE_F32);
    ck_assert_int_eq(back.rows, h.rows);
    ck_assert_int_eq(back.k, h.k);
    ck_assert_int_eq(back.cols, h.cols);
    ck_assert_uint_eq(back.a_key, h.a_key);
    ck_assert_int_eq(back.batch, 2);
    ck_assert_int_eq(back.geometry.channels, 3);
    ck_assert_int_eq(back.geometry.kernel_w, 3);
    ck_assert_int_eq(back.geometry.pad_w, 2);
    ck_assert_int_eq(back.geometry.dilation_w, 1);
    ck_assert_int_eq(back.error_code, -10);
    /* Little-endian on the wire whatever the host: "CDCG". */
    ck_assert_int_eq(memcmp(packed, "CDCG", 4), 0);
}
END_TEST

START_TEST(test_valid_messages_decode)
{
    cdc_msg_header_t h;
    gemm_header(&h);
    ck_assert_int_eq(decode_gemm(&h, sizeof a_data, sizeof bt_data), CDC_OK);
    /* Cached operands travel as empty frames. */
    h.a_key = 9;
    h.bt_key = 10;
    ck_assert_int_eq(decode_gemm(&h, 0, 0), CDC_OK);

    conv_header(&h);
    ck_assert_int_eq(decode_conv(&h, sizeof conv_input), CDC_OK);

    cdc_msg_t msg;
    cdc__msg_header_init(&h, CDC_MSG_RESULT);
    h.request_id = 4;
    h.rows = 2;
    h.cols = 3;
    cdc__msg_header_pack(&h, packed);
    cdc_frame_t frames[2] = {{packed, sizeof packed}, {a_data, sizeof a_data}};
    ck_assert_int_eq(cdc__msg_decode(frames, 2, &msg), CDC_OK);
    ck_assert_int_eq(msg.payload_count, 1);
    ck_assert_int_eq(msg.payload[0].count, 1);
    ck_assert_ptr_eq(msg.payload[0].frames[0].data, a_data);
    ck_assert_uint_eq(msg.header.request_id, 4);

    cdc__msg_header_init(&h, CDC_MSG_PING);
    cdc__msg_header_pack(&h, packed);
    ck_assert_int_eq(cdc__msg_decode(frames, 1, &msg), CDC_OK);
    ck_assert_int_eq(msg.payload_count, 0);

    cdc__msg_header_init(&h, CDC_MSG_ERROR);
    h.error_code = CDC_EPROTO;
    cdc__msg_header_pack(&h, packed);
    frames[1] = (cdc_frame_t){"bad", 3};
    ck_assert_int_eq(cdc__msg_decode(frames, 2, &msg), CDC_OK);
    ck_assert_int_eq(msg.header.error_code, CDC_EPROTO);
}
END_TEST

/* ---- every message type: pack, decode, same header ------------------------- */

static void assert_header_eq(const cdc_msg_header_t *got, const cdc_msg_header_t *want)
{
    ck_assert_uint_eq(got->magic, want->magic);
    ck_assert_uint_eq(got->version, want->version);
    ck_assert_uint_eq(got->type, want->type);
    ck_assert_uint_eq(got->request_id, want->request_id);
    ck_assert_int_eq(got->shard, want->shard);
    ck_assert_uint_eq(got->dtype, want->dtype);
    ck_assert_int_eq(got->rows, want->rows);
    ck_assert_int_eq(got->k, want->k);
    ck_assert_int_eq(got->cols, want->cols);
    ck_assert_uint_eq(got->a_key, want->a_key);
    ck_assert_uint_eq(got->bt_key, want->bt_key);
    ck_assert_int_eq(got->batch, want->batch);
    const cdc_conv_geometry_t *g = &got->geometry, *w = &want->geometry;
    ck_assert_int_eq(g->channels, w->channels);
    ck_assert_int_eq(g->h, w->h);
    ck_assert_int_eq(g->w, w->w);
    ck_assert_int_eq(g->kernel_h, w->kernel_h);
    ck_assert_int_eq(g->kernel_w, w->kernel_w);
    ck_assert_int_eq(g->stride_h, w->stride_h);
    ck_assert_int_eq(g->stride_w, w->stride_w);
    ck_assert_int_eq(g->pad_h, w->pad_h);
    ck_assert_int_eq(g->pad_w, w->pad_w);
    ck_assert_int_eq(g->dilation_h, w->dilation_h);
    ck_assert_int_eq(g->dilation_w, w->dilation_w);
    ck_assert_int_eq(got->error_code, want->error_code);
    ck_assert_int_eq(got->lead_rows, want->lead_rows);
    ck_assert_int_eq(got->part_rows, want->part_rows);
    ck_assert_int_eq(got->row_offset, want->row_offset);
}

/* A valid message of each type, every field it uses set, payloads to match. */
typedef struct {
    cdc_msg_header_t header;
    cdc_frame_t payload[CDC_PROTO_MAX_PAYLOADS]; /* whole payloads, one frame each here */
    int payload_count;
} sample_msg_t;

static const char error_text[] = "worker out of memory";
static const char status_text[] = "cache_bytes=1024\nload=2\n";

static void sample_message(cdc_msg_type_t type, sample_msg_t *m)
{
    memset(m, 0, sizeof *m);
    cdc_msg_header_t *h = &m->header;
    switch (type) {
    case CDC_MSG_TASK_GEMM: /* inline a, cached bt */
        gemm_header(h);
        h->bt_key = UINT64_C(0x8000000000000001);
        m->payload[0] = (cdc_frame_t){a_data, sizeof a_data};
        m->payload[1] = (cdc_frame_t){bt_data, 0};
        break;
    case CDC_MSG_TASK_CONV: /* cached a, inline input */
        conv_header(h);
        h->a_key = UINT64_C(0xfedcba9876543210);
        h->shard = 62;
        m->payload[0] = (cdc_frame_t){conv_a, 0};
        m->payload[1] = (cdc_frame_t){conv_input, sizeof conv_input};
        break;
    case CDC_MSG_WEIGHTS:
        cdc__msg_header_init(h, type);
        h->a_key = UINT64_MAX;
        h->rows = 4;
        h->k = 3;
        m->payload[0] = (cdc_frame_t){bt_data, sizeof bt_data};
        break;
    case CDC_MSG_RESULT:
        cdc__msg_header_init(h, type);
        h->request_id = UINT64_MAX;
        h->shard = 5;
        h->rows = 3;
        h->cols = 4;
        m->payload[0] = (cdc_frame_t){bt_data, sizeof bt_data};
        break;
    case CDC_MSG_ERROR:
        cdc__msg_header_init(h, type);
        h->request_id = 12;
        h->shard = 1;
        h->error_code = CDC_ENOMEM;
        m->payload[0] = (cdc_frame_t){error_text, sizeof error_text - 1};
        break;
    case CDC_MSG_MISS:
        cdc__msg_header_init(h, type);
        h->request_id = 13;
        h->shard = 2;
        h->a_key = 42;
        break;
    case CDC_MSG_PING:
        cdc__msg_header_init(h, type);
        h->request_id = UINT64_C(1) << 63;
        break;
    case CDC_MSG_PONG:
        cdc__msg_header_init(h, type);
        h->request_id = UINT64_C(1) << 63;
        m->payload[0] = (cdc_frame_t){status_text, sizeof status_text - 1};
        break;
    case CDC_MSG_CANCEL:
        cdc__msg_header_init(h, type);
        h->request_id = 77;
        break;
    case CDC_MSG_GOODBYE:
        cdc__msg_header_init(h, type);
        break;
    case CDC_MSG_STORED:
        cdc__msg_header_init(h, type);
        h->a_key = 99;
        h->rows = 12;
        h->k = 7;
        break;
    }
    m->payload_count = cdc__msg_payload_count(type);
}

static const cdc_msg_type_t every_type[] = {
    CDC_MSG_TASK_GEMM, CDC_MSG_TASK_CONV, CDC_MSG_WEIGHTS, CDC_MSG_RESULT,
    CDC_MSG_ERROR,     CDC_MSG_MISS,      CDC_MSG_PING,    CDC_MSG_PONG,
    CDC_MSG_CANCEL,    CDC_MSG_GOODBYE,   CDC_MSG_STORED,
};
#define TYPE_COUNT ((int) (sizeof every_type / sizeof every_type[0]))

START_TEST(test_every_type_decodes_to_same_header)
{
    cdc_msg_type_t type = every_type[_i];
    sample_msg_t m;
    sample_message(type, &m);
    cdc__msg_header_pack(&m.header, packed);
    cdc_frame_t frames[1 + CDC_PROTO_MAX_PAYLOADS] = {{packed, sizeof packed}};
    for (int i = 0; i < m.payload_count; i++)
        frames[1 + i] = m.payload[i];
    cdc_msg_t msg;
    ck_assert_msg(cdc__msg_decode(frames, 1 + m.payload_count, &msg) == CDC_OK, "%s: %s",
                  cdc__msg_type_name(type), cdc_last_error());
    assert_header_eq(&msg.header, &m.header);
    ck_assert_int_eq(msg.payload_count, m.payload_count);
    for (int i = 0; i < m.payload_count; i++) {
        ck_assert_int_eq(msg.payload[i].count, 1);
        ck_assert_ptr_eq(msg.payload[i].frames, &frames[1 + i]); /* a view, not a copy */
        ck_assert_ptr_eq(msg.payload[i].frames[0].data, m.payload[i].data);
        ck_assert_uint_eq(msg.payload[i].size, m.payload[i].size);
    }
    /* Matrix types carry float32, the others no dtype. */
    int matrix = type <= CDC_MSG_RESULT || type == CDC_MSG_STORED;
    ck_assert_uint_eq(msg.header.dtype, matrix ? CDC_PROTO_DTYPE_F32 : 0);
}
END_TEST

START_TEST(test_every_type_named)
{
    static const char *const names[] = {"TASK_GEMM", "TASK_CONV", "WEIGHTS", "RESULT",
                                        "ERROR",     "MISS",      "PING",    "PONG",
                                        "CANCEL",    "GOODBYE",   "STORED"};
    static const int payloads[] = {2, 2, 1, 1, 1, 0, 0, 1, 0, 0, 0};
    for (int i = 0; i < TYPE_COUNT; i++) {
        ck_assert_str_eq(cdc__msg_type_name(every_type[i]), names[i]);
        ck_assert_int_eq(cdc__msg_payload_count(every_type[i]), payloads[i]);
    }
    ck_assert_str_eq(cdc__msg_type_name(0), "UNKNOWN");
    ck_assert_str_eq(cdc__msg_type_name(12), "UNKNOWN");
    ck_assert_int_eq(cdc__msg_payload_count((cdc_msg_type_t) 0), -1);
    ck_assert_int_eq(cdc__msg_payload_count((cdc_msg_type_t) 12), -1);
}
END_TEST

START_TEST(test_random_headers_round_trip)
{
    /* pack then unpack is the identity on every field, whatever its value
       (negative ones included); out_h/out_w are not sent. */
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 7);
    for (int round = 0; round < 2000; round++) {
        cdc_msg_header_t h, back;
        cdc__msg_header_init(&h, every_type[round % TYPE_COUNT]);
        h.request_id = cdc_test_rng_next(&rng);
        h.shard = (int32_t) (uint32_t) cdc_test_rng_next(&rng);
        h.rows = (int64_t) cdc_test_rng_next(&rng);
        h.k = (int64_t) cdc_test_rng_next(&rng);
        h.cols = (int64_t) cdc_test_rng_next(&rng);
        h.a_key = cdc_test_rng_next(&rng);
        h.bt_key = cdc_test_rng_next(&rng);
        h.batch = (int64_t) cdc_test_rng_next(&rng);
        cdc_conv_geometry_t *g = &h.geometry;
        int64_t *sent[11] = {&g->channels, &g->h,        &g->w,        &g->kernel_h,
                             &g->kernel_w, &g->stride_h, &g->stride_w, &g->pad_h,
                             &g->pad_w,    &g->dilation_h, &g->dilation_w};
        for (int i = 0; i < 11; i++)
            *sent[i] = (int64_t) cdc_test_rng_next(&rng);
        h.error_code = (int32_t) (uint32_t) cdc_test_rng_next(&rng);
        h.lead_rows = (int64_t) cdc_test_rng_next(&rng);
        h.part_rows = (int64_t) cdc_test_rng_next(&rng);
        h.row_offset = (int64_t) cdc_test_rng_next(&rng);
        cdc__msg_header_pack(&h, packed);
        ck_assert_int_eq(cdc__msg_header_unpack(packed, sizeof packed, &back), CDC_OK);
        assert_header_eq(&back, &h);
        ck_assert_int_eq(back.geometry.out_h, 0);
        ck_assert_int_eq(back.geometry.out_w, 0);
    }
}
END_TEST

START_TEST(test_every_type_over_zmq)
{
    /* Through cdc__wire_send / cdc__wire_recv on an inproc pair: the header
       and the payload bytes (copied) arrive as sent. */
    void *zmq = zmq_ctx_new();
    void *out = zmq_socket(zmq, ZMQ_PAIR), *in = zmq_socket(zmq, ZMQ_PAIR);
    ck_assert_int_eq(zmq_bind(in, "inproc://test-protocol"), 0);
    ck_assert_int_eq(zmq_connect(out, "inproc://test-protocol"), 0);
    for (int i = 0; i < TYPE_COUNT; i++) {
        sample_msg_t m;
        sample_message(every_type[i], &m);
        ck_assert_int_eq(cdc__wire_send(out, NULL, &m.header, m.payload, m.payload_count, 0),
                         CDC_OK);
        cdc_wire_msg_t wire;
        ck_assert_int_eq(cdc__wire_recv(in, &wire, 0), CDC_OK);
        cdc_msg_t msg;
        ck_assert_msg(cdc__wire_decode(&wire, 0, &msg) == CDC_OK, "%s: %s",
                      cdc__msg_type_name(every_type[i]), cdc_last_error());
        assert_header_eq(&msg.header, &m.header);
        ck_assert_int_eq(msg.payload_count, m.payload_count);
        for (int p = 0; p < m.payload_count; p++) {
            ck_assert_uint_eq(msg.payload[p].size, m.payload[p].size);
            ck_assert_int_eq(msg.payload[p].count, 1);
            if (m.payload[p].size)
                ck_assert_mem_eq(msg.payload[p].frames[0].data, m.payload[p].data,
                                 m.payload[p].size);
        }
        cdc__wire_msg_close(&wire);
    }
    zmq_close(out);
    zmq_close(in);
    zmq_ctx_term(zmq);
}
END_TEST

START_TEST(test_bad_header)
{
    cdc_msg_header_t h;
    gemm_header(&h);
    cdc__msg_header_pack(&h, packed);
    cdc_msg_t msg;
    cdc_frame_t frames[3] = {{packed, sizeof packed - 1}, {a_data, sizeof a_data},
                             {bt_data, sizeof bt_data}};
    /* Truncated header frame. */
    ck_assert_int_eq(cdc__msg_decode(frames, 3, &msg), CDC_EPROTO);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "header"));
    /* Too long. */
    uint8_t longer[CDC_PROTO_HEADER_SIZE + 8] = {0};
    memcpy(longer, packed, sizeof packed);
    frames[0] = (cdc_frame_t){longer, sizeof longer};
    ck_assert_int_eq(cdc__msg_decode(frames, 3, &msg), CDC_EPROTO);

    gemm_header(&h);
    h.magic = 0xdeadbeef;
    ck_assert_int_eq(decode_gemm(&h, sizeof a_data, sizeof bt_data), CDC_EPROTO);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "magic"));

    gemm_header(&h);
    h.version = CDC_PROTO_VERSION + 1;
    ck_assert_int_eq(decode_gemm(&h, sizeof a_data, sizeof bt_data), CDC_EPROTO);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "version"));

    gemm_header(&h);
    h.type = 99;
    ck_assert_int_eq(decode_gemm(&h, sizeof a_data, sizeof bt_data), CDC_EPROTO);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "unknown message type"));
    h.type = 0;
    ck_assert_int_eq(decode_gemm(&h, sizeof a_data, sizeof bt_data), CDC_EPROTO);

    gemm_header(&h);
    h.dtype = 2;
    ck_assert_int_eq(decode_gemm(&h, sizeof a_data, sizeof bt_data), CDC_EPROTO);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "dtype"));

    gemm_header(&h);
    h.shard = -1;
    ck_assert_int_eq(decode_gemm(&h, sizeof a_data, sizeof bt_data), CDC_EPROTO);
}
END_TEST

START_TEST(test_frame_count)
{
    cdc_msg_header_t h;
    gemm_header(&h);
    cdc__msg_header_pack(&h, packed);
    cdc_frame_t frames[4] = {{packed, sizeof packed}, {a_data, sizeof a_data},
                             {bt_data, sizeof bt_data}, {bt_data, 4}};
    cdc_msg_t msg;
    ck_assert_int_eq(cdc__msg_decode(frames, 2, &msg), CDC_EPROTO); /* truncated */
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "frames"));
    ck_assert_int_eq(cdc__msg_decode(frames, 4, &msg), CDC_EPROTO); /* extra */
    ck_assert_int_eq(cdc__msg_decode(frames, 0, &msg), CDC_EPROTO);
    ck_assert_int_eq(cdc__msg_decode(NULL, 3, &msg), CDC_EPROTO);
    cdc__msg_header_init(&h, CDC_MSG_PING);
    cdc__msg_header_pack(&h, packed);
    ck_assert_int_eq(cdc__msg_decode(frames, 2, &msg), CDC_EPROTO);
}
END_TEST

/* CANCEL (type 9): a header alone naming the request to forget. */
START_TEST(test_cancel_decodes)
{
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_CANCEL);
    h.request_id = 41;
    cdc__msg_header_pack(&h, packed);
    cdc_frame_t frames[2] = {{packed, sizeof packed}, {a_data, sizeof a_data}};
    cdc_msg_t msg;
    ck_assert_int_eq(cdc__msg_decode(frames, 1, &msg), CDC_OK);
    ck_assert_uint_eq(msg.header.type, CDC_MSG_CANCEL);
    ck_assert_uint_eq(msg.header.request_id, 41);
    ck_assert_int_eq(msg.payload_count, 0);
    ck_assert_uint_eq(msg.header.dtype, 0);
    ck_assert_str_eq(cdc__msg_type_name(CDC_MSG_CANCEL), "CANCEL");
    ck_assert_int_eq(cdc__msg_payload_count(CDC_MSG_CANCEL), 0);
    ck_assert_int_eq(cdc__msg_decode(frames, 2, &msg), CDC_EPROTO); /* no payload */
    h.shard = 64;
    cdc__msg_header_pack(&h, packed);
    ck_assert_int_eq(cdc__msg_decode(frames, 1, &msg), CDC_EPROTO);
}
END_TEST

START_TEST(test_shape_mismatch)
{
    cdc_msg_header_t h;
    gemm_header(&h);
    ck_assert_int_eq(decode_gemm(&h, sizeof a_data - 4, sizeof bt_data), CDC_EPROTO);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "expected 24"));
    ck_assert_int_eq(decode_gemm(&h, sizeof a_data, sizeof bt_data + 4), CDC_EPROTO);
    ck_assert_int_eq(decode_gemm(&h, 0, sizeof bt_data), CDC_EPROTO); /* no key, no a */
    h.a_key = 3; /* keyed operand must not also carry a payload */
    ck_assert_int_eq(decode_gemm(&h, sizeof a_data, sizeof bt_data), CDC_EPROTO);

    gemm_header(&h);
    h.rows = 0;
    ck_assert_int_eq(decode_gemm(&h, 0, sizeof bt_data), CDC_EPROTO);
    gemm_header(&h);
    h.k = -3;
    ck_assert_int_eq(decode_gemm(&h, sizeof a_data, sizeof bt_data), CDC_EPROTO);

    conv_header(&h);
    ck_assert_int_eq(decode_conv(&h, sizeof conv_input - 4), CDC_EPROTO);
    conv_header(&h);
    h.k = 26; /* not channels x kh x kw */
    ck_assert_int_eq(decode_conv(&h, sizeof conv_input), CDC_EPROTO);
    conv_header(&h);
    h.cols = 2 * 8 * 8 + 1; /* not batch x out_h x out_w */
    ck_assert_int_eq(decode_conv(&h, sizeof conv_input), CDC_EPROTO);
    conv_header(&h);
    h.geometry.stride_h = 0;
    ck_assert_int_eq(decode_conv(&h, sizeof conv_input), CDC_EPROTO);
    conv_header(&h);
    h.geometry.pad_h = 0;
    h.geometry.kernel_h = 9; /* larger than the unpadded image: empty output */
    h.k = 3 * 9 * 3;
    ck_assert_int_eq(decode_conv(&h, sizeof conv_input), CDC_EPROTO);
    conv_header(&h);
    h.geometry.pad_w = -1;
    ck_assert_int_eq(decode_conv(&h, sizeof conv_input), CDC_EPROTO);
}
END_TEST

START_TEST(test_huge_dims)
{
    cdc_msg_header_t h;
    gemm_header(&h);
    h.rows = INT64_C(1) << 40;
    ck_assert_int_eq(decode_gemm(&h, sizeof a_data, sizeof bt_data), CDC_EPROTO);
    gemm_header(&h);
    h.rows = CDC_PROTO_MAX_DIM;
    h.cols = CDC_PROTO_MAX_DIM; /* each within bounds, the result is not */
    h.a_key = h.bt_key = 1;
    ck_assert_int_eq(decode_gemm(&h, 0, 0), CDC_EPROTO);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "exceeds"));
    gemm_header(&h);
    h.k = INT64_MAX;
    ck_assert_int_eq(decode_gemm(&h, sizeof a_data, sizeof bt_data), CDC_EPROTO);
    conv_header(&h);
    h.batch = INT64_C(1) << 23;
    h.geometry.h = h.geometry.w = INT64_C(1) << 20;
    ck_assert_int_eq(decode_conv(&h, sizeof conv_input), CDC_EPROTO);

    cdc__msg_header_init(&h, CDC_MSG_WEIGHTS);
    h.a_key = 1;
    h.rows = INT64_C(1) << 20;
    h.k = INT64_C(1) << 20;
    cdc__msg_header_pack(&h, packed);
    cdc_frame_t frames[2] = {{packed, sizeof packed}, {a_data, sizeof a_data}};
    cdc_msg_t msg;
    ck_assert_int_eq(cdc__msg_decode(frames, 2, &msg), CDC_EPROTO);
    /* WEIGHTS and MISS need a key. */
    h.rows = 2;
    h.k = 3;
    h.a_key = 0;
    cdc__msg_header_pack(&h, packed);
    ck_assert_int_eq(cdc__msg_decode(frames, 2, &msg), CDC_EPROTO);
    h.a_key = 1;
    cdc__msg_header_pack(&h, packed);
    ck_assert_int_eq(cdc__msg_decode(frames, 2, &msg), CDC_OK);
    cdc__msg_header_init(&h, CDC_MSG_MISS);
    cdc__msg_header_pack(&h, packed);
    ck_assert_int_eq(cdc__msg_decode(frames, 1, &msg), CDC_EPROTO);
    /* STORED: a key, a shape within bounds, and nothing after the header. */
    cdc__msg_header_init(&h, CDC_MSG_STORED);
    h.rows = 2;
    h.k = 3;
    cdc__msg_header_pack(&h, packed);
    ck_assert_int_eq(cdc__msg_decode(frames, 1, &msg), CDC_EPROTO); /* no key */
    h.a_key = 5;
    cdc__msg_header_pack(&h, packed);
    ck_assert_int_eq(cdc__msg_decode(frames, 1, &msg), CDC_OK);
    ck_assert_int_eq(cdc__msg_decode(frames, 2, &msg), CDC_EPROTO); /* a payload */
    h.k = 0;
    cdc__msg_header_pack(&h, packed);
    ck_assert_int_eq(cdc__msg_decode(frames, 1, &msg), CDC_EPROTO);
    h.rows = h.k = INT64_C(1) << 20; /* 4 TiB */
    cdc__msg_header_pack(&h, packed);
    ck_assert_int_eq(cdc__msg_decode(frames, 1, &msg), CDC_EPROTO);
    /* Over-long error text. */
    static char text[CDC_PROTO_MAX_TEXT + 1];
    cdc__msg_header_init(&h, CDC_MSG_ERROR);
    cdc__msg_header_pack(&h, packed);
    frames[1] = (cdc_frame_t){text, sizeof text};
    ck_assert_int_eq(cdc__msg_decode(frames, 2, &msg), CDC_EPROTO);
}
END_TEST

START_TEST(test_garbage)
{
    /* Random bytes in every frame and random frame counts: always a status. */
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 42);
    static uint8_t bytes[3][256];
    int accepted = 0;
    for (int round = 0; round < 20000; round++) {
        cdc_frame_t frames[3];
        for (int f = 0; f < 3; f++) {
            size_t size = round % 2 ? CDC_PROTO_HEADER_SIZE
                                    : (size_t) cdc_test_rng_int(&rng, 0, 255);
            for (size_t i = 0; i < size; i++)
                bytes[f][i] = (uint8_t) cdc_test_rng_next(&rng);
            /* Half the rounds keep a valid magic/version so deeper checks run. */
            if (f == 0 && round % 4 == 1) {
                memcpy(bytes[f], "CDCG", 4);
                bytes[f][4] = CDC_PROTO_VERSION;
                bytes[f][5] = 0;
                bytes[f][6] = (uint8_t) cdc_test_rng_int(&rng, 0, 9);
                bytes[f][7] = 0;
            }
            frames[f] = (cdc_frame_t){bytes[f], size};
        }
        cdc_msg_t msg;
        int rc = cdc__msg_decode(frames, (int) cdc_test_rng_int(&rng, 1, 3), &msg);
        ck_assert(rc == CDC_OK || rc == CDC_EPROTO);
        accepted += rc == CDC_OK;
    }
    /* Random 168-byte headers with a valid prefix are almost never valid
       messages; a PING/PONG with the right frame count can be. */
    ck_assert_int_lt(accepted, 2000);
}
END_TEST


/* ---- protocol version 2: payloads in chunks ------------------------------- */

#define CHUNK CDC_PROTO_CHUNK_BYTES
/* 10,000,000 bytes: chunks of 4194304, 4194304 and 1611392. */
#define BIG_ROWS 2500
#define BIG_K 1000
#define BIG_BYTES ((size_t) BIG_ROWS * BIG_K * sizeof(float))

static uint8_t *big_bytes(void)
{
    static uint8_t *bytes;
    if (!bytes) {
        bytes = cdc_test_alloc(BIG_BYTES + CHUNK);
        for (size_t i = 0; i < BIG_BYTES + CHUNK; i++)
            bytes[i] = (uint8_t) (i * 2654435761u >> 13);
    }
    return bytes;
}

START_TEST(test_payload_frames_rule)
{
    ck_assert_int_eq(CHUNK, 4194304);
    ck_assert_int_eq(cdc__msg_payload_frames(0), 1); /* a cached operand: one empty frame */
    ck_assert_int_eq(cdc__msg_payload_frames(1), 1);
    ck_assert_int_eq(cdc__msg_payload_frames(CHUNK), 1);
    ck_assert_int_eq(cdc__msg_payload_frames(CHUNK + 1), 2);
    ck_assert_int_eq(cdc__msg_payload_frames(BIG_BYTES), 3);
    ck_assert_int_eq(cdc__msg_payload_frames((size_t) CDC_PROTO_MAX_FLOATS * 4),
                     CDC_PROTO_MAX_PAYLOAD_FRAMES);
    ck_assert_int_eq(CDC_PROTO_MAX_PAYLOAD_FRAMES, 256);
    ck_assert_int_eq(CDC_PROTO_MAX_FRAMES, 1 + 2 * 256);
}
END_TEST

/* A 10 MB TASK_GEMM operand, WEIGHTS matrix and RESULT through
   cdc__wire_send / cdc__wire_recv: three frames each, the bytes identical
   after gathering. */
START_TEST(test_chunked_round_trip)
{
    static const cdc_msg_type_t types[] = {CDC_MSG_TASK_GEMM, CDC_MSG_WEIGHTS, CDC_MSG_RESULT};
    cdc_msg_type_t type = types[_i];
    const uint8_t *bytes = big_bytes();
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, type);
    h.request_id = 31;
    h.rows = BIG_ROWS;
    h.k = BIG_K;
    h.cols = type == CDC_MSG_RESULT ? BIG_K : 2;
    h.a_key = type == CDC_MSG_WEIGHTS ? 5 : 0;
    cdc_frame_t payloads[2] = {{bytes, BIG_BYTES}, {bytes + 1, 2 * BIG_K * sizeof(float)}};
    void *zmq = zmq_ctx_new();
    void *out = zmq_socket(zmq, ZMQ_PAIR), *in = zmq_socket(zmq, ZMQ_PAIR);
    ck_assert_int_eq(zmq_bind(in, "inproc://test-chunks"), 0);
    ck_assert_int_eq(zmq_connect(out, "inproc://test-chunks"), 0);
    int payload_count = cdc__msg_payload_count(type);
    ck_assert_int_eq(cdc__wire_send(out, NULL, &h, payloads, payload_count, 0), CDC_OK);
    cdc_wire_msg_t wire;
    ck_assert_int_eq(cdc__wire_recv(in, &wire, 0), CDC_OK);
    ck_assert_int_eq(wire.count, 1 + 3 + (payload_count - 1));
    ck_assert_uint_eq(zmq_msg_size(&wire.parts[1]), CHUNK);
    ck_assert_uint_eq(zmq_msg_size(&wire.parts[2]), CHUNK);
    ck_assert_uint_eq(zmq_msg_size(&wire.parts[3]), BIG_BYTES - 2 * CHUNK);
    cdc_msg_t msg;
    ck_assert_msg(cdc__wire_decode(&wire, 0, &msg) == CDC_OK, "%s", cdc_last_error());
    ck_assert_int_eq(msg.payload[0].count, 3);
    ck_assert_uint_eq(msg.payload[0].size, BIG_BYTES);
    uint8_t *gathered = cdc_test_alloc(BIG_BYTES);
    cdc__msg_payload_gather(&msg.payload[0], gathered);
    ck_assert_int_eq(memcmp(gathered, bytes, BIG_BYTES), 0);
    if (payload_count == 2) {
        ck_assert_int_eq(msg.payload[1].count, 1);
        ck_assert_mem_eq(msg.payload[1].frames[0].data, bytes + 1, payloads[1].size);
    }
    free(gathered);
    cdc__wire_msg_close(&wire);
    zmq_close(out);
    zmq_close(in);
    zmq_ctx_term(zmq);
}
END_TEST

/* A RESULT header of BIG_ROWS x BIG_K (10 MB) over the given frames: decode
   must fail naming want. */
static void expect_result_rejected(const cdc_frame_t *payload_frames, int count,
                                   const char *want)
{
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_RESULT);
    h.rows = BIG_ROWS;
    h.cols = BIG_K;
    cdc__msg_header_pack(&h, packed);
    cdc_frame_t frames[8] = {{packed, sizeof packed}};
    for (int i = 0; i < count; i++)
        frames[1 + i] = payload_frames[i];
    cdc_msg_t msg;
    ck_assert_int_eq(cdc__msg_decode(frames, 1 + count, &msg), CDC_EPROTO);
    ck_assert_msg(strstr(cdc_last_error(), want) != NULL, "'%s' does not name '%s'",
                  cdc_last_error(), want);
}

START_TEST(test_chunk_layout_rejected)
{
    const uint8_t *b = big_bytes();
    size_t last = BIG_BYTES - 2 * CHUNK;
    /* The right layout decodes. */
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_RESULT);
    h.rows = BIG_ROWS;
    h.cols = BIG_K;
    cdc__msg_header_pack(&h, packed);
    cdc_frame_t good[4] = {{packed, sizeof packed}, {b, CHUNK}, {b, CHUNK}, {b, last}};
    cdc_msg_t msg;
    ck_assert_msg(cdc__msg_decode(good, 4, &msg) == CDC_OK, "%s", cdc_last_error());
    /* A first chunk short, a middle one long, the last one wrong. */
    expect_result_rejected((cdc_frame_t[]){{b, CHUNK - 4}, {b, CHUNK + 4}, {b, last}}, 3,
                           "result chunk 1 of 3 is 4194300 bytes, expected 4194304");
    expect_result_rejected((cdc_frame_t[]){{b, CHUNK}, {b, CHUNK + 4}, {b, last - 4}}, 3,
                           "result chunk 2 of 3 is 4194308 bytes, expected 4194304");
    expect_result_rejected((cdc_frame_t[]){{b, CHUNK}, {b, CHUNK}, {b, last + 4}}, 3,
                           "result chunk 3 of 3 is 1611396 bytes, expected 1611392");
    /* A chunk missing, one extra, the whole payload in one frame over the
       chunk size: the count says so before any size is read. */
    expect_result_rejected((cdc_frame_t[]){{b, CHUNK}, {b, CHUNK + last}}, 2,
                           "3 frames, expected 4 (header, result: 3)");
    expect_result_rejected((cdc_frame_t[]){{b, CHUNK}, {b, CHUNK}, {b, last}, {b, 0}}, 4,
                           "5 frames, expected 4 (header, result: 3)");
    expect_result_rejected((cdc_frame_t[]){{b, BIG_BYTES}}, 1,
                           "2 frames, expected 4 (header, result: 3)");
    /* A frame over the chunk size where the count is right: 4 MiB + 4 bytes
       must be a full chunk and 4 bytes, not 4 MiB + 4 and nothing. */
    h.rows = (int64_t) (CHUNK / sizeof(float)) + 1;
    h.cols = 1;
    cdc__msg_header_pack(&h, packed);
    cdc_frame_t over[3] = {{packed, sizeof packed}, {b, CHUNK + 4}, {b, 0}};
    ck_assert_int_eq(cdc__msg_decode(over, 3, &msg), CDC_EPROTO);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "chunk 1 of 2 is 4194308 bytes"));
}
END_TEST

START_TEST(test_chunked_task_layout)
{
    /* TASK_GEMM: a (10 MB, 3 chunks) inline, bt cached: one empty frame. */
    const uint8_t *b = big_bytes();
    size_t last = BIG_BYTES - 2 * CHUNK;
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_TASK_GEMM);
    h.rows = BIG_ROWS;
    h.k = BIG_K;
    h.cols = 3;
    h.bt_key = 8;
    cdc__msg_header_pack(&h, packed);
    cdc_frame_t frames[6] = {{packed, sizeof packed}, {b, CHUNK}, {b, CHUNK}, {b, last},
                             {b, 0},                  {b, 0}};
    cdc_msg_t msg;
    ck_assert_msg(cdc__msg_decode(frames, 5, &msg) == CDC_OK, "%s", cdc_last_error());
    ck_assert_int_eq(msg.payload[0].count, 3);
    ck_assert_ptr_eq(msg.payload[0].frames, &frames[1]);
    ck_assert_int_eq(msg.payload[1].count, 1);
    ck_assert_uint_eq(msg.payload[1].size, 0);
    /* A keyed operand still travels as one empty frame, never chunks. */
    ck_assert_int_eq(cdc__msg_decode(frames, 6, &msg), CDC_EPROTO);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "6 frames, expected 5 (header, a: 3, bt: 1)"));
    frames[4] = (cdc_frame_t){b, 4};
    ck_assert_int_eq(cdc__msg_decode(frames, 5, &msg), CDC_EPROTO);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "bt has key"));
}
END_TEST

START_TEST(test_too_many_frames)
{
    /* More frames than any message may have: refused on the count alone,
       before the header is looked at. */
    static cdc_frame_t frames[CDC_PROTO_MAX_FRAMES + 1];
    for (int i = 0; i < CDC_PROTO_MAX_FRAMES + 1; i++)
        frames[i] = (cdc_frame_t){"", 0};
    cdc_msg_t msg;
    ck_assert_int_eq(cdc__msg_decode(frames, CDC_PROTO_MAX_FRAMES + 1, &msg), CDC_EPROTO);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "514 frames, at most 513"));
    /* The largest valid message is exactly at the limit: two 1 GiB operands. */
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_TASK_GEMM);
    h.rows = 1 << 14;
    h.k = 1 << 14;
    h.cols = 1 << 14;
    cdc__msg_header_pack(&h, packed);
    frames[0] = (cdc_frame_t){packed, sizeof packed};
    for (int i = 1; i < CDC_PROTO_MAX_FRAMES; i++)
        frames[i] = (cdc_frame_t){big_bytes(), CHUNK};
    ck_assert_msg(cdc__msg_decode(frames, CDC_PROTO_MAX_FRAMES, &msg) == CDC_OK, "%s",
                  cdc_last_error());
    ck_assert_int_eq(msg.payload[0].count, 256);
    ck_assert_int_eq(msg.payload[1].count, 256);
}
END_TEST

/* The PONG's status text: written and read back; unknown keys skipped (a
   newer worker's); malformed lines refused with the line named. */
START_TEST(test_status_text)
{
    cdc_status_report_t in = {.cache_bytes = UINT64_MAX, .cache_entries = 7,
                              .max_memory = (uint64_t) 1 << 30, .tasks = 123456789, .load = 0,
                              .instance = 42, .busy_us = 987654321, .flops = UINT64_MAX - 1,
                              .max_task_memory = (uint64_t) 512 << 20,
                              .thin_busy_us = 1234567, .thin_flops = 99, .thin_bytes = 1 << 20};
    char text[CDC_PROTO_MAX_TEXT];
    size_t len = cdc__status_format(&in, text, sizeof text);
    ck_assert_uint_eq(len, strlen(text));
    cdc_status_report_t out;
    ck_assert_int_eq(cdc__status_parse(text, len, &out), CDC_OK);
    ck_assert_int_eq(memcmp(&in, &out, sizeof in), 0);
    const char newer[] = "gflops=12\ntasks=5\n\nrtt_us=300";
    ck_assert_int_eq(cdc__status_parse(newer, sizeof newer - 1, &out), CDC_OK);
    ck_assert_uint_eq(out.tasks, 5);
    ck_assert_uint_eq(out.cache_bytes, 0);
    static const char *const bad[] = {"tasks", "=5", "tasks=", "tasks=-1", "tasks=5x",
                                      "Tasks=5", "tasks=18446744073709551616", "a b=1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_msg(cdc__status_parse(bad[i], strlen(bad[i]), &out) == CDC_EPROTO, "%s",
                      bad[i]);
        ck_assert_ptr_nonnull(strstr(cdc_last_error(), "line 1"));
    }
    /* Cut short: whole lines only. */
    len = cdc__status_format(&in, text, 30);
    ck_assert_uint_lt(len, 30);
    ck_assert_int_eq(cdc__status_parse(text, len, &out), CDC_OK);
}
END_TEST

/* Streamed tasks (version 3): the lead rows within the rows, parts of at
   least a row and at most 32 parts in all, nothing where the type has no
   stream; a RESULT's row_offset in range, only on a RESULT. */
START_TEST(test_stream_fields)
{
    cdc_msg_header_t h;
    gemm_header(&h);
    h.rows = 5;
    size_t a_bytes = 5 * 3 * 4, bt_bytes = 4 * 3 * 4;
    const struct {
        int64_t lead, part;
        int ok;
    } cases[] = {{0, 0, 1},  {3, 1, 1},  {3, 2, 1},  {5, 0, 1},  {1, 4, 1}, {3, 0, 0},
                 {0, 1, 0},  {-1, 0, 0}, {6, 0, 0},  {5, 1, 0},  {3, -1, 0}, {1, 5, 1},
                 {1, 6, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        h.lead_rows = cases[i].lead;
        h.part_rows = cases[i].part;
        int rc = decode_gemm(&h, a_bytes, bt_bytes);
        ck_assert_msg((rc == CDC_OK) == cases[i].ok, "lead %lld part %lld: %s",
                      (long long) cases[i].lead, (long long) cases[i].part,
                      rc == CDC_OK ? "accepted" : cdc_last_error());
    }
    /* 1 lead row and 40 one-row parts: more than 32 parts. */
    h.rows = 41;
    h.lead_rows = 1;
    h.part_rows = 1;
    float big_a[41 * 3] = {0};
    cdc__msg_header_pack(&h, packed);
    cdc_frame_t frames[3] = {{packed, sizeof packed}, {big_a, sizeof big_a}, {bt_data, bt_bytes}};
    cdc_msg_t msg;
    ck_assert_int_eq(cdc__msg_decode(frames, 3, &msg), CDC_EPROTO);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "part_rows"));
    /* row_offset: a RESULT's only. */
    cdc_msg_header_t r;
    cdc__msg_header_init(&r, CDC_MSG_RESULT);
    r.rows = 2;
    r.cols = 4;
    r.row_offset = 7;
    float result[8] = {0};
    cdc__msg_header_pack(&r, packed);
    cdc_frame_t result_frames[2] = {{packed, sizeof packed}, {result, sizeof result}};
    ck_assert_int_eq(cdc__msg_decode(result_frames, 2, &msg), CDC_OK);
    ck_assert_int_eq(msg.header.row_offset, 7);
    r.row_offset = -1;
    cdc__msg_header_pack(&r, packed);
    ck_assert_int_eq(cdc__msg_decode(result_frames, 2, &msg), CDC_EPROTO);
    gemm_header(&h);
    h.row_offset = 1;
    ck_assert_int_eq(decode_gemm(&h, 2 * 3 * 4, bt_bytes), CDC_EPROTO);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "row_offset"));
}
END_TEST

static Suite *protocol_suite(void)
{
    Suite *suite = suite_create("protocol");
    TCase *round_trip = tcase_create("round_trip");
    tcase_add_test(round_trip, test_stream_fields);
    tcase_add_test(round_trip, test_header_round_trip);
    tcase_add_test(round_trip, test_valid_messages_decode);
    tcase_add_loop_test(round_trip, test_every_type_decodes_to_same_header, 0, TYPE_COUNT);
    tcase_add_test(round_trip, test_every_type_named);
    tcase_add_test(round_trip, test_random_headers_round_trip);
    tcase_add_test(round_trip, test_every_type_over_zmq);
    tcase_add_test(round_trip, test_cancel_decodes);
    tcase_add_test(round_trip, test_status_text);
    suite_add_tcase(suite, round_trip);
    TCase *malformed = tcase_create("malformed");
    tcase_add_test(malformed, test_bad_header);
    tcase_add_test(malformed, test_frame_count);
    tcase_add_test(malformed, test_shape_mismatch);
    tcase_add_test(malformed, test_huge_dims);
    tcase_add_test(malformed, test_garbage);
    suite_add_tcase(suite, malformed);
    TCase *chunks = tcase_create("chunks");
    tcase_add_test(chunks, test_payload_frames_rule);
    tcase_add_loop_test(chunks, test_chunked_round_trip, 0, 3);
    tcase_add_test(chunks, test_chunk_layout_rejected);
    tcase_add_test(chunks, test_chunked_task_layout);
    tcase_add_test(chunks, test_too_many_frames);
    suite_add_tcase(suite, chunks);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(protocol_suite());
}
