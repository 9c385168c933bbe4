/* plan.h - the plan of one coded call (n, r, code, split, the data blocks'
   lengths) and the auto split rule: the split that moves fewer bytes per
   call. */
#ifndef CDC_PLAN_H_INCLUDED
#define CDC_PLAN_H_INCLUDED

#include "cdcgemm.h"
#include "code.h"
#include "context.h"
#include "geometry.h"
#include "plan_model.h"
#include "rotated_set.h"
#include "shard_set.h"

#include <stdint.h>


/* The common resolution of every front end: parity r (the context's unless
   parity_override >= 0), data shards n and the code over the workers in the
   plan now, and the split (split_override unless AUTO, else the context's;
   may stay AUTO). Not thread-safe against calls on the same context. */
int cdc__plan_resolve(cdc_context_t *context, int parity_override,
                      cdc_split_t split_override, cdc_call_plan_t *plan);

/* The single place the data blocks' lengths are decided: fill
   plan->block_len for a cut operand of `rows` rows over plan->n data shards
   (and set plan->sized), once the front end has resolved the split. cost
   describes the call's work per row. Lengths sum to rows, each >= 1 when
   rows >= n: the weights forced by cdc_testing_force_block_weights (in
   proportion, largest remainder), else under CDCGEMM_PLAN=profiled the
   profiled plan's (profiled_plan.h) once it can size the call (within the
   homes' memory budgets), else equal (differing by at most 1); under the
   profiled plan, cached weights in the rotated layout get sized stripes
   instead (plan->rotated: n + r workers' data rows). Then sets
   plan->over_budget when a slot's home cannot hold what the lengths give it
   (warned once per operand shape). */
int cdc__plan_size_blocks(cdc_context_t *context, cdc_call_plan_t *plan,
                          const cdc_block_cost_t *cost, int64_t rows);

/* AUTO resolved by predicted latency under a measured plan (auto,
   profiled): of the two splits (work per row and rows to cut of each in
   cost[i], rows[i]; index 0 ROWS, 1 COLUMNS), the one the profile predicts
   faster; previous (the layer's last split; for none, by_bytes, the bytes
   rule's answer) is kept unless the other is predicted 10% faster, as a
   change of split re-ships weights. by_bytes when the profile cannot
   predict both yet. columns_on_demand_n > 0: the COLUMNS split would run
   with its parity on demand over that many data blocks
   (cdc__plan_on_demand), so it is predicted as an uncoded call over them.
   The workers are calibrated first when the rows split would ship 1 MiB
   or more of weights (profiled_plan.h). */
cdc_split_t cdc__plan_split_by_latency(cdc_context_t *context, const cdc_call_plan_t *plan,
                                       const cdc_block_cost_t cost[2], const int64_t rows[2],
                                       cdc_split_t previous, cdc_split_t by_bytes,
                                       int columns_on_demand_n);

/* The slots whose home cannot hold its shard's cached weights (cost's
   held_*) within its --max-memory as it reports it (unknown, or a home not
   live: fits); a parity shard holds as many rows as the longest data
   block. Warns once per operand shape, naming the shard and the budget. */
uint64_t cdc__plan_unfit_slots(cdc_context_t *context, const cdc_call_plan_t *plan,
                               const cdc_block_cost_t *cost, int64_t rows);


/* Under CDCGEMM_PLAN=profiled, once the sized call has a prediction: set
   plan->local_faster when local_ms (the caller's prediction of the same
   work on the coordinator, local_cost.h) beats it. Each shape (what, n)
   keeps its last choice unless the other is predicted 10% faster, so a
   layer near the line does not flap. Logs each change (INFO), with both
   predictions. */
void cdc__plan_prefer_here(cdc_context_t *context, cdc_call_plan_t *plan, double local_ms,
                           const char *what);

/* When the plan re-sized the blocks of weights the workers cache
   (plan->stage_token): send the new blocks (set, the owner's staged shard
   set for plan->stage_len; key, the one naming the cut operand's blocks,
   cdc__shard_set_key of set) to the slots' homes in the background, and
   once they hold them let the next call use them. The call at hand goes on
   with the blocks they hold. */
void cdc__plan_stage_weights(cdc_context_t *context, const cdc_call_plan_t *plan,
                             const cdc_shard_set_t *set, uint64_t key);

/* The same for sized stripes (plan->rotated): set is the staged encoding
   of plan->stage_len, key the weights' set_key; every worker's operand is
   staged. */
void cdc__plan_stage_stripes(cdc_context_t *context, const cdc_call_plan_t *plan,
                             const cdc_rotated_set_t *set, uint64_t key);

/* The call of plan over rows rows of the cut operand runs in the rotated
   layout, worker w computing data_rows[w] (w < n + r) and then
   parity_rows of parity: the context's last_plan says so (rotated), with
   data_rows as block_len (on the slots' homes; under sized stripes after
   the coordinator's share, plan->here_rows) and the model's prediction
   for them: expected_ms, every worker's data rows done (the parity is
   computed only on demand); worst_ms, every worker's data and parity done
   (after a loss). Returns expected_ms (< 0: the profile cannot predict
   yet). Not thread-safe against calls on the same context. */
