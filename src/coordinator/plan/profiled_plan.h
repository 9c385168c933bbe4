/* profiled_plan.h - CDCGEMM_PLAN=profiled: the planner (planner.h) applied to
   a context, its slot homes and block lengths from the live profile. */
#ifndef CDC_PROFILED_PLAN_H_INCLUDED
#define CDC_PROFILED_PLAN_H_INCLUDED

#include "context.h"
#include "plan_model.h"

#include <stdint.h>

/* Size plan's data blocks (rows of the cut operand; work per row in cost)
   to the devices, once every worker of the plan's slots has been measured:
   moves the slots' homes first when the profile moved for good and new
   homes are predicted 10% faster, then sizes the blocks for those homes.
   When the coordinator's line is known (cost->here_per_row_ms), it takes
   the share of the rows (plan->here_rows) that makes the call's predicted
   latency least: its time for them against the workers' for the rest.
   Returns 1 with plan->block_len set and *predicted_ms (may be NULL) the
   model's latency, 0 when the profile cannot size this call yet (the
   caller sizes equal blocks), or a CDC_* error (< 0). Not thread-safe
   against calls on the same context (as cdc__plan_resolve). */
int cdc__profiled_plan_size(cdc_context_t *context, cdc_call_plan_t *plan,
                            const cdc_block_cost_t *cost, int64_t rows,
                            double *predicted_ms);

/* Sized stripes (the rotated layout, rotated_set.h): each of the plan's
   n + r workers' data rows of the cut operand's rows, into
   plan->block_len[0..n+r-1], as an uncoded call over the slots' homes
   would be sized (the parity is computed only on demand), each at least n
   (a row for each of its data blocks); equal unless the sizing is
   predicted 10% faster. The same hysteresis as the dedicated blocks: an
   operand keeps the rows it was given unless new ones are predicted 10%
   faster (20% for weights the workers cache), and new rows of those are staged
   (plan->stage_*: this call keeps the old ones). Until the profile can
   size the call the rows are equal, and remembered as what the workers
   hold, so the first sizing is staged too. When the coordinator's line is
   known it takes the first plan->here_rows rows, as for blocks, and the
   stripes cut the rest (block_len sums to rows - here_rows; they keep at
   least (n + r)·n rows). 1 when the profile sized them, 0 when it cannot
   yet (block_len: what the operand had, else equal), or a CDC_* error
   (< 0). Not thread-safe against calls on the same context. */
int cdc__profiled_plan_size_stripes(cdc_context_t *context, cdc_call_plan_t *plan,
                                    const cdc_block_cost_t *cost, int64_t rows);

/* The latency the profile predicts for a call of n data + r parity shards
   doing this work on the slots' present homes, as it would run sized now
   (nothing moved or remembered): rotated, as sized stripes over the n + r
   slots (cdc__profiled_plan_size_stripes), else as dedicated blocks
   (cdc__profiled_plan_size), with the lengths, equal or sized, and the
   coordinator's share those would choose, predicted exactly as
   cdc__profiled_plan_predict_lengths predicts the call that runs (a
   spatial band's halo included). 1 with *predicted_ms, 0 when the profile
   cannot predict it yet. Not thread-safe against calls on the same
   context. */
int cdc__profiled_plan_predict(cdc_context_t *context, int n, int r, int rotated,
                               const cdc_block_cost_t *cost, int64_t rows,
                               double *predicted_ms);

/* The model's latency for given block lengths len on the slots' homes
   home[], the coordinator computing the first here_rows rows (len covers
   the rest): *expected_ms with nothing failing (the n-th shard done),
   *worst_ms every shard done. 1, or 0 when the profile cannot predict it
   yet. Not thread-safe against calls on the same context. */
int cdc__profiled_plan_predict_lengths(cdc_context_t *context, int n, int r,
                                       const cdc_block_cost_t *cost, int64_t rows,
                                       int64_t here_rows, const int64_t *len, const int *home,
                                       double *expected_ms, double *worst_ms);

/* The workers hold the blocks staged under token (plan_staging.c): the
   next call of that operand uses them. */
void cdc__profiled_plan_staged(cdc_context_t *context, uint64_t token);

/* Rate samples a worker needs before its speed sizes blocks. */
#define CDC_PLAN_MIN_RATE_SAMPLES 2
/* Link samples before a link's estimate counts; until then the link is
   taken as free (a fast link gives none: profile.h). The first come from
   the calibration or from the calls that shipped the first weights (the
   window of profile.h needs a few to see past those). */
#define CDC_PLAN_MIN_LINK_SAMPLES 4
/* Bandwidth samples before a worker's roofline has its memory term
   (profile.h; until then: none, or the slowest measured). One: the first
   comes from the calibration's matrix-vector products, which are all a
   thin task is, and waiting for a second would let the first weights be
   sized without it. */
#define CDC_PLAN_MIN_STREAM_SAMPLES 1

/* Workers of live (bit w: worker w) with fewer than `samples` rate samples
   (CDC_PLAN_MIN_RATE_SAMPLES: those the plan cannot size by yet; an
   implausible one is planned as the slowest, so it counts as measured). */
int cdc__profiled_plan_unmeasured(cdc_context_t *context, uint64_t live, int samples);

/* Workers of live whose link has fewer than CDC_PLAN_MIN_LINK_SAMPLES
   samples (an implausible one aside, planned as the slowest anyway). */
int cdc__profiled_plan_unlinked(cdc_context_t *context, uint64_t live);

/* Workers of live with fewer than CDC_PLAN_MIN_STREAM_SAMPLES bandwidth
   samples (the same exception). */
int cdc__profiled_plan_unstreamed(cdc_context_t *context, uint64_t live);

/* Once per context, before the first call a measured plan (auto, profiled)
   sizes that ships 1 MiB or more of weights to cache (`held`: the bytes of
   the cut operand; a per-call or smaller one is re-sized by the next calls
   for less than a wait): every live worker computes a small GEMM (of
   per-call operands, nothing cached), round after round, until each has
   given the rates the plan sizes by (or 3 s have passed), so that the
   first blocks shipped are sized to the devices and no re-size has to move
   them again (plan_calibration.c). Nothing for the equal plan or an
   in-process context. Errors are logged, never returned: without it the
   plan starts from equal blocks, as it did. Not thread-safe against calls
   on the same context. */
void cdc__profiled_plan_calibrate(cdc_context_t *context, double held);

/* Slot s's home among n + r slots: the profiled plan's map when it has one
   for that many slots, else worker s (the equal plan's). */
int cdc__profiled_plan_home(const cdc_context_t *context, int n, int r, int s);

/* Whether some operand's re-sized blocks are being staged now (the calls
   keep the old ones meanwhile). */
int cdc__profiled_plan_staging(const cdc_context_t *context);

/* Whether some operand has new lengths its calls are confirming before
   they are staged (PLAN_RESIZE_CONFIRM_MS). */
int cdc__profiled_plan_confirming(const cdc_context_t *context);

#endif
