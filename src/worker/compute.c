/* compute.c - the compute thread: WEIGHTS into the cache, tasks through OpenBLAS, replies out. */
#include "compute.h"

#include "clock.h"
#include "error.h"
#include "hash.h"
#include "log.h"
#include "mailbox.h"
#include "peer_tasks.h"
#include "task_run.h"
#include "weight_cache.h"
#include "weight_store.h"

#include <pthread.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Only the compute thread touches cache and counters while it runs. */
struct cdc_worker_compute {
    cdc_server_t *server;
    cdc_mailbox_t *requests; /* main loop -> thread; NULL item: stop */
    cdc_mailbox_t *replies;  /* thread -> main loop                  */
    cdc_weight_cache_t *cache;
    cdc_weight_store_t *store; /* --store: NULL without */
    cdc_peer_tasks_t *peer_tasks; /* the main loop's; released here when done */
    cdc_worker_counters_t counters;
    pthread_t thread;
    int started;
    atomic_int stopping; /* set at stop: queued requests are dropped, not run */
    /* What PONGs report (cdc__worker_compute_status), published by the
       compute thread after each request, read by the socket thread. */
    atomic_uint_fast64_t submitted, done, tasks, cache_bytes, cache_entries, stored;
    /* Work done (cdc__worker_compute_count_work), written by the socket
       thread, which also builds heartbeat PONGs: they see both in step. */
    atomic_uint_fast64_t busy_us, flops;
    atomic_uint_fast64_t thin_busy_us, thin_flops, thin_bytes; /* status.h */
    uint64_t max_memory, max_task_memory;
    int report_weights; /* post a notice of each WEIGHTS cached (link emulation) */
    uint64_t instance; /* drawn at start: tells a coordinator this process
                          from the one before it on the same endpoint       */
    cdc_fault_misreport_t lie;    /* what its PONGs claim (a fault)           */
    atomic_uint_fast64_t flapped; /* instance numbers made up so far          */
};

/* A number no earlier process on this endpoint had: the start time in ns
   mixed with the pid (never 0: 0 means "not reported"). */
static uint64_t draw_instance(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t x = (uint64_t) now.tv_sec * 1000000000u + (uint64_t) now.tv_nsec;
    x ^= (uint64_t) getpid() << 40;
    return x ? x : 1;
}

/* Hand a built reply (rc: the status of building it) to the main loop and
   wake it. A reply the peer's budget refused is dropped and counted. */
static int post_reply(cdc_worker_compute_t *self, int rc, cdc_reply_t *reply,
                      const cdc_worker_reply_t *meta)
{
    if (rc == CDC_ETIMEDOUT) {
        self->counters.over_budget++; /* the peer is not reading: dropped */
        CDC_LOG_INFOF("worker: %s", cdc_last_error());
        return CDC_OK;
    }
    if (rc != CDC_OK)
        return rc;
    cdc_worker_reply_t *out = malloc(sizeof *out);
    if (!out) {
        cdc__reply_destroy(&reply);
        return cdc__fail(CDC_ENOMEM, "reply envelope");
    }
    *out = meta ? *meta : (cdc_worker_reply_t){NULL, 0, 0, 0, 0, 0, 0, 0};
    out->reply = reply; /* NULL: a WEIGHTS notice (meta has its bytes) */
    if ((rc = cdc__mailbox_push(self->replies, out)) != CDC_OK) {
        cdc__reply_destroy(&out->reply);
        free(out);
        return rc;
    }
    cdc__server_wake(self->server);
    return CDC_OK;
}

/* Build a reply of header and *payload_p (taken) and post it. */
static int post(cdc_worker_compute_t *self, const cdc_request_t *request,
                const cdc_msg_header_t *h, cdc_payload_t **payload_p,
                const cdc_worker_reply_t *meta)
{
    cdc_reply_t *reply = NULL;
    int rc = cdc__server_reply_new(self->server, request, h, payload_p, &reply);
    return post_reply(self, rc, reply, meta);
}

static void reply_error(cdc_worker_compute_t *self, const cdc_request_t *request, int code,
                        const char *text)
{
    cdc_reply_t *reply = NULL;
    int rc = cdc__server_error_new(self->server, request, code, text, &reply);
    post_reply(self, rc, reply, NULL);
}

