/* test_slots.c - the plan's slots without sockets: manifests and their
   holds, background restores through fake sends, acknowledgements, new
   instances, lost connections, when redundancy is full, and moved homes. */
#include "slots.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#define BIT(w) (UINT64_C(1) << (w))

/* ---- fakes: a hold that counts its frees, sends that record ---------------- */

typedef struct {
    cdc_hold_t hold;
    float data[16];
    int *freed;
} held_block_t;

static void held_block_free(cdc_hold_t *hold)
{
    held_block_t *block = (held_block_t *) hold;
    (*block->freed)++;
    free(block);
}

static held_block_t *held_block_new(int *freed)
{
    held_block_t *block = calloc(1, sizeof *block);
    ck_assert_ptr_nonnull(block);
    cdc__hold_init(&block->hold, held_block_free);
    block->freed = freed;
    return block;
}

static cdc_slot_weight_t weight_of(held_block_t *block, uint64_t key)
{
    return (cdc_slot_weight_t){key, 4, 4, block->data, &block->hold, 0, NULL};
}

/* A staging's blocks for count slots: block's weights under keys
   first_key, first_key + 1, ... */
static void staged_blocks(held_block_t *block, uint64_t first_key, int count,
                          cdc_slot_weight_t *out)
{
    for (int s = 0; s < count; s++)
        out[s] = weight_of(block, first_key + (uint64_t) s);
}

typedef struct {
    int weights_sent[8];  /* per worker */
    uint64_t last_key[8];
    int pings[8];
    uint64_t last_token[8];
    int refuse;           /* sends fail (no connection) */
} fake_io_t;

static int fake_send_weights(void *ctx, int w, const cdc_slot_weight_t *weight,
                             uint64_t *bytes)
{
    fake_io_t *io = ctx;
    *bytes = 0;
    if (io->refuse)
        return CDC_ETIMEDOUT;
    *bytes = (uint64_t) weight->rows * (uint64_t) weight->k * sizeof(float);
    io->weights_sent[w]++;
    io->last_key[w] = weight->key;
    return CDC_OK;
}

static int fake_send_ping(void *ctx, int w, uint64_t token)
{
    fake_io_t *io = ctx;
    if (io->refuse)
        return CDC_ETIMEDOUT;
    io->pings[w]++;
    io->last_token[w] = token;
    return CDC_OK;
}

/* Slots for workers workers after a first call of count shards, every home
   ready (nothing to hold yet). */
static void slots_start(cdc_slots_t *slots, int workers, int count, fake_io_t *fake,
                        cdc_slot_io_t *io)
{
    cdc__slots_init(slots);
    slots->worker_count = workers;
    memset(fake, 0, sizeof *fake);
    *io = (cdc_slot_io_t){fake_send_weights, fake_send_ping, fake};
    cdc__slots_call(slots, NULL, count);
    cdc__slots_restore(slots, BIT(workers) - 1, io);
}

/* ---- tests ------------------------------------------------------------------ */

START_TEST(test_homes_ready_without_weights)
{
    cdc_slots_t *slots = malloc(sizeof *slots);
    fake_io_t fake;
    cdc_slot_io_t io;
    slots_start(slots, 5, 5, &fake, &io);
    for (int w = 0; w < 5; w++)
        ck_assert_uint_eq(slots->workers[w].ready, BIT(w));
    ck_assert(cdc__slots_full(slots, BIT(5) - 1));
    ck_assert(!cdc__slots_full(slots, (BIT(5) - 1) & ~BIT(2)));
    cdc__slots_fini(slots);
    free(slots);
}
END_TEST

/* A home that got its weights on the call path stays ready; a returning
   empty one (new instance) is sent them in the background and is ready
   once it acknowledged them, not before. */
START_TEST(test_new_instance_restored_in_background)
{
    cdc_slots_t *slots = malloc(sizeof *slots);
    fake_io_t fake;
    cdc_slot_io_t io;
    int freed = 0;
    slots_start(slots, 5, 5, &fake, &io);
    held_block_t *blocks[5];
    for (int s = 0; s < 5; s++) {
        blocks[s] = held_block_new(&freed);
        cdc__slots_sent(slots, s, 100 + s); /* the call path */
        cdc__slots_instance(slots, s, 1000 + s);
        cdc_slot_weight_t weight = weight_of(blocks[s], 100 + s);
        cdc__slots_note(slots, s, &weight, s);
    }
    cdc__slots_restore(slots, BIT(5) - 1, &io);
    for (int w = 0; w < 5; w++)
        ck_assert_uint_eq(slots->workers[w].ready, BIT(w)); /* sticky */
    ck_assert_int_eq(fake.weights_sent[1], 0);
    /* Another instance on a connection that never dropped: not believed
       (a worker that lies would be re-sent its weights every heartbeat). */
    ck_assert_int_eq(cdc__slots_instance(slots, 1, 2001), 1);
    ck_assert_uint_eq(slots->workers[1].ready, BIT(1));
    ck_assert_uint_eq(slots->workers[1].instance, 1001);
    /* Worker 1's connection dropped, and a new process answered: it holds
       nothing. */
    cdc__slots_connection_lost(slots, 1);
    ck_assert_int_eq(cdc__slots_instance(slots, 1, 2001), 0);
    ck_assert_uint_eq(slots->workers[1].ready, 0);
    ck_assert(!cdc__slots_full(slots, BIT(5) - 1));
    cdc__slots_restore(slots, BIT(5) - 1, &io);
    ck_assert_int_eq(fake.weights_sent[1], 1);
    ck_assert_uint_eq(fake.last_key[1], 101);
    /* The ack PING behind it (an earlier one acknowledged the call path's). */
    ck_assert_uint_eq(fake.last_token[1], slots->workers[1].sent_seq);
    ck_assert_uint_eq(slots->background_sent, 1);
    ck_assert_uint_eq(slots->background_bytes, 4 * 4 * sizeof(float));
    ck_assert_uint_eq(slots->workers[1].ready, 0); /* sent, not acknowledged */
    cdc__slots_restore(slots, BIT(5) - 1, &io);
    ck_assert_int_eq(fake.weights_sent[1], 1); /* not again */
    cdc__slots_acked(slots, 1, fake.last_token[1]);
    cdc__slots_restore(slots, BIT(5) - 1, &io);
    ck_assert_uint_eq(slots->workers[1].ready, BIT(1));
    ck_assert(cdc__slots_full(slots, BIT(5) - 1));
    /* The layers go: the manifest lets go of their weights at the next pass. */
    for (int s = 0; s < 5; s++)
        cdc__hold_retire(&blocks[s]->hold);
    ck_assert_int_eq(freed, 0);
    cdc__slots_restore(slots, BIT(5) - 1, &io);
    ck_assert_int_eq(freed, 5);
    for (int s = 0; s < 5; s++)
        ck_assert_int_eq(slots->manifest_count[s], 0);
    cdc__slots_fini(slots);
    free(slots);
}
END_TEST

