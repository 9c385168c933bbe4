/* plan_budget.c - the workers' memory budgets against a call's shards
 * (plan.h): what a worker reports as its --max-memory bounds the rows of
 * cached weights it is given. The planner caps blocks with it
 * (cdc__plan_budget_rows); every plan, equal or sized, is checked against it
 * (cdc__plan_fits_budgets), and a call that does not fit runs on the
 * coordinator rather than make a worker evict what it holds. */
#include "plan.h"

#include "log.h"

#include <math.h>

/* What a cache entry costs beyond its floats (the entry record, the
   allocator's rounding, the index's share): generous, so that a shard
   planned to fit does fit. */
#define PLAN_BUDGET_ENTRY_SLACK 65536.0

double cdc__plan_budget_rows(uint64_t max_memory, const cdc_block_cost_t *cost)
{
    if (max_memory == 0 || cost->held_per_row <= 0.0)
        return 0.0;
    double room = (double) max_memory - cost->held_fixed - PLAN_BUDGET_ENTRY_SLACK;
    double rows = floor(room / cost->held_per_row);
    return rows >= 1.0 ? rows : 0.5;
}

/* Warn once per operand shape (a model's layers each get their own). */
static void warn_over_budget(cdc_context_t *context, const cdc_call_plan_t *plan,
                             const cdc_block_cost_t *cost, int64_t rows, int slot,
                             uint64_t max_memory)
{
    uint64_t key = (uint64_t) rows * 1000003u + (uint64_t) cost->held_per_row;
    for (int i = 0; i < CDC_BUDGET_WARNED; i++)
        if (context->budget_warned[i] == key)
            return;
    context->budget_warned[context->budget_warned_next] = key;
    context->budget_warned_next = (context->budget_warned_next + 1) % CDC_BUDGET_WARNED;
    double shard = (double) plan->block_len[slot < plan->n ? slot : 0] * cost->held_per_row +
                   cost->held_fixed;
    CDC_LOG_WARNF("weights of %lld rows x %.0f bytes: shard %d of %d data + %d parity "
                  "(%.1f MiB) does not fit its worker's --max-memory (%.1f MiB); computed "
                  "on the coordinator instead (budget_fallbacks)",
                  (long long) rows, cost->held_per_row, slot, plan->n, plan->r,
                  shard / 1048576.0, (double) max_memory / 1048576.0);
}

int cdc__plan_fits_budgets(cdc_context_t *context, const cdc_call_plan_t *plan,
                           const cdc_block_cost_t *cost, int64_t rows)
{
    if (cost->held_per_row <= 0.0 && cost->held_fixed <= 0.0)
        return 1;
    cdc_worker_profile_t profile[CDC_MAX_WORKERS];
    int workers = cdc__context_profile(context, profile, CDC_MAX_WORKERS);
    const cdc_profiled_state_t *st = &context->profiled;
    int64_t longest = 0;
    for (int i = 0; i < plan->n; i++)
        longest = plan->block_len[i] > longest ? plan->block_len[i] : longest;
    for (int s = 0; s < plan->n + plan->r; s++) {
        int home = st->slots == plan->n + plan->r ? st->home_of_slot[s] : s;
        if (home >= workers || profile[home].max_memory == 0)
            continue;
        double held = (double) (s < plan->n ? plan->block_len[s] : longest) * cost->held_per_row +
                      cost->held_fixed + PLAN_BUDGET_ENTRY_SLACK;
        if (held > (double) profile[home].max_memory) {
            warn_over_budget(context, plan, cost, rows, s, profile[home].max_memory);
            return 0;
        }
    }
    return 1;
}
