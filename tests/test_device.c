/* test_device.c - the worker's emulated device (one task at a time, a queue)
 * and the coordinator's CANCEL: the queue alone (pure), a real worker with
 * a slow fault answering back-to-back tasks at cumulative times and dropping
 * cancelled ones, and a straggler that a coordinator's CANCELs keep from
 * building a backlog. */
/* Contexts here use the dedicated parity layout and the equal plan: the
   assertions count its shards (weights per shard, one decoded shard per
   lost worker, results per call), and the adaptive default would compute
   these small calls on this host. The rotated layout's own: test_rotated.c. */
#include "cdcgemm.h"
#include "device.h"
#include "protocol.h"
#include "testutil.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

/* ---- the queue alone ---------------------------------------------------- */

static int match_int(void *item, void *ctx)
{
    return *(int *) item == *(int *) ctx;
}

static void count_release(void *item, void *ctx)
{
    (void) ctx;
    *(int *) item = -*(int *) item; /* marks it released */
}

/* Pop everything due at now into ids (count returned); -1 for a slot that
   sends nothing (a task cancelled in service). */
static int pop_all(cdc_device_t *device, double now, int *ids)
{
    int n = 0;
    void *item;
    while (cdc__device_pop_due(device, now, &item))
        ids[n++] = item ? *(int *) item : -1;
    return n;
}

/* Four tasks on a device that takes 100 ms each, all there at 0: they finish
   at 100, 200, 300, 400 (before: every reply at 100). */
START_TEST(test_back_to_back_cumulative)
{
    cdc_device_t device;
    cdc__device_init(&device);
    int id[4] = {1, 2, 3, 4}, got[8];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(cdc__device_push(&device, 0.0, 100.0, 0.0, &id[i]), CDC_OK);
    for (int i = 0; i < 4; i++)
        ck_assert_double_eq(cdc__device_finish(&device, (size_t) i), 100.0 * (i + 1));
    ck_assert_double_eq(cdc__device_next_due(&device), 100.0);
    ck_assert_int_eq(pop_all(&device, 99.9, got), 0);
    ck_assert_int_eq(pop_all(&device, 250.0, got), 2);
    ck_assert_int_eq(got[0], 1);
    ck_assert_int_eq(got[1], 2);
    ck_assert_double_eq(cdc__device_next_due(&device), 300.0);
    /* A task arriving after the device went idle starts when it arrives. */
    ck_assert_int_eq(pop_all(&device, 400.0, got), 2);
    ck_assert(isinf(cdc__device_next_due(&device)));
    int late = 5;
    ck_assert_int_eq(cdc__device_push(&device, 1000.0, 100.0, 0.0, &late), CDC_OK);
    ck_assert_double_eq(cdc__device_next_due(&device), 1100.0);
    ck_assert_uint_eq(cdc__device_queued(&device), 1);
    cdc__device_release(&device);
}
END_TEST

/* A delayed task holds back the next; link latency delays a reply without
   holding the device. */
START_TEST(test_delay_holds_next)
{
    cdc_device_t device;
    cdc__device_init(&device);
    int a = 1, b = 2, c = 3;
    cdc__device_push(&device, 0.0, 10.0 + 500.0, 0.0, &a); /* 10 ms compute + 500 ms delay */
    cdc__device_push(&device, 5.0, 10.0, 0.0, &b);
    ck_assert_double_eq(cdc__device_finish(&device, 0), 510.0);
    ck_assert_double_eq(cdc__device_finish(&device, 1), 520.0);
    int got[4];
    ck_assert_int_eq(pop_all(&device, 519.0, got), 1);
    ck_assert_int_eq(pop_all(&device, 520.0, got), 1);
    ck_assert_int_eq(got[0], 2);
    /* Latency 50: due at finish + 50, and the next starts at the finish. */
    cdc__device_push(&device, 1000.0, 10.0, 50.0, &a);
    cdc__device_push(&device, 1000.0, 10.0, 50.0, &c);
    ck_assert_double_eq(cdc__device_next_due(&device), 1060.0);
    ck_assert_double_eq(cdc__device_finish(&device, 1), 1020.0);
    ck_assert_int_eq(pop_all(&device, 1060.0, got), 1);
    ck_assert_double_eq(cdc__device_next_due(&device), 1070.0);
    cdc__device_release(&device);
}
END_TEST

/* Cancel: a queued task is removed and the ones behind move up; one in
   service holds the device until the cancel, then frees it; unknown ids
   and a second cancel of the same change nothing. */
