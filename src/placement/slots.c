/* slots.c - the plan's slots, their homes and their background restore (slots.h). */
#include "slots.h"

#include "error.h"
#include "placement.h"

#include <string.h>

#define BIT(s) (UINT64_C(1) << (s))

void cdc__slots_init(cdc_slots_t *slots)
{
    memset(slots, 0, sizeof *slots);
    slots->staging_slot = -1;
    cdc__slots_set_homes(slots, NULL, 0, 0);
}

/* CDC_OK when home_of_slot[0..count-1] names distinct workers of
   worker_count; else CDC_EINVAL saying why. */
static int homes_invalid(const int *home_of_slot, int count, int worker_count)
{
    if (count < 0 || count > worker_count)
        return cdc__fail(CDC_EINVAL, "homes: %d slots given, there are %d workers", count,
                         worker_count);
    if (count > 0 && !home_of_slot)
        return cdc__fail(CDC_EINVAL, "homes: %d slots given and no map", count);
    int slot_of[CDC_MAX_WORKERS];
    for (int w = 0; w < CDC_MAX_WORKERS; w++)
        slot_of[w] = -1;
    for (int s = 0; s < count; s++) {
        int w = home_of_slot[s];
        if (w < 0 || w >= worker_count)
            return cdc__fail(CDC_EINVAL, "homes: slot %d's home %d is no worker (0..%d)", s,
                             w, worker_count - 1);
        if (slot_of[w] >= 0)
            return cdc__fail(CDC_EINVAL, "homes: worker %d is home of slots %d and %d", w,
                             slot_of[w], s);
        slot_of[w] = s;
    }
    return CDC_OK;
}

int cdc__slots_set_homes(cdc_slots_t *slots, const int *home_of_slot, int count,
                         int worker_count)
{
    int rc = homes_invalid(home_of_slot, count, worker_count);
    if (rc != CDC_OK)
        return rc;
    uint64_t taken = 0;
    for (int s = 0; s < count; s++) {
        slots->home_of_slot[s] = home_of_slot[s];
        taken |= BIT(home_of_slot[s]);
    }
    /* The slots past the map: the other workers, ascending (none given:
       slot s on worker s). */
    for (int s = count, w = 0; s < CDC_MAX_WORKERS; s++, w++) {
        while (taken & BIT(w))
            w++;
        slots->home_of_slot[s] = w;
    }
    for (int s = 0; s < CDC_MAX_WORKERS; s++)
        slots->slot_of_home[slots->home_of_slot[s]] = s;
    return CDC_OK;
}

int cdc__slots_home(const cdc_slots_t *slots, int s)
{
    if (s < 0 || s >= CDC_MAX_WORKERS || slots->home_of_slot[s] >= slots->worker_count)
        return -1;
    return slots->home_of_slot[s];
}

/* The slot of the latest call whose home w is, or -1 (a spare). */
static int slot_homed_on(const cdc_slots_t *slots, int w)
{
    int s = slots->slot_of_home[w];
    return s < slots->slot_count ? s : -1;
}

static void staging_remove(cdc_slots_t *slots, int i)
{
    cdc_slot_staging_t *g = &slots->staging[i];
    for (int s = 0; s < g->count; s++)
        cdc__hold_release(g->weight[s].hold);
    memmove(g, g + 1, (size_t) (slots->staging_count - i - 1) * sizeof *g);
    slots->staging_count--;
}

void cdc__slots_fini(cdc_slots_t *slots)
{
    while (slots->staging_count > 0)
        staging_remove(slots, slots->staging_count - 1);
    for (int s = 0; s < CDC_MAX_WORKERS; s++) {
        for (int i = 0; i < slots->manifest_count[s]; i++)
            cdc__hold_release(slots->manifest[s][i].hold);
        slots->manifest_count[s] = 0;
    }
}

static int key_index(const cdc_slot_worker_t *w, uint64_t key)
{
    for (int i = 0; i < w->key_count; i++)
        if (w->keys[i] == key)
            return i;
    return -1;
}

static void remove_key(cdc_slot_worker_t *w, int i)
{
    memmove(&w->keys[i], &w->keys[i + 1], (size_t) (w->key_count - i - 1) * sizeof w->keys[0]);
    memmove(&w->seq[i], &w->seq[i + 1], (size_t) (w->key_count - i - 1) * sizeof w->seq[0]);
    w->key_count--;
}

