/* faults.h - the CDCGEMM_FAULTS schedule: parsing, and the per-call decisions a
   worker draws from it (workers apply faults as real behaviour). */
#ifndef CDC_FAULTS_H_INCLUDED
#define CDC_FAULTS_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#define CDC_FAULT_MAX_RULES 32

typedef enum {
    CDC_FAULT_CRASH,   /* the process exits (after= calls)                  */
    CDC_FAULT_HANG,    /* stops answering, keeps its sockets (after=, for=) */
    CDC_FAULT_DELAY,   /* reply delayed (dist=fixed|exp|pareto, ms/mean, p) */
    CDC_FAULT_DROP,    /* reply never sent (p)                              */
    CDC_FAULT_CORRUPT, /* one element of the reply is wrong (p)             */
    CDC_FAULT_SLOW,    /* compute stretched (x=FACTOR, or gflops=G and/or
                          gbps=B: a device of that compute rate and memory
                          bandwidth)                                       */
    CDC_FAULT_LINK,    /* per-message link emulation (mbit=, lat=MS)         */
    CDC_FAULT_MISREPORT, /* PONG status lies (memory=, rate=, flap=): a buggy
                           or hostile worker the coordinator trusts        */
    CDC_FAULT_DISK     /* the device's storage reads at mbyte= MB/s: what a
                          weight store (--store) load occupies it         */
} cdc_fault_kind_t;

typedef enum { CDC_DIST_FIXED, CDC_DIST_EXP, CDC_DIST_PARETO } cdc_fault_dist_t;

/* A rule's target "c": the coordinator's own compute (slow:gflops= only),
   so an edge coordinator is emulated like its workers. */
#define CDC_FAULT_COORDINATOR (-2)

typedef struct {
    cdc_fault_kind_t kind;
    int target;            /* worker index, -1 for every worker ('*'), or
                              CDC_FAULT_COORDINATOR ('c')                   */
    long after;            /* crash/hang: calls served before it strikes;
                              slow: calls served before it applies          */
    double for_ms;         /* hang: duration; 0 = for ever                  */
    cdc_fault_dist_t dist; /* delay distribution                            */
    double ms;             /* delay: fixed delay or mean                    */
    double p;              /* probability per call (delay/drop/corrupt)     */
    double x;              /* slow: compute time factor (>= 1), 0 = unset   */
    double gflops;         /* slow: emulated device speed, 0 = unset        */
    double gbps;           /* slow: emulated memory bandwidth, GB/s, over
                              the operands a task streams; 0 = unset       */
    double mbit;           /* link: bandwidth in Mbit/s, 0 = unlimited      */
    double lat_ms;         /* link: one-way latency per message             */
    double memory;         /* misreport: max_memory claimed, 0 = the truth  */
    double rate;           /* misreport: GFLOP/s claimed, 0 = the truth     */
    int flap;              /* misreport: a new instance in every PONG       */
    double mbyte;          /* disk: read rate in MB/s                       */
} cdc_fault_rule_t;

typedef struct {
    int count;
    cdc_fault_rule_t rules[CDC_FAULT_MAX_RULES];
    uint64_t seed;         /* from a seed=N rule; 1 when absent             */
} cdc_fault_plan_t;

/* Parse "rule;rule;..." (grammar in docs/faults.md). An empty string is an
   empty plan. CDC_ECONFIG with a detail naming the bad rule and key; *plan is
   untouched on failure. */
int cdc__fault_plan_parse(const char *text, cdc_fault_plan_t *plan);

/* What a worker does with one call. */
typedef struct {
    int crash;           /* exit now, before answering                          */
    double hang_ms;      /* stop answering this long (<0: no hang, 0: for ever) */
    double delay_ms;     /* extra time before the reply (delay + slow + link)   */
    double latency_ms;   /* the part of delay_ms that is link propagation
                            (2·lat): it does not occupy the emulated device  */
    double slow_ms;      /* the part of delay_ms that is a slow fault's
                            stretched compute (the device is computing)     */
    int slow_onset;      /* a slow rule of after= this call took over now       */
    int drop;            /* never send the reply                                */
    int corrupt;         /* change one element of the reply                     */
    uint64_t corrupt_at; /* which element (mod the reply length)                */
} cdc_fault_decision_t;