static int reply_miss(cdc_worker_compute_t *self, const cdc_request_t *request, uint64_t key)
{
    const cdc_msg_header_t *task = &cdc__request_msg(request)->header;
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_MISS);
    h.request_id = task->request_id;
    h.shard = task->shard;
    h.a_key = key;
    self->counters.misses++;
    return post(self, request, &h, NULL, NULL);
}

/* A barrier PING (protocol.h): everything before it has been handled. */
static int reply_barrier(cdc_worker_compute_t *self, const cdc_request_t *request)
{
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_PONG);
    h.request_id = cdc__request_msg(request)->header.request_id;
    h.shard = CDC_PING_BARRIER;
    cdc_payload_t *payload = cdc__worker_compute_status_payload(self, 0);
    if (!payload)
        return cdc__fail(CDC_ENOMEM, "PONG");
    return post(self, request, &h, &payload, NULL);
}

/* The cache's release function for a payload it holds. */
static void release_payload(void *owner)
{
    cdc_payload_t *payload = owner;
    cdc__payload_destroy(&payload);
}

/* Whose cache entries a request uses: its peer's CURVE key (hashed; never 0),
   so one coordinator's WEIGHTS never stand in for another's and its share
   of the cache is counted apart. Peers without CURVE share scope 0: the
   worker cannot tell them apart beyond their connection (ipc, loopback or
   --insecure), and a coordinator that reconnects keeps its weights. */
static uint64_t scope_of(const cdc_request_t *request)
{
    const char *user_id = cdc__request_peer(request)->user_id;
    if (!user_id[0])
        return 0;
    return cdc__hash_bytes(user_id, strlen(user_id), UINT64_C(0x5c09e)); /* never 0 */
}

/* Keep the WEIGHTS frame itself (no copy for a large one) under its key. */
static int put_weights(cdc_worker_compute_t *self, cdc_request_t *request)
{
    const cdc_msg_header_t *h = &cdc__request_msg(request)->header;
    cdc_weight_key_t key = {h->a_key, scope_of(request)};
    cdc_payload_t *payload = cdc__request_take_payload(request, 0);
    if (!payload)
        return cdc__fail(CDC_ENOMEM, "weights %016llx", (unsigned long long) h->a_key);
    cdc_weight_value_t value = {h->rows, h->k, cdc__payload_data(payload),
                                cdc__payload_footprint(payload), payload, release_payload};
    cdc_weight_cache_stats_t stats;
    cdc_worker_reply_t notice = {NULL, 0, 0, 0, cdc__payload_size(payload), cdc__clock_ms(),
                                 0, 0};
    cdc__weight_cache_stats(self->cache, &stats);
    uint64_t evictions_before = stats.evictions;
    int rc = cdc__weight_cache_put(self->cache, key, &value);
    if (rc != CDC_OK) {
        cdc__payload_destroy(&payload);
        return rc;
    }
    cdc__weight_cache_stats(self->cache, &stats);
    self->counters.evictions += stats.evictions - evictions_before;
    self->counters.weights_cached++;
    if (self->store) /* its failures are logged: the store only saves transfers */
        cdc__weight_store_save(self->store, key, h->rows, h->k, value.data);
    /* The emulated link carries them (worker.c): the main loop holds what
       follows until their transfer is done. The frame is not copied. Out
       of memory here loses the emulation of this transfer, not the weights. */
    if (self->report_weights && post_reply(self, CDC_OK, NULL, &notice) != CDC_OK)
        CDC_LOG_WARNF("worker: weights %016llx: %s", (unsigned long long) h->a_key,
                      cdc_last_error());
    return CDC_OK;
}

/* STORED: the matrix it names into the cache from the store (the process
   before this one received it), or a MISS (request id 0) that tells the
   coordinator to send it. Already cached: nothing to do. */
