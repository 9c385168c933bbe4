/* planner.h - the latency model of a coded call on devices of different speeds:
 * block lengths sized to each shard's home, and which workers are homes.
 *
 * Pure (no context, no clock, no locks): the caller turns the live profile
 * (profile.h) and a call's work (plan.h, cdc_block_cost_t) into one cost line
 * per shard home, and applies what comes back. */
#ifndef CDC_PLANNER_H_INCLUDED
#define CDC_PLANNER_H_INCLUDED

#include <stdint.h>

/* A shard's predicted time on its home for a block of len rows:
   fixed_ms + per_row_ms * len; an empty data block (len 0) is not sent: 0.
   fixed_ms holds the round trip and the bytes every shard gets whatever its
   length (the whole operand); per_row_ms the compute and the bytes of one
   row (the cut operand's row, the result's). */
typedef struct {
    double fixed_ms, per_row_ms;
    double max_rows; /* the most rows the home can hold (its memory budget):
                        0 no limit; below 1, none (its block stays empty) */
    double halo_ms;  /* the part of fixed_ms that computes a spatial band's
                        halo rows: counted whole here, exactly by the
                        profiled plan's predictions (profiled_plan.c)   */
} cdc_shard_cost_t;

/* The predicted latency of a call whose n data blocks have lengths len and
   whose r parity blocks (each as long as the longest data block) run on the
   homes costed by parity: the time by which every shard is done. Any one
   shard lost then still leaves a decodable call by that time, so the model
   holds after a crash too (no call waits on a slow parity's home). */
double cdc__planner_latency(const cdc_shard_cost_t *data, int n,
                            const cdc_shard_cost_t *parity, int r, const int64_t *len);

/* The predicted latency of the same call when nothing fails: the codes
   decode from any n of the n + r shard results, so a call ends when its
   n-th shard is done (the later ones are cancelled). What a call is
   expected to take; cdc__planner_latency is what it may take after a crash,
   and what the planner minimises. */
double cdc__planner_latency_first_n(const cdc_shard_cost_t *data, int n,
                                    const cdc_shard_cost_t *parity, int r, const int64_t *len);

/* Lengths of n data blocks of rows (rows >= 1) that minimise
   cdc__planner_latency: every data home finishes its block at about the
   same time, and no block is longer than the parity homes can compute by
   then, nor longer than its home's max_rows (a parity home's caps the
   longest block). A block may be empty (0 rows: not sent, its result zero)
   where its home's fixed cost passes that time, or its home holds no row.
   *predicted_ms (may be NULL) receives the latency. CDC_OK; CDC_ENOMEM when
   the rows do not fit the homes' max_rows (len untouched); CDC_EINVAL naming
   the bad argument. */
int cdc__planner_block_lengths(const cdc_shard_cost_t *data, int n,
                               const cdc_shard_cost_t *parity, int r, int64_t rows,
                               int64_t *len, double *predicted_ms);

/* The homes of a plan of n data + r parity slots among `workers` workers
   (cost[w]: worker w's cost line on a reference call of rows rows): the
   n + r workers of least per-row cost hold slots (the rest are spares),
   and among them every choice of the r parity homes is tried; the one of
   least predicted latency wins (ties: the earlier choice, so an unchanged
   profile gives an unchanged answer); choices whose blocks do not fit the
   homes' max_rows are skipped (CDC_ENOMEM when none fits). home_of_slot[s] receives the worker
   of slot s (data slots first, each group in worker order). *predicted_ms
   (may be NULL) receives its latency. CDC_OK or CDC_EINVAL. */
int cdc__planner_homes(const cdc_shard_cost_t *cost, int workers, int n, int r,
                       int64_t rows, int *home_of_slot, double *predicted_ms);

#endif
