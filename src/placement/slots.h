/* slots.h - the plan's slots: where each lives (its home), what its worker
 * must hold, who holds it, and getting it to a worker that returns or a new
 * home, in the background.
 *
 * Shard s of every call is the plan's slot s. Its home is a worker of the
 * slot-to-home map (cdc__slots_set_homes; worker s by default): the planner
 * moves homes, a parity slot to a fast device say. Workers that are home of
 * no slot of the latest call are hot spares. A slot's weights (one row
 * block per layer, under wire keys that name the shard) are remembered in
 * its manifest with a hold (hold.h) on their memory, so that a worker that
 * comes back empty (a respawned process, a new instance), a spare, or a
 * slot's new home can be sent them between calls, without a copy, instead
 * of on the call path.
 *
 * A worker is ready for slot s once it holds every weight in s's manifest
 * and has acknowledged them: a PING sent behind the WEIGHTS on the same
 * ordered pipe, answered, proves they arrived. Ready stays set while the
 * worker keeps them (a new layer's weights sent to it on the call path
 * arrive in order before its task); it is cleared for a new instance (an
 * empty cache), and for a slot whose new weights a worker lacks. A new home
 * is not ready for its slot until the background brought the weights; the
 * slot's previous home, still holding them, serves it meanwhile
 * (placement.h, pass 2).
 *
 * Pure: no sockets, no clock, no locks (the client calls it under its call
 * lock); sending goes through the callbacks in cdc_slot_io_t. */
#ifndef CDC_SLOTS_H_INCLUDED
#define CDC_SLOTS_H_INCLUDED

#include "cdcgemm.h"
#include "hold.h"
#include "operand_source.h"

#include <stdint.h>

#define CDC_SLOT_KEYS_PER_WORKER 256 /* keys remembered; forgetting costs a re-send */
#define CDC_SLOT_MANIFEST 32         /* weights remembered per slot (LRU)         */
#define CDC_SLOT_UNACKED 8           /* background WEIGHTS in flight per worker   */
#define CDC_SLOT_STAGINGS 32         /* operands whose new blocks are staged at once */

/* One weight operand of a slot, as it goes on the wire. */
typedef struct {
    uint64_t key;        /* wire key (names the shard)                        */
    int64_t rows, k;
    const float *data;   /* rows x k, kept alive by hold; NULL: source builds
                            them when they are sent                         */
    cdc_hold_t *hold;    /* one reference owned by the manifest; NULL: a view
                            valid only during the call (never re-shipped)    */
    uint64_t used;       /* call stamp of its last use (LRU)                  */
    const cdc_operand_source_t *source; /* without data: kept alive by hold   */
} cdc_slot_weight_t;

typedef struct {
    /* *bytes: the payload bytes it put on the wire (0 when the worker was
       asked to load the weights from its own store instead) */
    int (*send_weights)(void *ctx, int worker, const cdc_slot_weight_t *weight,
                        uint64_t *bytes);
    int (*send_ping)(void *ctx, int worker, uint64_t token);
    void *ctx;
} cdc_slot_io_t;

/* New blocks of one operand (a re-sized layout) on their way to the slots'
   homes in the background: the calls go on with the blocks the homes hold. */
typedef struct {
    uint64_t token;      /* names it (the plan's); 0: an empty entry          */
    int count;           /* its slots 0..count-1                              */
    cdc_slot_weight_t weight[CDC_MAX_WORKERS]; /* slot s's new block; its hold
                            retained by the entry                           */
    int order[CDC_MAX_WORKERS]; /* the slots, the most urgent first         */
} cdc_slot_staging_t;