static int load_stored(cdc_worker_compute_t *self, const cdc_request_t *request)
{
    const cdc_msg_header_t *h = &cdc__request_msg(request)->header;
    cdc_weight_key_t key = {h->a_key, scope_of(request)};
    const cdc_weight_value_t *held = cdc__weight_cache_get(self->cache, key);
    if (held && held->rows == h->rows && held->k == h->k)
        return CDC_OK;
    cdc_weight_value_t value = {h->rows, h->k, NULL, 0, NULL, NULL};
    int rc = !held && self->store
                 ? cdc__weight_store_load(self->store, key, h->rows, h->k, &value)
                 : CDC_OK;
    if (rc != CDC_OK)
        return rc;
    if (!value.data)
        return reply_miss(self, request, h->a_key);
    double started_ms = cdc__clock_ms();
    if ((rc = cdc__weight_cache_put(self->cache, key, &value)) != CDC_OK) {
        value.release(value.owner);
        return rc;
    }
    self->counters.stored_loaded++;
    uint64_t bytes = (uint64_t) h->rows * (uint64_t) h->k * sizeof(float);
    cdc_worker_reply_t notice = {NULL, 0, 0, 0, 0, started_ms, 0, bytes};
    if (self->report_weights && post_reply(self, CDC_OK, NULL, &notice) != CDC_OK)
        CDC_LOG_WARNF("worker: stored %016llx: %s", (unsigned long long) h->a_key,
                      cdc_last_error());
    return CDC_OK;
}

/* An operand as floats: the cached matrix for key (in scope), else the
   inline payload (used in place when it is one aligned frame, else gathered
   into *owned: chunks of a large payload are not contiguous). NULL data with
   CDC_OK means the key is not cached (a miss). */
static int operand(cdc_worker_compute_t *self, uint64_t scope, uint64_t key, int64_t rows,
                   int64_t k, const cdc_msg_payload_t *payload, const float **data,
                   float **owned)
{
    *data = NULL;
    *owned = NULL;
    if (key != 0) {
        const cdc_weight_value_t *held =
            cdc__weight_cache_get(self->cache, (cdc_weight_key_t){key, scope});
        if (!held)
            return CDC_OK;
        if (held->rows != rows || held->k != k)
            return cdc__fail(CDC_EPROTO,
                             "key %016llx holds %lld x %lld, task expects %lld x %lld",
                             (unsigned long long) key, (long long) held->rows,
                             (long long) held->k, (long long) rows, (long long) k);
        *data = held->data;
        return CDC_OK;
    }
    if (payload->count == 1 && (uintptr_t) payload->frames[0].data % alignof(float) == 0) {
        *data = payload->frames[0].data;
        return CDC_OK;
    }
    *owned = malloc(payload->size);
    if (!*owned)
        return cdc__fail(CDC_ENOMEM, "operand of %zu bytes", payload->size);
    cdc__msg_payload_gather(payload, *owned);
    *data = *owned;
    return CDC_OK;
}

/* Both operands of a task, cached ones from the sender's scope; *missing
   gets the key of one not cached (0: none). */
static int task_operands(cdc_worker_compute_t *self, const cdc_request_t *request,
                         const float **a, const float **second, float **owned,
                         uint64_t *missing)
{
    const cdc_msg_t *msg = cdc__request_msg(request);
    const cdc_msg_header_t *h = &msg->header;
    int is_conv = h->type == CDC_MSG_TASK_CONV;
    uint64_t scope = scope_of(request);
    *missing = 0;
    int rc = operand(self, scope, h->a_key, h->rows, h->k, &msg->payload[0], a, &owned[0]);
    if (rc != CDC_OK || !*a) {
        *missing = h->a_key;
        return rc;
    }
    rc = is_conv ? operand(self, scope, 0, 0, 0, &msg->payload[1], second, &owned[1])
                 : operand(self, scope, h->bt_key, h->cols, h->k, &msg->payload[1], second,
                           &owned[1]);
    if (rc == CDC_OK && !*second)
        *missing = h->bt_key;
    return rc;
}

/* Run part p of the task (its rows from first_row; the whole task when it
   is not streamed) into a fresh result and post it as a RESULT with its
   timing. */
