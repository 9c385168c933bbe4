/* bench_plan.h - `cdcgemm-bench plan`: each layer's plan (split, n, r, block
   sizes per worker) and the latency model's prediction against the
   measured time. */
#ifndef CDC_BENCH_PLAN_H_INCLUDED
#define CDC_BENCH_PLAN_H_INCLUDED

#include "run.h"

#include <stdio.h>

/* `cdcgemm-bench plan --model M | --layer SPEC [run options]`: the run of
   `cdcgemm-bench --model ...` (its options, warm-up and timed requests),
   then one line per layer: split, n, r, the data blocks' rows on their
   workers and the parity's, the median predicted and measured latency of
   its calls and their ratio; then the median over layers of
   |predicted / measured - 1|. With --json, each layer under "layers". */
int cdc_bench_plan(int argc, char **argv);

/* The table of run's layer_plans on out. */
void cdc_bench_plan_print(FILE *out, const cdc_run_t *run);

/* The layers' plans as a JSON member ("layers": [...]) of the run's object;
   nothing without layer_plans. */
void cdc_bench_plan_write_json(FILE *out, const cdc_run_t *run);

#endif