/* Live owners' weights stay in the manifest until fini releases them. */
START_TEST(test_fini_releases_holds)
{
    cdc_slots_t *slots = malloc(sizeof *slots);
    fake_io_t fake;
    cdc_slot_io_t io;
    int freed = 0;
    slots_start(slots, 3, 3, &fake, &io);
    held_block_t *block = held_block_new(&freed);
    cdc_slot_weight_t weight = weight_of(block, 7);
    cdc__slots_note(slots, 0, &weight, 0);
    cdc__slots_note(slots, 0, &weight, 0); /* touched, not added twice */
    ck_assert_int_eq(slots->manifest_count[0], 1);
    cdc__hold_release(&block->hold); /* the owner's reference, not retired */
    ck_assert_int_eq(freed, 0);
    cdc__slots_fini(slots);
    ck_assert_int_eq(freed, 1);
    free(slots);
}
END_TEST

/* A spare is sent every slot's weights and can then stand in for any. */
START_TEST(test_spare_holds_every_slot)
{
    cdc_slots_t *slots = malloc(sizeof *slots);
    fake_io_t fake;
    cdc_slot_io_t io;
    int freed = 0;
    slots_start(slots, 6, 5, &fake, &io); /* worker 5 is the spare */
    ck_assert_uint_eq(slots->workers[5].ready, BIT(5) - 1); /* nothing to hold yet */
    held_block_t *block = held_block_new(&freed);
    for (int s = 0; s < 5; s++) {
        cdc__slots_sent(slots, s, 10 + s);
        cdc_slot_weight_t weight = weight_of(block, 10 + s);
        cdc__slots_note(slots, s, &weight, s);
    }
    ck_assert_uint_eq(slots->workers[5].ready, 0); /* it lacks them now */
    cdc__slots_restore(slots, BIT(6) - 1, &io);
    ck_assert_int_eq(fake.weights_sent[5], 5);
    ck_assert_int_eq(fake.pings[5], 2); /* one proved its connection, one follows the weights */
    uint64_t ready[6];
    cdc__slots_ready(slots, ready);
    ck_assert_uint_eq(ready[5], 0); /* busy: weights not yet acknowledged */
    ck_assert_uint_eq(ready[0], BIT(0));
    cdc__slots_acked(slots, 5, fake.last_token[5]);
    cdc__slots_restore(slots, BIT(6) - 1, &io);
    ck_assert_uint_eq(slots->workers[5].ready, BIT(5) - 1);
    cdc__slots_ready(slots, ready);
    ck_assert_uint_eq(ready[5], BIT(5) - 1);
    /* Home 3 dies: the spare covers it, redundancy stays full. */
    ck_assert(cdc__slots_full(slots, (BIT(6) - 1) & ~BIT(3)));
    /* Two homes die: one spare cannot cover both. */
    ck_assert(!cdc__slots_full(slots, (BIT(6) - 1) & ~BIT(3) & ~BIT(1)));
    cdc__hold_release(&block->hold);
    cdc__slots_fini(slots);
    ck_assert_int_eq(freed, 1);
    free(slots);
}
END_TEST

/* A spare standing in for a slot gets no other slot's weights until the
   home takes its slot back: its queue is that slot's work. */