static int run_part_and_reply(cdc_worker_compute_t *self, const cdc_request_t *request,
                              cdc_shard_task_t *piece, int64_t first_row, int p)
{
    const cdc_msg_t *msg = cdc__request_msg(request);
    const cdc_msg_header_t *h = &msg->header;
    size_t result_bytes = (size_t) piece->a_rows * (size_t) h->cols * sizeof(float);
    float *result = malloc(result_bytes);
    if (!result)
        return cdc__fail(CDC_ENOMEM, "result of %zu bytes", result_bytes);
    piece->result = result;
    double started = cdc__clock_ms();
    int rc = cdc__task_run_local(piece);
    if (rc != CDC_OK) {
        free(result);
        return rc;
    }
    uint64_t bytes_in = p == 0 ? (uint64_t) (msg->payload[0].size + msg->payload[1].size) : 0;
    cdc_worker_reply_t meta = {
        NULL, cdc__clock_ms() - started,
        cdc__gemm_flops((double) piece->a_rows, (double) h->cols, (double) h->k),
        cdc__gemm_streamed_bytes((double) piece->a_rows, (double) h->cols, (double) h->k),
        bytes_in, started, p, 0};
    cdc_msg_header_t reply;
    cdc__msg_header_init(&reply, CDC_MSG_RESULT);
    reply.request_id = h->request_id;
    reply.shard = h->shard;
    reply.rows = piece->a_rows;
    reply.cols = h->cols;
    reply.row_offset = first_row;
    cdc_payload_t *payload = cdc__payload_adopt(result, result_bytes); /* sent without a copy */
    if (!payload)
        return cdc__fail(CDC_ENOMEM, "result payload");
    return post(self, request, &reply, &payload, &meta);
}

/* Run the task and post its RESULT; a streamed one (lead_rows) part by
   part, each sent as it is done, the parts after the lead (parity) only
   while the request is not cancelled. */
static int run_and_reply(cdc_worker_compute_t *self, const cdc_request_t *request,
                         const float *a, const float *second)
{
    const cdc_msg_header_t *h = &cdc__request_msg(request)->header;
    cdc_conv_geometry_t geometry = h->geometry;
    int rc = h->type == CDC_MSG_TASK_CONV ? cdc__conv_geometry_finish(&geometry) : CDC_OK;
    cdc_shard_task_t task = cdc__msg_task(h, a, second, &geometry, NULL);
    int parts = cdc_task_parts(&task);
    for (int p = 0; p < parts && rc == CDC_OK; p++) {
        if (p > 0 && cdc__server_cancelled(self->server, request, h->request_id)) {
            self->counters.cancelled += (uint64_t) (parts - p); /* parity nobody wants */
            break;
        }
        int64_t first_row;
        cdc_shard_task_t piece = cdc__task_part(&task, p, &first_row);
        rc = run_part_and_reply(self, request, &piece, first_row, p);
    }
    if (rc == CDC_OK)
        self->counters.tasks++;
    return rc;
}

static int handle_task(cdc_worker_compute_t *self, const cdc_request_t *request)
{
    const float *a = NULL, *second = NULL;
    float *owned[2] = {NULL, NULL};
    uint64_t missing = 0;
    int rc = task_operands(self, request, &a, &second, owned, &missing);
    if (rc == CDC_OK)
        rc = missing ? reply_miss(self, request, missing) : run_and_reply(self, request, a, second);
    free(owned[0]);
    free(owned[1]);
    return rc;
}

/* WEIGHTS, tasks and barrier PINGs, in the order the main loop forwarded
   them (so WEIGHTS always precede the task that needs them, and a barrier
   follows what came before it). */
static void compute_request(cdc_worker_compute_t *self, cdc_request_t *request)
{
    const cdc_msg_header_t *h = &cdc__request_msg(request)->header;
    int rc;
    if (h->type == CDC_MSG_WEIGHTS) {
        rc = put_weights(self, request);
    } else if (h->type == CDC_MSG_STORED) {
        rc = load_stored(self, request);
    } else if (h->type == CDC_MSG_PING) {
        rc = reply_barrier(self, request);
    } else if (cdc__server_cancelled(self->server, request, h->request_id)) {
        self->counters.cancelled++; /* the sender no longer wants it */
        return;
    } else {
        rc = handle_task(self, request);
    }
    if (rc == CDC_OK || rc == CDC_ETRANSPORT)
        return;
    if (rc == CDC_EPROTO)
        self->counters.invalid++;
    /* A valid request we could not serve (memory, a key of another shape). */
    CDC_LOG_WARNF("worker: %s failed: %s", cdc__msg_type_name(h->type), cdc_last_error());
    reply_error(self, request, rc, cdc_last_error());
}

