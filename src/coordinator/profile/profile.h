/* profile.h - a live profile of each worker (and of the coordinator's own
 * CPU): compute rate, link bandwidth, round trip, memory budget and use.
 *
 * Pure: no socket, no clock, no thread. Whoever has the data feeds it,
 * passing the times it measured: the client's heartbeat thread every PONG
 * (round trip, and the worker's status: cumulative busy_us and flops, its
 * memory), the calling thread each call's completed tasks (transport/client.h,
 * cdc_client_observer_t), the executor the coordinator's own meter
 * (task_run.h). The planner reads snapshots (cdc__context_profile).
 *
 * Estimators, each an EWMA (weight CDC_PROFILE_ALPHA on the new sample; the
 * first sample is taken as it is):
 *   rate    Δflops / Δbusy_us between two PONGs, once Δbusy_us reaches
 *           CDC_PROFILE_MIN_BUSY_US (shorter busy spans accumulate: a task
 *           or two of a few µs says more about clock jitter than speed). A
 *           new `instance` (a respawned process) or counters that went
 *           backwards restart the baseline; the estimates are kept. A
 *           sample outside CDC_PROFILE_MIN/MAX_GFLOPS makes the worker
 *           implausible: its rate is dropped, never measured again until
 *           another process (instance) takes its place, and the planner
 *           takes it for the slowest plausible device (a bug or a lie must
 *           not buy a worker the biggest share). Logged once.
 *           Only the tasks that are not thin (status.h) count: a thin
 *           task's time is set by the bytes its GEMM streams, so it would
 *           make a device look slower at arithmetic than it is (a Pi-class
 *           device: 4 GFLOP/s in a 64-column GEMM, 0.5 in a matrix-vector
 *           product, bound by 1 GB/s). Until one has, the thin tasks' own
 *           rate stands for it (a lower bound: a device that only ever
 *           computes matrix-vector products is planned by them).
 *   stream  the thin tasks' Δbytes / Δbusy_us (GB/s), the same way (their
 *           own baseline, CDC_PROFILE_MIN_BUSY_US, CDC_PROFILE_MIN/MAX_GBPS
 *           for plausible). With the rate it makes a roofline: a task takes
 *           the larger of flops / rate and streamed bytes / stream, as
 *           local_cost.h predicts the coordinator's own. Unmeasured (a
 *           worker that never computed a thin task, or an older one that
 *           does not report them): no memory term, as before it existed.
 *           Thin tasks that computed at about the device's rate
 *           (CDC_PROFILE_AT_RATE) were bound by arithmetic, not memory: a
 *           conv layer's 4 filters against 3,025 pixels (2 flops a byte,
 *           thin by status.h's rule) on a 4 GFLOP/s device whose memory is
 *           far faster. What they streamed is a floor, the bandwidth while
 *           no sample is taken (gbps_floor), never a sample: taken as one,
 *           it set the demo's workers at 2 GB/s, the calibration then
 *           measured nothing more, and the first FC blocks went out sized
 *           for memory 4x slower than it is (re-sized and staged for 14 s).
 *   rtt     heartbeat PING -> PONG of the latest PING only (an answer to an
 *           older one comes from a worker that stalled; it says nothing of
 *           the link), the estimator fed the least of the latest
 *           CDC_PROFILE_RTT_WINDOW, as TCP BBR takes its min RTT: a worker
 *           answers a PING after the task it is computing, so under calls
 *           most samples measure the task (7 ms against 0.7 idle, on
 *           emulated devices kept busy), and a plan sized by them would
 *           swing with the load.
 *   link    from a call's completed tasks on one worker: the time not spent
 *           computing or in the round trip,
 *               comm = elapsed - compute - rtt    (compute: the roofline above),
 *           over the bytes that moved for them (task operands and weights
 *           sent in the call, plus results): mbit = 8 bytes / comm. Only when
 *           the rate is known and comm is clearly positive (at least
 *           CDC_PROFILE_MIN_COMM_MS) and enough bytes moved
 *           (CDC_PROFILE_MIN_LINK_BYTES): a fast link, or a transfer of a few
 *           KB (a GEMV's input, ~1 ms on any link, as long as the host's own
 *           jitter), leaves only noise there, and stays unmeasured (0: free
 *           to the predictor). No threshold
 *           relative to elapsed: it would keep the ordinary samples of a
 *           link that is small beside the compute and let only the calls
 *           that queued through, a biased choice the window below cannot
 *           mend.
 *           Its weakness: comm is a remainder. It also holds whatever else
 *           delayed those tasks: queueing behind an earlier call's work
 *           (cancelled tasks still in service, background weights on the
 *           same link), the error of the rate estimate, the scheduler of a
 *           loaded host, and one-way latencies the heartbeat does not see
 *           (a worker's emulated `lat` delays task replies, not PONGs). All
 *           of those make the link look slower, never faster; small
 *           transfers suffer most. So, as TCP BBR does for its bottleneck
 *           bandwidth, the estimator is fed the largest of the latest
 *           CDC_PROFILE_LINK_WINDOW samples, not each sample: a call that
 *           queued behind a weight transfer does not make the link slow,
 *           while a link that really slowed down shows once the window has
 *           passed.
 * A generation counter per worker tells the planner that an estimate
 * "moved for good": it bumps when the rate, bandwidth or round trip is
 * measured for the first time, or when CDC_PROFILE_PERSIST samples in a row
 * fall on the same side of its value at the last bump, each more than
 * CDC_PROFILE_MOVE away (relative; the round trip also by
 * CDC_PROFILE_MOVE_RTT_MS). The estimate then restarts from their mean (a
 * new level is taken at once, not approached through a staircase of bumps).
 * One outlier, or samples scattering on both sides, never bump it. */
