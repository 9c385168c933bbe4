/* client_restore.c - what keeps the workers' weights where the slots want
 * them: workers at new endpoints, weights sent between calls (the restore
 * pass), staging a re-sized layout, the slots' homes.
 *
 * Placement: shard s of a call runs on its slot's home (worker s unless
 * cdc__client_set_homes moved it) while that worker is live and holds the
 * slot's weights (placement.c, slots.c; the call places it, client_call.c).
 * Weight shards are cached per worker under keys that name the shard and n
 * (cdc__client_wire_key), so when a worker leaves and the re-plan keeps n
 * (the default keep-shards re-plan drops parity instead), every survivor's
 * cache stays warm and weights travel only for the shards that moved.
 *
 * A worker respawned at a new endpoint (cdc__client_move) gets new sockets:
 * the data one from whoever holds the call lock next, the heartbeat one from
 * the heartbeat thread; the old ones are closed with what they held.
 *
 * The restore pass runs under the call lock, at a call's start
 * (client_call.c) or between calls (the heartbeat thread, client_heartbeat.c):
 * it sends returning workers and spares the weights their slots need and
 * times the repair. */
#include "client_internal.h"

#include "bits.h"
#include "clock.h"
#include "error.h"
#include "hash.h"
#include "log.h"
#include "slots.h"
#include "wire.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* The key a shard operand is cached under on a worker. The layer's key names
   the whole weight matrix; its shard s differs with the shard index, the
   split (needed = n) and the code, so mix those in, plus a 16-value sample of
   the operand itself to tell apart codes that give the same shapes. */
uint64_t cdc__client_wire_key(uint64_t key, int shard, int needed, int64_t rows, int64_t k,
                              const uint32_t *sample)
{
    uint64_t h = cdc__hash_mix(key, (uint64_t) shard);
    h = cdc__hash_mix(h, (uint64_t) needed);
    h = cdc__hash_mix(h, (uint64_t) rows);
    h = cdc__hash_mix(h, (uint64_t) k);
    for (int i = 0; i < CDC_OPERAND_SAMPLE && rows * k > 0; i++) /* none of an empty block */
        h = cdc__hash_mix(h, sample[i]);
    return h ? h : 1; /* 0 means "inline" on the wire */
}

/* ---- a worker at a new endpoint ------------------------------------------- */

int cdc__client_move(cdc_client_t *self, int w, const char *endpoint)
{
    if (!self || !endpoint || w < 0 || w >= self->count)
        return cdc__fail(CDC_EINVAL, "cdc__client_move: no worker %d", w);
    if (strlen(endpoint) >= CDC_CURVE_ENDPOINT_MAX)
        return cdc__fail(CDC_EINVAL, "cdc__client_move: endpoint '%s' too long", endpoint);
    uint64_t bit = UINT64_C(1) << w;
    pthread_mutex_lock(&self->state_lock);
    snprintf(self->endpoints[w], sizeof self->endpoints[w], "%s", endpoint);
    self->moved_data |= bit;
    self->moved_heartbeat |= bit;
    pthread_mutex_unlock(&self->state_lock);
    CDC_LOG_INFOF("worker %d: a new process at %s", w, endpoint);
    return CDC_OK;
}

/* The moves that bits in *pending (state_lock) ask for: the bits are taken
   and the workers' endpoints and keys copied (discovery may give an entry
   another key). Returns the bits. */
static uint64_t moves_take(cdc_client_t *self, uint64_t *pending,
                           char endpoints[][CDC_CURVE_ENDPOINT_MAX],
                           uint8_t keys[][CDC_CURVE_KEY_BYTES])
{
    pthread_mutex_lock(&self->state_lock);
    uint64_t moved = *pending;
    *pending = 0;
    for (int w = 0; w < self->count; w++)
        if (moved & (UINT64_C(1) << w)) {
            memcpy(endpoints[w], self->endpoints[w], sizeof endpoints[w]);
            memcpy(keys[w], self->curve_servers[w], sizeof keys[w]);
        }
    pthread_mutex_unlock(&self->state_lock);
    return moved;
}