START_TEST(test_cancel_moves_up)
{
    cdc_device_t device;
    cdc__device_init(&device);
    int id[4] = {1, 2, 3, 4}, got[8];
    for (int i = 0; i < 4; i++)
        cdc__device_push(&device, 0.0, 100.0, 0.0, &id[i]);
    int three = 3;
    /* At 150: task 2 is in service (100..200), 3 and 4 wait. */
    ck_assert_uint_eq(cdc__device_cancel(&device, 150.0, match_int, count_release, &three), 1);
    ck_assert_int_eq(id[2], -3); /* released */
    ck_assert_uint_eq(cdc__device_queued(&device), 3);
    ck_assert_double_eq(cdc__device_finish(&device, 2), 300.0); /* task 4 moved up */
    int two = 2;
    ck_assert_uint_eq(cdc__device_cancel(&device, 150.0, match_int, count_release, &two), 1);
    ck_assert_double_eq(cdc__device_finish(&device, 1), 150.0); /* served until the cancel */
    ck_assert_double_eq(cdc__device_finish(&device, 2), 250.0); /* task 4 starts at 150 */
    int unknown = 99;
    ck_assert_uint_eq(cdc__device_cancel(&device, 150.0, match_int, count_release, &unknown), 0);
    ck_assert_uint_eq(cdc__device_cancel(&device, 150.0, match_int, count_release, &two), 0);
    ck_assert_double_eq(cdc__device_finish(&device, 2), 250.0);
    /* The in-service slot sends nothing. */
    ck_assert_int_eq(pop_all(&device, 250.0, got), 3);
    ck_assert_int_eq(got[0], 1);
    ck_assert_int_eq(got[1], -1);
    ck_assert_int_eq(got[2], 4);
    /* Everything cancelled before it starts: the device is idle again. */
    int x = 7, y = 7;
    cdc__device_push(&device, 300.0, 100.0, 0.0, &x);
    cdc__device_push(&device, 300.0, 100.0, 0.0, &y);
    int seven = 7;
    ck_assert_uint_eq(cdc__device_cancel(&device, 260.0, match_int, count_release, &seven), 2);
    ck_assert_uint_eq(cdc__device_queued(&device), 0);
    int z = 8;
    cdc__device_push(&device, 300.0, 100.0, 0.0, &z);
    ck_assert_double_eq(cdc__device_next_due(&device), 400.0);
    ck_assert_uint_eq(cdc__device_drain(&device, count_release, NULL), 1);
    ck_assert_int_eq(z, -8);
    cdc__device_release(&device);
}
END_TEST

/* ---- a real worker ------------------------------------------------------ */

/* A d x d x d task: 2 d^3 flops; at `gflops` its emulated service is
   2 d^3 / (gflops 1e6) ms. d = 64 at 0.002 GFLOP/s: 262 ms. */
#define TASK_D 64
#define SLOW_GFLOPS 0.002
static const double service_s = 2.0 * TASK_D * TASK_D * TASK_D / (SLOW_GFLOPS * 1e9);

typedef struct {
    pid_t pid;
    char dir[40], endpoint[80], err_path[80];
    void *zmq, *socket;
} solo_t;

static void solo_start(solo_t *s, int index, const char *faults)
{
    cdc_test_temp_dir(s->dir, sizeof s->dir, "cdc-device");
    snprintf(s->endpoint, sizeof s->endpoint, "ipc://%s/w", s->dir);
    snprintf(s->err_path, sizeof s->err_path, "%s/err", s->dir);
    cdc_test_worker_t w = {.bin = CDC_WORKER_BIN, .endpoint = s->endpoint, .threads = 1,
                           .index = index, .parent = 1, .log = "info", .faults = faults,
                           .stderr_path = s->err_path};
    s->pid = cdc_test_worker_run(&w);
    s->zmq = zmq_ctx_new();
    s->socket = cdc_test_dealer(s->zmq, s->endpoint, NULL, NULL);
}

/* SIGTERM, wait, and the worker's counter `name` from the line it prints. */
static unsigned long long solo_stop(solo_t *s, const char *name)
{
    zmq_close(s->socket);
    zmq_ctx_term(s->zmq);
    cdc_test_worker_stop(s->pid, 30.0);
    char text[4096] = "";
    FILE *file = fopen(s->err_path, "r");
    ck_assert_ptr_nonnull(file);
    text[fread(text, 1, sizeof text - 1, file)] = '\0';
    fclose(file);
    unsigned long long value = 0;
    const char *at = name ? strstr(text, name) : NULL;
    ck_assert_msg(!name || at, "no '%s' in '%s'", name, text);
    if (at)
        ck_assert_int_eq(sscanf(at + strlen(name), "%llu", &value), 1);
    cdc_test_temp_dir_remove(s->dir);
    return value;
}

