/* fake_worker.c - a compromised device posing as a worker: it answers
 * heartbeats (so the coordinator keeps it in the plan), never computes, and
 * pushes unsolicited RESULTs at the coordinator (issue 9, finding 5). */
#include "attacker.h"

#include "cdcgemm.h"
#include "clock.h"
#include "protocol.h"
#include "wire.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define MAX_ROUTES 16

typedef struct {
    void *socket;
    zmq_msg_t routes[MAX_ROUTES]; /* every coordinator connection seen */
    int route_count;
    long pushed, pongs;
    float *junk;
    size_t result_bytes;
} fake_t;

static volatile sig_atomic_t stop_requested;

static void on_signal(int signo)
{
    (void) signo;
    stop_requested = 1;
}

static void remember_route(fake_t *fake, zmq_msg_t *route)
{
    for (int i = 0; i < fake->route_count; i++)
        if (zmq_msg_size(&fake->routes[i]) == zmq_msg_size(route) &&
            memcmp(zmq_msg_data(&fake->routes[i]), zmq_msg_data(route), zmq_msg_size(route)) ==
                0)
            return;
    if (fake->route_count < MAX_ROUTES) {
        zmq_msg_init(&fake->routes[fake->route_count]);
        zmq_msg_copy(&fake->routes[fake->route_count++], route);
    }
}

/* Answer PINGs, ignore everything else. */
static void serve_incoming(fake_t *fake)
{
    cdc_wire_msg_t msg;
    while (cdc__wire_recv(fake->socket, &msg, ZMQ_DONTWAIT) == CDC_OK) {
        cdc_msg_t decoded;
        if (msg.count >= 2 && cdc__wire_decode(&msg, 1, &decoded) == CDC_OK) {
            remember_route(fake, &msg.parts[0]);
            if (decoded.header.type == CDC_MSG_PING) {
                cdc_msg_header_t pong;
                cdc__msg_header_init(&pong, CDC_MSG_PONG);
                pong.request_id = decoded.header.request_id;
                cdc_frame_t status = {"", 0};
                if (cdc__wire_send(fake->socket, &msg.parts[0], &pong, &status, 1,
                                   ZMQ_DONTWAIT) == CDC_OK)
                    fake->pongs++;
            }
        }
        cdc__wire_msg_close(&msg);
    }
    cdc__wire_msg_close(&msg);
}

/* A few RESULTs to every connection, for request ids never issued. */
static void push_results(fake_t *fake, long flood)
{
    cdc_frame_t payload = {fake->junk, fake->result_bytes};
    for (int r = 0; r < fake->route_count && fake->pushed < flood; r++) {
        for (int burst = 0; burst < 8 && fake->pushed < flood; burst++) {
            cdc_msg_header_t h;
            cdc__msg_header_init(&h, CDC_MSG_RESULT);
            h.request_id = UINT64_C(0xdead0000) + (uint64_t) fake->pushed;
            h.rows = 1;
            h.cols = (int64_t) (fake->result_bytes / sizeof(float));
            if (cdc__wire_send(fake->socket, &fake->routes[r], &h, &payload, 1, ZMQ_DONTWAIT) !=
                CDC_OK)
                break; /* that connection's queue is full: later */
            fake->pushed++;
        }
    }
}

int cdc_fake_worker_main(const char *endpoint, long flood, size_t result_bytes, long seconds)
{
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    fake_t fake = {.result_bytes = result_bytes};
    fake.junk = calloc(1, result_bytes);
    void *context = zmq_ctx_new();
    fake.socket = context ? zmq_socket(context, ZMQ_ROUTER) : NULL;
    int mandatory = 1, linger = 0;
    if (!fake.junk || !fake.socket || zmq_bind(fake.socket, endpoint) != 0) {
        fprintf(stderr, "fake worker: bind %s: %s\n", endpoint, zmq_strerror(zmq_errno()));
        return 1;
    }
    /* Report a full queue (EAGAIN) instead of dropping silently, so the
       count of RESULTs pushed is what the coordinator's side accepted. */
    zmq_setsockopt(fake.socket, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof mandatory);
    zmq_setsockopt(fake.socket, ZMQ_LINGER, &linger, sizeof linger);
    double deadline = cdc__clock_ms() + 1000.0 * (double) seconds;
    while (!stop_requested && cdc__clock_ms() < deadline) {
        zmq_pollitem_t item = {fake.socket, 0, ZMQ_POLLIN, 0};
        zmq_poll(&item, 1, 5);
        serve_incoming(&fake);
        push_results(&fake, flood);
    }
    fprintf(stderr, "fake worker: pushed %ld unsolicited RESULTs of %zu bytes, %ld PONGs\n",
            fake.pushed, result_bytes, fake.pongs);
    for (int i = 0; i < fake.route_count; i++)
        zmq_msg_close(&fake.routes[i]);
    zmq_close(fake.socket);
    zmq_ctx_term(context);
    free(fake.junk);
    return 0;
}