START_TEST(test_standing_in_left_alone)
{
    cdc_slots_t *slots = malloc(sizeof *slots);
    fake_io_t fake;
    cdc_slot_io_t io;
    int freed = 0;
    slots_start(slots, 3, 2, &fake, &io); /* worker 2 is the spare */
    held_block_t *block = held_block_new(&freed);
    int shards[2] = {0, 1}, placed[2] = {0, 2}; /* home 1 out, the spare stands in */
    cdc__slots_placed(slots, shards, placed, 2);
    for (int s = 0; s < 2; s++) {
        cdc__slots_sent(slots, placed[s], 30 + s);
        cdc_slot_weight_t weight = weight_of(block, 30 + (uint64_t) s);
        cdc__slots_note(slots, s, &weight, placed[s]);
    }
    int before = fake.weights_sent[2];
    cdc__slots_restore(slots, BIT(0) | BIT(2), &io);
    ck_assert_int_eq(fake.weights_sent[2], before); /* slot 0's weights: not now */
    int home_back[2] = {0, 1};
    cdc__slots_placed(slots, shards, home_back, 2);
    cdc__slots_restore(slots, BIT(3) - 1, &io);
    ck_assert_int_eq(fake.weights_sent[2], before + 1);
    ck_assert_uint_eq(fake.last_key[2], 30);
    cdc__hold_release(&block->hold);
    cdc__slots_fini(slots);
    free(slots);
}
END_TEST

/* At most CDC_SLOT_UNACKED weights in flight per worker; the rest follow as
   acknowledgements come. */
START_TEST(test_unacknowledged_window)
{
    cdc_slots_t *slots = malloc(sizeof *slots);
    fake_io_t fake;
    cdc_slot_io_t io;
    int freed = 0;
    slots_start(slots, 2, 1, &fake, &io); /* worker 1: a spare of slot 0 */
    held_block_t *block = held_block_new(&freed);
    const int layers = CDC_SLOT_UNACKED + 4;
    for (int i = 0; i < layers; i++) {
        cdc__slots_sent(slots, 0, 500 + (uint64_t) i);
        cdc_slot_weight_t weight = weight_of(block, 500 + (uint64_t) i);
        cdc__slots_note(slots, 0, &weight, 0);
    }
    cdc__slots_restore(slots, BIT(2) - 1, &io);
    ck_assert_int_eq(fake.weights_sent[1], CDC_SLOT_UNACKED);
    cdc__slots_restore(slots, BIT(2) - 1, &io);
    ck_assert_int_eq(fake.weights_sent[1], CDC_SLOT_UNACKED);
    cdc__slots_acked(slots, 1, fake.last_token[1]);
    cdc__slots_restore(slots, BIT(2) - 1, &io);
    ck_assert_int_eq(fake.weights_sent[1], layers);
    ck_assert_uint_eq(slots->workers[1].ready, 0);
    cdc__slots_acked(slots, 1, fake.last_token[1]);
    cdc__slots_restore(slots, BIT(2) - 1, &io);
    ck_assert_uint_eq(slots->workers[1].ready, BIT(0));
    cdc__hold_release(&block->hold);
    cdc__slots_fini(slots);
    free(slots);
}
END_TEST

/* A lost connection may have lost what was not acknowledged: sent again.
   A send that fails (no connection) is not remembered, and a worker whose
   connection is not proven is not ready, even with nothing to hold. */
START_TEST(test_connection_lost_resends)
{
    cdc_slots_t *slots = malloc(sizeof *slots);
    fake_io_t fake;
    cdc_slot_io_t io;
    int freed = 0;
    slots_start(slots, 2, 1, &fake, &io);
    held_block_t *block = held_block_new(&freed);
    cdc__slots_sent(slots, 0, 42);
    cdc_slot_weight_t weight = weight_of(block, 42);
    cdc__slots_note(slots, 0, &weight, 0);
    fake.refuse = 1;
    cdc__slots_connection_lost(slots, 0);
    cdc__slots_restore(slots, BIT(2) - 1, &io);
    ck_assert(!cdc__slots_has(slots, 1, 42));
    cdc__slots_forget(slots, 0, 42);
    ck_assert_uint_eq(slots->workers[0].ready, 0);
    cdc__slots_restore(slots, BIT(2) - 1, &io);
    ck_assert_uint_eq(slots->workers[0].ready, 0); /* no connection proven */
    fake.refuse = 0;
    cdc__slots_restore(slots, BIT(2) - 1, &io);
    ck_assert(cdc__slots_has(slots, 1, 42));
    ck_assert_int_eq(fake.weights_sent[1], 1);
    cdc__slots_connection_lost(slots, 1);
    ck_assert(!cdc__slots_has(slots, 1, 42));
    cdc__slots_restore(slots, BIT(2) - 1, &io);
    ck_assert_int_eq(fake.weights_sent[1], 2);
    cdc__slots_acked(slots, 1, fake.last_token[1]);
    cdc__slots_connection_lost(slots, 1); /* acknowledged: kept */
    ck_assert(cdc__slots_has(slots, 1, 42));
    /* A stale token (from before) never acknowledges newer sends. */
    cdc__slots_acked(slots, 1, 0);
    ck_assert_uint_eq(slots->workers[1].acked_seq, slots->workers[1].sent_seq);
    /* MISS: forgotten, and not ready for the slot that needs it. */
    cdc__slots_restore(slots, BIT(2) - 1, &io);
    ck_assert_uint_eq(slots->workers[1].ready, BIT(0));
    cdc__slots_forget(slots, 1, 42);
    ck_assert_uint_eq(slots->workers[1].ready, 0);
    cdc__hold_release(&block->hold);
    cdc__slots_fini(slots);
    free(slots);
}
END_TEST