int cdc__slots_has(const cdc_slots_t *slots, int w, uint64_t key)
{
    return key_index(&slots->workers[w], key) >= 0;
}

void cdc__slots_sent(cdc_slots_t *slots, int w, uint64_t key)
{
    cdc_slot_worker_t *worker = &slots->workers[w];
    int i = key_index(worker, key);
    if (i >= 0)
        remove_key(worker, i);
    if (worker->key_count == CDC_SLOT_KEYS_PER_WORKER)
        remove_key(worker, 0);
    worker->keys[worker->key_count] = key;
    worker->seq[worker->key_count++] = ++worker->sent_seq;
    worker->connected = 1;
}

void cdc__slots_forget(cdc_slots_t *slots, int w, uint64_t key)
{
    cdc_slot_worker_t *worker = &slots->workers[w];
    int i = key_index(worker, key);
    if (i >= 0)
        remove_key(worker, i);
    /* A slot whose manifest names the key needs it again. */
    for (int s = 0; s < slots->slot_count; s++)
        for (int e = 0; e < slots->manifest_count[s]; e++)
            if (slots->manifest[s][e].key == key)
                worker->ready &= ~BIT(s);
}

void cdc__slots_acked(cdc_slots_t *slots, int w, uint64_t token)
{
    cdc_slot_worker_t *worker = &slots->workers[w];
    if (token <= worker->sent_seq && token > worker->acked_seq)
        worker->acked_seq = token;
}

void cdc__slots_connection_lost(cdc_slots_t *slots, int w)
{
    cdc_slot_worker_t *worker = &slots->workers[w];
    for (int i = worker->key_count - 1; i >= 0; i--)
        if (worker->seq[i] > worker->acked_seq)
            remove_key(worker, i);
    worker->pinged_seq = worker->acked_seq;
    worker->connected = 0;
    worker->gone = 1;
}

void cdc__slots_new_process(cdc_slots_t *slots, int w)
{
    cdc_slot_worker_t *worker = &slots->workers[w];
    worker->key_count = 0;
    worker->ready = 0;
    worker->acked_seq = worker->pinged_seq = worker->sent_seq;
    worker->connected = 0;
    worker->gone = 1;
}

int cdc__slots_instance(cdc_slots_t *slots, int w, uint64_t instance)
{
    cdc_slot_worker_t *worker = &slots->workers[w];
    if (instance == 0 || instance == worker->instance)
        return 0;
    if (worker->instance != 0 && !worker->gone) {
        worker->instances_refused++;
        return 1;
    }
    worker->gone = 0;
    if (worker->instance != 0) {
        /* Another process on this endpoint: its cache is empty. Old acks
           (seq numbers at most sent_seq) can no longer count. */
        worker->key_count = 0;
        worker->ready = 0;
        worker->acked_seq = worker->pinged_seq = worker->sent_seq;
    }
    worker->instance = instance;
    return 0;
}

void cdc__slots_call(cdc_slots_t *slots, const int *shards, int count)
{
    slots->stamp++;
    int top = shards ? 0 : count;
    for (int t = 0; shards && t < count; t++)
        if (shards[t] >= top)
            top = shards[t] + 1;
    slots->slot_count = top < CDC_MAX_WORKERS ? top : CDC_MAX_WORKERS;
}

void cdc__slots_placed(cdc_slots_t *slots, const int *shards, const int *worker_of, int count)
{
    slots->standing_in = 0;
    for (int t = 0; t < count; t++)
        if (worker_of[t] >= 0 && worker_of[t] != cdc__slots_home(slots, shards[t]))
            slots->standing_in |= BIT(worker_of[t]);
}

/* The manifest entry for key in slot s, or -1. */
static int manifest_index(const cdc_slots_t *slots, int s, uint64_t key)
{
    for (int e = 0; e < slots->manifest_count[s]; e++)
        if (slots->manifest[s][e].key == key)
            return e;
    return -1;
}