/* A move that could not be made now (no socket: out of descriptors) is
   tried again at the next chance; the old socket is kept meanwhile. */
static void move_retry(cdc_client_t *self, uint64_t *pending, int w)
{
    CDC_LOG_WARNF("worker %d: new endpoint not taken yet: %s", w, cdc_last_error());
    pthread_mutex_lock(&self->state_lock);
    *pending |= UINT64_C(1) << w;
    pthread_mutex_unlock(&self->state_lock);
}

/* Under the call lock: a moved worker's data socket is replaced by one
   connected to its new endpoint. Closing the old one (ZMQ_LINGER 0: at
   once) drops whatever it still queued for the old process, or received
   from it; none of that can reach the new one. The new process holds no
   weights, and no ack from the old one counts. */
void cdc__client_data_moves(cdc_client_t *self)
{
    char endpoints[CDC_MAX_WORKERS][CDC_CURVE_ENDPOINT_MAX];
    uint8_t keys[CDC_MAX_WORKERS][CDC_CURVE_KEY_BYTES];
    uint64_t moved = moves_take(self, &self->moved_data, endpoints, keys);
    for (int w = 0; moved; w++, moved >>= 1) {
        void *socket;
        if (!(moved & 1))
            continue;
        if (cdc__client_data_socket_open(self, keys[w], endpoints[w], &socket) != CDC_OK) {
            move_retry(self, &self->moved_data, w);
            continue;
        }
        zmq_close(self->workers[w].socket);
        self->workers[w].socket = socket;
        cdc__slots_new_process(self->slots, w);
    }
}

/* The heartbeat thread: a moved worker's heartbeat socket and monitor are
   replaced likewise; the worker is dead (its process is) until the new one
   answers. Returns whether a socket changed (the poll set must be redone). */
int cdc__client_heartbeat_moves(cdc_client_t *self, int64_t now)
{
    char endpoints[CDC_MAX_WORKERS][CDC_CURVE_ENDPOINT_MAX];
    uint8_t keys[CDC_MAX_WORKERS][CDC_CURVE_KEY_BYTES];
    uint64_t moved = moves_take(self, &self->moved_heartbeat, endpoints, keys);
    int changed = 0;
    for (int w = 0; moved; w++, moved >>= 1) {
        heartbeat_peer_t *peer = &self->peers[w];
        void *socket, *monitor;
        if (!(moved & 1))
            continue;
        if (cdc__client_heartbeat_socket_open(self, w, keys[w], endpoints[w], &socket,
                                              &monitor) != CDC_OK) {
            move_retry(self, &self->moved_heartbeat, w);
            continue;
        }
        cdc__client_heartbeat_socket_close(peer->socket, peer->monitor);
        peer->socket = socket;
        peer->monitor = monitor;
        peer->outstanding = 0;
        peer->next_ping = now; /* PING the new process at once */
        cdc__client_set_live(self, w, 0, 0, "a new process");
        changed = 1;
    }
    return changed;
}

/* ---- weights, and the restore pass ---------------------------------------- */

/* WEIGHTS for weight->key to worker w. With a hold (the task's
   a_hold/bt_hold, a manifest's) the payload goes without a copy: libzmq
   reads data after this returns, each chunk holding a reference to hold
   (cdc__wire_send_held); NULL copies it. Without data, its source builds
   it (operand_source.h), held until libzmq has sent it. The caller
   remembers it as sent (slots.h). A worker process with a store that may
   hold them is asked to load them instead (client_store.c): *payload_bytes
   says which (0). */