/* Views of a call's memory (no hold) are never kept for later. */
START_TEST(test_unheld_weights_not_kept)
{
    cdc_slots_t *slots = malloc(sizeof *slots);
    fake_io_t fake;
    cdc_slot_io_t io;
    slots_start(slots, 3, 3, &fake, &io);
    float data[16] = {0};
    cdc_slot_weight_t weight = {9, 4, 4, data, NULL, 0, NULL};
    cdc__slots_note(slots, 1, &weight, 1);
    ck_assert_int_eq(slots->manifest_count[1], 0);
    cdc__slots_fini(slots);
    free(slots);
}
END_TEST

/* ---- homes: the slot-to-home map ------------------------------------------- */

/* A map is distinct workers in range; the slots past it take the other
   workers in order; a bad map is refused with a message naming the fault
   and leaves the map as it was. */
START_TEST(test_set_homes_validates)
{
    cdc_slots_t *slots = malloc(sizeof *slots);
    cdc__slots_init(slots);
    slots->worker_count = 6;
    for (int s = 0; s < 6; s++)
        ck_assert_int_eq(cdc__slots_home(slots, s), s);
    ck_assert_int_eq(cdc__slots_home(slots, 6), -1); /* no such worker */
    const int parity_first[2] = {4, 0};
    ck_assert_int_eq(cdc__slots_set_homes(slots, parity_first, 2, 6), CDC_OK);
    const int want[6] = {4, 0, 1, 2, 3, 5};
    for (int s = 0; s < 6; s++)
        ck_assert_int_eq(cdc__slots_home(slots, s), want[s]);
    const int twice[3] = {1, 2, 1}, outside[2] = {0, 6}, negative[1] = {-1};
    ck_assert_int_eq(cdc__slots_set_homes(slots, twice, 3, 6), CDC_EINVAL);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "worker 1 is home of slots 0 and 2"));
    ck_assert_int_eq(cdc__slots_set_homes(slots, outside, 2, 6), CDC_EINVAL);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "slot 1's home 6 is no worker (0..5)"));
    ck_assert_int_eq(cdc__slots_set_homes(slots, negative, 1, 6), CDC_EINVAL);
    ck_assert_int_eq(cdc__slots_set_homes(slots, want, 7, 6), CDC_EINVAL);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "7 slots given, there are 6 workers"));
    ck_assert_int_eq(cdc__slots_set_homes(slots, NULL, 2, 6), CDC_EINVAL);
    for (int s = 0; s < 6; s++)
        ck_assert_int_eq(cdc__slots_home(slots, s), want[s]); /* unchanged */
    ck_assert_int_eq(cdc__slots_set_homes(slots, NULL, 0, 6), CDC_OK);
    for (int s = 0; s < 6; s++)
        ck_assert_int_eq(cdc__slots_home(slots, s), s);
    cdc__slots_fini(slots);
    free(slots);
}
END_TEST

/* The homes of slots 0 and 4 swap: each worker stays ready for the slot it
   holds (redundancy stays full, the old holders serve), and the restore
   sends each new home its slot's weights; acknowledged, it is ready for
   it. A spare (home of no slot) is the worker past the map's slots. */
START_TEST(test_moved_home_restored)
{
    cdc_slots_t *slots = malloc(sizeof *slots);
    fake_io_t fake;
    cdc_slot_io_t io;
    int freed = 0;
    slots_start(slots, 5, 5, &fake, &io);
    held_block_t *block = held_block_new(&freed);
    for (int s = 0; s < 5; s++) {
        cdc__slots_sent(slots, s, 60 + (uint64_t) s);
        cdc_slot_weight_t weight = weight_of(block, 60 + (uint64_t) s);
        cdc__slots_note(slots, s, &weight, s);
    }
    cdc__slots_restore(slots, BIT(5) - 1, &io);
    for (int w = 0; w < 5; w++)
        ck_assert_uint_eq(slots->workers[w].ready, BIT(w));
    const int swapped[5] = {4, 1, 2, 3, 0};
    ck_assert_int_eq(cdc__slots_set_homes(slots, swapped, 5, 5), CDC_OK);
    ck_assert(cdc__slots_full(slots, BIT(5) - 1)); /* the old holders */
    int sent_before[5];
    memcpy(sent_before, fake.weights_sent, sizeof sent_before);
    cdc__slots_restore(slots, BIT(5) - 1, &io);
    ck_assert_int_eq(fake.weights_sent[0] - sent_before[0], 1);
    ck_assert_uint_eq(fake.last_key[0], 64); /* slot 4's */
    ck_assert_int_eq(fake.weights_sent[4] - sent_before[4], 1);
    ck_assert_uint_eq(fake.last_key[4], 60); /* slot 0's */
    for (int w = 1; w < 4; w++)
        ck_assert_int_eq(fake.weights_sent[w], sent_before[w]); /* at home already */
    ck_assert(cdc__slots_busy(slots, BIT(5) - 1));
    ck_assert_uint_eq(slots->workers[0].ready, BIT(0)); /* not yet acknowledged */
    cdc__slots_acked(slots, 0, fake.last_token[0]);
    cdc__slots_acked(slots, 4, fake.last_token[4]);
    cdc__slots_restore(slots, BIT(5) - 1, &io);
    ck_assert_uint_eq(slots->workers[0].ready, BIT(0) | BIT(4));
    ck_assert_uint_eq(slots->workers[4].ready, BIT(4) | BIT(0));
    /* Worker 0 dies: worker 4 holds slots 0 and 4 but serves one. */
    ck_assert(!cdc__slots_full(slots, (BIT(5) - 1) & ~BIT(0)));
    /* Placed at the new homes: nobody stands in. */
    int shards[5] = {0, 1, 2, 3, 4}, placed[5] = {4, 1, 2, 3, 0};
    cdc__slots_placed(slots, shards, placed, 5);
    ck_assert_uint_eq(slots->standing_in, 0);
    /* The old placement is standing in now. */
    int old_placed[5] = {0, 1, 2, 3, 4};
    cdc__slots_placed(slots, shards, old_placed, 5);
    ck_assert_uint_eq(slots->standing_in, BIT(0) | BIT(4));
    cdc__hold_release(&block->hold);
    cdc__slots_fini(slots);
    free(slots);
}
END_TEST

