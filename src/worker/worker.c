/* worker.c - the worker daemon: a ROUTER loop that always answers, a compute thread, faults. */
#include "worker.h"

#include "blas_backend.h"
#include "clock.h"
#include "error.h"
#include "faults.h"
#include "log.h"
#include "task_run.h"
#include "wire.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    uint64_t key;
    int64_t rows, k;
    const float *data; /* into *msg, or owned (copied) when msg is NULL     */
    zmq_msg_t *msg;    /* the received frame itself: no second copy        */
    size_t bytes;
    uint64_t stamp; /* last use, for LRU */
} cache_entry_t;

typedef struct {
    cache_entry_t *entries;
    int count, capacity;
    size_t bytes, max_bytes;
    uint64_t clock;
} weight_cache_t;

/* The compute thread's state: the weight cache and a PAIR back to the main
   loop. Only the compute thread touches it while it runs. */
typedef struct {
    void *socket; /* PAIR to the main loop */
    weight_cache_t cache;
    cdc_worker_counters_t counters;
} worker_t;

/* Sent by the compute thread ahead of every reply: what the fault model needs. */
typedef struct {
    double compute_ms; /* time the task's GEMM took                  */
    double flops;      /* 2·rows·k·cols                               */
    uint64_t bytes_in; /* request payload bytes                       */
} reply_meta_t;

void cdc_worker_options_init(cdc_worker_options_t *options)
{
    memset(options, 0, sizeof *options);
    options->max_memory = (size_t) 1 << 30;
    options->threads = 1;
}

static cache_entry_t *cache_find(weight_cache_t *cache, uint64_t key)
{
    for (int i = 0; i < cache->count; i++) {
        if (cache->entries[i].key == key) {
            cache->entries[i].stamp = ++cache->clock;
            return &cache->entries[i];
        }
    }
    return NULL;
}

static void cache_remove(weight_cache_t *cache, int i)
{
    cache_entry_t *entry = &cache->entries[i];
    cache->bytes -= entry->bytes;
    if (entry->msg) {
        zmq_msg_close(entry->msg);
        free(entry->msg);
    } else {
        free((void *) entry->data);
    }
    cache->entries[i] = cache->entries[--cache->count];
}

/* Keep the frame *payload (moved out of the caller's message; copied only
   when its data is not float-aligned) under key, evicting least recently used
   entries until it fits. A matrix larger than the whole cache is refused.
   Taking the frame rather than a copy matters: first touches of fresh pages
   dominate the cost of a tens-of-MB weight shard on small VMs. */
static int cache_put(weight_cache_t *cache, uint64_t key, int64_t rows, int64_t k,
                     zmq_msg_t *payload, uint64_t *evictions)
{
    size_t bytes = zmq_msg_size(payload);
    if (bytes > cache->max_bytes)
        return cdc__fail(CDC_ENOMEM, "weights %016llx: %zu bytes exceed --max-memory %zu",
                         (unsigned long long) key, bytes, cache->max_bytes);
    for (int i = 0; i < cache->count; i++)
        if (cache->entries[i].key == key) {
            cache_remove(cache, i); /* replaced: the sender knows best */
            break;
        }
    while (cache->bytes + bytes > cache->max_bytes && cache->count > 0) {
        int oldest = 0;
        for (int i = 1; i < cache->count; i++)
            if (cache->entries[i].stamp < cache->entries[oldest].stamp)
                oldest = i;
        cache_remove(cache, oldest);
        (*evictions)++;
    }
    if (cache->count == cache->capacity) {
        int capacity = cache->capacity ? 2 * cache->capacity : 16;
        cache_entry_t *grown = realloc(cache->entries, (size_t) capacity * sizeof *grown);
        if (!grown)
            return cdc__fail(CDC_ENOMEM, "weight cache index");
        cache->entries = grown;
        cache->capacity = capacity;
    }
    zmq_msg_t *held = NULL;
    const float *data;
    if ((uintptr_t) zmq_msg_data(payload) % alignof(float) == 0) {
        held = malloc(sizeof *held);
        if (!held)
            return cdc__fail(CDC_ENOMEM, "weight cache entry");
        zmq_msg_init(held);
        zmq_msg_move(held, payload);
        data = zmq_msg_data(held);
    } else {
        float *copy = malloc(bytes);
        if (!copy)
            return cdc__fail(CDC_ENOMEM, "weights %016llx: %zu bytes",
                             (unsigned long long) key, bytes);
        memcpy(copy, zmq_msg_data(payload), bytes);
        data = copy;
    }
    cache->entries[cache->count++] =
        (cache_entry_t){key, rows, k, data, held, bytes, ++cache->clock};
    cache->bytes += bytes;
    return CDC_OK;
}

