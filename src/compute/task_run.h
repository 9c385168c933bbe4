/* task_run.h - running one shard task on this machine's OpenBLAS. */
#ifndef CDC_TASK_RUN_H_INCLUDED
#define CDC_TASK_RUN_H_INCLUDED

#include "task.h"

#include <stdint.h>

/* Run one task here and now with OpenBLAS: on a worker, in the in-process
   executor, and for the coordinator's local fallback. CDC_ENOMEM when the
   im2col buffer cannot be had. Thread-safe (per-thread scratch). */
int cdc__task_run_local(const cdc_shard_task_t *task);

/* What cdc__task_run_local has computed in this process so far: the work
   of every task that ran (2*a_rows*k*cols) and the wall time it took. In
   the coordinator that is its own CPU's work (local fallbacks, the
   in-process executor), which its profile reads (src/coordinator/profile/profile.h);
   worker processes count theirs apart, per task (src/worker/compute.c).
   Workers run as threads of the coordinator's process (some tests) would
   add theirs here too. Thread-safe. */
typedef struct {
    uint64_t flops;
    uint64_t busy_us;
} cdc_task_meter_t;

void cdc__task_run_meter(cdc_task_meter_t *meter);

#endif
