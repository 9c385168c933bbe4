/* context.h - the context's internals, shared by the coordinator modules. */
#ifndef CDC_CONTEXT_H_INCLUDED
#define CDC_CONTEXT_H_INCLUDED

#include "cdcgemm.h"
#include "cdcgemm_testing.h"
#include "code.h"
#include "executor.h"
#include "local_workers.h"
#include "supervisor.h"
#include "profile.h"

#include <pthread.h>

#define CDC_PROFILED_LAYOUTS 256 /* operands whose lengths are kept (a 7B model has 225) */
#define CDC_BUDGET_WARNED 16    /* over-budget shapes remembered as warned */
#define CDC_HERE_CHOICES 32     /* shapes whose here-or-workers choice is kept */

/* The lengths last given to an operand (profiled_plan.c). */
typedef struct {
    uint64_t key;        /* the operand (operand_key; 0: empty)             */
    uint64_t sized_for;  /* the calls' shape its lengths are sized for, the
                            one most of its calls have had lately; another
                            shape and the calls of each (vote_shape)      */
    uint64_t challenger;
    int sized_calls, challenger_calls;
    int64_t len[CDC_CODE_MAX_N];
    int64_t here;        /* the coordinator's share that goes with len      */
    int64_t pending[CDC_CODE_MAX_N]; /* faster lengths whose weights are
                            being staged (plan_staging.c)                  */
    int64_t pending_here;
    uint64_t pending_token; /* nonzero: pending is staged under it          */
    int pending_staged;  /* the workers hold pending: the next call uses it */
    double pending_since_ms; /* when pending's staging began               */
    double restage_ms;   /* no new staging before then (PLAN_RESTAGE_AFTER
                            times the last one's time after it ended)  */
    double wanted_since_ms; /* since when every call of its shape has
                            predicted new lengths enough faster (0: the
                            last one did not): PLAN_RESIZE_CONFIRM_MS */
} cdc_profiled_layout_t;

/* CDCGEMM_PLAN=profiled's state (profiled_plan.c): the profile it plans
   from, taken anew only when an estimate moved for good, and where the
   plan's slots live. */
typedef struct {
    cdc_worker_profile_t anchored[CDC_MAX_WORKERS];
    int workers;         /* entries of anchored; 0: none taken yet          */
    uint64_t generation; /* the profile's generations (and which estimates
                            had samples enough), summed, when taken      */
    int homes_stale;     /* anchored moved since the homes were chosen      */
    int home_of_slot[CDC_MAX_WORKERS];
    int slots;           /* n + r the homes were chosen for; 0: none yet    */
    cdc_profiled_layout_t layouts[CDC_PROFILED_LAYOUTS];
    int next_layout;     /* the entry to replace next (round robin)        */
    uint64_t last_token; /* the last staging token given                   */
    uint64_t dropped_token; /* a staging given up before it was all sent,
                            for the executor to forget (0: none)        */
    int calibrated;      /* cdc__profiled_plan_calibrate ran               */
    int repairing;       /* this call's: a failure's repair under way, or
                            one that ended less than PLAN_AFTER_REPAIR_MS
                            ago (profiled_plan.c)                       */
    double repair_seen_ms; /* the last call that saw one under way (0: none) */
} cdc_profiled_state_t;

/* What the last call sized by cdc__plan_size_blocks was planned to do, and
   what the latency model predicted for it (plan.c): for `cdcgemm-bench
   plan` and the tests, which read it with cdc_testing_last_plan, so it is
   cdcgemm_testing.h's struct (the fields are described there). */
typedef cdc_testing_plan_t cdc_plan_record_t;
_Static_assert(CDC_CODE_MAX_N <= CDC_MAX_WORKERS, "cdc_plan_record_t.block_len is too short");

