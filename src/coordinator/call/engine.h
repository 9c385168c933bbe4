/* engine.h - the one sequence of a coded call's steps, whatever its
 * parity layout (layout.h): dispatch, collect, verify, decode, fall back,
 * account. */
#ifndef CDC_ENGINE_H_INCLUDED
#define CDC_ENGINE_H_INCLUDED

#include "context.h"
#include "layout.h"

/* Run the call: the coordinator's share (layout->share) on the helper
   thread while the layout's tasks run on the context's executor (slots
   named by cdc_context_erase_next skipped); wait until every stripe is
   whole or decodable within cdc__decode_limit (and, in a call the check
   samples, checkable, within its wait); check the stripes that can be;
   decode the lost data blocks from parity; compute here what is still
   missing. With layout->here, every data block is computed here and
   nothing is sent. On CDC_OK every data block is the product. Updates
   the context's counters and last call report. */
int cdc__call_run(cdc_context_t *context, cdc_call_layout_t *layout);

/* Compute task here, now: a local computation on an emulated coordinator
   (slow@c:gflops=G) ends no sooner than its flops at G, as on the device
   it stands for. An empty task (no rows or columns) computes nothing. */
int cdc__call_compute_here(const cdc_context_t *context, const cdc_shard_task_t *task);

/* The largest error amplification A (cdc__code_decode_amplification) a
   decode of products of inner dimension k may have: a rebuilt block's
   predicted relative error u * sqrt(k) * A (u = 2^-24) at most 1e-4, which
   it measures at about a quarter of (docs/codes.md). Never below 8 =
   sqrt(64), the all-ones parity's A for one loss at the largest n, so
   r = 1 decodes are never refused. The BLAS entry points add their
   per-element guard (context decode_guard). */
double cdc__decode_limit(int64_t k);

/* How a call checks its data blocks against the parity. */
enum {
    CDC_CHECK_NONE = 0,
    CDC_CHECK_SAMPLED = 1, /* waits for a parity to check with, within the
                              check's wait (cdc_check_wait_t); a stripe whose
                              parity came later goes unchecked           */
    CDC_CHECK_FIRST = 2,   /* the same, with the longer wait of a context's
                              first calls                                */
    CDC_CHECK_STRICT = 3   /* the sampled wait, then a stripe it could not
                              check is computed here: no block unchecked */
};

/* How this call checks (config.verify: 0 never; 1 the first
   CDC_VERIFY_FIRST calls, then calls sampled on a budget of 2% of the
   calls' time (check_policy.c); 2 every call; under 1 and 2, every call
   strictly once a check has failed: a device is known to corrupt). Counts
   the call; takes the context's lock. */
int cdc__verify_this_call(cdc_context_t *context);

/* The sample's budget, under the context's lock: a coded call of call_ms
   that checked as `check` and waited wait_ms past decodable for it. */
void cdc__verify_account(cdc_context_t *context, int check, double call_ms, double wait_ms);

/* How long a checked call waits for the parity it checks with, past the
   moment its results first sufficed (decodable): half the time it took to
   get there, so a straggler costs a checked call at most 1.5x; twice that
   time in a context's first calls (CDC_CHECK_FIRST), which catch a device
   that corrupts every result, so that a parity a busy host delays is still
   waited for there (at most 3x, for those calls only). A parity sent on
   demand (task.h) starts only once a worker is done with its own task, a
   task's time after the data: such a call waits once more that time
   (parity_after). */
typedef struct {
    double started_ms;   /* the call's dispatch                           */
    double decodable_ms; /* when its results first sufficed; < 0: not yet */
    double patience;     /* the wait over the time to decodable           */
} cdc_check_wait_t;

void cdc__check_wait_start(cdc_check_wait_t *wait, int check, int parity_after);
/* Whether the call is done: decodable and either checkable (a parity to
   check with is in) or past the wait. Reads the clock. */
int cdc__check_wait_over(cdc_check_wait_t *wait, int decodable, int checkable);
/* What the check cost a call that ended at done_ms: its wait past
   decodable (0 if it never waited). */
double cdc__check_wait_past_decodable(const cdc_check_wait_t *wait, double done_ms);

#endif
