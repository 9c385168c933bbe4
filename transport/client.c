/* client.c - dispatch shard tasks to workers over DEALER sockets, collect results.
 *
 * One DEALER per worker rather than one DEALER connected to all: a DEALER
 * round-robins over its peers, so it cannot address "worker i"; per-worker
 * sockets give each worker its own ordered pipe (WEIGHTS before the TASK that
 * needs them), its own reconnection, and a reply's origin without routing ids.
 * ZMQ_IMMEDIATE makes a send to a worker with no live connection fail at once
 * (EAGAIN) instead of queueing for a peer that may never come back. */
#include "client.h"

#include "error.h"
#include "log.h"
#include "wire.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_KEYS_PER_WORKER 256 /* remembered keys; forgetting one costs a re-send */
#define MAX_MISS_RETRIES 2

typedef struct {
    void *socket;
    uint64_t keys[MAX_KEYS_PER_WORKER]; /* weight keys this worker holds, oldest first */
    int key_count;
} remote_worker_t;

struct cdc_client {
    void *zmq;
    remote_worker_t workers[CDC_MAX_WORKERS];
    int count;
    uint64_t next_request;
    pthread_mutex_t lock;
    cdc_remote_counters_t counters;
};

typedef enum { TASK_IDLE, TASK_PENDING, TASK_DONE } task_state_t;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t mix64(uint64_t h, uint64_t v)
{
    h ^= v + UINT64_C(0x9e3779b97f4a7c15) + (h << 6) + (h >> 2);
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    return h;
}

/* The key a shard operand is cached under on a worker. The layer's key names
   the whole weight matrix; its shard s differs with the shard index, the
   split (needed = n) and the code, so mix those in, plus a 16-value sample of
   the operand itself to tell apart codes that give the same shapes. */
static uint64_t wire_key(uint64_t key, int shard, int needed, int64_t rows, int64_t k,
                         const float *data)
{
    uint64_t h = mix64(key, (uint64_t) shard);
    h = mix64(h, (uint64_t) needed);
    h = mix64(h, (uint64_t) rows);
    h = mix64(h, (uint64_t) k);
    size_t total = (size_t) rows * (size_t) k;
    for (int i = 0; i < 16; i++) {
        uint32_t bits;
        memcpy(&bits, data + (total - 1) * (size_t) i / 15, sizeof bits);
        h = mix64(h, bits);
    }
    return h ? h : 1; /* 0 means "inline" on the wire */
}

static int worker_has(const remote_worker_t *w, uint64_t key)
{
    for (int i = 0; i < w->key_count; i++)
        if (w->keys[i] == key)
            return 1;
    return 0;
}

static void worker_forget(remote_worker_t *w, uint64_t key)
{
    for (int i = 0; i < w->key_count; i++)
        if (w->keys[i] == key) {
            memmove(&w->keys[i], &w->keys[i + 1],
                    (size_t) (w->key_count - i - 1) * sizeof w->keys[0]);
            w->key_count--;
            return;
        }
}

static void worker_remember(remote_worker_t *w, uint64_t key)
{
    if (w->key_count == MAX_KEYS_PER_WORKER)
        worker_forget(w, w->keys[0]);
    w->keys[w->key_count++] = key;
}