static void solo_header(solo_t *s, int type, uint64_t id)
{
    cdc_msg_header_t h;
    uint8_t packed[CDC_PROTO_HEADER_SIZE];
    cdc__msg_header_init(&h, type);
    h.request_id = id;
    cdc__msg_header_pack(&h, packed);
    ck_assert_int_eq(zmq_send(s->socket, packed, sizeof packed, 0), (int) sizeof packed);
}

/* A TASK_D-cube GEMM with inline operands. */
static void solo_task(solo_t *s, uint64_t id, const float *m)
{
    cdc_msg_header_t h;
    uint8_t packed[CDC_PROTO_HEADER_SIZE];
    cdc__msg_header_init(&h, CDC_MSG_TASK_GEMM);
    h.request_id = id;
    h.rows = h.k = h.cols = TASK_D;
    cdc__msg_header_pack(&h, packed);
    size_t bytes = (size_t) TASK_D * TASK_D * sizeof(float);
    zmq_send(s->socket, packed, sizeof packed, ZMQ_SNDMORE);
    zmq_send(s->socket, m, bytes, ZMQ_SNDMORE);
    zmq_send(s->socket, m, bytes, 0);
}

/* The next reply's header within timeout_ms (type 0: none). */
static cdc_msg_header_t solo_recv(solo_t *s, long timeout_ms)
{
    cdc_msg_header_t h;
    memset(&h, 0, sizeof h);
    zmq_pollitem_t item = {s->socket, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, timeout_ms) != 1)
        return h;
    zmq_msg_t part;
    zmq_msg_init(&part);
    zmq_msg_recv(&part, s->socket, 0);
    cdc__msg_header_unpack(zmq_msg_data(&part), zmq_msg_size(&part), &h);
    while (zmq_msg_more(&part)) {
        zmq_msg_close(&part);
        zmq_msg_init(&part);
        zmq_msg_recv(&part, s->socket, 0);
    }
    zmq_msg_close(&part);
    return h;
}

static void solo_ready(solo_t *s)
{
    solo_header(s, CDC_MSG_PING, 1);
    ck_assert_uint_eq(solo_recv(s, 5000).type, CDC_MSG_PONG);
}

/* The next RESULT (PONGs skipped) with its seconds since t0. */
static cdc_msg_header_t next_result(solo_t *s, double t0, double *at_s)
{
    for (;;) {
        cdc_msg_header_t h = solo_recv(s, 10000);
        *at_s = cdc_test_now_s() - t0;
        if (h.type != CDC_MSG_PONG)
            return h;
    }
}

static float *task_matrix(void)
{
    float *m = cdc_test_alloc((size_t) TASK_D * TASK_D * sizeof(float));
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 11);
    cdc_test_fill_uniform(&rng, m, (size_t) TASK_D * TASK_D);
    return m;
}

/* Four tasks back to back on a slow device: results at about 1, 2, 3 and 4
   service times (before: all four at about 1), PONGs at once meanwhile. */
START_TEST(test_worker_slow_queue)
{
    char faults[64];
    snprintf(faults, sizeof faults, "slow@w0:gflops=%g", SLOW_GFLOPS);
    solo_t s;
    solo_start(&s, 0, faults);
    solo_ready(&s);
    float *m = task_matrix();
    double t0 = cdc_test_now_s();
    for (int i = 0; i < 4; i++)
        solo_task(&s, 10 + (uint64_t) i, m);
    cdc_test_sleep_ms(50);
    double pinged = cdc_test_now_s();
    solo_header(&s, CDC_MSG_PING, 2);
    cdc_msg_header_t h = solo_recv(&s, 5000);
    ck_assert_uint_eq(h.type, CDC_MSG_PONG);
    ck_assert_msg(cdc_test_now_s() - pinged < 0.2, "PONG %.3f s behind a backlog",
                  cdc_test_now_s() - pinged);
    for (int i = 0; i < 4; i++) {
        double at;
        h = next_result(&s, t0, &at);
        ck_assert_uint_eq(h.type, CDC_MSG_RESULT);
        ck_assert_uint_eq(h.request_id, 10 + (uint64_t) i);
        double want = (i + 1) * service_s;
        if (getenv("CDC_TEST_LOG"))
            fprintf(stderr, "slow queue: result %d at %.3f s (%.3f service times)\n", i + 1,
                    at, at / service_s);
        ck_assert_msg(at >= want - 0.02 && at <= want + 0.4,
                      "result %d after %.3f s, expected about %.3f s", i + 1, at, want);
    }
    free(m);
    ck_assert_uint_eq(solo_stop(&s, "cancelled "), 0);
}
END_TEST