static void manifest_remove(cdc_slots_t *slots, int s, int e)
{
    cdc__hold_release(slots->manifest[s][e].hold);
    cdc_slot_weight_t *m = slots->manifest[s];
    memmove(&m[e], &m[e + 1], (size_t) (slots->manifest_count[s] - e - 1) * sizeof m[0]);
    slots->manifest_count[s]--;
}

void cdc__slots_note(cdc_slots_t *slots, int s, const cdc_slot_weight_t *weight, int served_by)
{
    if (s < 0 || s >= CDC_MAX_WORKERS || !weight->hold || cdc__hold_retired(weight->hold) ||
        weight->rows == 0)
        return; /* a view of the call's memory cannot be shipped later; an
                   empty block is never sent */
    int e = manifest_index(slots, s, weight->key);
    if (e >= 0) {
        slots->manifest[s][e].used = slots->stamp;
        return;
    }
    if (slots->manifest_count[s] == CDC_SLOT_MANIFEST) {
        int oldest = 0;
        for (int i = 1; i < CDC_SLOT_MANIFEST; i++)
            if (slots->manifest[s][i].used < slots->manifest[s][oldest].used)
                oldest = i;
        manifest_remove(slots, s, oldest);
    }
    cdc_slot_weight_t *entry = &slots->manifest[s][slots->manifest_count[s]++];
    *entry = *weight;
    entry->used = slots->stamp;
    cdc__hold_retain(entry->hold);
    for (int w = 0; w < slots->worker_count; w++)
        if (w != served_by && !cdc__slots_has(slots, w, weight->key))
            slots->workers[w].ready &= ~BIT(s);
}

/* Weights whose owner let go (a destroyed layer) are never asked for again. */
static void manifest_prune(cdc_slots_t *slots)
{
    for (int s = 0; s < slots->slot_count; s++)
        for (int e = slots->manifest_count[s] - 1; e >= 0; e--)
            if (cdc__hold_retired(slots->manifest[s][e].hold))
                manifest_remove(slots, s, e);
}

/* Send worker w what slot s lacks, within the unacknowledged window; mark
   it ready when it holds and acknowledged all of it. */
static void restore_slot(cdc_slots_t *slots, int w, int s, const cdc_slot_io_t *io)
{
    cdc_slot_worker_t *worker = &slots->workers[w];
    int complete = 1;
    for (int e = 0; e < slots->manifest_count[s]; e++) {
        const cdc_slot_weight_t *weight = &slots->manifest[s][e];
        int i = key_index(worker, weight->key);
        if (i >= 0) {
            complete &= worker->seq[i] <= worker->acked_seq;
            continue;
        }
        complete = 0;
        if (worker->sent_seq - worker->acked_seq >= CDC_SLOT_UNACKED)
            continue; /* the window is full: the next pass goes on */
        uint64_t bytes;
        if (io->send_weights(io->ctx, w, weight, &bytes) != CDC_OK)
            continue; /* not now (no connection, queue full): the next pass */
        cdc__slots_sent(slots, w, weight->key);
        slots->background_bytes += bytes;
        slots->background_sent++;
    }
    if (complete && worker->connected)
        worker->ready |= BIT(s);
}

/* ---- staging: a re-sized layout's blocks, one slot at a time ---------- */

static int staging_index(const cdc_slots_t *slots, uint64_t token)
{
    for (int i = 0; i < slots->staging_count; i++)
        if (slots->staging[i].token == token)
            return i;
    return -1;
}

void cdc__slots_stage(cdc_slots_t *slots, uint64_t token, const cdc_slot_weight_t *weight,
                      int count, const int *order)
{
    if (token == 0 || count < 1 || count > CDC_MAX_WORKERS || staging_index(slots, token) >= 0)
        return;
    for (int s = 0; s < count; s++)
        if (!weight[s].hold)
            return; /* a view of a call's memory cannot be sent later */
    if (slots->staging_count == CDC_SLOT_STAGINGS)
        staging_remove(slots, 0);
    cdc_slot_staging_t *g = &slots->staging[slots->staging_count++];
    g->token = token;
    g->count = count;
    for (int s = 0; s < count; s++) {
        g->weight[s] = weight[s];
        g->weight[s].used = 0;
        cdc__hold_retain(g->weight[s].hold);
        g->order[s] = order ? order[s] : s;
    }
}

