/* testing_hooks.c - what cdcgemm_testing.h lets tests and the bench read of a
   context (its embedded workers, the last plan, the workers' status and
   profile), delegated to the internals that hold it. */
#include "cdcgemm_testing.h"

#include "context.h"
#include "error.h"
#include "executor.h"
#include "local_workers.h"
#include "plan.h"
#include "profile.h"
#include "profiled_plan.h"
#include "stats_json.h"

#include <string.h>

_Static_assert(sizeof(((cdc_testing_worker_status_t *) 0)->endpoint) ==
                   sizeof(((cdc_worker_status_t *) 0)->endpoint),
               "cdc_testing_worker_status_t.endpoint is not the client's");

int cdc_testing_local_worker_count(cdc_context_t *context)
{
    return context ? cdc__local_workers_count(context->local) : 0;
}

long cdc_testing_local_worker_pid(cdc_context_t *context, int worker)
{
    if (!context || !context->local)
        return -1;
    return (long) cdc__local_workers_pid(context->local, worker);
}

int cdc_testing_last_plan(cdc_context_t *context, cdc_testing_plan_t *plan)
{
    if (!context || !plan)
        return cdc__fail(CDC_EINVAL, "cdc_testing_last_plan: NULL argument");
    cdc__plan_last(context, plan); /* cdc_plan_record_t is cdc_testing_plan_t */
    return CDC_OK;
}

int cdc_testing_plan_settling(const cdc_context_t *context)
{
    return context &&
           (cdc__profiled_plan_staging(context) || cdc__profiled_plan_confirming(context));
}

int cdc_testing_worker_status(cdc_context_t *context, cdc_testing_worker_status_t *out,
                              int max)
{
    if (!context || !out || max <= 0)
        return 0;
    cdc_worker_status_t status[CDC_MAX_WORKERS];
    int count = cdc__executor_worker_status(context->executor, status,
                                            max < CDC_MAX_WORKERS ? max : CDC_MAX_WORKERS);
    for (int w = 0; w < count; w++) {
        const cdc_worker_status_t *s = &status[w];
        cdc_testing_worker_status_t *o = &out[w];
        memset(o, 0, sizeof *o);
        memcpy(o->endpoint, s->endpoint, sizeof o->endpoint);
        o->live = s->live;
        o->rtt_ms = s->rtt_ms;
        o->protocol = s->version;
        o->has_status = s->has_status;
        o->cache_bytes = s->status.cache_bytes;
        o->cache_entries = s->status.cache_entries;
        o->max_memory = s->status.max_memory;
        o->tasks = s->status.tasks;
        o->load = s->status.load;
        o->busy_us = s->status.busy_us;
        o->flops = s->status.flops;
    }
    return count;
}

int cdc_testing_stats_json(const cdc_stats_t *stats, FILE *out)
{
    if (!stats || !out)
        return cdc__fail(CDC_EINVAL, "cdc_testing_stats_json: NULL argument");
    cdc__stats_write_members(out, stats);
    return CDC_OK;
}

int cdc_testing_call_steps(cdc_context_t *context, cdc_testing_call_steps_t *steps)
{
    if (!context || !steps)
        return cdc__fail(CDC_EINVAL, "cdc_testing_call_steps: NULL argument");
    pthread_mutex_lock(&context->lock);
    *steps = context->steps;
    pthread_mutex_unlock(&context->lock);
    return CDC_OK;
}

int cdc_testing_profile_json(cdc_context_t *context, FILE *out)
{
    if (!context || !out)
        return cdc__fail(CDC_EINVAL, "cdc_testing_profile_json: NULL argument");
    cdc_profile_report_t profile;
    cdc__context_profile_report(context, &profile);
    cdc__profile_write_json(out, &profile);
    return CDC_OK;
}