/* CANCEL at a slow device: the task in service frees the device at once,
   a queued one leaves the queue, those behind move up; a CANCEL for a
   request never sent, and a repeated one, change nothing. */
START_TEST(test_worker_cancel_frees_device)
{
    char faults[64];
    snprintf(faults, sizeof faults, "slow@w0:gflops=%g", SLOW_GFLOPS);
    solo_t s;
    solo_start(&s, 0, faults);
    solo_ready(&s);
    float *m = task_matrix();
    double t0 = cdc_test_now_s();
    for (int i = 0; i < 4; i++)
        solo_task(&s, 20 + (uint64_t) i, m); /* 20 in service, 21..23 queued */
    cdc_test_sleep_ms((long) (service_s * 500)); /* half of 20's service */
    double cancelled_at = cdc_test_now_s() - t0;
    solo_header(&s, CDC_MSG_CANCEL, 20); /* in service */
    solo_header(&s, CDC_MSG_CANCEL, 22); /* queued */
    solo_header(&s, CDC_MSG_CANCEL, 22); /* again */
    solo_header(&s, CDC_MSG_CANCEL, 999); /* never sent */
    /* 21 starts at the cancel, 23 after it. */
    const uint64_t expect[2] = {21, 23};
    for (int i = 0; i < 2; i++) {
        double at;
        cdc_msg_header_t h = next_result(&s, t0, &at);
        ck_assert_uint_eq(h.type, CDC_MSG_RESULT);
        ck_assert_uint_eq(h.request_id, expect[i]);
        double want = cancelled_at + (i + 1) * service_s;
        if (getenv("CDC_TEST_LOG"))
            fprintf(stderr, "cancel: result %llu at %.3f s, cancels at %.3f s\n",
                    (unsigned long long) expect[i], at, cancelled_at);
        ck_assert_msg(at >= want - 0.05 && at <= want + 0.4,
                      "result %llu after %.3f s, expected about %.3f s",
                      (unsigned long long) expect[i], at, want);
    }
    ck_assert_uint_eq(solo_recv(&s, (long) (service_s * 1500)).type, 0); /* nothing else */
    solo_ready(&s);
    free(m);
    ck_assert_uint_eq(solo_stop(&s, "cancelled "), 2);
}
END_TEST

/* WEIGHTS of LINK_D x LINK_D floats (1 MiB) under key 1, a barrier PING
   (id 7) behind them, a heartbeat PING (id 8), then a task on the cached
   weights (id 9, one column inline); returns when they were sent. */
#define LINK_D 512
static double send_weights_barrier_task(solo_t *s)
{
    size_t floats = (size_t) LINK_D * LINK_D;
    float *w = cdc_test_alloc(floats * sizeof(float)), column[LINK_D];
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 12);
    cdc_test_fill_uniform(&rng, w, floats);
    cdc_test_fill_uniform(&rng, column, LINK_D);
    cdc_msg_header_t h;
    uint8_t packed[CDC_PROTO_HEADER_SIZE];
    cdc__msg_header_init(&h, CDC_MSG_WEIGHTS);
    h.request_id = 2;
    h.a_key = 1;
    h.rows = h.k = LINK_D;
    cdc__msg_header_pack(&h, packed);
    double sent = cdc_test_now_s();
    zmq_send(s->socket, packed, sizeof packed, ZMQ_SNDMORE);
    zmq_send(s->socket, w, floats * sizeof(float), 0);
    cdc__msg_header_init(&h, CDC_MSG_PING);
    h.request_id = 7;
    h.shard = CDC_PING_BARRIER;
    cdc__msg_header_pack(&h, packed);
    zmq_send(s->socket, packed, sizeof packed, 0);
    solo_header(s, CDC_MSG_PING, 8); /* a heartbeat: answered at once */
    cdc__msg_header_init(&h, CDC_MSG_TASK_GEMM);
    h.request_id = 9;
    h.a_key = 1;
    h.rows = h.k = LINK_D;
    h.cols = 1;
    cdc__msg_header_pack(&h, packed);
    zmq_send(s->socket, packed, sizeof packed, ZMQ_SNDMORE);
    zmq_send(s->socket, NULL, 0, ZMQ_SNDMORE);
    zmq_send(s->socket, column, sizeof column, 0);
    free(w);
    return sent;
}