struct cdc_context {
    cdc_config_t config;
    pthread_mutex_t call_lock; /* one call at a time: held by the public entry
                             points (cdc_sgemm, the layers' forward and
                             destroy) for a whole call, as cdcgemm.h
                             promises; the driver, the plan, the caches
                             and the share thread below them assume it */
    pthread_mutex_t lock; /* short sections: stats, erase_next, last_plan  */
    cdc_stats_t stats;
    uint64_t erase_next;  /* shards the next coded call treats as lost       */
    uint64_t corrupt_next; /* shards whose next results get one bad element  */
    uint64_t verify_sequence; /* coded calls cdc__verify_this_call was asked */
    double verify_credit_ms; /* the sample's budget left (cdc__verify_account) */
    int corruption_seen;  /* a parity check failed once: every call checked */
    uint64_t stripes_failed; /* under call_lock: stripes that failed the check
                             (the warnings say the first few, then 1 in
                             CDC_CHECK_WARN_EVERY)                        */
    cdc_call_report_t last_call;
    double decode_guard;  /* > 0: a rebuilt shard whose error amplification
                             exceeds decode_guard * sqrt(k) is computed
                             locally instead (BLAS entry points)            */
    int workers;          /* W: workers configured (live ones: the executor);
                             with discovery, see cdc__context_worker_total */
    int discover;         /* CDCGEMM_WORKERS=discover: W grows as workers
                             are found                                      */
    cdc_executor_t *executor;
    cdc_local_workers_t *local; /* spawned workers (embedded default), or NULL */
    cdc_supervisor_t *supervisor; /* keeps them alive (config.respawn), or NULL */
    uint64_t respawns, given_up;  /* a stopped supervisor's counters         */
    cdc_code_t *codes[CDC_CODE_MAX_R + 1][CDC_CODE_MAX_N + 1]; /* [r][n], lazily */
    double block_weights[CDC_CODE_MAX_N]; /* cdc_testing_force_block_weights:
                             data blocks sized in these proportions when a
                             call has block_weights_n data shards          */
    int block_weights_n;  /* 0: the planner's own lengths                  */
    cdc_profiled_state_t profiled; /* CDCGEMM_PLAN=profiled             */
    uint64_t budget_warned[CDC_BUDGET_WARNED]; /* operand shapes over budget
                             already warned about (plan.c), round robin  */
    int budget_warned_next;
    cdc_plan_record_t last_plan; /* under lock                           */
    double local_gflops, local_gbps; /* > 0: the coordinator is an emulated
                             device of these speeds (slow@c:gflops=,gbps=,
                             faults.h); 0: this host as it is            */
    struct {                     /* each shape's last here-or-workers choice
                                    (plan.c), so it is logged on a change */
        uint64_t key;
        int local;
    } here_choice[CDC_HERE_CHOICES];
    int here_choice_next;
    struct cdc_share_thread *share_thread; /* computes the coordinator's
                             share of a call (share_thread.h), from the
                             first call that has one                      */
    double call_began_ms; /* under call_lock: when the call in the public
                             entry point began                           */
    int call_ran_engine;  /* under call_lock: it went through the engine */
    cdc_testing_call_steps_t steps; /* under lock: where the calls' time
                             went (cdc_testing_call_steps)                */
};

/* Data shards for parity r on this context: n = L - r' over the L planned
   workers (all W without heartbeats), where r' = min(r, L / 2) keeps
   r' <= n and n >= 1 (one live worker: r' = 0); cdc__context_code applies
   the same r'. With no live worker, n = W - r (the call then runs locally).
   CDC_ECONFIG when r is out of range for W (r > W - r or W - r < 1). */
int cdc__context_data_shards(const cdc_context_t *context, int parity, int *n);

/* W: the endpoints given or the local workers; with discovery, the workers
   found so far but at least r + 1, so a plan exists before any is found
   (with none live, every shard is computed here). */
int cdc__context_worker_total(const cdc_context_t *context);

/* Workers in the plan now (bit w of *mask, may be NULL): those answering
   heartbeats, plus any silent for less than the grace period (docs/workers.md);
   W and all bits for an executor without heartbeats. Thread-safe. */
int cdc__context_plan_workers(const cdc_context_t *context, uint64_t *mask);

/* Count one completed layer or GEMM call. Thread-safe. */
void cdc__context_count_call(cdc_context_t *context);

/* The code for (n, r) on this context, built once and cached (NULL for r =
   0); r lowered so that the n + r shards fit the workers in the plan. */
int cdc__context_code(cdc_context_t *context, int n, int r, const cdc_code_t **code);

/* The code for exactly (n, r), r <= n (NULL for r = 0), whatever the
   workers: an on-demand parity's n + r tasks may outnumber them (plan.h
   on_demand). */
int cdc__context_code_exact(cdc_context_t *context, int n, int r, const cdc_code_t **code);

/* Hold / let go of the context's call lock (call_lock above). */
void cdc__context_call_begin(cdc_context_t *context);
void cdc__context_call_end(cdc_context_t *context);

/* The layer/call parity: the context's unless overridden (>= 0). */
int cdc__context_parity(const cdc_context_t *context, int parity_override);

#endif
