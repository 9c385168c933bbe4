/* client_discovery.c - the client's discovery: workers that announce
 * themselves (CDCGEMM_WORKERS=discover), admitted to the client's table by
 * their trusted CURVE key. The beacons are read by the heartbeat thread
 * (client_heartbeat.c); a worker admitted is counted between calls.
 *
 * A beacon proves nothing: anyone on the LAN can replay a trusted worker's
 * beacon with its own address, or send beacons of random keys; only the
 * CURVE handshake proves a key. So the table is guarded by what costs
 * nothing to check (measured before: a replay took a planned slot that
 * never turned live, 70 replayed ports filled the table, a flood of random
 * keys scanned the certificate directory per beacon):
 * - one endpoint per key: a key already in the table at another endpoint
 *   moves there only once its entry has not been live for longer than the
 *   death verdict (CDC_HEARTBEAT_DEAD_MS); a replay of a live worker's
 *   beacon elsewhere is ignored;
 * - an entry that never answered a PING is not planned (cdc__client_admitted)
 *   and is set free after DISCOVERY_NEVER_LIVE_MS, its sockets replaced by
 *   unconnected ones (no more connection attempts); a new key reuses a free
 *   entry, and a full table the never-live entry admitted longest ago, in
 *   place (the slot tables are indexed by worker);
 * - trusted keys are looked up in memory (cdc__trust_find); a pass reads at
 *   most DISCOVERY_BEACONS_PER_PASS beacons, drops the rest unread, and the
 *   listener then rests for DISCOVERY_REST_MS (a flood costs a pass per
 *   rest, not a heartbeat loop per beacon); each refusal is logged once. */
#include "client_internal.h"