static void publish_status(cdc_worker_compute_t *self)
{
    cdc_weight_cache_stats_t stats;
    cdc__weight_cache_stats(self->cache, &stats);
    atomic_store(&self->cache_bytes, stats.bytes);
    atomic_store(&self->cache_entries, stats.count);
    if (self->store) {
        cdc_weight_store_stats_t stored;
        cdc__weight_store_stats(self->store, &stored);
        atomic_store(&self->stored, stored.count);
    }
    atomic_store(&self->tasks, self->counters.tasks);
    atomic_fetch_add(&self->done, 1);
}

static void *compute_main(void *arg)
{
    cdc_worker_compute_t *self = arg;
    for (;;) {
        cdc_request_t *request = cdc__mailbox_pop(self->requests);
        if (!request)
            break;
        if (atomic_load(&self->stopping))
            self->counters.dropped_at_exit++; /* SIGTERM: only the current task finishes */
        else
            compute_request(self, request);
        if (self->peer_tasks)
            cdc__peer_tasks_release(self->peer_tasks, cdc__request_peer(request));
        cdc__request_destroy(&request);
        publish_status(self);
    }
    return NULL;
}

int cdc__worker_compute_start(cdc_server_t *server, const cdc_worker_options_t *options,
                              cdc_peer_tasks_t *peer_tasks, int report_weights,
                              const cdc_fault_misreport_t *lie,
                              cdc_worker_compute_t **compute_p)
{
    *compute_p = NULL;
    cdc_worker_compute_t *self = calloc(1, sizeof *self);
    if (!self)
        return cdc__fail(CDC_ENOMEM, "compute thread");
    self->server = server;
    self->peer_tasks = peer_tasks;
    self->max_memory = options->max_memory;
    self->max_task_memory = cdc__worker_task_memory_limit(options);
    self->report_weights = report_weights;
    self->instance = draw_instance();
    if (lie)
        self->lie = *lie; /* before the thread starts: it builds barrier PONGs */
    int rc;
    if ((rc = cdc__mailbox_new(&self->requests)) != CDC_OK ||
        (rc = cdc__mailbox_new(&self->replies)) != CDC_OK ||
        (rc = cdc__weight_cache_new(options->max_memory, options->max_entries, &self->cache)) !=
            CDC_OK) {
        cdc__worker_compute_stop(&self, NULL);
        return rc;
    }
    cdc__weight_cache_limit_scope(self->cache, options->max_peer_memory);
    if (options->store) {
        size_t store_max = options->store_max ? options->store_max : options->max_memory;
        if ((rc = cdc__weight_store_open(options->store, store_max, &self->store)) != CDC_OK) {
            cdc__worker_compute_stop(&self, NULL);
            return rc;
        }
        cdc_weight_store_stats_t stored;
        cdc__weight_store_stats(self->store, &stored);
        atomic_store(&self->stored, stored.count);
        CDC_LOG_INFOF("worker: weight store %s: %zu matrices, %.1f MB", options->store,
                      stored.count, (double) stored.bytes / 1e6);
    }
    /* Signals go to the main loop, never to the compute thread. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int started = pthread_create(&self->thread, NULL, compute_main, self);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started != 0) {
        cdc__worker_compute_stop(&self, NULL);
        return cdc__fail(CDC_ENOMEM, "compute thread: %s", strerror(started));
    }
    self->started = 1;
    *compute_p = self;
    return CDC_OK;
}

int cdc__worker_compute_submit(cdc_worker_compute_t *self, cdc_request_t *request)
{
    int rc = cdc__mailbox_push(self->requests, request);
    if (rc != CDC_OK)
        cdc__request_destroy(&request);
    else
        atomic_fetch_add(&self->submitted, 1);
    return rc;
}

void cdc__worker_compute_status(cdc_worker_compute_t *self, cdc_status_report_t *status)
{
    uint64_t done = atomic_load(&self->done), submitted = atomic_load(&self->submitted);
    *status = (cdc_status_report_t){
        .cache_bytes = atomic_load(&self->cache_bytes),
        .cache_entries = atomic_load(&self->cache_entries),
        .max_memory = self->max_memory,
        .tasks = atomic_load(&self->tasks),
        .load = submitted > done ? submitted - done : 0,
        .instance = self->instance,
        .busy_us = atomic_load(&self->busy_us),
        .flops = atomic_load(&self->flops),
        .max_task_memory = self->max_task_memory,
        .thin_busy_us = atomic_load(&self->thin_busy_us),
        .thin_flops = atomic_load(&self->thin_flops),
        .thin_bytes = atomic_load(&self->thin_bytes),
        .stored = atomic_load(&self->stored),
    };
    if (self->lie.memory > 0)
        status->max_memory = (uint64_t) self->lie.memory;
    double claimed = (double) status->busy_us * self->lie.rate * 1e3; /* flops at rate */
    if (self->lie.rate > 0) { /* every task claimed at that rate: none thin */
        status->flops = claimed < 1.8e19 ? (uint64_t) claimed : UINT64_MAX;
        status->thin_busy_us = status->thin_flops = status->thin_bytes = 0;
    }
    if (self->lie.flap)
        status->instance += (atomic_fetch_add(&self->flapped, 1) + 1) * 0x9e3779b97f4a7c15u;
}