/* Whether worker w holds key and acknowledged it. */
static int holds_acked(const cdc_slots_t *slots, int w, uint64_t key)
{
    const cdc_slot_worker_t *worker = &slots->workers[w];
    int i = key_index(worker, key);
    return i >= 0 && worker->seq[i] <= worker->acked_seq;
}

/* Whether slot s's home holds staging g's block for s (none, or an empty
   block, which is never sent: yes). */
static int slot_staged(const cdc_slots_t *slots, const cdc_slot_staging_t *g, int s)
{
    if (s >= g->count || g->weight[s].rows == 0)
        return 1;
    int home = cdc__slots_home(slots, s);
    return home >= 0 && holds_acked(slots, home, g->weight[s].key);
}

int cdc__slots_staged(cdc_slots_t *slots, uint64_t token)
{
    int i = staging_index(slots, token);
    if (i < 0)
        return -1;
    for (int s = 0; s < slots->staging[i].count; s++) {
        /* And ready for its slot: a home moved meanwhile may hold the new
           block before the rest of its slot's manifest, and then the
           calls' tasks of that slot would go where the new block is not. */
        int home = cdc__slots_home(slots, s);
        if (!slot_staged(slots, &slots->staging[i], s) ||
            (home >= 0 && !(slots->workers[home].ready & BIT(s))))
            return 0;
    }
    staging_remove(slots, i);
    return 1;
}

void cdc__slots_unstage(cdc_slots_t *slots, uint64_t token)
{
    int i = staging_index(slots, token);
    if (i < 0)
        return;
    const cdc_slot_staging_t *g = &slots->staging[i];
    for (int s = 0; s < g->count && s < slots->slot_count; s++)
        for (int e = slots->manifest_count[s] - 1; e >= 0; e--)
            if (slots->manifest[s][e].key == g->weight[s].key &&
                slots->manifest[s][e].hold == g->weight[s].hold)
                manifest_remove(slots, s, e);
    staging_remove(slots, i);
}

int cdc__slots_staging(const cdc_slots_t *slots)
{
    return slots->staging_count > 0 || slots->staging_slot >= 0;
}

/* The home of the slot being staged while what it was sent is not all
   acknowledged, else -1. Not ready for any slot: a task would wait behind
   the transfer, also one whose staging was dropped on the way (the owner
   re-sized again), which no manifest asks for any more. */
static int staging_home_busy(const cdc_slots_t *slots)
{
    int home = slots->staging_slot >= 0 ? cdc__slots_home(slots, slots->staging_slot) : -1;
    if (home < 0 || slots->workers[home].sent_seq <= slots->workers[home].acked_seq)
        return -1;
    return home;
}

/* Whether every slot but `except` (-1: none) has a distinct live worker
   ready for it, with worker `busy` (-1: none) ready for nothing. */
static int covered(const cdc_slots_t *slots, uint64_t live, int busy, int except)
{
    int shards[CDC_MAX_WORKERS], worker_of[CDC_MAX_WORKERS];
    uint64_t ready[CDC_MAX_WORKERS];
    for (int s = 0; s < slots->slot_count; s++)
        shards[s] = s;
    for (int w = 0; w < slots->worker_count; w++)
        ready[w] = w == busy ? 0 : slots->workers[w].ready;
    /* Every slot tolerable: nothing goes where its weights are not. */
    cdc__placement_slots(shards, slots->slot_count, slots->worker_count, slots->home_of_slot,
                         live, ready, slots->slot_count, worker_of);
    for (int s = 0; s < slots->slot_count; s++)
        if (worker_of[s] < 0 && s != except)
            return 0;
    return 1;
}

/* The next slot to stage: the oldest staging's first (in its order) whose
   home lacks its block and is live, and whose staging leaves every other
   slot a ready worker (its home, busy taking the blocks in, serves none:
   after the homes moved it may be the only holder of another slot's old
   weights, and two slots without a worker are more than r = 1 can lose);
   -1 for none. */
