/* slots.c - the plan's fixed slots and their background restore (slots.h). */
#include "slots.h"

#include <string.h>

#define BIT(s) (UINT64_C(1) << (s))

void cdc_slots_init(cdc_slots_t *slots)
{
    memset(slots, 0, sizeof *slots);
}

void cdc_slots_fini(cdc_slots_t *slots)
{
    for (int s = 0; s < CDC_MAX_WORKERS; s++) {
        for (int i = 0; i < slots->manifest_count[s]; i++)
            cdc_hold_release(slots->manifest[s][i].hold);
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

int cdc_slots_has(const cdc_slots_t *slots, int w, uint64_t key)
{
    return key_index(&slots->workers[w], key) >= 0;
}

void cdc_slots_sent(cdc_slots_t *slots, int w, uint64_t key)
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

void cdc_slots_forget(cdc_slots_t *slots, int w, uint64_t key)
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

void cdc_slots_acked(cdc_slots_t *slots, int w, uint64_t token)
{
    cdc_slot_worker_t *worker = &slots->workers[w];
    if (token <= worker->sent_seq && token > worker->acked_seq)
        worker->acked_seq = token;
}

void cdc_slots_connection_lost(cdc_slots_t *slots, int w)
{
    cdc_slot_worker_t *worker = &slots->workers[w];
    for (int i = worker->key_count - 1; i >= 0; i--)
        if (worker->seq[i] > worker->acked_seq)
            remove_key(worker, i);
    worker->pinged_seq = worker->acked_seq;
    worker->connected = 0;
}

void cdc_slots_new_process(cdc_slots_t *slots, int w)
{
    cdc_slot_worker_t *worker = &slots->workers[w];
    worker->key_count = 0;
    worker->ready = 0;
    worker->acked_seq = worker->pinged_seq = worker->sent_seq;
    worker->connected = 0;
}

void cdc_slots_instance(cdc_slots_t *slots, int w, uint64_t instance)
{
    cdc_slot_worker_t *worker = &slots->workers[w];
    if (instance == 0 || instance == worker->instance)
        return;
    if (worker->instance != 0) {
        /* Another process on this endpoint: its cache is empty. Old acks
           (seq numbers at most sent_seq) can no longer count. */
        worker->key_count = 0;
        worker->ready = 0;
        worker->acked_seq = worker->pinged_seq = worker->sent_seq;
    }
    worker->instance = instance;
}

void cdc_slots_call(cdc_slots_t *slots, int count)
{
    slots->stamp++;
    slots->slot_count = count < CDC_MAX_WORKERS ? count : CDC_MAX_WORKERS;
}

void cdc_slots_placed(cdc_slots_t *slots, const int *shards, const int *worker_of, int count)
{
    slots->standing_in = 0;
    for (int t = 0; t < count; t++)
        if (worker_of[t] >= 0 && worker_of[t] != shards[t])
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
    cdc_hold_release(slots->manifest[s][e].hold);
    cdc_slot_weight_t *m = slots->manifest[s];
    memmove(&m[e], &m[e + 1], (size_t) (slots->manifest_count[s] - e - 1) * sizeof m[0]);
    slots->manifest_count[s]--;
}

void cdc_slots_note(cdc_slots_t *slots, int s, const cdc_slot_weight_t *weight, int served_by)
{
    if (s < 0 || s >= CDC_MAX_WORKERS || !weight->hold || cdc_hold_retired(weight->hold))
        return; /* a view of the call's memory cannot be shipped later */
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
    cdc_hold_retain(entry->hold);
    for (int w = 0; w < slots->worker_count; w++)
        if (w != served_by && !cdc_slots_has(slots, w, weight->key))
            slots->workers[w].ready &= ~BIT(s);
}

/* Weights whose owner let go (a destroyed layer) are never asked for again. */
static void manifest_prune(cdc_slots_t *slots)
{
    for (int s = 0; s < slots->slot_count; s++)
        for (int e = slots->manifest_count[s] - 1; e >= 0; e--)
            if (cdc_hold_retired(slots->manifest[s][e].hold))
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
        if (io->send_weights(io->ctx, w, weight) != CDC_OK)
            continue; /* not now (no connection, queue full): the next pass */
        cdc_slots_sent(slots, w, weight->key);
        slots->background_bytes += (uint64_t) weight->rows * (uint64_t) weight->k * sizeof(float);
        slots->background_sent++;
    }
    if (complete && worker->connected)
        worker->ready |= BIT(s);
}

void cdc_slots_restore(cdc_slots_t *slots, uint64_t live, const cdc_slot_io_t *io)
{
    manifest_prune(slots);
    /* Homes first: they restore redundancy; spares only add to it. */
    for (int pass = 0; pass < 2; pass++)
        for (int w = 0; w < slots->worker_count; w++) {
            int home = w < slots->slot_count;
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
            for (int s = home ? w : 0; s < (home ? w + 1 : slots->slot_count); s++)
                if (!(worker->ready & BIT(s)))
                    restore_slot(slots, w, s, io);
            if (worker->sent_seq > worker->pinged_seq &&
                io->send_ping(io->ctx, w, worker->sent_seq) == CDC_OK)
                worker->pinged_seq = worker->sent_seq;
        }
}

int cdc_slots_busy(const cdc_slots_t *slots, uint64_t live)
{
    for (int w = 0; w < slots->worker_count; w++)
        if ((live & BIT(w)) && slots->workers[w].sent_seq > slots->workers[w].acked_seq)
            return 1;
    return 0;
}

int cdc_slots_full(const cdc_slots_t *slots, uint64_t live)
{
    uint64_t used = 0;
    int uncovered[CDC_MAX_WORKERS], count = 0;
    for (int s = 0; s < slots->slot_count; s++) {
        if (s < slots->worker_count && (live & BIT(s)) && (slots->workers[s].ready & BIT(s)))
            used |= BIT(s);
        else
            uncovered[count++] = s;
    }
    for (int i = 0; i < count; i++) {
        int found = 0;
        for (int w = 0; w < slots->worker_count && !found; w++)
            if ((live & BIT(w)) && !(used & BIT(w)) &&
                (slots->workers[w].ready & BIT(uncovered[i]))) {
                used |= BIT(w);
                found = 1;
            }
        if (!found)
            return 0;
    }
    return 1;
}

void cdc_slots_ready(const cdc_slots_t *slots, uint64_t *ready)
{
    for (int w = 0; w < slots->worker_count; w++) {
        const cdc_slot_worker_t *worker = &slots->workers[w];
        /* A spare still taking in weights would serve a slot only after
           caching them: its result would come too late, and tasks would
           pile up behind them. */
        int busy_spare = w >= slots->slot_count && worker->sent_seq > worker->acked_seq;
        ready[w] = busy_spare ? 0 : worker->ready;
    }
}
