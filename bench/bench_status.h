/* bench_status.h - `cdcgemm-bench status`: the workers at a glance. */
#ifndef CDC_BENCH_STATUS_H_INCLUDED
#define CDC_BENCH_STATUS_H_INCLUDED

/* `cdcgemm-bench status [--json]`: connects as the CDCGEMM_* environment
   says (an endpoint list, discover, or local workers), waits for the
   heartbeats, and lists every worker: endpoint, alive, round-trip time,
   protocol version, cached weight bytes and entries, memory budget, tasks
   served, current load, time spent computing and its average rate; a table,
   or one JSON object with --json (with the profile, profile.h). Exit 0
   when every worker is alive, 1 when one is not, 2 on bad usage. */
int cdc_bench_status(int argc, char **argv);

#endif