/* Homes of a 4-slot call on workers 5, 0, 1, 2: workers 3 and 4 are the
   spares, sent every slot's weights; worker 5, a home, only its own. */
START_TEST(test_spares_are_homeless_workers)
{
    cdc_slots_t *slots = malloc(sizeof *slots);
    fake_io_t fake;
    cdc_slot_io_t io;
    int freed = 0;
    slots_start(slots, 6, 4, &fake, &io);
    const int homes[4] = {5, 0, 1, 2};
    ck_assert_int_eq(cdc__slots_set_homes(slots, homes, 4, 6), CDC_OK);
    held_block_t *block = held_block_new(&freed);
    for (int s = 0; s < 4; s++) {
        cdc_slot_weight_t weight = weight_of(block, 80 + (uint64_t) s);
        cdc__slots_note(slots, s, &weight, -1);
    }
    memset(fake.weights_sent, 0, sizeof fake.weights_sent);
    cdc__slots_restore(slots, BIT(6) - 1, &io);
    const int want[6] = {1, 1, 1, 4, 4, 1};
    for (int w = 0; w < 6; w++)
        ck_assert_int_eq(fake.weights_sent[w], want[w]);
    ck_assert_uint_eq(fake.last_key[5], 80);
    uint64_t ready[6];
    cdc__slots_ready(slots, ready);
    ck_assert_uint_eq(ready[3], 0); /* a busy spare */
    for (int w = 0; w < 6; w++)
        cdc__slots_acked(slots, w, fake.last_token[w]);
    cdc__slots_restore(slots, BIT(6) - 1, &io);
    ck_assert_uint_eq(slots->workers[5].ready, BIT(0));
    ck_assert_uint_eq(slots->workers[3].ready, BIT(4) - 1);
    ck_assert(cdc__slots_full(slots, (BIT(6) - 1) & ~BIT(5) & ~BIT(0)));
    ck_assert(!cdc__slots_full(slots, (BIT(6) - 1) & ~BIT(5) & ~BIT(0) & ~BIT(3)));
    cdc__hold_release(&block->hold);
    cdc__slots_fini(slots);
    free(slots);
}
END_TEST

/* A call of 5 slots whose data shard 3 has no rows (a 3-row operand cut
   in 4 blocks: known zero, not sent): its 4 tasks are shards 0, 1, 2, 4. The slots are still 0..4: worker 4
   is slot 4's home, not a spare, so it is sent no other slot's weights and
   cannot stand in for a dead home; with home 2 dead redundancy is not full
   after such a call, as after the calls with all 5 tasks. (The slots once
   followed the task count: slot 4 was dropped, worker 4 made a spare, and
   redundancy flipped between the two kinds of call, each flip a repair.) */
START_TEST(test_shard_kept_here_keeps_its_slot)
{
    cdc_slots_t *slots = malloc(sizeof *slots);
    fake_io_t fake;
    cdc_slot_io_t io;
    int freed = 0;
    slots_start(slots, 5, 5, &fake, &io);
    held_block_t *block = held_block_new(&freed);
    const int shards[4] = {0, 1, 2, 4};
    cdc__slots_call(slots, shards, 4);
    ck_assert_int_eq(slots->slot_count, 5);
    for (int t = 0; t < 4; t++) {
        int s = shards[t];
        cdc__slots_sent(slots, s, 90 + (uint64_t) s);
        cdc_slot_weight_t weight = weight_of(block, 90 + (uint64_t) s);
        cdc__slots_note(slots, s, &weight, s);
    }
    memset(fake.weights_sent, 0, sizeof fake.weights_sent);
    cdc__slots_restore(slots, BIT(5) - 1, &io);
    ck_assert_int_eq(fake.weights_sent[4], 0); /* a home: it holds its own */
    for (int w = 0; w < 5; w++)
        cdc__slots_acked(slots, w, slots->workers[w].sent_seq);
    uint64_t live = (BIT(5) - 1) & ~BIT(2);
    cdc__slots_call(slots, shards, 4);
    cdc__slots_restore(slots, live, &io);
    ck_assert_int_eq(fake.weights_sent[4], 0);
    ck_assert_uint_eq(slots->workers[4].ready, BIT(4));
    ck_assert(!cdc__slots_full(slots, live));
    cdc__slots_call(slots, NULL, 5); /* a call with all five tasks */
    cdc__slots_restore(slots, live, &io);
    ck_assert(!cdc__slots_full(slots, live));
    ck_assert(cdc__slots_full(slots, BIT(5) - 1));
    cdc__hold_release(&block->hold);
    cdc__slots_fini(slots);
    free(slots);
}
END_TEST

/* ---- staging: a re-sized layout's blocks -------------------------------- */