/* x rounded to a count (0 for what is not positive). */
static uint64_t count_of(double x)
{
    return x > 0 ? (uint64_t) (x + 0.5) : 0;
}

void cdc__worker_compute_count_work(cdc_worker_compute_t *self, double flops, double bytes_read,
                                    double busy_ms)
{
    uint64_t work = count_of(flops), busy_us = count_of(busy_ms * 1000.0);
    atomic_fetch_add(&self->flops, work);
    atomic_fetch_add(&self->busy_us, busy_us);
    if (!cdc__status_task_thin(flops, bytes_read))
        return;
    atomic_fetch_add(&self->thin_flops, work);
    atomic_fetch_add(&self->thin_busy_us, busy_us);
    atomic_fetch_add(&self->thin_bytes, count_of(bytes_read));
}

cdc_payload_t *cdc__worker_compute_status_payload(cdc_worker_compute_t *self, uint64_t held)
{
    cdc_status_report_t status;
    char text[CDC_PROTO_MAX_TEXT];
    cdc__worker_compute_status(self, &status);
    status.load += held;
    size_t len = cdc__status_format(&status, text, sizeof text);
    return cdc__payload_copy(text, len);
}

cdc_worker_reply_t *cdc__worker_compute_next(cdc_worker_compute_t *self)
{
    void *item = NULL;
    return cdc__mailbox_try_pop(self->replies, &item) ? item : NULL;
}

void cdc__worker_compute_finish(cdc_worker_compute_t *self)
{
    if (!self || !self->started)
        return;
    atomic_store(&self->stopping, 1);
    /* Out of memory here cannot be recovered from: the thread must stop. */
    while (cdc__mailbox_push(self->requests, NULL) != CDC_OK)
        cdc__sleep_ms(10);
    pthread_join(self->thread, NULL);
    self->started = 0;
}

void cdc__worker_compute_stop(cdc_worker_compute_t **compute_p, cdc_worker_counters_t *counters)
{
    if (!compute_p || !*compute_p)
        return;
    cdc_worker_compute_t *self = *compute_p;
    cdc__worker_compute_finish(self);
    void *item;
    while (self->requests && cdc__mailbox_try_pop(self->requests, &item)) {
        cdc_request_t *request = item;
        cdc__request_destroy(&request);
    }
    cdc_worker_reply_t *reply;
    while (self->replies && (reply = cdc__worker_compute_next(self))) {
        cdc__reply_destroy(&reply->reply);
        free(reply);
    }
    cdc__weight_cache_destroy(&self->cache);
    cdc__weight_store_close(&self->store);
    cdc__mailbox_destroy(&self->requests);
    cdc__mailbox_destroy(&self->replies);
    if (counters)
        cdc__worker_counters_add(counters, &self->counters);
    free(self);
    *compute_p = NULL;
}