static int send_weights(cdc_client_t *self, int w, const cdc_slot_weight_t *weight,
                        uint64_t *payload_bytes)
{
    *payload_bytes = 0;
    if (cdc__client_store_ask(self, w, weight->key))
        return cdc__client_store_send(self, w, weight);
    const float *data = weight->data;
    cdc_hold_t *hold = weight->hold, *built = NULL;
    size_t bytes = (size_t) weight->rows * (size_t) weight->k * sizeof(float);
    if (!data && weight->source) {
        /* Not while libzmq holds a budget of earlier builds (build_meter.h). */
        cdc__build_meter_wait(self->build_meter, CDC_CLIENT_BUILT_WAIT_MS);
        int rc = weight->source->open(weight->source, &data, &built);
        if (rc != CDC_OK)
            return rc;
        if (!(built = cdc__build_meter_track(self->build_meter, built, bytes)))
            return CDC_ENOMEM;
        hold = built;
    }
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_WEIGHTS);
    h.a_key = weight->key;
    h.rows = weight->rows;
    h.k = weight->k;
    cdc_frame_t payload = {data, bytes};
    int rc = cdc__wire_send_held(self->workers[w].socket, NULL, &h, &payload, &hold, 1,
                                 ZMQ_DONTWAIT);
    cdc__hold_release(built); /* libzmq's slices keep it until sent */
    if (rc != CDC_OK)
        return rc;
    self->counters.weights_sent++;
    self->weights_epoch[w]++;
    double now_ms = cdc__clock_ms(), from = self->weights_clear_ms[w];
    self->weights_clear_ms[w] = (from > now_ms ? from : now_ms) +
                                (double) payload.size * 8.0 / (CDC_CLIENT_FLOOR_MBIT * 1e3);
    self->counters.weight_bytes += payload.size;
    self->counters.bytes_out += payload.size;
    *payload_bytes = payload.size;
    return CDC_OK;
}

/* Make sure worker w holds the keyed operand, sending it if not. */
int cdc__client_ensure_weights(cdc_client_t *self, int w, const cdc_slot_weight_t *weight)
{
    uint64_t bytes;
    if (cdc__slots_has(self->slots, w, weight->key))
        return CDC_OK;
    int rc = send_weights(self, w, weight, &bytes);
    if (rc == CDC_OK)
        cdc__slots_sent(self->slots, w, weight->key);
    return rc;
}

/* The restore pass's callbacks (slots.h): its sends count as background. */
static int restore_send_weights(void *ctx, int w, const cdc_slot_weight_t *weight,
                                uint64_t *bytes)
{
    return send_weights(ctx, w, weight, bytes);
}

/* A barrier PING on client ctx's data socket to worker w, behind the
   WEIGHTS sent before it: the worker answers it once those are cached
   (protocol.h), so its PONG (request id = token) proves they arrived and
   bounds what is in flight. Token 0 acknowledges nothing: a PING that only
   proves the connection (CDC_OK: the socket took it, so it is connected).
   ctx is the client (void: it is also the restore pass's send_ping, slots.h). */
int cdc__client_send_data_ping(void *ctx, int w, uint64_t token)
{
    cdc_client_t *self = ctx;
    cdc_msg_header_t ping;
    cdc__msg_header_init(&ping, CDC_MSG_PING);
    ping.request_id = token;
    ping.shard = CDC_PING_BARRIER;
    return cdc__wire_send(self->workers[w].socket, NULL, &ping, NULL, 0, ZMQ_DONTWAIT);
}

/* Before a call: read what waits on the data sockets (answers to calls
   given up, or messages nobody asked for) and drop it, counted as late when
   it names a request already made, else as invalid, so nothing unsolicited
   is held from one call to the next. */
static void drain_stale(cdc_client_t *self)
{
    for (int w = 0; w < self->count; w++) {
        cdc_wire_msg_t wire;
        for (int n = 0; n < DRAIN_MAX &&
                        cdc__wire_recv(self->workers[w].socket, &wire, ZMQ_DONTWAIT) == CDC_OK;
             n++) {
            cdc_msg_t msg;
            int valid = cdc__wire_decode(&wire, 0, &msg) == CDC_OK;
            if (valid && msg.header.type == CDC_MSG_PONG)
                /* an ack of cdc__client_send_data_ping */
                cdc__slots_acked(self->slots, w, msg.header.request_id);
            else if (valid && msg.header.type == CDC_MSG_MISS && msg.header.request_id == 0)
                cdc__client_store_lacks(self, w, msg.header.a_key, 1); /* a STORED's */
            else if (valid && msg.header.type == CDC_MSG_GOODBYE)
                ; /* harmless: the heartbeat thread acts on it */
            else if (valid && msg.header.request_id > self->first_request &&
                     msg.header.request_id <= self->next_request)
                cdc__client_count_late(self, &msg.header);
            else
                self->counters.invalid_replies++;
            cdc__wire_msg_close(&wire);
        }
        cdc__wire_msg_close(&wire);
    }
}