int cdc_client_new(const char *endpoints, int connect_wait_ms, cdc_client_t **client_p)
{
    if (!endpoints || !*endpoints || !client_p)
        return cdc__fail(CDC_EINVAL, "cdc_client_new: no endpoints");
    int rc;
    cdc_client_t *self = calloc(1, sizeof *self);
    if (!self)
        return cdc__fail(CDC_ENOMEM, "client");
    self->zmq = zmq_ctx_new();
    if (!self->zmq) {
        rc = cdc__fail(CDC_ETRANSPORT, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
        goto fail_alloc;
    }
    if (pthread_mutex_init(&self->lock, NULL) != 0) {
        rc = cdc__fail(CDC_ENOMEM, "client mutex");
        goto fail_context;
    }
    const char *item = endpoints;
    while (*item) {
        const char *comma = strchr(item, ',');
        size_t len = comma ? (size_t) (comma - item) : strlen(item);
        char endpoint[CDC_CONFIG_STR];
        if (len == 0 || len >= sizeof endpoint || self->count == CDC_MAX_WORKERS) {
            rc = cdc__fail(CDC_ECONFIG, "workers: bad endpoint list '%s'", endpoints);
            goto fail_sockets;
        }
        memcpy(endpoint, item, len);
        endpoint[len] = '\0';
        void *socket = zmq_socket(self->zmq, ZMQ_DEALER);
        if (!socket) {
            rc = cdc__fail(CDC_ETRANSPORT, "zmq_socket: %s", zmq_strerror(zmq_errno()));
            goto fail_sockets;
        }
        int linger = 0, immediate = 1, reconnect_ms = 100;
        zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof linger);
        zmq_setsockopt(socket, ZMQ_IMMEDIATE, &immediate, sizeof immediate);
        zmq_setsockopt(socket, ZMQ_RECONNECT_IVL_MAX, &reconnect_ms, sizeof reconnect_ms);
        self->workers[self->count++].socket = socket;
        if (zmq_connect(socket, endpoint) != 0) {
            rc = cdc__fail(CDC_ECONFIG, "connect %s: %s", endpoint, zmq_strerror(zmq_errno()));
            goto fail_sockets;
        }
        item += len + (comma ? 1 : 0);
    }

    /* Connections come up in the background; PING until each answers (or the
       wait ends) so the first call does not find every pipe still closed. */
    int64_t deadline = now_ms() + connect_wait_ms;
    int answered = 0, pinged[CDC_MAX_WORKERS] = {0}, ponged[CDC_MAX_WORKERS] = {0};
    while (answered < self->count && now_ms() < deadline) {
        zmq_pollitem_t items[CDC_MAX_WORKERS];
        for (int w = 0; w < self->count; w++) {
            if (!pinged[w]) {
                cdc_msg_header_t ping;
                cdc_msg_header_init(&ping, CDC_MSG_PING);
                pinged[w] = cdc_wire_send(self->workers[w].socket, NULL, &ping, NULL, 0,
                                          ZMQ_DONTWAIT) == CDC_OK;
            }
            items[w] = (zmq_pollitem_t){self->workers[w].socket, 0, ZMQ_POLLIN, 0};
        }
        if (zmq_poll(items, self->count, 10) < 0)
            continue; /* EINTR: try again */
        for (int w = 0; w < self->count; w++) {
            if (!(items[w].revents & ZMQ_POLLIN))
                continue;
            cdc_wire_msg_t wire;
            cdc_msg_t msg;
            if (cdc_wire_recv(self->workers[w].socket, &wire, ZMQ_DONTWAIT) == CDC_OK &&
                cdc_wire_decode(&wire, 0, &msg) == CDC_OK &&
                msg.header.type == CDC_MSG_PONG && !ponged[w]) {
                ponged[w] = 1;
                answered++;
            }
            cdc_wire_msg_close(&wire);
        }
    }
    if (answered < self->count)
        CDC_LOG_WARNF("%d of %d workers answered within %d ms", answered, self->count,
                      connect_wait_ms);
    *client_p = self;
    return CDC_OK;

fail_sockets:
    for (int w = 0; w < self->count; w++)
        zmq_close(self->workers[w].socket);
    pthread_mutex_destroy(&self->lock);
fail_context:
    zmq_ctx_term(self->zmq);
fail_alloc:
    free(self);
    return rc;
}

void cdc_client_destroy(cdc_client_t **client_p)
{
    if (!client_p || !*client_p)
        return;
    cdc_client_t *self = *client_p;
    for (int w = 0; w < self->count; w++)
        zmq_close(self->workers[w].socket);
    zmq_ctx_term(self->zmq);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *client_p = NULL;
}

int cdc_client_worker_count(const cdc_client_t *self)
{
    return self ? self->count : 0;
}

void cdc_client_counters(cdc_client_t *self, cdc_remote_counters_t *counters)
{
    pthread_mutex_lock(&self->lock);
    *counters = self->counters;
    pthread_mutex_unlock(&self->lock);
}