#include "clock.h"
#include "discovery.h"
#include "error.h"
#include "hash.h"
#include "keys.h"
#include "log.h"
#include "slots.h"
#include "wire.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Beacons handled per pass, a pass at most every DISCOVERY_REST_MS (25,600
   a second; the rest dropped unread), how long a discovered entry may stay
   never-live before its sockets close and it is free, how often that is
   looked at, how long a (key, host) that never answered is not taken again,
   and how often the refusals remembered (so each is logged once) are
   forgotten. The sizes of those two memories, DISCOVERY_FAILED and
   DISCOVERY_REFUSALS, are in client_internal.h (the client's arrays). */
#define DISCOVERY_BEACONS_PER_PASS 256
#define DISCOVERY_DRAIN_MAX 4096
#define DISCOVERY_NEVER_LIVE_MS (5 * CDC_HEARTBEAT_DEAD_MS)
#define DISCOVERY_AGE_PASS_MS 100
#define DISCOVERY_REST_MS 10
#define DISCOVERY_FAILED_MS 10000  /* (key, host) pairs that never answered are
                                      not taken again for this long          */
#define DISCOVERY_REFUSALS_RESET_MS 60000

/* Log a refusal once per (endpoint, reason) in bounded memory: once
   DISCOVERY_REFUSALS are remembered, new ones go unlogged until the memory
   is cleared, at most once per DISCOVERY_REFUSALS_RESET_MS. */
static void discovery_refuse(cdc_client_t *self, const char *endpoint, const char *reason,
                             const char *detail, int64_t now)
{
    uint64_t h = cdc__hash_bytes(endpoint, strlen(endpoint), 0);
    h = cdc__hash_bytes(reason, strlen(reason), h);
    for (int i = 0; i < self->refused_count; i++)
        if (self->refused[i] == h)
            return;
    if (self->refused_count == DISCOVERY_REFUSALS) {
        if (now - self->refused_reset_ms < DISCOVERY_REFUSALS_RESET_MS)
            return;
        self->refused_count = 0;
    }
    if (self->refused_count == 0)
        self->refused_reset_ms = now;
    self->refused[self->refused_count++] = h;
    CDC_LOG_WARNF("discovery: %s refused: %s%s%s (logged once%s)", endpoint, reason,
                  detail ? ": " : "", detail ? detail : "",
                  self->refused_count == DISCOVERY_REFUSALS
                      ? "; further refusals are not logged for a minute"
                      : "");
}

/* The table entry (counted or pending) at endpoint text, or (by_key)
   holding key text; -1. */
static int entry_of(const cdc_client_t *self, const char *text, int by_key)
{
    for (int w = 0; w < self->count + self->pending; w++)
        if (strcmp(by_key ? self->entry_keys[w] : self->endpoints[w], text) == 0)
            return w;
    return -1;
}

/* Entry w (counted) to the key of cert at endpoint, or (cert NULL) free with
   no connection: its sockets are replaced as for a moved worker
   (cdc__client_move), keeping its index. */
static void entry_retarget(cdc_client_t *self, int w, const char *endpoint,
                           const cdc_curve_cert_t *cert, int64_t now)
{
    uint64_t bit = UINT64_C(1) << w;
    pthread_mutex_lock(&self->state_lock);
    snprintf(self->endpoints[w], sizeof self->endpoints[w], "%s", endpoint);
    if (cert)
        memcpy(self->curve_servers[w], cert->public_key, CDC_CURVE_KEY_BYTES);
    self->moved_data |= bit;
    self->moved_heartbeat |= bit;
    pthread_mutex_unlock(&self->state_lock);
    snprintf(self->entry_keys[w], sizeof self->entry_keys[w], "%s",
             cert ? cert->public_txt : "");
    self->vacant = cert ? self->vacant & ~bit : self->vacant | bit;
    self->entry_since[w] = now;
}

/* key at endpoint's host (tcp://HOST:PORT less :PORT), hashed: an address
   that sends beacons on many ports is one host. */
static uint64_t key_host(const char *key, const char *endpoint)
{
    const char *colon = strrchr(endpoint, ':');
    size_t len = colon ? (size_t) (colon - endpoint) : strlen(endpoint);
    return cdc__hash_bytes(endpoint, len, cdc__hash_bytes(key, strlen(key), 1));
}

/* Remember that key never answered from endpoint's host, so beacons from
   there with it are refused for DISCOVERY_FAILED_MS: without this, a
   replayer sending a key on many ports (or often) took the entry back from
   each new endpoint and the real worker's two beacons a second never won. */
static void failed_note(cdc_client_t *self, const char *key, const char *endpoint, int64_t now)
{
    self->failed[self->failed_next] = key_host(key, endpoint);
    self->failed_ms[self->failed_next] = now;
    self->failed_next = (self->failed_next + 1) % DISCOVERY_FAILED;
}

static int failed_recently(const cdc_client_t *self, const char *key, const char *endpoint,
                           int64_t now)
{
    uint64_t h = key_host(key, endpoint);
    for (int i = 0; i < DISCOVERY_FAILED; i++)
        if (self->failed[i] == h && self->failed_ms[i] > 0 &&
            now - self->failed_ms[i] < DISCOVERY_FAILED_MS)
            return 1;
    return 0;
}

/* A trusted key at entry w heard from another endpoint: the entry moves
   there once it has not been live for longer than the death verdict, and
   not to a host that never answered with this key. */
static void discovery_move(cdc_client_t *self, int w, const char *endpoint, int64_t now)
{
    if (w >= self->count)
        return; /* pending: counted first */
    int live = (self->live & (UINT64_C(1) << w)) != 0;
    int answered_here = live || (self->peers[w].ever_live &&
                                 self->dead_since[w] >= self->entry_since[w]);
    int64_t since = answered_here ? self->dead_since[w] : self->entry_since[w];
    char detail[CDC_CURVE_ENDPOINT_MAX + 48];
    snprintf(detail, sizeof detail, "worker %d holds it at %s", w, self->endpoints[w]);
    if (live || now - since <= CDC_HEARTBEAT_DEAD_MS) {
        discovery_refuse(self, endpoint, "its key is live at another endpoint (or was "
                                         "within the death verdict)", detail, now);
        return;
    }
    if (!answered_here)
        failed_note(self, self->entry_keys[w], self->endpoints[w], now);
    if (failed_recently(self, self->entry_keys[w], endpoint, now)) {
        discovery_refuse(self, endpoint, "its key never answered from this host", detail, now);
        return;
    }
    self->entry_since[w] = now;
    cdc__client_move(self, w, endpoint);
}

static void close_worker(cdc_client_t *self, int w)
{
    if (self->workers[w].socket)
        zmq_close(self->workers[w].socket);
    cdc__client_heartbeat_socket_close(self->peers[w].socket, self->peers[w].monitor);
    memset(&self->workers[w], 0, sizeof self->workers[w]);
    memset(&self->peers[w], 0, sizeof self->peers[w]);
}

/* Worker number count's sockets, connected to endpoint; not yet counted
   (cdc__client_discovery_publish does that). */
static int worker_prepare(cdc_client_t *self, const char *endpoint, const cdc_curve_cert_t *cert)
{
    int w = self->count;
    if (w == CDC_MAX_WORKERS)
        return cdc__fail(CDC_ECONFIG, "discovery: %s not added: %d workers already",
                         endpoint, CDC_MAX_WORKERS);
    memcpy(self->curve_servers[w], cert->public_key, CDC_CURVE_KEY_BYTES);
    int rc = cdc__client_worker_connect(self, w, endpoint);
    if (rc != CDC_OK) {
        close_worker(self, w);
        return rc;
    }
    self->peers[w].next_ping = 0; /* PINGed at once once counted */
    return CDC_OK;
}

/* Where a new key goes: the lowest free entry, else a new one, else (a full
   table) the never-live entry admitted longest ago; -1 when every entry
   has answered a PING. */
static int entry_for_new(const cdc_client_t *self)
{
    for (int w = 0; w < self->count; w++)
        if (self->vacant & (UINT64_C(1) << w))
            return w;
    if (self->count < CDC_MAX_WORKERS)
        return self->count;
    int oldest = -1;
    for (int w = 0; w < self->count; w++)
        if (!self->peers[w].ever_live &&
            (oldest < 0 || self->entry_since[w] < self->entry_since[oldest]))
            oldest = w;
    return oldest;
}

/* A trusted key not in the table: an entry reused in place, or a new one
   (sockets now, counted by cdc__client_discovery_publish; one at a time). */
static void discovery_add(cdc_client_t *self, const cdc_discovered_t *found,
                          const cdc_curve_cert_t *cert, int64_t now)
{
    if (failed_recently(self, cert->public_txt, found->endpoint, now)) {
        discovery_refuse(self, found->endpoint, "its key never answered from this host", NULL,
                         now);
        return;
    }
    int w = entry_for_new(self);
    if (w < 0) {
        discovery_refuse(self, found->endpoint, "not added",
                         "every entry of the table has answered PINGs", now);
        return;
    }
    if (w < self->count) {
        if (!(self->vacant & (UINT64_C(1) << w))) {
            CDC_LOG_WARNF("discovery: worker %d (%s) never answered; the full table gives "
                          "its entry to %s", w, self->endpoints[w], found->endpoint);
            failed_note(self, self->entry_keys[w], self->endpoints[w], now);
        }
        entry_retarget(self, w, found->endpoint, cert, now);
        CDC_LOG_INFOF("discovery: worker %d is %s", w, found->endpoint);
        return;
    }
    if (self->pending)
        return; /* the next beacon comes in 500 ms */
    if (worker_prepare(self, found->endpoint, cert) != CDC_OK) {
        discovery_refuse(self, found->endpoint, "not added", cdc_last_error(), now);
        return;
    }
    snprintf(self->entry_keys[w], sizeof self->entry_keys[w], "%s", cert->public_txt);
    self->entry_since[w] = now;
    pthread_mutex_lock(&self->state_lock);
    self->pending = 1;
    pthread_mutex_unlock(&self->state_lock);
}

/* One beacon: a known endpoint costs a table scan; another protocol
   version or an untrusted key (a lookup in memory) is refused; a key in the
   table may move its entry; a new trusted key gets one. */
static void discovery_take(cdc_client_t *self, const cdc_discovered_t *found, int64_t now)
{
    if (entry_of(self, found->endpoint, 0) >= 0)
        return;
    if (found->version != CDC_PROTO_VERSION) {
        char detail[80];
        snprintf(detail, sizeof detail, "it speaks protocol version %d, this coordinator %d",
                 found->version, CDC_PROTO_VERSION);
        discovery_refuse(self, found->endpoint, "another protocol version", detail, now);
        return;
    }
    cdc_curve_cert_t cert;
    if (cdc__trust_find(self->trust, found->public_txt, now, &cert) != CDC_OK) {
        discovery_refuse(self, found->endpoint, "not trusted", cdc_last_error(), now);
        return;
    }
    int w = entry_of(self, found->public_txt, 1);
    if (w >= 0)
        discovery_move(self, w, found->endpoint, now);
    else
        discovery_add(self, found, &cert, now);
}

/* Entries that never answered a PING within DISCOVERY_NEVER_LIVE_MS (a
   replayed beacon, a worker that cannot reach this coordinator): their
   sockets stop connecting and the entry is free for the next key. */
static void discovery_age(cdc_client_t *self, int64_t now)
{
    for (int w = 0; w < self->count; w++)
        if (!(self->vacant & (UINT64_C(1) << w)) && !self->peers[w].ever_live &&
            now - self->entry_since[w] > DISCOVERY_NEVER_LIVE_MS) {
            CDC_LOG_WARNF("discovery: worker %d (%s) never answered within %d ms: its entry "
                          "is free", w, self->endpoints[w], DISCOVERY_NEVER_LIVE_MS);
            failed_note(self, self->entry_keys[w], self->endpoints[w], now);
            entry_retarget(self, w, "", NULL, now);
        }
}

/* Count a prepared worker: calls and the heartbeat thread see it from now.
   The caller holds self->lock (no call runs) or no thread but its own runs
   yet. */
void cdc__client_discovery_publish(cdc_client_t *self)
{
    pthread_mutex_lock(&self->state_lock);
    int added = self->pending;
    if (added) {
        /* Its never-live time counts from its first PING (the heartbeat
           thread reads it once it sees the new count). */
        self->entry_since[self->count] = (int64_t) cdc__clock_ms();
        self->count++;
        self->pending = 0;
    }
    pthread_mutex_unlock(&self->state_lock);
    if (added)
        CDC_LOG_INFOF("discovery: worker %d is %s", self->count - 1,
                      self->endpoints[self->count - 1]);
}

/* Under self->lock, with discovery and no homes given (cdc__client_set_homes):
   the plan's slots go to the entries that have answered a PING, in index
   order, so a never-live entry below them (a replayed beacon heard first)
   is home of no slot; the others come after (cdc__slots_set_homes). */
void cdc__client_discovery_homes(cdc_client_t *self)
{
    if (!self->listener || self->homes_given)
        return;
    uint64_t answered = 0;
    pthread_mutex_lock(&self->state_lock);
    for (int w = 0; w < self->count; w++)
        if (self->peers[w].ever_live)
            answered |= UINT64_C(1) << w;
    pthread_mutex_unlock(&self->state_lock);
    if (answered == self->homes_answered)
        return;
    self->homes_answered = answered;
    int homes[CDC_MAX_WORKERS], k = 0;
    for (int w = 0; w < self->count; w++)
        if (answered & (UINT64_C(1) << w))
            homes[k++] = w;
    if (cdc__slots_set_homes(self->slots, homes, k, self->count) == CDC_OK)
        atomic_store(&self->restoring, 1); /* the new homes' weights, soon */
}

/* Heartbeat thread: at most DISCOVERY_BEACONS_PER_PASS beacons, the rest
   dropped unread, then the listener is left alone for DISCOVERY_REST_MS
   (a beacon waits at most that long); the ageing; a worker admitted gets
   its sockets here and is counted between calls (a call owns the worker
   count and the data sockets): by the next call, or here when no call
   runs. */
void cdc__client_discovery_poll(cdc_client_t *self, int64_t now)
{
    cdc_discovered_t found;
    int heard = 0;
    while (now >= self->discovery_rest_ms && heard < DISCOVERY_BEACONS_PER_PASS &&
           cdc__listener_next(self->listener, 0, &found) == CDC_OK) {
        heard++;
        discovery_take(self, &found, now);
    }
    if (heard == DISCOVERY_BEACONS_PER_PASS) {
        int dropped = cdc__listener_drain(self->listener, DISCOVERY_DRAIN_MAX);
        if (dropped > 0 && self->beacons_dropped == 0)
            CDC_LOG_WARNF("discovery: more than %d beacons in %d ms: the rest dropped unread "
                          "(logged once)", DISCOVERY_BEACONS_PER_PASS, DISCOVERY_REST_MS);
        self->beacons_dropped += (uint64_t) dropped;
    }
    if (heard > 0)
        self->discovery_rest_ms = now + DISCOVERY_REST_MS;
    if (now >= self->discovery_age_ms) {
        discovery_age(self, now);
        self->discovery_age_ms = now + DISCOVERY_AGE_PASS_MS;
    }
    if (self->pending && pthread_mutex_trylock(&self->lock) == 0) {
        cdc__client_discovery_publish(self);
        pthread_mutex_unlock(&self->lock);
    }
}

/* The first set: beacons for up to wait_ms, ending sooner once a worker was
   heard and no new one for two beacon periods (every worker has beaconed
   by then). */
static void discovery_first_set(cdc_client_t *self, int wait_ms)
{
    int64_t deadline = (int64_t) cdc__clock_ms() + wait_ms, last_new = -1;
    const int64_t settle = 2 * CDC_DISCOVERY_INTERVAL_MS + 100;
    int64_t window = 0;
    for (int heard = 0;;) {
        int64_t now = (int64_t) cdc__clock_ms();
        if (now >= deadline || (last_new >= 0 && now - last_new >= settle))
            break;
        cdc_discovered_t found;
        int slice = deadline - now < 50 ? (int) (deadline - now) : 50;
        if (now - window >= DISCOVERY_REST_MS) {
            window = now;
            heard = 0;
        } else if (heard == DISCOVERY_BEACONS_PER_PASS) { /* a flood: as the thread does */
            cdc__listener_drain(self->listener, DISCOVERY_DRAIN_MAX);
            cdc__sleep_ms(DISCOVERY_REST_MS);
            continue;
        }
        if (cdc__listener_next(self->listener, slice, &found) != CDC_OK)
            continue;
        heard++;
        int before = self->count;
        discovery_take(self, &found, now);
        cdc__client_discovery_publish(self); /* no other thread yet */
        if (self->count != before)
            last_new = (int64_t) cdc__clock_ms();
    }
    if (self->count == 0)
        CDC_LOG_WARNF("discovery: no trusted worker announced itself within %d ms; calls "
                      "run locally until one does", wait_ms);
}

int cdc__client_new_discover(const cdc_discovery_where_t *where, int wait_ms,
                             int connect_wait_ms, const cdc_curve_cert_t *client_cert,
                             const char *trusted, cdc_client_t **client_p)
{
    if (!where || !client_cert || !trusted || !*trusted || !client_p)
        return cdc__fail(CDC_EINVAL, "discovery needs CURVE: a client certificate and the "
                                     "trusted worker certificates");
    cdc_client_t *self = NULL;
    int rc = cdc__client_alloc(client_cert, &self);
    if (rc != CDC_OK)
        return rc;
    if (!(self->trusted = strdup(trusted)))
        rc = cdc__fail(CDC_ENOMEM, "client");
    if (rc == CDC_OK)
        rc = cdc__trust_new(trusted, &self->trust);
    if (rc == CDC_OK)
        rc = cdc__listener_new(where, &self->listener);
    if (rc == CDC_OK) {
        discovery_first_set(self, wait_ms);
        /* No PING before the heartbeat thread: the first set's never-live
           time starts now (it aged real workers heard early). */
        for (int w = 0; w < self->count; w++)
            self->entry_since[w] = (int64_t) cdc__clock_ms();
        rc = cdc__client_heartbeat_start(self);
    }
    if (rc != CDC_OK) {
        cdc__client_free(self);
        return rc;
    }
    cdc__client_wait_for_workers(self, connect_wait_ms);
    *client_p = self;
    return CDC_OK;
}

int cdc__client_admitted(cdc_client_t *self)
{
    if (!self)
        return 0;
    if (!self->listener)
        return self->count;
    pthread_mutex_lock(&self->state_lock);
    int admitted = 0;
    for (int w = 0; w < self->count; w++)
        admitted += self->peers[w].ever_live != 0;
    pthread_mutex_unlock(&self->state_lock);
    return admitted;
}