/* Full redundancy (every slot has a live worker holding its weights) lost
   and regained: the repair's time, from the departure that began it. */
static void track_redundancy(cdc_client_t *self, uint64_t live, int64_t last_departure_us)
{
    int full = cdc__slots_full(self->slots, live);
    int64_t now_us = (int64_t) (cdc__clock_ms() * 1000.0);
    /* A slot erased while its home takes in a re-sized layout's blocks
       (staging) is planned, not a loss to repair. */
    if (!full && self->degraded_since_us < 0 && self->slots->staging_slot < 0) {
        /* Seen at the pass after the departure: date it from the departure
           when that is recent, else from now (a slot that was never filled). */
        int recent = last_departure_us > 0 && now_us - last_departure_us < 1000000;
        self->degraded_since_us = recent ? last_departure_us : now_us;
    } else if (full && self->degraded_since_us >= 0) {
        uint64_t took = (uint64_t) (now_us - self->degraded_since_us);
        self->counters.redundancy_repairs++;
        self->counters.repair_us_sum += took;
        if (took > self->counters.repair_us_max)
            self->counters.repair_us_max = took;
        self->degraded_since_us = -1;
        CDC_LOG_INFOF("full redundancy again after %.1f ms", (double) took / 1000.0);
    }
    atomic_store(&self->restoring, !full || cdc__slots_busy(self->slots, live) ||
                                       cdc__slots_staging(self->slots));
}

/* Worker w's status named instance: a new process is taken only once the
   old one is gone (cdc__slots_instance; refused changes logged once per
   worker). Each one that comes back empty within a minute of its last
   return waits longer before it is sent its weights again: 0, then 1, 2,
   4 ... 30 s, so a process in a crash loop (or a worker that lies about
   its instance across reconnections) cannot keep the links busy; one that
   reloads its weights from its store is not held back, unless its store
   was found lacking (client_store.c). */
static void note_instance(cdc_client_t *self, int w, uint64_t instance, uint64_t stored)
{
    cdc_slot_worker_t *worker = &self->slots->workers[w];
    uint64_t was = worker->instance;
    if (cdc__slots_instance(self->slots, w, instance) && worker->instances_refused == 1)
        CDC_LOG_WARNF("worker %d names another process (instance) on a connection that "
                      "never dropped: ignored, its weights are not sent again (a bug or a "
                      "lie; logged once)", w);
    if (worker->instance == was)
        return;
    /* One that reloads its weights from its own disk costs the links
       nothing, unless the process before it was found to lack some. */
    int reloads = stored > 0 && self->store_lack_count[w] == 0;
    cdc__client_store_new_process(self, w, stored);
    if (was == 0 || reloads)
        return;
    int64_t now = (int64_t) cdc__clock_ms();
    self->empty_returns[w] = now - self->empty_at_ms[w] < 60000 ? self->empty_returns[w] + 1 : 1;
    self->empty_at_ms[w] = now;
    int shift = self->empty_returns[w] - 2;
    int64_t backoff = shift < 0 ? 0 : shift >= 5 ? 30000 : (int64_t) 1000 << shift;
    self->restore_after_ms[w] = now + backoff;
    if (backoff > 0)
        CDC_LOG_INFOF("worker %d came back empty %d times within a minute of each other: "
                      "its weights are sent again in %.0f s", w, self->empty_returns[w],
                      (double) backoff / 1000.0);
}

/* Under the call lock, at a call's start or between calls (the heartbeat
   thread): read the data sockets (acks of restores, stale replies), learn
   which workers are new processes or lost their connection, send returning
   workers and spares the weights their slots need (slots.h), and time the
   repair. */