static void cache_clear(weight_cache_t *cache)
{
    while (cache->count > 0)
        cache_remove(cache, cache->count - 1);
    free(cache->entries);
    memset(cache, 0, sizeof *cache);
}

/* A reply from the compute thread to the main loop: the meta frame, then the
   message as the ROUTER will send it (routing id first). */
static int compute_send(worker_t *self, zmq_msg_t *routing_id, const cdc_msg_header_t *h,
                        const cdc_frame_t *payloads, int payload_count,
                        const reply_meta_t *meta)
{
    reply_meta_t none = {0, 0, 0};
    if (zmq_send(self->socket, meta ? meta : &none, sizeof none, ZMQ_SNDMORE) < 0)
        return cdc__fail(CDC_ETRANSPORT, "compute pipe: %s", zmq_strerror(zmq_errno()));
    return cdc_wire_send(self->socket, routing_id, h, payloads, payload_count, 0);
}

static int reply_error(worker_t *self, zmq_msg_t *routing_id, uint64_t request_id,
                       int32_t shard, int code, const char *text)
{
    cdc_msg_header_t h;
    cdc_msg_header_init(&h, CDC_MSG_ERROR);
    h.request_id = request_id;
    h.shard = shard;
    h.error_code = code;
    size_t len = strlen(text);
    cdc_frame_t payload = {text, len > CDC_PROTO_MAX_TEXT ? CDC_PROTO_MAX_TEXT : len};
    return compute_send(self, routing_id, &h, &payload, 1, NULL);
}

static int reply_miss(worker_t *self, zmq_msg_t *routing_id, const cdc_msg_header_t *task,
                      uint64_t key)
{
    cdc_msg_header_t h;
    cdc_msg_header_init(&h, CDC_MSG_MISS);
    h.request_id = task->request_id;
    h.shard = task->shard;
    h.a_key = key;
    self->counters.misses++;
    return compute_send(self, routing_id, &h, NULL, 0, NULL);
}

/* An operand as floats: the cached matrix for key, else the inline frame
   (used in place when aligned, else copied into *owned). NULL data with CDC_OK
   means the key is not cached (a miss). */
static int operand(worker_t *self, uint64_t key, int64_t rows, int64_t k,
                   const cdc_frame_t *frame, const float **data, float **owned)
{
    *data = NULL;
    *owned = NULL;
    if (key != 0) {
        cache_entry_t *entry = cache_find(&self->cache, key);
        if (!entry)
            return CDC_OK;
        if (entry->rows != rows || entry->k != k)
            return cdc__fail(CDC_EPROTO,
                             "key %016llx holds %lld x %lld, task expects %lld x %lld",
                             (unsigned long long) key, (long long) entry->rows,
                             (long long) entry->k, (long long) rows, (long long) k);
        *data = entry->data;
        return CDC_OK;
    }
    if ((uintptr_t) frame->data % alignof(float) == 0) {
        *data = frame->data;
        return CDC_OK;
    }
    *owned = malloc(frame->size);
    if (!*owned)
        return cdc__fail(CDC_ENOMEM, "operand of %zu bytes", frame->size);
    memcpy(*owned, frame->data, frame->size);
    *data = *owned;
    return CDC_OK;
}