/* What the slots know of one worker. */
typedef struct {
    uint64_t keys[CDC_SLOT_KEYS_PER_WORKER]; /* weight keys sent, oldest first */
    uint64_t seq[CDC_SLOT_KEYS_PER_WORKER];  /* the send number of each        */
    int key_count;
    uint64_t sent_seq;   /* WEIGHTS sent to it so far                          */
    uint64_t acked_seq;  /* those acknowledged (a PONG behind them)            */
    uint64_t pinged_seq; /* sent_seq when the last ack PING went               */
    uint64_t instance;   /* the process's own number (its status); 0 unknown  */
    uint64_t ready;      /* bit s: ready to serve slot s                       */
    int connected;       /* a send to it went through since its connection
                            last dropped (the heartbeats' socket is another
                            connection: live does not prove this one)      */
    int gone;            /* it died or left since its instance was taken:
                            only then may another instance replace it     */
    uint64_t instances_refused; /* instance changes ignored: the connection
                            that brought them never dropped              */
} cdc_slot_worker_t;

typedef struct {
    int worker_count;
    int slot_count;      /* the latest call's slots: 0..slot_count-1, its
                            highest shard + 1 (a slot the call sends nothing,
                            an empty data block, is still the plan's);
                            workers home of none of them are spares          */
    int home_of_slot[CDC_MAX_WORKERS]; /* a permutation of 0..63: slot s's
                            home (none when >= worker_count)                  */
    int slot_of_home[CDC_MAX_WORKERS]; /* its inverse: the slot worker w is
                            home of (none when >= slot_count)                 */
    uint64_t stamp;      /* calls seen                                         */
    cdc_slot_worker_t workers[CDC_MAX_WORKERS];
    cdc_slot_weight_t manifest[CDC_MAX_WORKERS][CDC_SLOT_MANIFEST];
    int manifest_count[CDC_MAX_WORKERS];
    uint64_t standing_in;      /* workers the latest call gave a shard other
                                  than their home's: a spare doing a slot's
                                  work gets no other slot's weights meanwhile */
    cdc_slot_staging_t staging[CDC_SLOT_STAGINGS]; /* oldest first           */
    int staging_count;
    int staging_slot;          /* the slot whose home is taking in new blocks
                                  (an erasure meanwhile), -1: none          */
    uint64_t background_bytes; /* weight bytes sent by cdc__slots_restore    */
    uint64_t background_sent;  /* and messages                                */
} cdc_slots_t;

/* Empty, slot s's home worker s. */
void cdc__slots_init(cdc_slots_t *slots);
/* Drop every manifest hold. */
void cdc__slots_fini(cdc_slots_t *slots);

/* Slot s's home is worker home_of_slot[s] for s < count (distinct workers
   in 0..worker_count-1); the slots after them take the other workers in
   ascending order. count 0 (home_of_slot may then be NULL): slot s's home
   is worker s. CDC_EINVAL naming the fault, the map unchanged. Readiness is
   kept: a new home is sent its slot's weights by the next restore. */
int cdc__slots_set_homes(cdc_slots_t *slots, const int *home_of_slot, int count,
                         int worker_count);

/* Slot s's home, or -1 (no such worker, or a slot past the map). */
int cdc__slots_home(const cdc_slots_t *slots, int s);

/* Keys sent to worker w (the call path, or a restore). */
int cdc__slots_has(const cdc_slots_t *slots, int w, uint64_t key);
void cdc__slots_sent(cdc_slots_t *slots, int w, uint64_t key);
/* Worker w said MISS for key: it no longer holds it. */
void cdc__slots_forget(cdc_slots_t *slots, int w, uint64_t key);
/* Worker w answered the ack PING token (its sent_seq when sent). */
void cdc__slots_acked(cdc_slots_t *slots, int w, uint64_t token);
/* Worker w's connection dropped: what was sent but not acknowledged may be
   lost with it. */
void cdc__slots_connection_lost(cdc_slots_t *slots, int w);
/* Worker w is a new process on a new connection (a respawned embedded
   worker on its fresh endpoint): it holds nothing, and no ack from before
   counts. Its instance is kept: the new one's status resets it again,
   harmlessly (nothing is sent to it before that status makes it live). */
