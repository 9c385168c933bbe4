/* worker.c - the worker daemon: a ROUTER socket, a weight cache, shard GEMMs. */
#include "worker.h"

#include "blas_backend.h"
#include "error.h"
#include "executor.h"
#include "log.h"
#include "wire.h"

#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t key;
    int64_t rows, k;
    float *data;
    size_t bytes;
    uint64_t stamp; /* last use, for LRU */
} cache_entry_t;

typedef struct {
    cache_entry_t *entries;
    int count, capacity;
    size_t bytes, max_bytes;
    uint64_t clock;
} weight_cache_t;

typedef struct {
    void *socket;
    weight_cache_t cache;
    cdc_worker_counters_t counters;
} worker_t;

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
    cache->bytes -= cache->entries[i].bytes;
    free(cache->entries[i].data);
    cache->entries[i] = cache->entries[--cache->count];
}

/* Store a copy of payload under key, evicting least recently used entries
   until it fits. A matrix larger than the whole cache is refused. */
static int cache_put(weight_cache_t *cache, uint64_t key, int64_t rows, int64_t k,
                     const void *payload, size_t bytes, uint64_t *evictions)
{
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
    float *data = malloc(bytes);
    if (!data)
        return cdc__fail(CDC_ENOMEM, "weights %016llx: %zu bytes", (unsigned long long) key,
                         bytes);
    memcpy(data, payload, bytes);
    cache->entries[cache->count++] =
        (cache_entry_t){key, rows, k, data, bytes, ++cache->clock};
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
    return cdc_wire_send(self->socket, routing_id, &h, &payload, 1, ZMQ_DONTWAIT);
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
    return cdc_wire_send(self->socket, routing_id, &h, NULL, 0, ZMQ_DONTWAIT);
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
    rc = cdc__task_run_local(&task);
    if (rc != CDC_OK)
        goto cleanup;
    self->counters.tasks++;
    cdc_msg_header_t reply;
    cdc_msg_header_init(&reply, CDC_MSG_RESULT);
    reply.request_id = h->request_id;
    reply.shard = h->shard;
    reply.rows = h->rows;
    reply.cols = h->cols;
    cdc_frame_t payload = {result, result_bytes};
    rc = cdc_wire_send(self->socket, routing_id, &reply, &payload, 1, ZMQ_DONTWAIT);
cleanup:
    free(result);
    free(second_owned);
    free(a_owned);
    return rc;
}

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

static void handle_message(worker_t *self, cdc_wire_msg_t *wire)
{
    cdc_msg_t msg;
    zmq_msg_t *routing_id = &wire->parts[0];
    self->counters.messages++;
    int rc = cdc_wire_decode(wire, 1, &msg);
    if (rc == CDC_OK) {
        const cdc_msg_header_t *h = &msg.header;
        switch ((cdc_msg_type_t) h->type) {
        case CDC_MSG_PING: {
            cdc_msg_header_t pong;
            cdc_msg_header_init(&pong, CDC_MSG_PONG);
            pong.request_id = h->request_id;
            self->counters.pings++;
            rc = cdc_wire_send(self->socket, routing_id, &pong, NULL, 0, ZMQ_DONTWAIT);
            break;
        }
        case CDC_MSG_WEIGHTS:
            rc = cache_put(&self->cache, h->a_key, h->rows, h->k, msg.payload[0].data,
                           msg.payload[0].size, &self->counters.evictions);
            if (rc == CDC_OK)
                self->counters.weights_cached++;
            break;
        case CDC_MSG_TASK_GEMM:
        case CDC_MSG_TASK_CONV:
            rc = handle_task(self, routing_id, &msg);
            break;
        default:
            rc = cdc__fail(CDC_EPROTO, "a worker does not accept %s messages",
                           cdc_msg_type_name(h->type));
            break;
        }
        if (rc == CDC_OK || rc == CDC_ETIMEDOUT) /* ETIMEDOUT: the peer left */
            return;
        if (rc != CDC_EPROTO) {
            /* A valid request we could not serve (memory, BLAS): tell the sender. */
            CDC_LOG_WARNF("worker: %s failed: %s", cdc_msg_type_name(h->type),
                          cdc_last_error());
            reply_error(self, routing_id, h->request_id, h->shard, rc, cdc_last_error());
            return;
        }
    }
    self->counters.invalid++;
    CDC_LOG_INFOF("worker: invalid message: %s", cdc_last_error());
    char text[CDC_PROTO_MAX_TEXT];
    snprintf(text, sizeof text, "%s", cdc_last_error());
    int32_t shard;
    uint64_t request_id = salvage_request_id(wire, &shard);
    reply_error(self, routing_id, request_id, shard, CDC_EPROTO, text);
}

int cdc_worker_run(const cdc_worker_options_t *options, volatile sig_atomic_t *stop,
                   cdc_worker_counters_t *counters)
{
    worker_t self;
    memset(&self, 0, sizeof self);
    self.cache.max_bytes = options->max_memory;
    int rc = cdc__blas_ready();
    if (rc != CDC_OK)
        return rc;
    cdc__blas_set_threads(options->threads > 0 ? options->threads : 1);

    void *context = zmq_ctx_new();
    if (!context)
        return cdc__fail(CDC_ETRANSPORT, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    self.socket = zmq_socket(context, ZMQ_ROUTER);
    if (!self.socket) {
        rc = cdc__fail(CDC_ETRANSPORT, "zmq_socket: %s", zmq_strerror(zmq_errno()));
        goto cleanup_context;
    }
    int linger = 0;
    /* Refuse absurd messages before libzmq allocates them: the largest valid
       one is two CDC_PROTO_MAX_FLOATS matrices plus headers. */
    int64_t max_message = CDC_PROTO_MAX_FLOATS * (int64_t) sizeof(float) + 4096;
    zmq_setsockopt(self.socket, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(self.socket, ZMQ_MAXMSGSIZE, &max_message, sizeof max_message);
    if (zmq_bind(self.socket, options->bind) != 0) {
        rc = cdc__fail(CDC_ETRANSPORT, "bind %s: %s", options->bind,
                       zmq_strerror(zmq_errno()));
        goto cleanup_socket;
    }
    CDC_LOG_INFOF("worker: serving on %s", options->bind);
    while (!*stop) {
        zmq_pollitem_t item = {self.socket, 0, ZMQ_POLLIN, 0};
        int ready = zmq_poll(&item, 1, 100);
        if (ready < 0) {
            if (zmq_errno() == EINTR)
                continue;
            rc = cdc__fail(CDC_ETRANSPORT, "poll: %s", zmq_strerror(zmq_errno()));
            goto cleanup_socket;
        }
        /* Drain everything waiting before polling again. */
        while (ready > 0 && !*stop) {
            cdc_wire_msg_t wire;
            int got = cdc_wire_recv(self.socket, &wire, ZMQ_DONTWAIT);
            if (got == CDC_OK && wire.count >= 1)
                handle_message(&self, &wire);
            cdc_wire_msg_close(&wire);
            if (got != CDC_OK)
                break;
        }
    }
    rc = CDC_OK;
cleanup_socket:
    zmq_close(self.socket);
cleanup_context:
    zmq_ctx_term(context);
    cache_clear(&self.cache);
    if (counters)
        *counters = self.counters;
    return rc;
}