static int handle_task(worker_t *self, zmq_msg_t *routing_id, const cdc_msg_t *msg)
{
    const cdc_msg_header_t *h = &msg->header;
    int is_conv = h->type == CDC_MSG_TASK_CONV;
    const float *a, *second;
    float *a_owned = NULL, *second_owned = NULL, *result = NULL;
    cdc_conv_geometry_t geometry = h->geometry;
    int rc = operand(self, h->a_key, h->rows, h->k, &msg->payload[0], &a, &a_owned);
    if (rc != CDC_OK)
        goto cleanup;
    if (!a) {
        rc = reply_miss(self, routing_id, h, h->a_key);
        goto cleanup;
    }
    if (is_conv) {
        rc = operand(self, 0, 0, 0, &msg->payload[1], &second, &second_owned);
        if (rc == CDC_OK)
            rc = cdc_conv_geometry_finish(&geometry);
    } else {
        rc = operand(self, h->bt_key, h->cols, h->k, &msg->payload[1], &second,
                     &second_owned);
    }
    if (rc != CDC_OK)
        goto cleanup;
    if (!second) {
        rc = reply_miss(self, routing_id, h, h->bt_key);
        goto cleanup;
    }
    size_t result_bytes = (size_t) h->rows * (size_t) h->cols * sizeof(float);
    result = malloc(result_bytes);
    if (!result) {
        rc = cdc__fail(CDC_ENOMEM, "result of %zu bytes", result_bytes);
        goto cleanup;
    }
    cdc_shard_task_t task = {
        .kind = is_conv ? CDC_TASK_CONV : CDC_TASK_GEMM,
        .shard = h->shard,
        .a = a,
        .a_rows = h->rows,
        .k = h->k,
        .bt = is_conv ? NULL : second,
        .geometry = is_conv ? &geometry : NULL,
        .batch = h->batch,
        .input = is_conv ? second : NULL,
        .cols = h->cols,
        .result = result,
    };
    double started = cdc__clock_ms();
    rc = cdc__task_run_local(&task);
    if (rc != CDC_OK)
        goto cleanup;
    self->counters.tasks++;
    reply_meta_t meta = {cdc__clock_ms() - started, 2.0 * (double) h->rows * (double) h->k *
                                                 (double) h->cols,
                         (uint64_t) (msg->payload[0].size + msg->payload[1].size)};
    cdc_msg_header_t reply;
    cdc_msg_header_init(&reply, CDC_MSG_RESULT);
    reply.request_id = h->request_id;
    reply.shard = h->shard;
    reply.rows = h->rows;
    reply.cols = h->cols;
    cdc_frame_t payload = {result, result_bytes};
    rc = compute_send(self, routing_id, &reply, &payload, 1, &meta);
cleanup:
    free(result);
    free(second_owned);
    free(a_owned);
    return rc;
}

/* The compute thread: WEIGHTS and tasks, in the order the main loop forwards
   them (so WEIGHTS always precede the task that needs them). */
static void compute_message(worker_t *self, cdc_wire_msg_t *wire)
{
    cdc_msg_t msg;
    zmq_msg_t *routing_id = &wire->parts[0];
    int rc = cdc_wire_decode(wire, 1, &msg);
    if (rc != CDC_OK)
        return; /* validated by the main loop already; cannot happen */
    const cdc_msg_header_t *h = &msg.header;
    if (h->type == CDC_MSG_WEIGHTS) {
        rc = cache_put(&self->cache, h->a_key, h->rows, h->k, &wire->parts[2],
                       &self->counters.evictions);
        if (rc == CDC_OK)
            self->counters.weights_cached++;
    } else {
        rc = handle_task(self, routing_id, &msg);
    }
    if (rc == CDC_OK || rc == CDC_ETRANSPORT)
        return;
    if (rc == CDC_EPROTO)
        self->counters.invalid++;
    /* A valid request we could not serve (memory, a key of another shape). */
    CDC_LOG_WARNF("worker: %s failed: %s", cdc_msg_type_name(h->type), cdc_last_error());
    reply_error(self, routing_id, h->request_id, h->shard, rc, cdc_last_error());
}

static void *compute_main(void *arg)
{
    worker_t *self = arg;
    for (;;) {
        cdc_wire_msg_t wire;
        int got = cdc_wire_recv(self->socket, &wire, 0);
        int quit = got != CDC_OK || wire.count < 2; /* one empty frame: stop */
        if (!quit)
            compute_message(self, &wire);
        cdc_wire_msg_close(&wire);
        if (quit)
            break;
    }
    return NULL;
}

/* A reply waiting for its (fault-delayed) send time. */
typedef struct {
    double due_ms;
    cdc_wire_msg_t msg; /* meta, routing id, header, payload */
} scheduled_t;

/* The main loop's state. */
typedef struct {
    void *router, *pipe;
    cdc_fault_state_t faults;
    int has_faults;
    double hang_until; /* < 0: not hung; INFINITY: hung for ever */
    scheduled_t **queue;
    int queued, queue_capacity;
    cdc_worker_counters_t counters;
} loop_t;

/* Best effort: the request id of a message that failed validation, so the
   sender can match the ERROR to its request. */
static uint64_t salvage_request_id(const cdc_wire_msg_t *wire, int32_t *shard)
{
    cdc_msg_header_t h;
    *shard = 0;
    if (wire->count < 2)
        return 0;
    zmq_msg_t *part = (zmq_msg_t *) &wire->parts[1];
    if (cdc_msg_header_unpack(zmq_msg_data(part), zmq_msg_size(part), &h) != CDC_OK ||
        h.magic != CDC_PROTO_MAGIC)
        return 0;
    *shard = h.shard >= 0 && h.shard < 64 ? h.shard : 0;
    return h.request_id;
}

