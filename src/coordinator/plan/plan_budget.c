/* plan_budget.c - the workers' memory budgets against a call's shards
 * (plan.h): what a worker reports as its --max-memory bounds the rows of
 * cached weights it is given. The planner caps blocks with it
 * (cdc__plan_budget_rows); every plan, equal or sized, is checked against it
 * (cdc__plan_unfit_slots): a slot whose home cannot hold its shard is not
 * sent, an erasure the parity covers, rather than make a worker evict what
 * it holds; only more such slots than parity send the call to the
 * coordinator. One worker reporting a tiny budget (a bug, or a lie) costs
 * its own slot, not every call. */
#include "plan.h"

#include "bits.h"
#include "log.h"
#include "profiled_plan.h"
#include "rotated_set.h"


/* The rows of the cut operand slot s holds: a data block, a parity block
   as long as the longest; under sized stripes, its worker's data rows and
   r parity blocks. */
static int64_t slot_rows(const cdc_call_plan_t *plan, int s)
{
    int slots = plan->n + plan->r;
    if (plan->rotated)
        return plan->block_len[s] +
               (int64_t) plan->r * cdc__rotated_parity_rows(plan->block_len, slots, plan->n);
    int64_t longest = 0;
    for (int i = 0; i < plan->n; i++)
        longest = plan->block_len[i] > longest ? plan->block_len[i] : longest;
    return s < plan->n ? plan->block_len[s] : longest;
}

/* Warn once per operand shape (a model's layers each get their own). */
static void warn_over_budget(cdc_context_t *context, const cdc_call_plan_t *plan,
                             const cdc_block_cost_t *cost, int64_t rows, int slot,
                             uint64_t max_memory, int erasure)
{
    uint64_t key = (uint64_t) rows * 1000003u + (uint64_t) cost->held_per_row;
    for (int i = 0; i < CDC_BUDGET_WARNED; i++)
        if (context->budget_warned[i] == key)
            return;
    context->budget_warned[context->budget_warned_next] = key;
    context->budget_warned_next = (context->budget_warned_next + 1) % CDC_BUDGET_WARNED;
    double shard = (double) slot_rows(plan, slot) * cost->held_per_row + cost->held_fixed;
    CDC_LOG_WARNF("weights of %lld rows x %.0f bytes: shard %d of %d data + %d parity "
                  "(%.1f MiB) does not fit its worker's --max-memory (%.1f MiB); %s",
                  (long long) rows, cost->held_per_row, slot, plan->n, plan->r,
                  shard / 1048576.0, (double) max_memory / 1048576.0,
                  erasure ? "not sent: the parity covers it (budget_erasures)"
                          : "too many such shards: computed on the coordinator "
                            "(budget_fallbacks)");
}

/* Only live homes count: a dead worker's report is forgotten (its slot is
   an erasure anyway, and a process started in its place reports anew). */
uint64_t cdc__plan_unfit_slots(cdc_context_t *context, const cdc_call_plan_t *plan,
                               const cdc_block_cost_t *cost, int64_t rows)
{
    if (cost->held_per_row <= 0.0 && cost->held_fixed <= 0.0)
        return 0;
    cdc_worker_profile_t profile[CDC_MAX_WORKERS];
    int workers = cdc__context_profile(context, profile, CDC_MAX_WORKERS);
    uint64_t unfit = 0;
    int first = -1;
    uint64_t first_budget = 0; /* the first unfit slot's home's */
    int sized_r = cdc__plan_sized_r(plan); /* an on-demand parity has no home */
    for (int s = 0; s < plan->n + sized_r; s++) {
        int home = cdc__profiled_plan_home(context, plan->n, sized_r, s);
        if (home >= workers || profile[home].max_memory == 0 || !profile[home].live)
            continue;
        double held = (double) slot_rows(plan, s) * cost->held_per_row + cost->held_fixed +
                      CDC_PLAN_BUDGET_ENTRY_SLACK;
        if (held > (double) profile[home].max_memory) {
            if (!unfit) {
                first = s;
                first_budget = profile[home].max_memory;
            }
            unfit |= UINT64_C(1) << s;
        }
    }
    if (unfit)
        warn_over_budget(context, plan, cost, rows, first, first_budget,
                         cdc__popcount64(unfit) <= plan->r);
    return unfit;
}
