/* bench_run.h - `cdcgemm-bench [--model ...|--layer ...] [options]`. */
#ifndef CDC_BENCH_RUN_H_INCLUDED
#define CDC_BENCH_RUN_H_INCLUDED

#include <stdio.h>

/* Parse the options (argv[0] is the program or command name), run, report.
   Returns the process exit status: 0 when no request was lost or wrong. */
int cdc_bench_run(int argc, char **argv);

/* The same; plan_table 1 also records each layer's plan and prints the
   table of `cdcgemm-bench plan` (bench_plan.h). */
int cdc_bench_run_mode(int argc, char **argv, int plan_table);

/* The driver's options, for --help. */
void cdc_bench_run_usage(FILE *out);

#endif