/* Make sure worker w holds the keyed operand, sending it if not. */
static int ensure_weights(cdc_client_t *self, remote_worker_t *w, uint64_t key,
                          int64_t rows, int64_t k, const float *data)
{
    if (worker_has(w, key))
        return CDC_OK;
    cdc_msg_header_t h;
    cdc_msg_header_init(&h, CDC_MSG_WEIGHTS);
    h.a_key = key;
    h.rows = rows;
    h.k = k;
    cdc_frame_t payload = {data, (size_t) rows * (size_t) k * sizeof(float)};
    int rc = cdc_wire_send(w->socket, NULL, &h, &payload, 1, ZMQ_DONTWAIT);
    if (rc != CDC_OK)
        return rc;
    worker_remember(w, key);
    self->counters.weights_sent++;
    self->counters.weight_bytes += payload.size;
    self->counters.bytes_out += payload.size;
    return CDC_OK;
}

static int send_task(cdc_client_t *self, remote_worker_t *w, const cdc_shard_task_t *task,
                     uint64_t request_id, int needed)
{
    cdc_msg_header_t h;
    int is_conv = task->kind == CDC_TASK_CONV;
    cdc_msg_header_init(&h, is_conv ? CDC_MSG_TASK_CONV : CDC_MSG_TASK_GEMM);
    h.request_id = request_id;
    h.shard = task->shard;
    h.rows = task->a_rows;
    h.k = task->k;
    h.cols = task->cols;
    cdc_frame_t payloads[2] = {{NULL, 0}, {NULL, 0}};
    int rc;
    if (task->a_key) {
        h.a_key = wire_key(task->a_key, task->shard, needed, task->a_rows, task->k, task->a);
        if ((rc = ensure_weights(self, w, h.a_key, task->a_rows, task->k, task->a)))
            return rc;
    } else {
        payloads[0] = (cdc_frame_t){task->a, (size_t) task->a_rows * (size_t) task->k * 4};
    }
    if (is_conv) {
        const cdc_conv_geometry_t *g = task->geometry;
        h.batch = task->batch;
        h.geometry = *g;
        payloads[1] = (cdc_frame_t){
            task->input, (size_t) task->batch * (size_t) (g->channels * g->h * g->w) * 4};
    } else if (task->bt_key) {
        h.bt_key = wire_key(task->bt_key, task->shard, needed, task->cols, task->k, task->bt);
        if ((rc = ensure_weights(self, w, h.bt_key, task->cols, task->k, task->bt)))
            return rc;
    } else {
        payloads[1] = (cdc_frame_t){task->bt, (size_t) task->cols * (size_t) task->k * 4};
    }
    rc = cdc_wire_send(w->socket, NULL, &h, payloads, 2, ZMQ_DONTWAIT);
    if (rc != CDC_OK)
        return rc;
    self->counters.tasks_sent++;
    self->counters.bytes_out += payloads[0].size + payloads[1].size;
    return CDC_OK;
}

/* The pending task of this call that a reply from worker w names, or -1. */
static int match_task(const cdc_shard_task_t *tasks, const int *worker_of,
                      const task_state_t *state, int count, int w, int shard)
{
    for (int t = 0; t < count; t++)
        if (tasks[t].shard == shard && worker_of[t] == w && state[t] == TASK_PENDING)
            return t;
    return -1;
}

