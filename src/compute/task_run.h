/* task_run.h - running one shard task on this machine's OpenBLAS. */
#ifndef CDC_TASK_RUN_H_INCLUDED
#define CDC_TASK_RUN_H_INCLUDED

#include "task.h"

/* Run one task here and now with OpenBLAS: on a worker, in the in-process
   executor, and for the coordinator's local fallback. CDC_ENOMEM when the
   im2col buffer cannot be had. Thread-safe (per-thread scratch). */
int cdc__task_run_local(const cdc_shard_task_t *task);

#endif