/* Every worker acknowledges what it was sent, then a pass. */
static void ack_all_and_pass(cdc_slots_t *slots, fake_io_t *fake, cdc_slot_io_t *io,
                             int workers, uint64_t live)
{
    for (int w = 0; w < workers; w++)
        cdc__slots_acked(slots, w, fake->last_token[w]);
    cdc__slots_restore(slots, live, io);
}

/* Five homes holding their old blocks (keys 100 + s, sent on the call
   path and acknowledged), and new blocks to stage (200 + s) in staged. */
static void five_homes_to_restage(cdc_slots_t *slots, fake_io_t *fake, cdc_slot_io_t *io,
                                  int *freed, held_block_t **old, held_block_t **fresh,
                                  cdc_slot_weight_t *staged)
{
    slots_start(slots, 5, 5, fake, io);
    *old = held_block_new(freed);
    *fresh = held_block_new(freed);
    for (int s = 0; s < 5; s++) {
        cdc__slots_sent(slots, s, 100 + (uint64_t) s);
        cdc_slot_weight_t weight = weight_of(*old, 100 + (uint64_t) s);
        cdc__slots_note(slots, s, &weight, s);
        staged[s] = weight_of(*fresh, 200 + (uint64_t) s);
    }
    ack_all_and_pass(slots, fake, io, 5, BIT(5) - 1);
}

/* Five homes hold their old blocks (keys 100 + s). New blocks (200 + s)
   are staged one slot at a time, in the order given: the slot being staged
   is the only one without a ready worker; the next starts only after its
   home acknowledged and is ready again; none starts while another slot is
   already lost (a dead home); the staging is done once every home holds
   its block, and then forgotten. */
START_TEST(test_staged_one_slot_at_a_time)
{
    cdc_slots_t *slots = malloc(sizeof *slots);
    fake_io_t fake;
    cdc_slot_io_t io;
    int freed = 0;
    const uint64_t all = BIT(5) - 1;
    held_block_t *old, *fresh;
    cdc_slot_weight_t staged[5];
    five_homes_to_restage(slots, &fake, &io, &freed, &old, &fresh, staged);
    ck_assert(cdc__slots_full(slots, all));
    ck_assert_int_eq(cdc__slots_staged(slots, 7), -1);
    const int order[5] = {3, 0, 4, 1, 2};
    cdc__slots_stage(slots, 7, staged, 5, order);
    cdc__slots_stage(slots, 7, staged, 5, order); /* again: only asks */
    ck_assert_int_eq(slots->staging_count, 1);
    ck_assert(cdc__slots_staging(slots));

    for (int step = 0; step < 5; step++) {
        int s = order[step];
        memset(fake.weights_sent, 0, sizeof fake.weights_sent);
        cdc__slots_restore(slots, all, &io);
        ck_assert_int_eq(slots->staging_slot, s);
        for (int w = 0; w < 5; w++) /* only its home is sent anything */
            ck_assert_int_eq(fake.weights_sent[w], w == s);
        ck_assert_uint_eq(fake.last_key[s], 200 + (uint64_t) s);
        ck_assert_uint_eq(slots->workers[s].ready, 0); /* an erasure meanwhile */
        ck_assert(!cdc__slots_full(slots, all));
        ck_assert_int_eq(cdc__slots_staged(slots, 7), 0);
        cdc__slots_restore(slots, all, &io); /* unacknowledged: nothing new */
        ck_assert_int_eq(slots->staging_slot, s);
        ck_assert_int_eq(fake.weights_sent[s], 1);
        if (step == 1) {
            /* Worker 4 dies after slot 0 is staged: no slot starts while its
               slot is lost too; once it is back, staging goes on. */
            ack_all_and_pass(slots, &fake, &io, 5, all & ~BIT(4));
            cdc__slots_restore(slots, all & ~BIT(4), &io);
            ck_assert_int_eq(slots->staging_slot, -1);
            for (int w = 0; w < 5; w++)
                ck_assert_int_eq(fake.weights_sent[w], w == s);
            continue;
        }
        ack_all_and_pass(slots, &fake, &io, 5, all);
        ck_assert_uint_eq(slots->workers[s].ready, BIT(s)); /* both blocks held */
    }
    ck_assert_int_eq(cdc__slots_staged(slots, 7), 1);
    ck_assert(!cdc__slots_staging(slots));
    ck_assert_int_eq(cdc__slots_staged(slots, 7), -1); /* forgotten */
    cdc__slots_restore(slots, all, &io);
    ck_assert(cdc__slots_full(slots, all));
    cdc__hold_release(&old->hold);
    cdc__hold_release(&fresh->hold);
    cdc__slots_fini(slots);
    ck_assert_int_eq(freed, 2);
    free(slots);
}
END_TEST

/* Homes moved (slots 0 and 4 swapped) while their old homes still serve
   them, and new blocks staged with those two slots first: staging slot 4
   would keep its new home (worker 0, the only holder of slot 0's old
   weights) busy, and slot 0 too would have no worker; so the staging
   starts with a slot whose home moved nowhere, and the swapped slots follow
   once their new homes hold their old weights. A call never has more than
   the one slot being staged without a ready worker. */
