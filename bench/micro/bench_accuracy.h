/* bench_accuracy.h - decode precision per n and losses, and the accuracy guard. */
#ifndef CDC_BENCH_ACCURACY_H_INCLUDED
#define CDC_BENCH_ACCURACY_H_INCLUDED

/* Run "cdcgemm-bench accuracy": one parsable line per (n, r, losses, k) to
   stdout (docs/codes.md). Returns 0, or 1 on a failure. */
int cdc_bench_accuracy(int argc, char **argv);

#endif