double cdc__plan_record_rotated(cdc_context_t *context, const cdc_call_plan_t *plan,
                                int64_t rows, const int64_t *data_rows, int64_t parity_rows);

/* Whether the context asks for the rotated layout and a call of plan over
   rows of a cut operand could run in it: parity, no replication, no
   injected corruption pending (cdc_context_corrupt_next names shards of
   the dedicated layout; workers' corrupt faults are checked in both) or
   forced block weights, and a row for every data block
   (cdc__rotated_fits). Under CDCGEMM_PLAN=profiled, cdc__plan_size_blocks
   then sizes the stripes of cached weights to the devices (plan->rotated). */
int cdc__plan_rotated_eligible(cdc_context_t *context, const cdc_call_plan_t *plan,
                               int64_t rows);

/* The data blocks a per-call cut of plan (resolved: n data + r parity over
   the workers) has with its parity on demand (plan.h on_demand): one per
   worker of its n + r that is in the plan with no weights in flight to it
   (a band for a worker being restored would wait behind them), when those
   are more than n and the context allows it: it asks for the rotated
   layout, whose point is no parity computed fault-free; parity, no
   replication, no CDCGEMM_DATA_SHARDS, no forced block weights or injected
   corruption pending (they name the dedicated layout's shards), no device
   known to corrupt (every call then checks, its parity wanted at once), at
   most 64 tasks. 0: the cut runs dedicated. */
int cdc__plan_on_demand_n(cdc_context_t *context, const cdc_call_plan_t *plan);

/* Make plan an on-demand one of n data blocks (cdc__plan_on_demand_n's
   answer): the code for (n, r), plan->on_demand. Before
   cdc__plan_size_blocks. */
int cdc__plan_on_demand(cdc_context_t *context, cdc_call_plan_t *plan, int n);

/* A plan of sized stripes made a dedicated one (the call cannot run in the
   rotated layout after all): equal blocks of rows, nothing staged. */
void cdc__plan_unrotate(cdc_call_plan_t *plan, int64_t rows);

/* Where a sized plan computes its data blocks: CDC_HERE_BUDGET, they would
   not fit their homes' memory (over_budget); CDC_HERE_FASTER, it is
   predicted faster here (local_faster); 0, on the workers. */
enum { CDC_HERE_BUDGET = 1, CDC_HERE_FASTER = 2 };
int cdc__plan_here(const cdc_call_plan_t *plan);

/* The last sized call's plan and prediction (context.h) into *record.
   Thread-safe. */
void cdc__plan_last(cdc_context_t *context, cdc_plan_record_t *record);


/* The operand a caller's split cuts. transposed: T is the caller's result
   transposed (column-major C, or a layer's y = x·Wᵀ whose output split cuts
   W = Bt), so the caller's rows are T's columns. */
cdc_shard_side_t cdc__plan_cut_side(cdc_split_t split, int transposed);

/* The caller's split that cutting `side` is (the inverse of the above). */
cdc_split_t cdc__plan_side_split(cdc_shard_side_t side, int transposed);

/* Per-call bytes (inputs out to every shard + results back) of T = A·Btᵀ
   (A m x k, Bt ncols x k) when A's rows (split = ROWS) or Bt's rows
   (split = COLUMNS) are sharded over n data + r parity shards. Operands named
   cached travel once, not per call, and are not counted. */
double cdc__plan_matmul_bytes(cdc_split_t split, int64_t m, int64_t ncols, int64_t k,
                              int n, int r, int a_cached, int bt_cached);

/* AUTO resolved for T = A·Btᵀ: COLUMNS only when it moves fewer bytes and
   every data shard gets at least one real row of Bt. */
cdc_split_t cdc__plan_matmul_split(int64_t m, int64_t ncols, int64_t k, int n, int r,
                                   int a_cached, int bt_cached);

/* Per-call bytes of a conv layer, channel (ROWS) vs spatial (COLUMNS). */
double cdc__plan_conv_bytes(cdc_split_t split, const cdc_conv_geometry_t *g,
                            int64_t out_channels, int64_t batch, int n, int r);

/* Whether n equal spatial bands (ceil(out_h / n) output rows, the last
   shorter) each get at least one real output row. */
int cdc__plan_bands_fill(const cdc_conv_geometry_t *g, int n);

/* AUTO resolved for a conv layer: spatial only when it moves fewer bytes and
   every data shard gets at least one real output row. */
cdc_split_t cdc__plan_conv_split(const cdc_conv_geometry_t *g, int64_t out_channels,
                                 int64_t batch, int n, int r);

/* Input rows (of the zero-padded input) one spatial band of out_rows output
   rows reads: (out_rows - 1) * stride_h + the window's height. */
int64_t cdc__plan_band_height(const cdc_conv_geometry_t *g, int64_t out_rows);

#endif