void cdc__slots_new_process(cdc_slots_t *slots, int w);
/* Worker w's status named its instance: a new one (a new process) holds
   nothing. Accepted only once the old process is gone (w died or left, a
   connection lost, since the current instance was taken): a new process
   can only answer on a new connection, and a worker that names another
   instance in every PONG on the same one (a bug, or a lie) would otherwise
   be re-sent its weights on every heartbeat. Returns 1 when a change was
   refused for that (the caller may ask again after a departure). */
int cdc__slots_instance(cdc_slots_t *slots, int w, uint64_t instance);

/* A call begins whose count tasks are shards[0..count-1] (NULL: shards
   0..count-1): slot_count follows its highest shard, not its task count,
   since a call may leave a slot out (a data block with no rows, known to
   be zero, or one no worker can hold: call/layout.h), and the slots after
   it are still the plan's: their homes are no spares. */
void cdc__slots_call(cdc_slots_t *slots, const int *shards, int count);
/* Where its tasks went (placement.h): shards[t] on worker_of[t]. */
void cdc__slots_placed(cdc_slots_t *slots, const int *shards, const int *worker_of, int count);
/* Task of slot s used weight (its hold retained by the manifest when not
   NULL) and went to worker served_by (-1: nobody). Workers ready for s that
   lack it are ready no longer. */
void cdc__slots_note(cdc_slots_t *slots, int s, const cdc_slot_weight_t *weight, int served_by);

/* Between calls or at a call's start: for each live worker, the slots it
   should be ready for (a home: its slot; a spare: every slot), homes first,
   send what it lacks (at most CDC_SLOT_UNACKED unacknowledged at a time),
   then an ack PING; mark ready what it holds and acknowledged, once its
   data connection is proven (a PING first, when nothing else was sent). A
   spare standing in for a slot is left alone: its queue is that slot's. */
void cdc__slots_restore(cdc_slots_t *slots, uint64_t live, const cdc_slot_io_t *io);
/* Staged blocks (cdc__slots_stage) go the same way: the pass first moves the
   staging on (the next slot, when the last one's home has acknowledged). */

/* Stage new blocks (a re-sized layout's, weight[s] for slot s, count slots;
   keys are wire keys) under token: the restore passes send them to the
   slots' homes one slot at a time, in order (slot numbers, the first the
   most urgent). The slot being staged gets its new block into its manifest,
   so its home is not ready for it and the calls (which still use the old
   blocks) treat it as an erasure instead of waiting behind the transfer; a
   slot is staged only while every other slot has a worker ready for it, so
   the erasure is the only one. A token already staged (or staging) is left
   as it is. The oldest staging is dropped when CDC_SLOT_STAGINGS are under
   way (its owner stages it again). */
void cdc__slots_stage(cdc_slots_t *slots, uint64_t token, const cdc_slot_weight_t *weight,
                      int count, const int *order);

/* 1 when every slot's home holds token's new block, acknowledged, and is
   ready for its slot (the staging is then forgotten: the calls may switch
   to the new blocks), 0
   while it is under way, -1 for a token not staged (never, or dropped). */
int cdc__slots_staged(cdc_slots_t *slots, uint64_t token);

/* Forget staging `token` (its owner chose other lengths before it was
   all sent): its blocks leave the slots' manifests, so no home or spare is
   sent or waits for them any more; a transfer already on the wire ends as
   it is. Nothing for a token not staged. */
void cdc__slots_unstage(cdc_slots_t *slots, uint64_t token);

/* Whether some staging is under way. */
int cdc__slots_staging(const cdc_slots_t *slots);

/* Whether some live worker has weights sent and not yet acknowledged. */
int cdc__slots_busy(const cdc_slots_t *slots, uint64_t live);

/* Whether every slot has a distinct live worker ready for it (its home or
   another: placement.h's passes 1 and 2). */
int cdc__slots_full(const cdc_slots_t *slots, uint64_t live);

/* ready[0..worker_count-1] for cdc__placement_slots: the workers' ready
   bits, none for a spare with weights still unacknowledged (busy). */
void cdc__slots_ready(const cdc_slots_t *slots, uint64_t *ready);

#endif