#ifndef CDC_PROFILE_H_INCLUDED
#define CDC_PROFILE_H_INCLUDED

#include "cdcgemm.h"
#include "status.h"

#include <stdint.h>

#define CDC_PROFILE_ALPHA 0.25          /* EWMA weight of a new sample            */
#define CDC_PROFILE_MIN_BUSY_US 2000    /* busy time a rate sample needs          */
#define CDC_PROFILE_MIN_COMM_MS 1.0     /* a link sample's least comm time ...    */
#define CDC_PROFILE_MIN_LINK_BYTES 65536 /* ... and least bytes                   */
#define CDC_PROFILE_LINK_WINDOW 8      /* link samples the max is taken over     */
#define CDC_PROFILE_RTT_WINDOW 16      /* round trips the min is taken over      */
#define CDC_PROFILE_MOVE 0.2            /* relative move that counts              */
#define CDC_PROFILE_MOVE_RTT_MS 1.0     /* a round trip must move this much too:
                                           less is scheduling noise next to
                                           shards of tens of ms            */
#define CDC_PROFILE_PERSIST 3           /* samples in a row away before a bump    */
#define CDC_PROFILE_NOMINAL_GFLOPS 1.0  /* predictor's rate when none is known    */
/* A rate sample outside these is a report no device could make: a worker
   claiming it is believed in nothing it says of its speed (below). */
#define CDC_PROFILE_MIN_GFLOPS 1e-4     /* 100 kFLOP/s: below a microcontroller   */
#define CDC_PROFILE_MAX_GFLOPS 1e5      /* 100 TFLOP/s: beyond any CPU's fp32
                                           peak several times over          */
/* A thin task's flop rate at least this share of the device's own: it
   was bound by arithmetic, not memory, and its bandwidth is only a floor. */
#define CDC_PROFILE_AT_RATE 0.8
#define CDC_PROFILE_MIN_GBPS 1e-5       /* 10 kB/s: no device streams slower     */
#define CDC_PROFILE_MAX_GBPS 1e4        /* 10 TB/s: beyond any memory's          */

typedef struct {
    double gflops;        /* compute rate, 0 = not measured yet            */
    double gbps;          /* streaming bandwidth of thin tasks (GB/s), 0 =
                             not measured: no memory term                 */
    double mbit;          /* link bandwidth, 0 = not measured yet          */
    double rtt_ms;        /* heartbeat round trip, < 0 = not measured yet  */
    uint64_t max_memory;  /* its --max-memory (0 = unlimited/unknown)      */
    uint64_t cache_bytes; /* its weight cache use                          */
    uint64_t rate_samples, link_samples, stream_samples;
    int gbps_floor;       /* gbps is a floor, no sample (stream_samples 0):
                             thin tasks bound by the device's arithmetic
                             streamed at least that                       */
    uint64_t generation;  /* bumps when an estimate moved for good         */
    int live;
    int implausible;      /* it reported a rate no device has: gflops 0,
                             rate_samples 0; plan it as the slowest       */
} cdc_worker_profile_t;