START_TEST(test_staging_waits_for_moved_homes)
{
    cdc_slots_t *slots = malloc(sizeof *slots);
    fake_io_t fake;
    cdc_slot_io_t io;
    int freed = 0;
    const uint64_t all = BIT(5) - 1;
    held_block_t *old, *fresh;
    cdc_slot_weight_t staged[5];
    five_homes_to_restage(slots, &fake, &io, &freed, &old, &fresh, staged);
    const int swapped[5] = {4, 1, 2, 3, 0};
    ck_assert_int_eq(cdc__slots_set_homes(slots, swapped, 5, 5), CDC_OK);
    const int order[5] = {4, 0, 1, 2, 3};
    cdc__slots_stage(slots, 7, staged, 5, order);
    cdc__slots_restore(slots, all, &io);
    ck_assert_int_eq(slots->staging_slot, 1);
    for (int step = 0; step < 30 && cdc__slots_staged(slots, 7) != 1; step++) {
        uint64_t ready[CDC_MAX_WORKERS];
        cdc__slots_ready(slots, ready);
        int without = 0; /* slots no worker is ready for */
        for (int t = 0; t < 5; t++) {
            int any = 0;
            for (int w = 0; w < 5; w++)
                any |= (ready[w] >> t) & 1;
            without += !any;
        }
        ck_assert_int_le(without, 1);
        ack_all_and_pass(slots, &fake, &io, 5, all);
    }
    ck_assert_int_eq(cdc__slots_staged(slots, 7), -1); /* done, and forgotten */
    cdc__hold_release(&old->hold);
    cdc__hold_release(&fresh->hold);
    cdc__slots_fini(slots);
    free(slots);
}
END_TEST

/* A staging whose owner let go of the blocks (a re-size replaced them, the
   layer went) is dropped, and fini releases what is still staged. */
START_TEST(test_staging_dropped_with_its_blocks)
{
    cdc_slots_t *slots = malloc(sizeof *slots);
    fake_io_t fake;
    cdc_slot_io_t io;
    int freed = 0;
    slots_start(slots, 3, 3, &fake, &io);
    held_block_t *first = held_block_new(&freed), *second = held_block_new(&freed);
    cdc_slot_weight_t a[3], b[3];
    staged_blocks(first, 300, 3, a);
    staged_blocks(second, 400, 3, b);
    cdc__slots_stage(slots, 1, a, 3, NULL);
    cdc__slots_stage(slots, 2, b, 3, NULL);
    ck_assert_int_eq(slots->staging_count, 2);
    cdc__hold_retire(&first->hold);
    ck_assert_int_eq(freed, 0); /* the stagings hold it */
    cdc__slots_restore(slots, BIT(3) - 1, &io);
    ck_assert_int_eq(slots->staging_count, 1);
    ck_assert_int_eq(cdc__slots_staged(slots, 1), -1);
    ck_assert_int_eq(cdc__slots_staged(slots, 2), 0);
    ck_assert_int_eq(slots->staging_slot, 0); /* the order given: NULL, slot order */
    cdc__slots_fini(slots);
    ck_assert_int_eq(freed, 1);
    cdc__hold_release(&second->hold);
    ck_assert_int_eq(freed, 2);
    free(slots);
}
END_TEST

/* Three homes, and a staging (token 9, blocks key + s) under way: slot 0's
   home has been sent its block and not acknowledged it. Returns the block,
   the caller's to let go. */
static held_block_t *three_homes_staging_slot0(cdc_slots_t *slots, fake_io_t *fake,
                                               cdc_slot_io_t *io, int *freed, uint64_t key)
{
    slots_start(slots, 3, 3, fake, io);
    held_block_t *block = held_block_new(freed);
    cdc_slot_weight_t staged[3];
    staged_blocks(block, key, 3, staged);
    cdc__slots_stage(slots, 9, staged, 3, NULL);
    cdc__slots_restore(slots, BIT(3) - 1, io);
    ck_assert_int_eq(slots->staging_slot, 0);
    ck_assert_int_eq(fake->weights_sent[0], 1);
    return block;
}

/* The owner re-sizes again while a slot's home is taking in a block: the
   staging is dropped, but that home stays out of the calls (not ready for
   any slot) until it acknowledged what it was sent, since a task would wait
   behind the transfer; then it serves again and nothing else is staged. */
START_TEST(test_dropped_staging_drains_first)
{
    cdc_slots_t *slots = malloc(sizeof *slots);
    fake_io_t fake;
    cdc_slot_io_t io;
    int freed = 0;
    const uint64_t all = BIT(3) - 1;
    held_block_t *block = three_homes_staging_slot0(slots, &fake, &io, &freed, 500);
    cdc__hold_retire(&block->hold);
    cdc__slots_restore(slots, all, &io);
    ck_assert_int_eq(cdc__slots_staged(slots, 9), -1); /* dropped */
    uint64_t ready[3];
    cdc__slots_ready(slots, ready);
    ck_assert_uint_eq(ready[0], 0);
    ck_assert(!cdc__slots_full(slots, all));
    ck_assert(cdc__slots_staging(slots)); /* the passes go on until it drained */
    ack_all_and_pass(slots, &fake, &io, 3, all);
    cdc__slots_restore(slots, all, &io);
    ck_assert_int_eq(slots->staging_slot, -1);
    cdc__slots_ready(slots, ready);
    ck_assert_uint_eq(ready[0], BIT(0));
    ck_assert(cdc__slots_full(slots, all));
    ck_assert(!cdc__slots_staging(slots));
    cdc__slots_fini(slots);
    ck_assert_int_eq(freed, 1);
    free(slots);
}
END_TEST