/* The replies to send_weights_barrier_task in the order they come, with
   their times since sent (at[0]: heartbeat PONG, at[1]: barrier PONG,
   at[2]: RESULT). */
static void weights_replies(solo_t *s, double sent, double at[3])
{
    at[0] = at[1] = at[2] = -1;
    for (int i = 0; i < 3; i++) {
        cdc_msg_header_t h = solo_recv(s, 10000);
        double when = cdc_test_now_s() - sent;
        ck_assert_msg(h.type != 0, "reply %d of 3 missing", i + 1);
        int which = h.type == CDC_MSG_RESULT ? 2 : h.shard == CDC_PING_BARRIER ? 1 : 0;
        ck_assert_uint_eq(h.request_id, which == 2 ? 9 : which == 1 ? 7 : 8);
        ck_assert(at[which] < 0);
        at[which] = when;
    }
    if (getenv("CDC_TEST_LOG"))
        fprintf(stderr, "weights: heartbeat PONG %.3f s, barrier PONG %.3f s, result %.3f s\n",
                at[0], at[1], at[2]);
}

/* 1 MiB of WEIGHTS over link@w0:mbit=8 (1 MB/s) take 1.05 s on the emulated
   link: the barrier PING behind them is answered no sooner, and the task
   behind them waits too; heartbeats are answered at once. Without the link
   fault the barrier PONG is immediate. */
START_TEST(test_worker_weights_on_link)
{
    const double transfer_s = (double) LINK_D * LINK_D * sizeof(float) * 8 / 8e6;
    solo_t s;
    double at[3];
    solo_start(&s, 0, "link@w0:mbit=8");
    solo_ready(&s);
    weights_replies(&s, send_weights_barrier_task(&s), at);
    ck_assert_msg(at[0] < 0.3, "heartbeat PONG after %.3f s", at[0]);
    ck_assert_msg(at[1] >= transfer_s - 0.01 && at[1] <= transfer_s + 1.0,
                  "barrier PONG after %.3f s, the weights' transfer takes %.3f s", at[1],
                  transfer_s);
    ck_assert_msg(at[2] >= transfer_s - 0.01 && at[2] <= transfer_s + 1.0,
                  "result after %.3f s, behind a transfer of %.3f s", at[2], transfer_s);
    solo_stop(&s, NULL);

    solo_start(&s, 0, NULL); /* no link: as fast as ipc */
    solo_ready(&s);
    weights_replies(&s, send_weights_barrier_task(&s), at);
    ck_assert_msg(at[1] < 0.5 && at[2] < 0.5, "barrier PONG %.3f s, result %.3f s without a link",
                  at[1], at[2]);
    solo_stop(&s, NULL);
}
END_TEST

/* ---- through the coordinator -------------------------------------------- */

/* Five workers, r = 1; worker 1 a straggler (its tasks take 400 ms more).
   Each call returns without it; the coordinator then CANCELs its shard,
   which the worker drops, so after K calls its device is free: a task sent
   to it right after answers in one service time, not K of them. */
