/* placement.h - which worker computes which shard of a call: slots on their
 * homes.
 *
 * Pure (no sockets, no clock, no locks) so the rule can be tested alone;
 * client.c applies it to every call. */
#ifndef CDC_PLACEMENT_H_INCLUDED
#define CDC_PLACEMENT_H_INCLUDED

#include <stdint.h>

/* Place count tasks (task t computes shard shards[t]) on worker_count
   workers (at most 64). Shard s is the plan's slot s; its home is worker
   home_of_slot[s] (for s < worker_count; a value outside 0..worker_count-1:
   no home; the homes are distinct), or worker s when home_of_slot is NULL.
   Slots from worker_count on have no home. The planner moves homes (a
   parity slot to a fast device); the workers that are home of no slot of
   the call are its spares.

   1. Shard s goes home when its home is live and ready for slot s (bit s
      of ready[home]: it holds the slot's weights). Only the first task of
      a shard claims its home this way.
   2. A shard whose home cannot take it goes to the lowest-numbered live,
      unclaimed worker ready for its slot (a hot spare holds every slot's
      weights; a worker a spare stood in for, or a slot's previous home
      after the homes moved, may hold them too). When every such worker is
      claimed, one is freed if its task can move to another ready worker
      (an augmenting path): after the homes move, a new home that is ready
      may claim the only holder of another slot.
   3. Still homeless: when more tasks are homeless than the call can lose
      (tolerable: tasks beyond the n results it needs), the call could not
      be decoded, so they go where their weights are not yet: home when it
      is live, else the lowest live unclaimed worker (the weights follow on
      the call path); with none unclaimed, task t wraps onto the (t mod L)-th
      of the L live workers. Otherwise they are left out (-1): erasures,
      decoded from parity, while the background brings their workers' weights.

   ready may be NULL: every worker ready for every slot. worker_of[t]
   receives the worker of task t or -1. Never fails; thread-safe. */
void cdc__placement_slots(const int *shards, int count, int worker_count,
                          const int *home_of_slot, uint64_t live, const uint64_t *ready,
                          int tolerable, int *worker_of);

/* The placement before slots and the test suite's reference: slot s's home
   is worker s, every planned worker ready, nothing tolerable (every task
   placed while any worker is planned). */
void cdc__placement_assign(const int *shards, int count, int worker_count,
                           uint64_t planned_mask, int *worker_of);

#endif