static int staging_next(const cdc_slots_t *slots, uint64_t live)
{
    for (int i = 0; i < slots->staging_count; i++) {
        const cdc_slot_staging_t *g = &slots->staging[i];
        for (int j = 0; j < g->count; j++) {
            int s = g->order[j], home = cdc__slots_home(slots, s);
            if (home >= 0 && (live & BIT(home)) && !slot_staged(slots, g, s) &&
                covered(slots, live, home, s))
                return s;
        }
    }
    return -1;
}

/* Every staging's block for slot s that its home lacks, into s's manifest
   (the restore sends them); whether any was lacking. */
static int staging_note_lacking(cdc_slots_t *slots, int s)
{
    int lacking = 0;
    for (int i = 0; i < slots->staging_count; i++)
        if (!slot_staged(slots, &slots->staging[i], s)) {
            cdc__slots_note(slots, s, &slots->staging[i].weight[s], -1);
            lacking = 1;
        }
    return lacking;
}

/* Move the staging on: once the slot being staged has every staging's
   block for it at its home, and every slot has a worker ready for it (no
   other erasure: a dead or returning worker's slot is one), the next slot
   gets every staging's block for it into its manifest (its home is then
   not ready for it, and the restore sends them). */
static void staging_step(cdc_slots_t *slots, uint64_t live)
{
    for (int i = slots->staging_count - 1; i >= 0; i--)
        for (int s = 0; s < slots->staging[i].count; s++)
            if (cdc__hold_retired(slots->staging[i].weight[s].hold)) {
                staging_remove(slots, i); /* its owner let go: never wanted now */
                break;
            }
    /* Its home still taking them in; a staging added since the slot was
       picked has its block noted now, or nobody would send it. */
    int s = slots->staging_slot;
    if ((s >= 0 && staging_note_lacking(slots, s)) || staging_home_busy(slots) >= 0)
        return;
    slots->staging_slot = -1;
    if (slots->staging_count == 0 || !cdc__slots_full(slots, live))
        return;
    s = staging_next(slots, live);
    if (s < 0)
        return;
    staging_note_lacking(slots, s);
    slots->staging_slot = s;
}

void cdc__slots_restore(cdc_slots_t *slots, uint64_t live, const cdc_slot_io_t *io)
{
    manifest_prune(slots);
    staging_step(slots, live);
    /* Homes first: they restore redundancy; spares only add to it. */
    for (int pass = 0; pass < 2; pass++)
        for (int w = 0; w < slots->worker_count; w++) {
            int slot = slot_homed_on(slots, w), home = slot >= 0;
            if (!(live & BIT(w)) || home != (pass == 0) ||
                (!home && (slots->standing_in & BIT(w))))
                continue;
            cdc_slot_worker_t *worker = &slots->workers[w];
            if (!worker->connected) {
                if (io->send_ping(io->ctx, w, worker->sent_seq) != CDC_OK)
                    continue; /* not connected yet: the next pass */
                worker->connected = 1;
                worker->pinged_seq = worker->sent_seq;
            }
            for (int s = home ? slot : 0; s < (home ? slot + 1 : slots->slot_count); s++)
                if (!(worker->ready & BIT(s)))
                    restore_slot(slots, w, s, io);
            if (worker->sent_seq > worker->pinged_seq &&
                io->send_ping(io->ctx, w, worker->sent_seq) == CDC_OK)
                worker->pinged_seq = worker->sent_seq;
        }
}

int cdc__slots_busy(const cdc_slots_t *slots, uint64_t live)
{
    for (int w = 0; w < slots->worker_count; w++)
        if ((live & BIT(w)) && slots->workers[w].sent_seq > slots->workers[w].acked_seq)
            return 1;
    return 0;
}

int cdc__slots_full(const cdc_slots_t *slots, uint64_t live)
{
    return covered(slots, live, staging_home_busy(slots), -1);
}

void cdc__slots_ready(const cdc_slots_t *slots, uint64_t *ready)
{
    for (int w = 0; w < slots->worker_count; w++) {
        const cdc_slot_worker_t *worker = &slots->workers[w];
        /* A spare still taking in weights would serve a slot only after
           caching them: its result would come too late, and tasks would
           pile up behind them. */
        int busy_spare = slot_homed_on(slots, w) < 0 && worker->sent_seq > worker->acked_seq;
        ready[w] = busy_spare || w == staging_home_busy(slots) ? 0 : worker->ready;
    }
}
