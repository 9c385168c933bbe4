/* bench_codes.h - throughput of encode/decode and conditioning of the code schemes. */
#ifndef CDC_BENCH_CODES_H_INCLUDED
#define CDC_BENCH_CODES_H_INCLUDED

/* Run the codes benchmark ("cdcgemm-bench codes [runs]"): prints one parsable
   line per measurement to stdout. Returns 0, or 1 on a failure. */
int cdc_bench_codes(int argc, char **argv);

#endif