/* Snapshot of every worker's profile (index = worker index in the plan);
   returns the count (<= max). Thread-safe. 0 for a context without remote
   workers (in-process executor). */
int cdc__context_profile(cdc_context_t *context, cdc_worker_profile_t *out, int max);

/* Every profile at once, for reports (CDCGEMM_STATS, the bench JSON). */
typedef struct {
    int count; /* workers in workers[]; 0 without remote workers */
    cdc_worker_profile_t workers[CDC_MAX_WORKERS];
    int has_coordinator;
    cdc_worker_profile_t coordinator;
} cdc_profile_report_t;

/* The context's profiles into *report. Thread-safe. */
void cdc__context_profile_report(cdc_context_t *context, cdc_profile_report_t *report);

/* The coordinator's own CPU as a profile: gflops from its local compute
   (fallbacks; task_run.h's meter), rtt 0 and a free link (it is local),
   live. CDC_OK, or CDC_EINVAL for a context without remote workers. */
int cdc__context_profile_self(cdc_context_t *context, cdc_worker_profile_t *out);

/* Predicted time (ms) for a worker to compute flops whose GEMMs stream
   `streamed` operand bytes: the larger of flops at its rate and the bytes
   at its bandwidth (a roofline; no memory term while gbps is 0), the rate
   CDC_PROFILE_NOMINAL_GFLOPS when not measured yet. */
double cdc__profile_compute_ms(const cdc_worker_profile_t *p, double flops, double streamed);

/* Predicted time (ms) for a worker to take bytes_out, compute flops that
   stream `streamed` bytes (cdc__profile_compute_ms) and send bytes_in back:
       rtt + 8 (bytes_out + bytes_in) / (mbit 1e6) 1e3 + compute
   With what is not measured yet: no round trip (rtt < 0: 0), a free link
   (mbit 0), the compute above (see cdc__profile_assume_rates for a better
   guess of the rate). */
double cdc__profile_predict_ms(const cdc_worker_profile_t *p, double flops, double streamed,
                               double bytes_out, double bytes_in);

/* Give every profile with no measured rate (rate_samples 0) the mean rate of
   those measured, or CDC_PROFILE_NOMINAL_GFLOPS when none is: a new worker
   is assumed typical until it shows otherwise; an implausible one, the
   slowest measured rate. rate_samples still tells the assumed from the
   measured. The bandwidth likewise, when some worker's is measured (none:
   no memory term for any). */
void cdc__profile_assume_rates(cdc_worker_profile_t *profiles, int count);

/* ---- one worker's estimator (pure; the table below holds one per worker) */

typedef struct {
    double value, anchor; /* the estimate; its value at the last bump       */
    int away;             /* samples in a row away from the anchor: > 0
                             above it, < 0 below                            */
    double run_sum;       /* their sum                                      */
} cdc_profile_estimate_t;

/* A process's cumulative work counters at some PONG: the baseline the
   next sample's deltas are taken from. */
typedef struct {
    uint64_t flops, bytes, busy_us;
} cdc_profile_counts_t;

typedef struct {
    cdc_profile_estimate_t rate, link, rtt; /* GFLOP/s, Mbit/s, ms          */
    cdc_profile_estimate_t stream;          /* GB/s                         */
    double link_window[CDC_PROFILE_LINK_WINDOW]; /* the latest link samples */
    double rtt_window[CDC_PROFILE_RTT_WINDOW];   /* the latest round trips    */
    uint64_t rate_samples, link_samples, rtt_samples, stream_samples, generation;
    uint64_t max_memory, cache_bytes;
    int has_base;              /* the counters below are a baseline        */
    int implausible;           /* a rate sample no device could give       */
    uint64_t instance;
    cdc_profile_counts_t base; /* the tasks not thin (bytes unused)        */
    int has_stream_base;       /* thin_base is set                         */
    cdc_profile_counts_t thin_base;
    int rate_from_thin;        /* the rate is the thin tasks' lower bound   */
    double stream_floor;       /* GB/s thin tasks bound by arithmetic
                                  streamed at least (0: none)           */
} cdc_profile_state_t;

/* Nothing measured. */
void cdc__profile_state_init(cdc_profile_state_t *state);

/* Cumulative work counters of one process (instance, 0: not reported), of
   its tasks that are not thin: a rate sample once enough busy time has
   passed since the baseline. Another process restarts both baselines. */