int cdc_client_run(cdc_client_t *self, cdc_shard_task_t *tasks, int count, int needed,
                   int wait_ms, int timeout_ms, uint64_t *arrived)
{
    *arrived = 0;
    if (count < 1 || count > 64)
        return count == 0 ? CDC_OK : cdc__fail(CDC_EINVAL, "%d tasks, at most 64", count);
    pthread_mutex_lock(&self->lock);
    int64_t started = now_ms(), deadline = started + timeout_ms, wait_deadline = -1;
    uint64_t request_id = ++self->next_request;
    task_state_t state[64];
    int worker_of[64], retries[64], pending = 0, done = 0, rc = CDC_OK;

    for (int t = 0; t < count; t++) {
        worker_of[t] = tasks[t].shard % self->count;
        retries[t] = 0;
        state[t] = TASK_IDLE;
        int sent = send_task(self, &self->workers[worker_of[t]], &tasks[t], request_id,
                             needed);
        if (sent == CDC_OK) {
            state[t] = TASK_PENDING;
            pending++;
        } else {
            self->counters.send_failures++;
            if (sent != CDC_ETIMEDOUT)
                CDC_LOG_WARNF("shard %d not sent: %s", tasks[t].shard, cdc_last_error());
        }
    }

    while (pending > 0) {
        int64_t now = now_ms();
        if (done >= needed) {
            int data_pending = 0;
            for (int t = 0; t < count; t++)
                data_pending += state[t] == TASK_PENDING && tasks[t].shard < needed;
            if (data_pending == 0)
                break;
            if (wait_deadline < 0)
                wait_deadline = now + wait_ms;
            if (now >= wait_deadline)
                break;
        }
        if (now >= deadline) {
            self->counters.timeouts++;
            CDC_LOG_INFOF("request %llu: %d of %d results after %d ms; giving up on the rest",
                          (unsigned long long) request_id, done, count, timeout_ms);
            break;
        }
        int64_t until = wait_deadline >= 0 && wait_deadline < deadline ? wait_deadline
                                                                        : deadline;
        zmq_pollitem_t items[CDC_MAX_WORKERS];
        for (int w = 0; w < self->count; w++)
            items[w] = (zmq_pollitem_t){self->workers[w].socket, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(items, self->count, (long) (until - now)) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            rc = cdc__fail(CDC_ETRANSPORT, "poll: %s", zmq_strerror(zmq_errno()));
            break;
        }
        for (int w = 0; w < self->count; w++) {
            if (!(items[w].revents & ZMQ_POLLIN))
                continue;
            cdc_wire_msg_t wire;
            while (cdc_wire_recv(self->workers[w].socket, &wire, ZMQ_DONTWAIT) == CDC_OK) {
                cdc_msg_t msg;
                if (cdc_wire_decode(&wire, 0, &msg) != CDC_OK) {
                    self->counters.invalid_replies++;
                    CDC_LOG_WARNF("worker %d: invalid reply: %s", w, cdc_last_error());
                    cdc_wire_msg_close(&wire);
                    continue;
                }
                const cdc_msg_header_t *h = &msg.header;
                if (h->type == CDC_MSG_PONG) {
                    cdc_wire_msg_close(&wire);
                    continue;
                }
                if (h->request_id != request_id) {
                    self->counters.late_replies++;
                    cdc_wire_msg_close(&wire);
                    continue;
                }
                int t = match_task(tasks, worker_of, state, count, w, h->shard);
                if (t < 0) {
                    self->counters.invalid_replies++;
                    cdc_wire_msg_close(&wire);
                    continue;
                }
                if (h->type == CDC_MSG_RESULT && h->rows == tasks[t].a_rows &&
                    h->cols == tasks[t].cols) {
                    memcpy(tasks[t].result, msg.payload[0].data, msg.payload[0].size);
                    self->counters.results++;
                    self->counters.bytes_in += msg.payload[0].size;
                    state[t] = TASK_DONE;
                    tasks[t].elapsed_ms = (double) (now_ms() - started);
                    *arrived |= UINT64_C(1) << t;
                    done++;
                    pending--;
                } else if (h->type == CDC_MSG_MISS && retries[t] < MAX_MISS_RETRIES) {
                    /* The worker restarted or evicted: forget and re-send. */
                    self->counters.misses++;
                    retries[t]++;
                    worker_forget(&self->workers[w], h->a_key);
                    if (send_task(self, &self->workers[w], &tasks[t], request_id, needed) !=
                        CDC_OK) {
                        state[t] = TASK_IDLE;
                        pending--;
                    }
                } else {
                    if (h->type == CDC_MSG_ERROR) {
                        self->counters.error_replies++;
                        CDC_LOG_WARNF("worker %d: shard %d failed: %s: %.*s", w, h->shard,
                                      cdc_err_name(h->error_code),
                                      (int) msg.payload[0].size,
                                      (const char *) msg.payload[0].data);
                    } else {
                        self->counters.invalid_replies++;
                    }
                    state[t] = TASK_IDLE; /* this result will not come */
                    pending--;
                }
                cdc_wire_msg_close(&wire);
            }
            cdc_wire_msg_close(&wire);
        }
    }
    pthread_mutex_unlock(&self->lock);
    return rc;
}
