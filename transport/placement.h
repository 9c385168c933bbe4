/* placement.h - which worker computes which shard of a call: stable placement.
 *
 * Pure (no sockets, no clock, no locks) so the rule can be tested alone;
 * client.c applies it to every call. */
#ifndef CDC_PLACEMENT_H_INCLUDED
#define CDC_PLACEMENT_H_INCLUDED

#include <stdint.h>

/* Place count tasks (task t computes shard shards[t]) on the workers of the
   plan: bit w of planned_mask for w < worker_count (at most 64).

   - Shard s stays on worker s while worker s is in the plan: it already
     holds shard s's cached weights, so a re-plan after a worker leaves or
     rejoins moves nothing that did not have to move. Only the first task
     of a shard claims its worker this way.
   - Every other task goes, in task order, to the lowest-numbered planned
     worker that no task has claimed yet.
   - With more tasks than planned workers, a task that finds none free
     wraps onto the (t mod P)-th of the P planned workers (which then
     computes two shards).

   worker_of[t] receives the worker of task t, or -1 for every task when no
   worker is planned. Never fails; thread-safe. */
void cdc_placement_assign(const int *shards, int count, int worker_count,
                          uint64_t planned_mask, int *worker_of);

#endif