/* Per-worker fault state: call count and a seeded generator. */
typedef struct {
    cdc_fault_plan_t plan; /* rules that apply to this worker */
    int worker;
    int incarnation;       /* 0: the slot's first process; N: its N-th respawn */
    long calls;
    uint64_t rng;
} cdc_fault_state_t;

void cdc__fault_state_init(cdc_fault_state_t *state, const cdc_fault_plan_t *plan, int worker);

/* A respawned worker (incarnation N >= 1 of its slot): the one-shot rules
   (crash, hang after= calls) fired in an earlier process and do not fire
   again; the others keep applying, from a stream of their own per
   incarnation (still reproducible from the seed). */
void cdc__fault_state_set_incarnation(cdc_fault_state_t *state, int incarnation);

/* Decide one call's faults. compute_ms is the time the call's real compute
   took, flops its work, bytes_read the operand bytes its GEMM streams (a
   slow rule's gbps= reads them), bytes_in/bytes_out the request and reply
   payloads. The same seed and call sequence give the same decisions. */
void cdc__fault_next(cdc_fault_state_t *state, double compute_ms, double flops,
                     double bytes_read, size_t bytes_in, size_t bytes_out,
                     cdc_fault_decision_t *decision);

/* A streamed task's later part (a parity block sent after the task's first
   RESULT, whose cdc__fault_next decided the task's faults): only what the
   device does to it, the slow rules in force for that task (its compute
   stretched) and the link (its bytes, and one latency: it travels one
   way). Counts no call and draws nothing. */
void cdc__fault_part(const cdc_fault_state_t *state, double compute_ms, double flops,
                     double bytes_read, size_t bytes_out, cdc_fault_decision_t *decision);

/* This worker's link rules applied to one message of `bytes` outside the
   calls (the WEIGHTS a coordinator ships, a barrier PONG): *transfer_ms the
   time its bytes take at mbit (the same arithmetic as a call's transfer in
   cdc__fault_next), *latency_ms the one-way latency (lat). Counts no call and
   draws nothing, so the calls' fault sequence is unchanged. Returns 1 when
   a link rule applies to this worker, else 0 (both times 0). */
int cdc__fault_link(const cdc_fault_state_t *state, size_t bytes, double *transfer_ms,
                    double *latency_ms);

/* The time this worker's disk rules take to read `bytes` from its store
   (the sum over the rules, ms; 0 without one). Counts no call. */
double cdc__fault_disk_ms(const cdc_fault_state_t *state, size_t bytes);

/* What worker state's misreport rules make its PONGs claim (the latest
   rule's value of each key wins; 0 where none lies). */
typedef struct {
    double memory; /* max_memory, bytes */
    double rate;   /* flops reported as busy time at this GFLOP/s */
    int flap;      /* another instance number in every PONG */
} cdc_fault_misreport_t;

void cdc__fault_misreport(const cdc_fault_state_t *state, cdc_fault_misreport_t *out);

/* An emulated device's speeds: GFLOP/s and GB/s of operand streaming, 0
   for not emulated. */
typedef struct {
    double gflops, gbps;
} cdc_emulated_device_t;

/* The coordinator as an emulated device (slow@c:gflops=G,gbps=B; zeros for
   none): its local computations take at least cdc__emulated_ms (engine.c),
   and the planner predicts them so (local_cost.h). */
cdc_emulated_device_t cdc__fault_coordinator(const cdc_fault_plan_t *plan);

/* The emulated device's time (ms) for flops that stream bytes_read of
   operands: the larger of its compute and its memory time (a worker's slow
   rule likewise, docs/faults.md); 0 for a device not emulated. */
double cdc__emulated_ms(cdc_emulated_device_t device, double flops, double bytes_read);

#endif
