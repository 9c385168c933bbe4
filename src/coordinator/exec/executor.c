/* executor.c - what the coordinator asks of any executor (executor.h): the
   ops an executor without remote workers leaves NULL answer as if it had
   one worker that is always there and holds nothing. */
#include "executor.h"

#include "error.h"

int cdc__executor_live(cdc_executor_t *executor, uint64_t *mask)
{
    if (executor->ops->live)
        return executor->ops->live(executor, mask);
    if (mask)
        *mask = ~UINT64_C(0);
    return -1; /* every worker */
}

int cdc__executor_heartbeat_live(cdc_executor_t *executor, uint64_t *mask)
{
    if (!executor || !executor->ops->heartbeat_live)
        return -1;
    return executor->ops->heartbeat_live(executor, mask);
}

int cdc__executor_free_workers(cdc_executor_t *executor, uint64_t *mask)
{
    if (!executor || !executor->ops->free_workers)
        return -1;
    return executor->ops->free_workers(executor, mask);
}

int cdc__executor_repairing(cdc_executor_t *executor)
{
    return executor && executor->ops->repairing ? executor->ops->repairing(executor) : 0;
}

int cdc__executor_worker_moved(cdc_executor_t *executor, int w, const char *endpoint)
{
    if (!executor || !executor->ops->worker_moved)
        return cdc__fail(CDC_EINVAL, "the %s executor has no workers to move",
                         executor ? executor->ops->name : "NULL");
    return executor->ops->worker_moved(executor, w, endpoint);
}

int cdc__executor_set_homes(cdc_executor_t *executor, const int *home_of_slot, int slots)
{
    if (!executor || !executor->ops->set_homes)
        return CDC_OK; /* no slots: every shard runs here */
    return executor->ops->set_homes(executor, home_of_slot, slots);
}

int cdc__executor_stage(cdc_executor_t *executor, uint64_t token, int needed,
                        const cdc_slot_weight_t *block, int count, const int *order)
{
    if (!executor || !executor->ops->stage)
        return 1; /* no slots: every shard runs here */
    return executor->ops->stage(executor, token, needed, block, count, order);
}

void cdc__executor_unstage(cdc_executor_t *executor, uint64_t token)
{
    if (executor && executor->ops->unstage)
        executor->ops->unstage(executor, token);
}

int cdc__executor_last_call(cdc_executor_t *executor, int *sent_to, int *answered_by,
                            int max)
{
    if (!executor || !executor->ops->last_call)
        return cdc__fail(CDC_EINVAL, "the %s executor keeps no placements",
                         executor ? executor->ops->name : "NULL");
    executor->ops->last_call(executor, sent_to, answered_by, max);
    return CDC_OK;
}

int cdc__executor_worker_count(cdc_executor_t *executor)
{
    if (!executor || !executor->ops->worker_count)
        return -1;
    return executor->ops->worker_count(executor);
}

int cdc__executor_worker_status(cdc_executor_t *executor, cdc_worker_status_t *out, int max)
{
    if (!executor || !executor->ops->worker_status)
        return 0;
    return executor->ops->worker_status(executor, out, max);
}

int cdc__executor_profile(cdc_executor_t *executor, cdc_worker_profile_t *out, int max,
                          cdc_worker_profile_t *coordinator)
{
    if (!executor || !executor->ops->profile)
        return -1;
    return executor->ops->profile(executor, out, max, coordinator);
}

int cdc__executor_remote_counters(cdc_executor_t *executor, cdc_remote_counters_t *counters)
{
    if (!executor || !counters || !executor->ops->remote_counters)
        return cdc__fail(CDC_EINVAL, "the %s executor has no remote workers",
                         executor ? executor->ops->name : "NULL");
    executor->ops->remote_counters(executor, counters);
    return CDC_OK;
}
