/* cross_probe.c - hand-made requests to one worker, for tests/cross/interop.sh (issue 28).
 *
 * usage: cross_probe ENDPOINT CLIENT_SECRET_CERT WORKER_PUBLIC_CERT
 *
 * Over CURVE, as an allowed coordinator, it sends what no coordinator of ours
 * sends, and prints one line per reply (the script checks them):
 *   1. PING                                         -> "PONG <status text, one line>"
 *   2. TASK_GEMM whose header declares 2^20 x 2^20 operands (4 TiB each: sizes
 *      that wrap a 32-bit size_t to 0), cached keys so nothing follows
 *                                                   -> "ERROR <code> <text>"
 *   3. TASK_GEMM of 2^14 x 2^14 cached operands and a 1 GiB result: within the
 *      protocol, over the default --max-task-memory -> "ERROR <code> <text>"
 *   4. PING again: the worker is still there       -> "PONG ..."
 * A reply that does not come within 60 s (the worker may run under qemu) is
 * "TIMEOUT"; exit status 0 when all four came, 1 otherwise, 2 on bad usage. */
#include "cdcgemm.h"
#include "keys.h"
#include "protocol.h"
#include "wire.h"

#include <stdio.h>
#include <string.h>
#include <zmq.h>

#define PROBE_TIMEOUT_MS 60000

/* The next reply on socket, printed as one line: 1, or 0 on a time-out. */
static int print_reply(void *socket)
{
    zmq_pollitem_t item = {socket, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, PROBE_TIMEOUT_MS) != 1) {
        printf("TIMEOUT\n");
        return 0;
    }
    cdc_wire_msg_t msg;
    cdc_msg_t decoded;
    int rc = cdc__wire_recv(socket, &msg, 0);
    if (rc == CDC_OK)
        rc = cdc__wire_decode(&msg, 0, &decoded);
    if (rc != CDC_OK) {
        printf("INVALID %s\n", cdc_last_error());
        cdc__wire_msg_close(&msg);
        return 1;
    }
    char text[CDC_PROTO_MAX_TEXT + 1] = "";
    if (decoded.payload_count == 1 && decoded.payload[0].size <= CDC_PROTO_MAX_TEXT &&
        (decoded.header.type == CDC_MSG_ERROR || decoded.header.type == CDC_MSG_PONG)) {
        cdc__msg_payload_gather(&decoded.payload[0], text);
        text[decoded.payload[0].size] = '\0';
        for (char *c = text; *c; c++)
            *c = *c == '\n' ? ' ' : *c;
    }
    if (decoded.header.type == CDC_MSG_ERROR)
        printf("ERROR %d %s\n", (int) decoded.header.error_code, text);
    else
        printf("%s %s\n", cdc__msg_type_name(decoded.header.type), text);
    fflush(stdout);
    cdc__wire_msg_close(&msg);
    return 1;
}

static int send_header(void *socket, const cdc_msg_header_t *h)
{
    cdc_frame_t empty[2] = {{NULL, 0}, {NULL, 0}};
    int payloads = cdc__msg_payload_count((cdc_msg_type_t) h->type);
    return cdc__wire_send(socket, NULL, h, empty, payloads, 0);
}

/* TASK_GEMM request id of rows x k by cols x k, both operands cached. */
static int send_gemm(void *socket, uint64_t id, int64_t rows, int64_t k, int64_t cols)
{
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_TASK_GEMM);
    h.request_id = id;
    h.rows = rows;
    h.k = k;
    h.cols = cols;
    h.a_key = 0x28;
    h.bt_key = 0x29;
    return send_header(socket, &h);
}

static int send_ping(void *socket, uint64_t id)
{
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_PING);
    h.request_id = id;
    return send_header(socket, &h);
}

/* A CURVE DEALER to endpoint, or NULL with the reason on stderr. */
static void *connect_curve(void *zmq, const char *endpoint, const char *client_path,
                           const char *server_path)
{
    cdc_curve_cert_t client, server;
    if (cdc__curve_load_secret(client_path, &client) != CDC_OK ||
        cdc__curve_load_public(server_path, &server) != CDC_OK) {
        fprintf(stderr, "cross_probe: %s\n", cdc_last_error());
        return NULL;
    }
    void *socket = zmq_socket(zmq, ZMQ_DEALER);
    int linger = 0;
    if (!socket || zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_setsockopt(socket, ZMQ_CURVE_SERVERKEY, server.public_key, 32) != 0 ||
        zmq_setsockopt(socket, ZMQ_CURVE_PUBLICKEY, client.public_key, 32) != 0 ||
        zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, client.secret_key, 32) != 0 ||
        zmq_connect(socket, endpoint) != 0) {
        fprintf(stderr, "cross_probe: socket to %s: %s\n", endpoint, zmq_strerror(zmq_errno()));
        if (socket)
            zmq_close(socket);
        socket = NULL;
    }
    cdc__curve_cert_clear(&client);
    return socket;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: cross_probe ENDPOINT CLIENT_SECRET_CERT WORKER_PUBLIC_CERT\n");
        return 2;
    }
    void *zmq = zmq_ctx_new();
    void *socket = connect_curve(zmq, argv[1], argv[2], argv[3]);
    if (!socket) {
        zmq_ctx_term(zmq);
        return 1;
    }
    int64_t huge = (int64_t) 1 << 20, big = (int64_t) 1 << 14;
    int came = 0;
    if (send_ping(socket, 1) == CDC_OK)
        came += print_reply(socket);
    if (send_gemm(socket, 2, huge, huge, huge) == CDC_OK)
        came += print_reply(socket);
    if (send_gemm(socket, 3, big, big, big) == CDC_OK)
        came += print_reply(socket);
    if (send_ping(socket, 4) == CDC_OK)
        came += print_reply(socket);
    zmq_close(socket);
    zmq_ctx_term(zmq);
    return came == 4 ? 0 : 1;
}
