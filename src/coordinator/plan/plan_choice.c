/* plan_choice.c - the profiled plan's choices around the sized blocks
 * (plan.h): which split an auto layer gets, and whether a call runs here
 * rather than on the workers, each by the latency model's prediction, with
 * hysteresis (a change re-ships weights, or flips a layer back and forth). */
#include "plan.h"

#include "hash.h"
#include "log.h"
#include "profiled_plan.h"

#include <string.h>

/* A change of split must be predicted this much faster than keeping it. */
#define PLAN_SPLIT_SWITCH_GAIN 0.9

cdc_split_t cdc__plan_split_by_latency(cdc_context_t *context, const cdc_call_plan_t *plan,
                                       const cdc_block_cost_t cost[2], const int64_t rows[2],
                                       cdc_split_t previous, cdc_split_t by_bytes,
                                       int columns_on_demand_n)
{
    if (context->config.plan == CDC_PLAN_EQUAL)
        return by_bytes;
    /* The devices measured before a choice that ships the weights (cut by
       rows, cached) and that the hysteresis below would keep. */
    cdc__profiled_plan_calibrate(context, cost[0].held_per_row * (double) rows[0]);
    const cdc_split_t splits[2] = {CDC_SPLIT_ROWS, CDC_SPLIT_COLUMNS};
    /* Each as it would run: cached weights cut by rows in sized stripes
       where the call may rotate (plan.c), a spatial band dedicated or with
       its parity on demand. */
    const int rotated[2] = {cost[0].held_per_row > 0.0 &&
                                cdc__plan_rotated_eligible(context, plan, rows[0]),
                            0};
    /* Spatial bands with their parity on demand: uncoded over theirs. */
    const int n[2] = {plan->n, columns_on_demand_n > 0 ? columns_on_demand_n : plan->n};
    const int r[2] = {plan->r, columns_on_demand_n > 0 ? 0 : plan->r};
    double t[2];
    for (int i = 0; i < 2; i++)
        if (cdc__profiled_plan_predict(context, n[i], r[i], rotated[i], &cost[i], rows[i],
                                       &t[i]) != 1)
            return by_bytes;
    if (previous == CDC_SPLIT_AUTO) /* the model must beat the rule to leave it */
        previous = by_bytes;
    int best = t[1] < t[0];
    int kept = previous == splits[!best] && !(t[best] < PLAN_SPLIT_SWITCH_GAIN * t[!best]);
    cdc_split_t chosen = kept ? previous : splits[best];
    if (chosen != previous)
        CDC_LOG_INFOF("profiled plan: %s split (predicted %.2f ms; %s %.2f ms)",
                      chosen == CDC_SPLIT_ROWS ? "rows" : "columns", t[chosen != CDC_SPLIT_ROWS],
                      chosen == CDC_SPLIT_ROWS ? "columns" : "rows", t[chosen == CDC_SPLIT_ROWS]);
    return chosen;
}

/* A shape's choice between here and the workers changes only for a
   prediction this much faster. */
#define PLAN_HERE_GAIN 0.9

void cdc__plan_prefer_here(cdc_context_t *context, cdc_call_plan_t *plan, double local_ms,
                           const char *what)
{
    /* A CDCGEMM_MIN_FLOPS the user set is the override: what passed it goes
       to the workers (docs/drop-in.md). */
    if (context->config.plan == CDC_PLAN_EQUAL || context->config.min_flops >= 0.0 ||
        plan->over_budget || !(plan->predicted_ms > 0.0))
        return;
    uint64_t key = cdc__hash_mix(cdc__hash_bytes(what, strlen(what), 0), (uint64_t) plan->n);
    int slot = -1;
    for (int i = 0; i < CDC_HERE_CHOICES && slot < 0; i++)
        if (context->here_choice[i].key == key)
            slot = i;
    /* The shape keeps its last choice unless the other is 10% faster. */
    if (slot >= 0 && context->here_choice[slot].local)
        plan->local_faster = !(plan->predicted_ms < PLAN_HERE_GAIN * local_ms);
    else
        plan->local_faster = local_ms < PLAN_HERE_GAIN * plan->predicted_ms;
    if (plan->local_faster) { /* the record says what the call will do */
        pthread_mutex_lock(&context->lock);
        context->last_plan.here = 1;
        context->last_plan.expected_ms = context->last_plan.worst_ms = local_ms;
        pthread_mutex_unlock(&context->lock);
    }
    if (slot >= 0 && context->here_choice[slot].local == plan->local_faster)
        return;
    if (slot < 0) {
        slot = context->here_choice_next;
        context->here_choice_next = (slot + 1) % CDC_HERE_CHOICES;
    }
    context->here_choice[slot].key = key;
    context->here_choice[slot].local = plan->local_faster;
    CDC_LOG_INFOF("plan: %s %s (predicted %.2f ms here, %.2f ms on %d + %d workers)", what,
                  plan->local_faster ? "computed here" : "distributed", local_ms,
                  plan->predicted_ms, plan->n, plan->r);
}
