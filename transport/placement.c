/* placement.c - a call's shards on the plan's fixed slots (placement.h). */
#include "placement.h"

#include <stddef.h>

#define BIT(w) (UINT64_C(1) << (w))

static int is_ready(const uint64_t *ready, int w, int slot)
{
    return !ready || (slot >= 0 && slot < 64 && (ready[w] & BIT(slot)));
}

/* Pass 1: every shard whose home is live, ready and unclaimed goes home.
   Returns the claimed workers. */
static uint64_t place_at_home(const int *shards, int count, int worker_count, uint64_t live,
                              const uint64_t *ready, int *worker_of)
{
    uint64_t claimed = 0;
    for (int t = 0; t < count; t++) {
        int s = shards[t];
        worker_of[t] = -1;
        if (s >= 0 && s < worker_count && (live & BIT(s)) && !(claimed & BIT(s)) &&
            is_ready(ready, s, s)) {
            worker_of[t] = s;
            claimed |= BIT(s);
        }
    }
    return claimed;
}

/* Pass 2: homeless shards to live, unclaimed workers ready for their slot.
   Returns how many are still homeless. */
static int place_on_ready(const int *shards, int count, int worker_count, uint64_t live,
                          const uint64_t *ready, uint64_t *claimed, int *worker_of)
{
    int homeless = 0;
    for (int t = 0; t < count; t++) {
        if (worker_of[t] >= 0)
            continue;
        for (int w = 0; w < worker_count && worker_of[t] < 0; w++)
            if ((live & BIT(w)) && !(*claimed & BIT(w)) && is_ready(ready, w, shards[t])) {
                worker_of[t] = w;
                *claimed |= BIT(w);
            }
        homeless += worker_of[t] < 0;
    }
    return homeless;
}

/* Pass 3: the call cannot be decoded without them, so every homeless shard
   goes to a live worker whatever it holds. */
static void place_anywhere(const int *shards, int count, int worker_count, uint64_t live,
                           uint64_t claimed, int *worker_of)
{
    int lives[64], live_count = 0;
    for (int w = 0; w < worker_count; w++)
        if (live & BIT(w))
            lives[live_count++] = w;
    if (live_count == 0)
        return;
    for (int t = 0, next = 0; t < count; t++) {
        if (worker_of[t] >= 0)
            continue;
        int s = shards[t];
        if (s >= 0 && s < worker_count && (live & BIT(s)) && !(claimed & BIT(s))) {
            worker_of[t] = s;
        } else {
            while (next < live_count && (claimed & BIT(lives[next])))
                next++;
            worker_of[t] = next < live_count ? lives[next] : lives[t % live_count];
        }
        claimed |= BIT(worker_of[t]);
    }
}

void cdc_placement_slots(const int *shards, int count, int worker_count, uint64_t live,
                         const uint64_t *ready, int tolerable, int *worker_of)
{
    if (worker_count > 64)
        worker_count = 64;
    uint64_t claimed = place_at_home(shards, count, worker_count, live, ready, worker_of);
    int homeless = place_on_ready(shards, count, worker_count, live, ready, &claimed, worker_of);
    if (homeless > tolerable)
        place_anywhere(shards, count, worker_count, live, claimed, worker_of);
}

void cdc_placement_assign(const int *shards, int count, int worker_count,
                          uint64_t planned_mask, int *worker_of)
{
    cdc_placement_slots(shards, count, worker_count, planned_mask, NULL, 0, worker_of);
}