/* Send parts[first..] of wire on the ROUTER (moved, not copied). */
static void router_forward(loop_t *loop, cdc_wire_msg_t *wire, int first)
{
    for (int i = first; i < wire->count; i++) {
        int flags = ZMQ_DONTWAIT | (i + 1 < wire->count ? ZMQ_SNDMORE : 0);
        if (zmq_msg_send(&wire->parts[i], loop->router, flags) < 0)
            break; /* the peer left or its queue is full: the reply is lost */
    }
}

/* Main-thread messages: PING answered here; WEIGHTS and tasks forwarded. */
static void handle_message(loop_t *loop, cdc_wire_msg_t *wire)
{
    cdc_msg_t msg;
    zmq_msg_t *routing_id = &wire->parts[0];
    loop->counters.messages++;
    int rc = cdc_wire_decode(wire, 1, &msg);
    if (rc == CDC_OK) {
        const cdc_msg_header_t *h = &msg.header;
        switch ((cdc_msg_type_t) h->type) {
        case CDC_MSG_PING: {
            cdc_msg_header_t pong;
            cdc_msg_header_init(&pong, CDC_MSG_PONG);
            pong.request_id = h->request_id;
            loop->counters.pings++;
            cdc_wire_send(loop->router, routing_id, &pong, NULL, 0, ZMQ_DONTWAIT);
            return;
        }
        case CDC_MSG_WEIGHTS:
        case CDC_MSG_TASK_GEMM:
        case CDC_MSG_TASK_CONV:
            for (int i = 0; i < wire->count; i++)
                zmq_msg_send(&wire->parts[i], loop->pipe,
                             i + 1 < wire->count ? ZMQ_SNDMORE : 0);
            return;
        default:
            cdc__fail(CDC_EPROTO, "a worker does not accept %s messages",
                      cdc_msg_type_name(h->type));
            break;
        }
    }
    loop->counters.invalid++;
    CDC_LOG_INFOF("worker: invalid message: %s", cdc_last_error());
    cdc_msg_header_t h;
    cdc_msg_header_init(&h, CDC_MSG_ERROR);
    h.request_id = salvage_request_id(wire, &h.shard);
    h.error_code = CDC_EPROTO;
    char text[CDC_PROTO_MAX_TEXT];
    snprintf(text, sizeof text, "%s", cdc_last_error());
    cdc_frame_t payload = {text, strlen(text)};
    cdc_wire_send(loop->router, routing_id, &h, &payload, 1, ZMQ_DONTWAIT);
}

static int schedule(loop_t *loop, cdc_wire_msg_t *wire, double due_ms)
{
    if (loop->queued == loop->queue_capacity) {
        int capacity = loop->queue_capacity ? 2 * loop->queue_capacity : 16;
        scheduled_t **grown = realloc(loop->queue, (size_t) capacity * sizeof *grown);
        if (!grown)
            return cdc__fail(CDC_ENOMEM, "reply queue");
        loop->queue = grown;
        loop->queue_capacity = capacity;
    }
    scheduled_t *entry = calloc(1, sizeof *entry);
    if (!entry)
        return cdc__fail(CDC_ENOMEM, "reply queue entry");
    entry->due_ms = due_ms;
    for (int i = 0; i < wire->count; i++) {
        zmq_msg_init(&entry->msg.parts[i]);
        zmq_msg_move(&entry->msg.parts[i], &wire->parts[i]);
    }
    entry->msg.count = wire->count;
    loop->queue[loop->queued++] = entry;
    return CDC_OK;
}

/* Send every queued reply that is due; returns ms until the next one (or
   `cap` when none is sooner). */
static long flush_due(loop_t *loop, long cap)
{
    double now = cdc__clock_ms(), next = now + (double) cap;
    for (int i = 0; i < loop->queued;) {
        scheduled_t *entry = loop->queue[i];
        if (entry->due_ms <= now) {
            router_forward(loop, &entry->msg, 1);
            cdc_wire_msg_close(&entry->msg);
            free(entry);
            /* Keep send order among equal due times: shift, not swap. */
            memmove(&loop->queue[i], &loop->queue[i + 1],
                    (size_t) (loop->queued - i - 1) * sizeof *loop->queue);
            loop->queued--;
            continue;
        }
        if (entry->due_ms < next)
            next = entry->due_ms;
        i++;
    }
    long wait = (long) ceil(next - now);
    return wait < 0 ? 0 : wait;
}

