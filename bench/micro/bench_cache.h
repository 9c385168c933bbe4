/* bench_cache.h - the worker's weight cache: insert speed, and a real worker's RSS under --max-memory. */
#ifndef CDC_BENCH_CACHE_H_INCLUDED
#define CDC_BENCH_CACHE_H_INCLUDED

/* `cdcgemm-bench cache [--entries N] [--max-memory MIB] [--max-entries E]
   [--entry-bytes B] [--fill F] [--worker PATH]`: (i) N (200,000) distinct
   small entries into a cache, timed; (ii) a real cdcgemm-worker with
   --max-memory MIB (64) and --max-entries E (its default)
   filled over ipc:// with F (3) x BYTES of distinct B-byte (4096) weight
   matrices through the transport client; its RSS growth against BYTES. One
   parsable line per measurement on stdout. Returns the exit status. */
int cdc_bench_cache(int argc, char **argv);

#endif