void cdc__client_restore_pass(cdc_client_t *self)
{
    drain_stale(self);
    int count = self->count;
    uint64_t live, instance[CDC_MAX_WORKERS], stored[CDC_MAX_WORKERS];
    uint64_t departures[CDC_MAX_WORKERS];
    pthread_mutex_lock(&self->state_lock);
    live = self->live;
    int64_t last_departure_us = self->last_departure_us;
    for (int w = 0; w < count; w++) {
        instance[w] = self->peers[w].has_status ? self->peers[w].status.instance : 0;
        stored[w] = self->peers[w].has_status ? self->peers[w].status.stored : 0;
        departures[w] = self->departures[w];
    }
    pthread_mutex_unlock(&self->state_lock);
    cdc_slots_t *slots = self->slots;
    slots->worker_count = count;
    uint64_t restorable = live;
    int64_t now_ms = (int64_t) cdc__clock_ms();
    for (int w = 0; w < count; w++) {
        if (departures[w] != self->deaths_seen[w]) {
            cdc__slots_connection_lost(slots, w);
            self->deaths_seen[w] = departures[w];
        }
        note_instance(self, w, instance[w], stored[w]);
        if (now_ms < self->restore_after_ms[w])
            restorable &= ~(UINT64_C(1) << w);
    }
    uint64_t before = slots->background_bytes;
    cdc_slot_io_t io = {restore_send_weights, cdc__client_send_data_ping, self};
    cdc__slots_restore(slots, restorable, &io);
    self->counters.background_weight_bytes += slots->background_bytes - before;
    track_redundancy(self, live, last_departure_us);
    self->last_pass_ms = (int64_t) cdc__clock_ms();
}

int cdc__client_set_homes(cdc_client_t *self, const int *home_of_slot, int slots)
{
    pthread_mutex_lock(&self->lock);
    int rc = cdc__slots_set_homes(self->slots, home_of_slot, slots, self->count);
    if (rc == CDC_OK) {
        self->homes_given = 1; /* cdc__client_discovery_homes leaves them alone */
        /* The new homes' weights go in the next restore pass, soon. */
        atomic_store(&self->restoring, 1);
        CDC_LOG_INFOF("homes of %d slots set; the rest on the other workers", slots);
    }
    pthread_mutex_unlock(&self->lock);
    return rc;
}

int cdc__client_stage(cdc_client_t *self, uint64_t token, int needed,
                      const cdc_slot_weight_t *block, int count, const int *order)
{
    if (count < 1 || count > CDC_MAX_WORKERS)
        return 0;
    cdc_slot_weight_t weight[CDC_MAX_WORKERS];
    for (int s = 0; s < count; s++) {
        uint32_t sample[CDC_OPERAND_SAMPLE];
        weight[s] = block[s];
        weight[s].key = cdc__client_wire_key(
            block[s].key, s, needed, block[s].rows, block[s].k,
            cdc__operand_sample_of(block[s].data, block[s].source, block[s].rows, block[s].k,
                                   sample));
    }
    pthread_mutex_lock(&self->lock);
    cdc__slots_stage(self->slots, token, weight, count, order);
    int staged = cdc__slots_staged(self->slots, token) == 1;
    if (!staged)
        atomic_store(&self->restoring, 1); /* the heartbeat thread moves it on */
    pthread_mutex_unlock(&self->lock);
    return staged;
}

void cdc__client_unstage(cdc_client_t *self, uint64_t token)
{
    pthread_mutex_lock(&self->lock);
    cdc__slots_unstage(self->slots, token);
    pthread_mutex_unlock(&self->lock);
}

int cdc__client_repairing(cdc_client_t *self)
{
    pthread_mutex_lock(&self->lock);
    int repairing = self->degraded_since_us >= 0;
    pthread_mutex_unlock(&self->lock);
    return repairing;
}

int cdc__client_free_workers(cdc_client_t *self, uint64_t *mask)
{
    uint64_t planned, free_now = 0, ready[CDC_MAX_WORKERS];
    cdc__client_planned(self, &planned);
    pthread_mutex_lock(&self->lock);
    cdc__slots_ready(self->slots, ready);
    for (int w = 0; w < self->count; w++)
        if ((planned & (UINT64_C(1) << w)) && ready[w])
            free_now |= UINT64_C(1) << w;
    pthread_mutex_unlock(&self->lock);
    if (mask)
        *mask = free_now;
    return cdc__popcount64(free_now);
}