/* A reply from the compute thread: apply this task's faults, then send it
   now, later, or never. */
static void handle_reply(loop_t *loop, cdc_wire_msg_t *wire, int index)
{
    reply_meta_t meta = {0, 0, 0};
    cdc_msg_header_t h;
    if (wire->count < 3 || zmq_msg_size(&wire->parts[0]) != sizeof meta ||
        cdc_msg_header_unpack(zmq_msg_data(&wire->parts[2]), zmq_msg_size(&wire->parts[2]),
                              &h) != CDC_OK)
        return;
    memcpy(&meta, zmq_msg_data(&wire->parts[0]), sizeof meta);
    double now = cdc__clock_ms(), due = now;
    if (loop->has_faults && h.type == CDC_MSG_RESULT && wire->count == 4) {
        zmq_msg_t *payload = &wire->parts[3];
        cdc_fault_decision_t d;
        cdc_fault_next(&loop->faults, meta.compute_ms, meta.flops, (size_t) meta.bytes_in,
                       zmq_msg_size(payload), &d);
        if (d.crash) {
            fprintf(stderr, "cdcgemm-worker %d: crash fault at task %ld: exiting\n", index,
                    loop->faults.calls - 1);
            _exit(3);
        }
        if (d.drop) {
            loop->counters.dropped++;
            return;
        }
        if (d.corrupt) {
            size_t count = zmq_msg_size(payload) / sizeof(float);
            float *data = zmq_msg_data(payload), value;
            size_t at = (size_t) (d.corrupt_at % count);
            memcpy(&value, data + at, sizeof value);
            value += 1.0f + fabsf(value); /* changes any finite value by >= 1 */
            memcpy(data + at, &value, sizeof value);
            loop->counters.corrupted++;
        }
        if (d.hang_ms >= 0) {
            loop->counters.hangs++;
            loop->hang_until = d.hang_ms == 0 ? INFINITY : now + d.hang_ms;
            CDC_LOG_INFOF("worker %d: hang fault for %.0f ms", index, d.hang_ms);
            if (d.hang_ms == 0)
                return; /* hung for ever: this reply never leaves */
            due = loop->hang_until;
        }
        if (d.delay_ms > 0) {
            loop->counters.delayed++;
            due += d.delay_ms;
        }
    }
    if (due <= now || schedule(loop, wire, due) != CDC_OK)
        router_forward(loop, wire, 1);
}

static int parent_gone(const cdc_worker_options_t *options)
{
    return options->parent_pid > 0 && (long) getppid() != options->parent_pid;
}

static void add_counters(cdc_worker_counters_t *into, const cdc_worker_counters_t *from)
{
    into->messages += from->messages;
    into->tasks += from->tasks;
    into->weights_cached += from->weights_cached;
    into->misses += from->misses;
    into->invalid += from->invalid;
    into->evictions += from->evictions;
    into->pings += from->pings;
    into->delayed += from->delayed;
    into->dropped += from->dropped;
    into->corrupted += from->corrupted;
    into->hangs += from->hangs;
}