void cdc__profile_note_counters(cdc_profile_state_t *state, uint64_t instance, uint64_t flops,
                                uint64_t busy_us);

/* The same process's thin tasks' cumulative counters (status.h; after
   cdc__profile_note_counters): their flops, the bytes their GEMMs
   streamed and their busy time, a bandwidth sample once enough busy time
   has passed; and, while no task that is not thin has given a rate, a
   rate sample too (flops / busy: a lower bound on the rate, which the
   first such task's sample replaces). Thin tasks that computed at about
   the device's rate (CDC_PROFILE_AT_RATE) were bound by its arithmetic,
   not its memory: their bandwidth is a floor (gbps_floor), not a sample;
   so are the samples taken before the rate was known, once it shows they
   were. */
void cdc__profile_note_streaming(cdc_profile_state_t *state, uint64_t flops, uint64_t bytes,
                                 uint64_t busy_us);

/* A PONG: its round trip (rtt_ms < 0: not a sample) and the worker's status
   (NULL: none or malformed): memory, and its counters as above. */
void cdc__profile_note_pong(cdc_profile_state_t *state, double rtt_ms,
                            const cdc_status_report_t *status);

/* Tasks of one call that one worker completed: elapsed_ms from the call's
   dispatch to the last result, their flops and the operand bytes their
   GEMMs stream (their compute, cdc__profile_compute_ms), and the bytes
   that moved for them both ways. A link sample when comm is clearly
   positive (above). */
void cdc__profile_note_transfer(cdc_profile_state_t *state, double elapsed_ms, double flops,
                                double streamed, double bytes);

/* Tasks of one call that one worker had not finished when the call ended
   elapsed_ms after their dispatch (cancelled: the call was decoded without
   them), with their flops, streamed and moved bytes (as above): they take
   longer than that. The link is slower than the bandwidth that would
   explain the wait, 8 bytes / (elapsed - compute - rtt), always above the
   true link's (the tasks took longer than elapsed). When the estimate is faster than
   that bound the bound is a link sample, and the window's samples above it
   are capped to it (it contradicts them: the link is slower now); else the
   estimate itself is (a sample that agrees: the planner trusts a link after
   a few samples, profiled_plan.c). A
   device that is always decoded without, and so never completes a call, is
   measured this way: each bound moves its estimate down, the planner gives
   it less (or nothing, when its fixed bytes alone exceed what the others
   take), until it completes within the calls and is measured as it is. The
   remainder is charged to the link, like a completed call's: a rate that is
   too high makes the link look slower, never faster. The client reports no
   cut for a worker whose link may still carry weights sent before the
   call: the task queued behind them, and the bound would charge their
   transfer to it (transport/client.h). */
void cdc__profile_note_cut(cdc_profile_state_t *state, double elapsed_ms, double flops,
                           double streamed, double bytes);

/* The estimates as the planner sees them (live 0: the caller knows it). */
void cdc__profile_state_view(const cdc_profile_state_t *state, cdc_worker_profile_t *out);

/* ---- the thread-safe table: CDC_MAX_WORKERS workers and the coordinator */

typedef struct cdc_profile cdc_profile_t;

/* An empty table. CDC_OK or CDC_ENOMEM. Caller destroys it. */
int cdc__profile_new(cdc_profile_t **profile_p);

/* Accepts NULL and *NULL; nulls *profile_p. */
void cdc__profile_destroy(cdc_profile_t **profile_p);

/* The estimators above, for worker w (ignored outside 0..CDC_MAX_WORKERS-1). */
void cdc__profile_pong(cdc_profile_t *profile, int w, double rtt_ms,
                       const cdc_status_report_t *status);
void cdc__profile_transfer(cdc_profile_t *profile, int w, double elapsed_ms, double flops,
                           double streamed, double bytes);
void cdc__profile_cut(cdc_profile_t *profile, int w, double elapsed_ms, double flops,
                      double streamed, double bytes);

/* The coordinator's own meter (task_run.h), read by the caller. */
void cdc__profile_self(cdc_profile_t *profile, uint64_t flops, uint64_t busy_us);

/* Workers 0..count-1 into out (live 0); the coordinator's into *self when
   not NULL (live 1, rtt 0). */
void cdc__profile_snapshot(cdc_profile_t *profile, cdc_worker_profile_t *out, int count,
                           cdc_worker_profile_t *self);

#endif
