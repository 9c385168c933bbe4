/* plan_staging.c - re-sized blocks of cached weights reach the workers in
 * the background.
 *
 * When the profiled plan gives an operand whose blocks the workers cache
 * new lengths, every block changes, and sending them on the call path
 * would make that call wait for all of them (seconds over a slow link: a
 * timeout and a fallback). Instead the call goes on with the lengths the
 * workers hold, and the new blocks are staged (slots.h): one slot at a
 * time, its home takes them in while the calls treat that slot as an
 * erasure and decode it from parity, so no call queues behind the
 * transfer. Once every home holds its new block, the next call uses them.
 * The price: during the staging the calls have one erasure fewer to spare,
 * and they run at the old lengths' latency for the sum of the transfers
 * (sent side by side on the call path, the longest would be all one call
 * waits, but that call waits it, and times out over a slow link).
 *
 * Sized stripes (the rotated layout) are staged the same way: every
 * worker's operand changes, each goes in its turn, its worker an erasure
 * the stripes' parity covers meanwhile. */
#include "plan.h"

#include "executor.h"
#include "log.h"
#include "profiled_plan.h"

void cdc__plan_stage_weights(cdc_context_t *context, const cdc_call_plan_t *plan,
                             const cdc_shard_set_t *set, uint64_t key)
{
    int count = set->n + set->r;
    cdc_slot_weight_t block[CDC_MAX_SHARDS];
    for (int s = 0; s < count; s++)
        /* As the tasks will carry them: a data block's real rows, a parity's B. */
        block[s] = (cdc_slot_weight_t){key,
                                       s < set->n ? cdc__shard_set_valid_rows(set, s)
                                                  : set->block_rows,
                                       set->k, set->blocks[s], cdc__shard_set_hold(set), 0,
                                       NULL};
    if (cdc__executor_stage(context->executor, plan->stage_token, plan->n, block, count,
                            plan->stage_order) == 1)
        cdc__profiled_plan_staged(context, plan->stage_token);
}

void cdc__plan_stage_stripes(cdc_context_t *context, const cdc_call_plan_t *plan,
                             const cdc_rotated_set_t *set, uint64_t key)
{
    int workers = set->layout.workers;
    cdc_slot_weight_t operand[CDC_MAX_SHARDS];
    for (int w = 0; w < workers; w++)
        /* As the rotated tasks name them: built by their source when sent. */
        operand[w] = (cdc_slot_weight_t){cdc__rotated_operand_key(set, key),
                                         cdc__rotated_operand_rows(set, w), set->k, NULL,
                                         cdc__rotated_set_hold(set), 0, &set->source[w]};
    /* The rotated calls' executor n is every worker (the wire keys mix it). */
    if (cdc__executor_stage(context->executor, plan->stage_token, workers, operand, workers,
                            plan->stage_order) == 1)
        cdc__profiled_plan_staged(context, plan->stage_token);
}
