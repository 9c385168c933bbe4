/* cdcgemm_testing.h - test and demo hooks of cdcgemm: fault injection into the
   next coded call, where the plan's slots live, forced sizes of the data
   blocks, and what the bench reads of a context besides cdcgemm.h (its
   embedded workers' processes, the last call's plan, the workers' status and
   live profile). Not part of the stable API of cdcgemm.h (docs/abi.md): a
   hook or a struct here may change or go in any minor release. */
#ifndef CDCGEMM_TESTING_H_INCLUDED
#define CDCGEMM_TESTING_H_INCLUDED

#include "cdcgemm.h"

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Erasure injection for tests and demos: the next coded call treats the shards
   whose bit is set in mask (bit i = shard i; data shards 0..n-1, parity n..n+r-1;
   in the rotated parity layout bit w = worker w's task, its data and parity
   blocks) as lost. Cleared after that call. Returns CDC_OK, or CDC_EINVAL for a NULL
   context. Thread-safe (serialised with the context's calls). */
CDC_EXPORT int cdc_context_erase_next(cdc_context_t *context, uint64_t mask);

/* Silent-corruption injection, the in-process twin of the `corrupt` fault: in
   the next coded call, one element of each arrived result whose bit is set in
   mask is changed by 1% of that result's largest magnitude. The
   parity check (config.verify) is what catches it. Cleared after that call.
   Returns CDC_OK, or CDC_EINVAL for a NULL context. Thread-safe. */
CDC_EXPORT int cdc_context_corrupt_next(cdc_context_t *context, uint64_t mask);

/* Where the plan's slots live, for tests and the planner: shard s of every
   later coded call (data 0..n-1, parity n..n+r-1) is computed on worker
   home_of_slot[s] for s < slots (distinct workers in 0..W-1), the other
   slots on the other workers in ascending order; slots 0 (home_of_slot may
   be NULL): shard s on worker s, the default. A new home gets its slot's
   weights in the background; until it holds them, a worker that does (the
   previous home) computes the shard. A call in flight is not disturbed.
   Returns CDC_OK (also for an in-process context: nothing to place), or
   CDC_EINVAL for a NULL context or a map that is not one (the message
   names the slot or worker). Thread-safe. */
CDC_EXPORT int cdc_context_set_homes(cdc_context_t *context, const int *home_of_slot,
                                     int slots);

/* Unequal data blocks on demand: every later coded call with n data shards
   cuts its operand into blocks of rows in proportion to weights[0..n-1]
   (largest remainder; each block gets at least one row when there are at
   least n rows), instead of the planner's lengths. Calls with another number
   of data shards are unaffected. n = 0 (or weights NULL) restores the
   planner. Returns CDC_OK, or CDC_EINVAL for a NULL context, n outside
   0..64 or a weight that is not finite and > 0. Thread-safe. */
CDC_EXPORT int cdc_testing_force_block_weights(cdc_context_t *context,
                                               const double *weights, int n);

/* ---- what the bench reads of a context ------------------------------------ */

/* The embedded workers (config.local_workers, spawned by the context as its
   children): how many, 0 for a NULL context or one without (endpoints,
   discovery, in process). Thread-safe. */
CDC_EXPORT int cdc_testing_local_worker_count(cdc_context_t *context);

/* The pid of the process serving embedded worker `worker` now (a respawned
   worker's new one), for crash and stop injection from outside: > 0, or
   <= 0 when there is none (a NULL context, no embedded workers, worker out
   of range, or not running now). Thread-safe. */
CDC_EXPORT long cdc_testing_local_worker_pid(cdc_context_t *context, int worker);

/* The plan of the last call the context planned (a coded call, or one the
   plan ran on the coordinator): its split, n, r, block lengths and where each
   slot ran, and the latency model's prediction for it. The library keeps its
   last plan in this struct (src/coordinator/context/context.h). */
typedef struct {
    cdc_split_t split;
    int n, r;
    int64_t block_len[CDC_MAX_WORKERS]; /* data blocks' rows, 0..n-1 (a
                                           parity block: the longest)     */
    int64_t here_rows;                  /* the coordinator's own share      */
    int home[CDC_MAX_WORKERS];          /* slot s's worker, s < n + r       */
    double expected_ms; /* predicted, nothing failing (the n-th shard done);
                           < 0: the profile cannot predict it yet        */
    double worst_ms;    /* predicted, every shard done (after a crash)     */
    int over_budget;    /* ran on the coordinator: over the workers' memory
                           budgets (budget_fallbacks)                     */
    int here;           /* ran on the coordinator, predicted faster there
                           (planned_local): expected_ms is that prediction */
    int rotated;        /* ran in the rotated parity layout: block_len[w]
                           is worker w's data rows (w < n + r, on
                           home[w]), the prediction that layout's (its parity
                           computed only when a block is missing)        */
    int on_demand;      /* a per-call cut (a spatial conv) whose parity is
                           sent only when a band is lost or late: n bands
                           on home[0..n-1], r parity blocks on no worker
                           until then; the prediction that of the n bands */
} cdc_testing_plan_t;

/* The last planned call's plan into *plan (all zero before the first).
   CDC_OK, or CDC_EINVAL for a NULL argument. Thread-safe. */
CDC_EXPORT int cdc_testing_last_plan(cdc_context_t *context, cdc_testing_plan_t *plan);

/* 1 while the plan has re-sized blocks of cached weights that the workers
   are still taking in (one slot at a time, that slot an erasure meanwhile:
   the calls run one parity short), or new lengths for them that it is
   confirming before it stages them (they must stay predicted faster for
   3 s), else 0 (also for NULL). Between calls,
   from the thread that makes them: a benchmark's warm-up waits for it. */
CDC_EXPORT int cdc_testing_plan_settling(const cdc_context_t *context);

/* One remote worker as the coordinator's heartbeats see it. */
typedef struct {
    char endpoint[256];
    int live;           /* answers heartbeats now                          */
    double rtt_ms;      /* its last round trip; < 0: never answered        */
    int protocol;       /* wire protocol version it speaks (0: not heard)  */
    int has_status;     /* the fields below came from its PONGs            */
    uint64_t cache_bytes, cache_entries; /* its weight cache               */
    uint64_t max_memory; /* its --max-memory                               */
    uint64_t tasks;     /* shard tasks computed since it started           */
    uint64_t load;      /* weights and tasks queued or running now         */
    uint64_t busy_us;   /* time computing those tasks ...                  */
    uint64_t flops;     /* ... and their work                              */
} cdc_testing_worker_status_t;

/* Up to max remote workers' status into out[0..]: returns how many were
   written (0 for a NULL context or one in process). Thread-safe; never
   waits for a call in progress. */
CDC_EXPORT int cdc_testing_worker_status(cdc_context_t *context,
                                         cdc_testing_worker_status_t *out, int max);

/* Where a context's calls spent their time (cdcgemm-bench smallcalls),
   summed over the calls that went through the call engine since the
   context was made: each call's whole time in the public entry point
   (total_ms), and of it the sending of its tasks (send_ms: until the last
   was handed to the transport), the wait after that until enough results
   were in (wait_ms: the network, the workers, receiving), and the steps
   after (finish_ms: collect, check, decode, fall back, account). The rest
   of total_ms is the call's own preparation and output: the plan, the
   operands' keys and layout, the epilogue. */
typedef struct {
    uint64_t calls;
    double total_ms, send_ms, wait_ms, finish_ms;
} cdc_testing_call_steps_t;

/* The sums above into *steps. CDC_OK, or CDC_EINVAL for a NULL argument.
   Thread-safe. */
CDC_EXPORT int cdc_testing_call_steps(cdc_context_t *context, cdc_testing_call_steps_t *steps);

/* The workers' live profile now, as the JSON members that CDCGEMM_STATS
   writes: `"profile": [...]` (one object per worker: worker, live, gflops,
   mbit, rtt_ms, max_memory, cache_bytes, rate_samples, link_samples,
   generation) and, when the context has remote workers,
   `"coordinator_profile": {gflops, rate_samples}`, comma-separated and with
   no braces around them, to go inside an object. CDC_OK, or CDC_EINVAL for
   a NULL argument. Thread-safe. */
CDC_EXPORT int cdc_testing_profile_json(cdc_context_t *context, FILE *out);

/* The counters of *stats as the JSON members CDCGEMM_STATS writes ("calls":
   N, "coded_calls": N, ...), comma-separated, with no braces around them.
   CDC_OK, or CDC_EINVAL for a NULL argument. */
CDC_EXPORT int cdc_testing_stats_json(const cdc_stats_t *stats, FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* CDCGEMM_TESTING_H_INCLUDED */
