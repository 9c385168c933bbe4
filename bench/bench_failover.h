/* bench_failover.h - coded vs uncoded latency on local workers, and recovery from a SIGKILL. */
#ifndef CDC_BENCH_FAILOVER_H_INCLUDED
#define CDC_BENCH_FAILOVER_H_INCLUDED

/* `cdcgemm-bench failover [--layers all|fc6|conv] [--requests N] [--workers W]`:
   for AlexNet fc6 (4096 x 9216) and conv1..conv5 on W (default 5) spawned
   local workers, the fault-free latency with r = 1 and r = 0 (median, p99),
   then per layer a SIGKILL of one worker with r = 1 (and r = 0): the time to
   detection, the time to the first call planned without the dead worker, and
   the median of the N calls after the kill vs the N before. One parsable
   line per measurement on stdout. Returns the process exit status. */
int cdc_bench_failover(int argc, char **argv);

#endif