START_TEST(test_straggler_cancelled)
{
    enum { WORKERS = 5, CALLS = 6 };
    const double delay_s = 0.4;
    solo_t w[WORKERS];
    char endpoints[CDC_CONFIG_STR] = "";
    for (int i = 0; i < WORKERS; i++) {
        solo_start(&w[i], i, "delay@w1:ms=400");
        snprintf(endpoints + strlen(endpoints), sizeof endpoints - strlen(endpoints), "%s%s",
                 i ? "," : "", w[i].endpoint);
    }
    cdc_config_t config;
    cdc_config_init(&config);
    config.parity_layout = CDC_LAYOUT_DEDICATED; /* what the assertions count (top) */
    config.plan = CDC_PLAN_EQUAL;                /* every call on the workers (top) */
    snprintf(config.workers, sizeof config.workers, "%s", endpoints);
    config.parity = 1;
    config.wait_ms = 0;
    config.timeout_ms = 5000;
    config.log_level = getenv("CDC_DEBUG") ? CDC_LOG_DEBUG : CDC_LOG_ERROR;
    cdc_context_t *context = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &context), CDC_OK);

    enum { OUT = 512, IN = 512, BATCH = 4 };
    float *weights = cdc_test_alloc(sizeof(float) * OUT * IN);
    float *x = cdc_test_alloc(sizeof(float) * BATCH * IN);
    float *y = cdc_test_alloc(sizeof(float) * BATCH * OUT);
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 5);
    cdc_test_fill_uniform(&rng, weights, OUT * IN);
    cdc_test_fill_uniform(&rng, x, BATCH * IN);
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = CDC_SPLIT_ROWS;
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_fc_new(context, OUT, IN, weights, NULL, &options, &layer), CDC_OK);
    ck_assert_int_eq(cdc_fc_forward(layer, BATCH, x, y), CDC_OK); /* ships the weights */
    cdc_test_sleep_ms((long) (delay_s * 1000 + 200)); /* the straggler's first is over */
    ck_assert_int_eq(cdc_fc_forward(layer, BATCH, x, y), CDC_OK); /* reads a late one */
    cdc_stats_t before;
    ck_assert_int_eq(cdc_context_stats(context, &before), CDC_OK);
    double start = cdc_test_now_s();
    for (int i = 0; i < CALLS; i++)
        ck_assert_int_eq(cdc_fc_forward(layer, BATCH, x, y), CDC_OK);
    double calls_s = cdc_test_now_s() - start;
    cdc_stats_t after;
    ck_assert_int_eq(cdc_context_stats(context, &after), CDC_OK);
    /* Every call returned without the straggler's shard and cancelled it. */
    ck_assert_msg(calls_s < CALLS * delay_s / 2, "%d calls took %.3f s", CALLS, calls_s);
    ck_assert_uint_eq(after.cancels_sent - before.cancels_sent, CALLS);
    ck_assert_uint_eq(after.fallbacks, 0);

    /* The straggler's device is free: a task now takes one service time. */
    float *m = task_matrix();
    solo_t *probe = &w[1];
    solo_ready(probe);
    double t0 = cdc_test_now_s(), at;
    solo_task(probe, 1000, m);
    cdc_msg_header_t h = next_result(probe, t0, &at);
    ck_assert_uint_eq(h.type, CDC_MSG_RESULT);
    ck_assert_uint_eq(h.request_id, 1000);
    if (getenv("CDC_TEST_LOG"))
        fprintf(stderr, "straggler: %d calls in %.3f s, %llu CANCELs; a task then took %.3f s\n",
                CALLS, calls_s, (unsigned long long) (after.cancels_sent - before.cancels_sent),
                at);
    ck_assert_msg(at < delay_s + 0.3,
                  "a task on the straggler took %.3f s after %d cancelled calls "
                  "(a backlog would be about %.1f s)",
                  at, CALLS, CALLS * delay_s - calls_s + delay_s);
    cdc_test_sleep_ms(100);
    ck_assert_int_eq(cdc_context_stats(context, &after), CDC_OK);
    ck_assert_uint_eq(after.late_replies - before.late_replies, 0); /* none came back */
    free(m);
    cdc_layer_destroy(&layer);
    cdc_context_destroy(&context);
    /* The straggler dropped every shard of the timed calls (and perhaps the
       warm-up calls'), the others none. */
    for (int i = 0; i < WORKERS; i++) {
        unsigned long long cancelled = solo_stop(&w[i], "cancelled ");
        if (i == 1)
            ck_assert_msg(cancelled >= CALLS && cancelled <= after.cancels_sent,
                          "straggler cancelled %llu, coordinator sent %llu", cancelled,
                          (unsigned long long) after.cancels_sent);
        else
            ck_assert_uint_eq(cancelled, 0);
    }
    free(weights);
    free(x);
    free(y);
}
END_TEST

static Suite *device_suite(void)
{
    Suite *suite = suite_create("device");
    TCase *queue = tcase_create("queue");
    tcase_add_test(queue, test_back_to_back_cumulative);
    tcase_add_test(queue, test_delay_holds_next);
    tcase_add_test(queue, test_cancel_moves_up);
    suite_add_tcase(suite, queue);
    TCase *worker = tcase_create("worker");
    tcase_add_test(worker, test_worker_slow_queue);
    tcase_add_test(worker, test_worker_cancel_frees_device);
    tcase_add_test(worker, test_worker_weights_on_link);
    tcase_add_test(worker, test_straggler_cancelled);
    tcase_set_timeout(worker, 60);
    suite_add_tcase(suite, worker);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(device_suite());
}