/* The plan gives a staging up (other lengths chosen) while a slot's home
   takes in its block: the staging and its blocks leave the manifests, no
   other home is sent anything for it, the home serves again once it
   acknowledged what was on the wire, and the blocks' holds are let go. */
START_TEST(test_unstaged_stops_sending)
{
    cdc_slots_t *slots = malloc(sizeof *slots);
    fake_io_t fake;
    cdc_slot_io_t io;
    int freed = 0;
    const uint64_t all = BIT(3) - 1;
    held_block_t *block = three_homes_staging_slot0(slots, &fake, &io, &freed, 800);
    cdc__slots_unstage(slots, 10); /* not staged: nothing */
    ck_assert_int_eq(cdc__slots_staged(slots, 9), 0);
    ck_assert_int_eq(slots->manifest_count[0], 1);
    cdc__slots_unstage(slots, 9);
    ck_assert_int_eq(cdc__slots_staged(slots, 9), -1);
    ck_assert_int_eq(slots->manifest_count[0], 0);
    for (int pass = 0; pass < 4; pass++)
        ack_all_and_pass(slots, &fake, &io, 3, all);
    ck_assert_int_eq(slots->staging_slot, -1);
    ck_assert(cdc__slots_full(slots, all));
    ck_assert(!cdc__slots_staging(slots));
    for (int w = 0; w < 3; w++)
        ck_assert_int_eq(fake.weights_sent[w], w == 0);
    ck_assert_int_eq(freed, 0); /* its owner still holds it */
    cdc__hold_release(&block->hold);
    ck_assert_int_eq(freed, 1);
    cdc__slots_fini(slots);
    free(slots);
}
END_TEST

/* A second re-size comes while a slot's home takes in the first one's
   block: that home is sent the second's block too before the staging moves
   on (the slot was picked before the second staging existed, and waiting
   for a block nobody sends would leave the slot erased for good); both
   stagings then finish, one slot at a time. */
START_TEST(test_staging_added_while_a_slot_stages)
{
    cdc_slots_t *slots = malloc(sizeof *slots);
    fake_io_t fake;
    cdc_slot_io_t io;
    int freed = 0;
    const uint64_t all = BIT(3) - 1;
    slots_start(slots, 3, 3, &fake, &io);
    held_block_t *first = held_block_new(&freed), *second = held_block_new(&freed);
    cdc_slot_weight_t a[3], b[3];
    staged_blocks(first, 600, 3, a);
    staged_blocks(second, 700, 3, b);
    cdc__slots_stage(slots, 1, a, 3, NULL);
    cdc__slots_restore(slots, all, &io);
    ck_assert_int_eq(slots->staging_slot, 0);
    ck_assert_uint_eq(fake.last_key[0], 600);
    cdc__slots_stage(slots, 2, b, 3, NULL);
    ack_all_and_pass(slots, &fake, &io, 3, all);
    ck_assert_int_eq(slots->staging_slot, 0); /* still slot 0: the second block */
    ck_assert_uint_eq(fake.last_key[0], 700);
    for (int pass = 0; pass < 8 && cdc__slots_staging(slots); pass++)
        ack_all_and_pass(slots, &fake, &io, 3, all);
    ck_assert_int_eq(cdc__slots_staged(slots, 1), 1);
    ck_assert_int_eq(cdc__slots_staged(slots, 2), 1);
    for (int w = 0; w < 3; w++)
        ck_assert_int_eq(fake.weights_sent[w], 2); /* each block once */
    ck_assert(cdc__slots_full(slots, all));
    cdc__slots_fini(slots);
    cdc__hold_release(&first->hold);
    cdc__hold_release(&second->hold);
    ck_assert_int_eq(freed, 2);
    free(slots);
}
END_TEST

static Suite *slots_suite(void)
{
    Suite *suite = suite_create("slots");
    TCase *tcase = tcase_create("slots");
    tcase_add_test(tcase, test_homes_ready_without_weights);
    tcase_add_test(tcase, test_new_instance_restored_in_background);
    tcase_add_test(tcase, test_fini_releases_holds);
    tcase_add_test(tcase, test_spare_holds_every_slot);
    tcase_add_test(tcase, test_standing_in_left_alone);
    tcase_add_test(tcase, test_unacknowledged_window);
    tcase_add_test(tcase, test_connection_lost_resends);
    tcase_add_test(tcase, test_unheld_weights_not_kept);
    suite_add_tcase(suite, tcase);
    TCase *homes = tcase_create("homes");
    tcase_add_test(homes, test_set_homes_validates);
    tcase_add_test(homes, test_moved_home_restored);
    tcase_add_test(homes, test_spares_are_homeless_workers);
    tcase_add_test(homes, test_shard_kept_here_keeps_its_slot);
    suite_add_tcase(suite, homes);
    TCase *staging = tcase_create("staging");
    tcase_add_test(staging, test_staged_one_slot_at_a_time);
    tcase_add_test(staging, test_staging_waits_for_moved_homes);
    tcase_add_test(staging, test_staging_dropped_with_its_blocks);
    tcase_add_test(staging, test_dropped_staging_drains_first);
    tcase_add_test(staging, test_unstaged_stops_sending);
    tcase_add_test(staging, test_staging_added_while_a_slot_stages);
    suite_add_tcase(suite, staging);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(slots_suite());
}
