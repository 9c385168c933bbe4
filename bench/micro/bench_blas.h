/* bench_blas.h - cost of the BLAS entry points beside OpenBLAS itself. */
#ifndef CDC_BENCH_BLAS_H_INCLUDED
#define CDC_BENCH_BLAS_H_INCLUDED

/* cdcgemm-bench blas [overhead|threshold] [--reps N]: see bench_blas.c. */
int cdc_bench_blas(int argc, char **argv);

#endif
