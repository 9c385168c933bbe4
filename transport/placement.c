/* placement.c - stable placement of a call's shards on the planned workers. */
#include "placement.h"

#define BIT(w) (UINT64_C(1) << (w))

/* First pass: every shard whose own worker is planned and still unclaimed
   goes there. Returns the claimed workers. */
static uint64_t place_at_home(const int *shards, int count, int worker_count,
                              uint64_t planned_mask, int *worker_of)
{
    uint64_t claimed = 0;
    for (int t = 0; t < count; t++) {
        int s = shards[t];
        worker_of[t] = -1;
        if (s >= 0 && s < worker_count && (planned_mask & BIT(s)) && !(claimed & BIT(s))) {
            worker_of[t] = s;
            claimed |= BIT(s);
        }
    }
    return claimed;
}

void cdc_placement_assign(const int *shards, int count, int worker_count,
                          uint64_t planned_mask, int *worker_of)
{
    int planned[64], planned_count = 0;
    for (int w = 0; w < worker_count && w < 64; w++)
        if (planned_mask & BIT(w))
            planned[planned_count++] = w;
    uint64_t claimed = place_at_home(shards, count, worker_count, planned_mask, worker_of);
    /* Second pass: the homeless shards (their worker left the plan, or a
       replica of a shard already placed) take the spare planned workers in
       order. */
    for (int t = 0, spare = 0; t < count && planned_count; t++) {
        if (worker_of[t] >= 0)
            continue;
        while (spare < planned_count && (claimed & BIT(planned[spare])))
            spare++;
        if (spare < planned_count) {
            worker_of[t] = planned[spare];
            claimed |= BIT(planned[spare]);
        } else {
            worker_of[t] = planned[t % planned_count];
        }
    }
}