int cdc_worker_run(const cdc_worker_options_t *options, volatile sig_atomic_t *stop,
                   cdc_worker_counters_t *counters)
{
    loop_t loop;
    worker_t compute;
    memset(&loop, 0, sizeof loop);
    memset(&compute, 0, sizeof compute);
    loop.hang_until = -1.0;
    compute.cache.max_bytes = options->max_memory;
    cdc_fault_plan_t plan;
    int rc = cdc_fault_plan_parse(options->faults ? options->faults : "", &plan);
    if (rc != CDC_OK)
        return rc;
    loop.has_faults = plan.count > 0;
    cdc_fault_state_init(&loop.faults, &plan, options->index);
    if ((rc = cdc__blas_ready()) != CDC_OK)
        return rc;
    cdc__blas_set_threads(options->threads > 0 ? options->threads : 1);

    void *context = zmq_ctx_new();
    if (!context)
        return cdc__fail(CDC_ETRANSPORT, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    char pipe_name[64];
    snprintf(pipe_name, sizeof pipe_name, "inproc://cdc-worker-%p", (void *) &loop);
    loop.router = zmq_socket(context, ZMQ_ROUTER);
    loop.pipe = zmq_socket(context, ZMQ_PAIR);
    compute.socket = zmq_socket(context, ZMQ_PAIR);
    if (!loop.router || !loop.pipe || !compute.socket) {
        rc = cdc__fail(CDC_ETRANSPORT, "zmq_socket: %s", zmq_strerror(zmq_errno()));
        goto cleanup_sockets;
    }
    int linger = 0;
    /* Refuse absurd messages before libzmq allocates them: the largest valid
       one is two CDC_PROTO_MAX_FLOATS matrices plus headers. */
    int64_t max_message = CDC_PROTO_MAX_FLOATS * (int64_t) sizeof(float) + 4096;
    zmq_setsockopt(loop.router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(loop.router, ZMQ_MAXMSGSIZE, &max_message, sizeof max_message);
    int buffer = 4 << 20; /* weight shards are tens of MB: see client.c */
    zmq_setsockopt(loop.router, ZMQ_SNDBUF, &buffer, sizeof buffer);
    zmq_setsockopt(loop.router, ZMQ_RCVBUF, &buffer, sizeof buffer);
    zmq_setsockopt(loop.pipe, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(compute.socket, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(loop.pipe, pipe_name) != 0 || zmq_connect(compute.socket, pipe_name) != 0) {
        rc = cdc__fail(CDC_ETRANSPORT, "compute pipe: %s", zmq_strerror(zmq_errno()));
        goto cleanup_sockets;
    }
    if (zmq_bind(loop.router, options->bind) != 0) {
        rc = cdc__fail(CDC_ETRANSPORT, "bind %s: %s", options->bind,
                       zmq_strerror(zmq_errno()));
        goto cleanup_sockets;
    }
    /* Signals go to the main loop, never to the compute thread. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_t thread;
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int started = pthread_create(&thread, NULL, compute_main, &compute);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started != 0) {
        rc = cdc__fail(CDC_ENOMEM, "compute thread: %s", strerror(started));
        goto cleanup_sockets;
    }
    CDC_LOG_INFOF("worker %d: serving on %s", options->index, options->bind);
    rc = CDC_OK;
    while (!*stop) {
        if (parent_gone(options)) {
            CDC_LOG_WARNF("worker %d: coordinator %ld is gone; exiting", options->index,
                          options->parent_pid);
            break;
        }
        if (loop.hang_until >= 0) {
            /* Hung: read nothing, answer nothing; the sockets stay open. */
            double left = loop.hang_until - cdc__clock_ms();
            if (left > 0) {
                cdc__sleep_ms(left < 50 ? left : 50);
                continue;
            }
            loop.hang_until = -1.0;
        }
        long timeout = flush_due(&loop, 100);
        zmq_pollitem_t items[2] = {{loop.router, 0, ZMQ_POLLIN, 0},
                                   {loop.pipe, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(items, 2, timeout) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            rc = cdc__fail(CDC_ETRANSPORT, "poll: %s", zmq_strerror(zmq_errno()));
            break;
        }
        /* Results first: they are what the coordinator waits for. */
        while ((items[1].revents & ZMQ_POLLIN) && loop.hang_until < 0) {
            cdc_wire_msg_t wire;
            int got = cdc_wire_recv(loop.pipe, &wire, ZMQ_DONTWAIT);
            if (got == CDC_OK)
                handle_reply(&loop, &wire, options->index);
            cdc_wire_msg_close(&wire);
            if (got != CDC_OK)
                break;
        }
        while ((items[0].revents & ZMQ_POLLIN) && loop.hang_until < 0 && !*stop) {
            cdc_wire_msg_t wire;
            int got = cdc_wire_recv(loop.router, &wire, ZMQ_DONTWAIT);
            if (got == CDC_OK && wire.count >= 1)
                handle_message(&loop, &wire);
            cdc_wire_msg_close(&wire);
            if (got != CDC_OK)
                break;
        }
    }
    zmq_send(loop.pipe, "", 0, 0); /* one empty frame: the compute thread stops */
    pthread_join(thread, NULL);
cleanup_sockets:
    for (int i = 0; i < loop.queued; i++) {
        cdc_wire_msg_close(&loop.queue[i]->msg);
        free(loop.queue[i]);
    }
    free(loop.queue);
    if (compute.socket)
        zmq_close(compute.socket);
    if (loop.pipe)
        zmq_close(loop.pipe);
    if (loop.router)
        zmq_close(loop.router);
    zmq_ctx_term(context);
    cache_clear(&compute.cache);
    add_counters(&loop.counters, &compute.counters);
    if (counters)
        *counters = loop.counters;
    return rc;
}
