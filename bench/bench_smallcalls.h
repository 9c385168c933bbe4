/* bench_smallcalls.h - `cdcgemm-bench smallcalls`: what a batch-1 call (one
   token's matrix-vector product) costs besides its work, step by step. */
#ifndef CDC_BENCH_SMALLCALLS_H_INCLUDED
#define CDC_BENCH_SMALLCALLS_H_INCLUDED

/* `cdcgemm-bench smallcalls [--calls N] [--workers W] [--json F]`: FC
   layers of a language model's shapes called with one column, in process
   (the call engine alone) and on W local worker processes with r = 0, 1
   and 2; per configuration the call's p50 and p99, where its time went
   (cdc_testing_call_steps: preparing, sending, waiting, finishing), the
   coordinator's and the workers' CPU time per call, and the workers' PING
   round trip beside it. Exit 0, 1 when a call fails or is wrong, 2 on bad
   usage. */
int cdc_bench_smallcalls(int argc, char **argv);

#endif
