/* placement.c - a call's shards on the plan's slots and their homes (placement.h). */
#include "placement.h"

#include <stddef.h>

#define BIT(w) (UINT64_C(1) << (w))

/* One placement in progress: the call's tasks and what is claimed. */
typedef struct {
    const int *shards;
    int count, worker_count;
    const int *home_of_slot;
    uint64_t live;
    const uint64_t *ready;
    int *worker_of;
    int task_on[64]; /* the task worker w took, -1: unclaimed */
} placing_t;

static int home_of(const placing_t *p, int slot)
{
    if (slot < 0 || slot >= p->worker_count)
        return -1;
    int w = p->home_of_slot ? p->home_of_slot[slot] : slot;
    return w >= 0 && w < p->worker_count ? w : -1;
}

static int is_ready(const placing_t *p, int w, int slot)
{
    return !p->ready || (slot >= 0 && slot < 64 && (p->ready[w] & BIT(slot)));
}

static int can_serve(const placing_t *p, int w, int slot)
{
    return (p->live & BIT(w)) && is_ready(p, w, slot);
}

static void claim(placing_t *p, int t, int w)
{
    p->worker_of[t] = w;
    p->task_on[w] = t;
}

/* Pass 1: every shard whose home is live, ready and unclaimed goes home. */
static void place_at_home(placing_t *p)
{
    for (int t = 0; t < p->count; t++) {
        int s = p->shards[t], home = home_of(p, s);
        p->worker_of[t] = -1;
        if (home >= 0 && p->task_on[home] < 0 && can_serve(p, home, s))
            claim(p, t, home);
    }
}

/* Whether task t gets a ready worker not in *visited: a free one, or one
   whose task moves to another ready worker in turn (Kuhn's augmenting path;
   depth at most the 64 workers). */
static int augment(placing_t *p, int t, uint64_t *visited)
{
    for (int w = 0; w < p->worker_count; w++) {
        if ((*visited & BIT(w)) || !can_serve(p, w, p->shards[t]))
            continue;
        *visited |= BIT(w);
        int holder = p->task_on[w];
        if (holder < 0 || augment(p, holder, visited)) {
            claim(p, t, w);
            return 1;
        }
    }
    return 0;
}

/* Pass 2: homeless shards to live, unclaimed workers ready for their slot,
   the lowest first; failing that, by an augmenting path. Returns how many
   are still homeless. */
static int place_on_ready(placing_t *p)
{
    int homeless = 0;
    for (int t = 0; t < p->count; t++) {
        if (p->worker_of[t] >= 0)
            continue;
        for (int w = 0; w < p->worker_count && p->worker_of[t] < 0; w++)
            if (p->task_on[w] < 0 && can_serve(p, w, p->shards[t]))
                claim(p, t, w);
        uint64_t visited = 0;
        if (p->worker_of[t] < 0 && !augment(p, t, &visited))
            homeless++;
    }
    return homeless;
}

/* Pass 3: the call cannot be decoded without them, so every homeless shard
   goes to a live worker whatever it holds. */
static void place_anywhere(placing_t *p)
{
    int lives[64], live_count = 0;
    for (int w = 0; w < p->worker_count; w++)
        if (p->live & BIT(w))
            lives[live_count++] = w;
    if (live_count == 0)
        return;
    for (int t = 0, next = 0; t < p->count; t++) {
        if (p->worker_of[t] >= 0)
            continue;
        int home = home_of(p, p->shards[t]);
        if (home >= 0 && (p->live & BIT(home)) && p->task_on[home] < 0) {
            claim(p, t, home);
            continue;
        }
        while (next < live_count && p->task_on[lives[next]] >= 0)
            next++;
        claim(p, t, next < live_count ? lives[next] : lives[t % live_count]);
    }
}

void cdc__placement_slots(const int *shards, int count, int worker_count,
                          const int *home_of_slot, uint64_t live, const uint64_t *ready,
                          int tolerable, int *worker_of)
{
    placing_t p = {shards, count, worker_count > 64 ? 64 : worker_count, home_of_slot,
                   live, ready, worker_of, {0}};
    for (int w = 0; w < 64; w++)
        p.task_on[w] = -1;
    place_at_home(&p);
    if (place_on_ready(&p) > tolerable)
        place_anywhere(&p);
}

void cdc__placement_assign(const int *shards, int count, int worker_count,
                           uint64_t planned_mask, int *worker_of)
{
    cdc__placement_slots(shards, count, worker_count, NULL, planned_mask, NULL, 0, worker_of);
}
