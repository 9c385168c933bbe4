/* attacker.c - hostile peers for `cdcgemm-bench hostile` (see attacker.h). */
#include "attacker.h"

#include "cdcgemm.h"
#include "clock.h"
#include "protocol.h"
#include "wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <zmq.h>

struct cdc_attacker {
    void *context, *socket;
};

cdc_attacker_t *cdc_attacker_new(const char *endpoint, const cdc_curve_cert_t *server,
                                 const cdc_curve_cert_t *as)
{
    cdc_attacker_t *self = calloc(1, sizeof *self);
    if (!self || !(self->context = zmq_ctx_new()) ||
        !(self->socket = zmq_socket(self->context, ZMQ_DEALER))) {
        fprintf(stderr, "attacker: zmq socket: %s\n", zmq_strerror(zmq_errno()));
        cdc_attacker_destroy(&self);
        return NULL;
    }
    int linger = 0, hwm = 100000;
    zmq_setsockopt(self->socket, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(self->socket, ZMQ_SNDHWM, &hwm, sizeof hwm);
    if (as && server &&
        (zmq_setsockopt(self->socket, ZMQ_CURVE_SERVERKEY, server->public_key,
                        CDC_CURVE_KEY_BYTES) != 0 ||
         zmq_setsockopt(self->socket, ZMQ_CURVE_PUBLICKEY, as->public_key,
                        CDC_CURVE_KEY_BYTES) != 0 ||
         zmq_setsockopt(self->socket, ZMQ_CURVE_SECRETKEY, as->secret_key,
                        CDC_CURVE_KEY_BYTES) != 0)) {
        fprintf(stderr, "attacker: CURVE keys: %s\n", zmq_strerror(zmq_errno()));
        cdc_attacker_destroy(&self);
        return NULL;
    }
    if (zmq_connect(self->socket, endpoint) != 0) {
        fprintf(stderr, "attacker: connect %s: %s\n", endpoint, zmq_strerror(zmq_errno()));
        cdc_attacker_destroy(&self);
        return NULL;
    }
    return self;
}

void cdc_attacker_destroy(cdc_attacker_t **attacker_p)
{
    if (!attacker_p || !*attacker_p)
        return;
    cdc_attacker_t *self = *attacker_p;
    if (self->socket)
        zmq_close(self->socket);
    if (self->context)
        zmq_ctx_term(self->context);
    free(self);
    *attacker_p = NULL;
}

long cdc_attacker_replies(cdc_attacker_t *attacker)
{
    long replies = 0;
    cdc_wire_msg_t msg;
    while (cdc__wire_recv(attacker->socket, &msg, ZMQ_DONTWAIT) == CDC_OK) {
        replies++;
        cdc__wire_msg_close(&msg);
    }
    cdc__wire_msg_close(&msg);
    return replies;
}

int cdc_attacker_wait_reply(cdc_attacker_t *attacker, long timeout_ms, char *text,
                            size_t size)
{
    zmq_pollitem_t item = {attacker->socket, 0, ZMQ_POLLIN, 0};
    if (size)
        text[0] = '\0';
    if (zmq_poll(&item, 1, timeout_ms) <= 0)
        return 0;
    cdc_wire_msg_t msg;
    cdc_msg_t decoded;
    int type = 0;
    if (cdc__wire_recv(attacker->socket, &msg, ZMQ_DONTWAIT) == CDC_OK &&
        cdc__wire_decode(&msg, 0, &decoded) == CDC_OK) {
        type = decoded.header.type;
        if (type == CDC_MSG_ERROR && size) {
            /* ERROR text is one frame (at most 1024 bytes) */
            const cdc_frame_t *frame = &decoded.payload[0].frames[0];
            size_t n = frame->size < size - 1 ? frame->size : size - 1;
            memcpy(text, frame->data, n);
            text[n] = '\0';
        }
    }
    cdc__wire_msg_close(&msg);
    return type;
}

long cdc_attack_unfinished_multipart(cdc_attacker_t *attacker, int frames, size_t frame_bytes)
{
    char *junk = malloc(frame_bytes);
    if (!junk)
        return 0;
    memset(junk, 0x5a, frame_bytes);
    long accepted = 0;
    for (int i = 0; i < frames; i++)
        if (zmq_send(attacker->socket, junk, frame_bytes, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
            accepted++;
    free(junk); /* zmq_send copied each frame */
    return accepted;
}

static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* One random frame into buf (up to 4 KiB); every fourth a header that
   passes the magic and version checks with random fields after them. */
static size_t random_frame(uint8_t *buf, uint64_t *state, int first)
{
    if (first && next_random(state) % 4 == 0) {
        cdc_msg_header_t h;
        cdc__msg_header_init(&h, (cdc_msg_type_t) (1 + next_random(state) % 9));
        h.request_id = next_random(state);
        h.rows = (int64_t) (next_random(state) % 5000);
        h.k = (int64_t) (next_random(state) % 5000);
        h.cols = (int64_t) (next_random(state) % 5000);
        h.a_key = next_random(state) % 3;
        cdc__msg_header_pack(&h, buf);
        return CDC_PROTO_HEADER_SIZE;
    }
    size_t size = (size_t) (next_random(state) % 4096);
    for (size_t i = 0; i < size; i++)
        buf[i] = (uint8_t) next_random(state);
    return size;
}

long cdc_attack_random_messages(cdc_attacker_t *attacker, long count, uint64_t seed)
{
    uint8_t buf[4096];
    uint64_t state = seed | 1;
    long accepted = 0;
    for (long m = 0; m < count; m++) {
        int frames = 1 + (int) (next_random(&state) % 4), ok = 1;
        for (int f = 0; f < frames && ok; f++) {
            size_t size = random_frame(buf, &state, f == 0);
            ok = zmq_send(attacker->socket, buf, size,
                          ZMQ_DONTWAIT | (f + 1 < frames ? ZMQ_SNDMORE : 0)) >= 0;
        }
        accepted += ok;
    }
    return accepted;
}

int cdc_attack_padding_conv(cdc_attacker_t *attacker, uint64_t request_id)
{
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_TASK_CONV);
    h.request_id = request_id;
    h.rows = 16;
    h.k = 1;
    h.batch = 1;
    h.geometry = (cdc_conv_geometry_t){.channels = 1, .h = 1, .w = 1, .kernel_h = 1,
                                       .kernel_w = 1, .stride_h = 1, .stride_w = 1,
                                       .pad_h = 1000, .pad_w = 1000, .dilation_h = 1,
                                       .dilation_w = 1};
    h.cols = 2001 * 2001; /* out_h x out_w: all of it padding */
    float filters[16], pixel = 1.0f;
    for (int i = 0; i < 16; i++)
        filters[i] = 1.0f;
    cdc_frame_t payloads[2] = {{filters, sizeof filters}, {&pixel, sizeof pixel}};
    return cdc__wire_send(attacker->socket, NULL, &h, payloads, 2, 0) == CDC_OK ? 0 : -1;
}

int cdc_attack_weights_flood(cdc_attacker_t *attacker, long count, uint64_t first_key,
                             long timeout_ms)
{
    float matrix[16];
    for (int i = 0; i < 16; i++)
        matrix[i] = (float) i;
    cdc_frame_t payload = {matrix, sizeof matrix};
    for (long i = 0; i < count; i++) {
        cdc_msg_header_t h;
        cdc__msg_header_init(&h, CDC_MSG_WEIGHTS);
        h.rows = 4;
        h.k = 4;
        h.a_key = first_key + (uint64_t) i * UINT64_C(0x9e3779b97f4a7c15);
        if (cdc__wire_send(attacker->socket, NULL, &h, &payload, 1, 0) != CDC_OK)
            return -1;
    }
    /* A PING every 200 ms until a PONG comes back: the worker refuses
       WEIGHTS beyond --max-peer-tasks with ERRORs, and those fill this
       unread peer's send queue, so a PONG sent meanwhile may be dropped
       (counted as replies dropped); the ERRORs are read here. */
    double deadline = cdc__clock_ms() + (double) timeout_ms;
    for (uint64_t id = 7; cdc__clock_ms() < deadline; id++) {
        cdc_msg_header_t ping;
        cdc__msg_header_init(&ping, CDC_MSG_PING);
        ping.request_id = id;
        if (cdc__wire_send(attacker->socket, NULL, &ping, NULL, 0, 0) != CDC_OK)
            return -1;
        double next = cdc__clock_ms() + 200.0;
        while (cdc__clock_ms() < next)
            if (cdc_attacker_wait_reply(attacker, 50, NULL, 0) == CDC_MSG_PONG)
                return 0;
    }
    return -1;
}

/* A ZMTP 3.0 greeting: signature, version 3.0, mechanism, as-client. */
static void zmtp_greeting(uint8_t out[64], const char *mechanism)
{
    memset(out, 0, 64);
    out[0] = 0xff;
    out[9] = 0x7f;
    out[10] = 3;
    memcpy(out + 12, mechanism, strlen(mechanism));
}

static int tcp_connect(const char *host, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t) port)};
    struct timeval two_seconds = {2, 0};
    if (fd < 0 || inet_pton(AF_INET, host, &addr.sin_addr) != 1 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &two_seconds, sizeof two_seconds) != 0 ||
        connect(fd, (struct sockaddr *) &addr, sizeof addr) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

long cdc_attack_raw_frames(const char *host, int port, int frames, size_t frame_bytes)
{
    int fd = tcp_connect(host, port);
    if (fd < 0)
        return -1;
    uint8_t greeting[64], head[9] = {0x03}; /* MORE | LONG */
    zmtp_greeting(greeting, "CURVE");
    for (int i = 0; i < 8; i++)
        head[1 + i] = (uint8_t) ((uint64_t) frame_bytes >> (56 - 8 * i));
    char *body = calloc(1, frame_bytes);
    long sent = body && send(fd, greeting, sizeof greeting, MSG_NOSIGNAL) == 64 ? 64 : 0;
    for (int f = 0; body && sent > 0 && f < frames; f++) {
        if (send(fd, head, sizeof head, MSG_NOSIGNAL) != (ssize_t) sizeof head)
            break;
        size_t done = 0;
        while (done < frame_bytes) {
            ssize_t n = send(fd, body + done, frame_bytes - done, MSG_NOSIGNAL);
            if (n <= 0)
                break;
            done += (size_t) n;
        }
        sent += (long) (sizeof head + done);
        if (done < frame_bytes)
            break;
    }
    free(body);
    close(fd);
    return sent;
}
