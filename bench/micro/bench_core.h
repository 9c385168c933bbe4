/* bench_core.h - the coded path's own costs beside the GEMM, per model layer. */
#ifndef CDC_BENCH_CORE_H_INCLUDED
#define CDC_BENCH_CORE_H_INCLUDED

/* `cdcgemm-bench core [--model alexnet|vgg16|all] [--repeat N]`: one line per
   (layer, r) on stdout. Returns the process exit status. */
int cdc_bench_core(int argc, char **argv);

#endif
