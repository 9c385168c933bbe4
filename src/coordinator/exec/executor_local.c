/* executor_local.c - the in-process executor: shard tasks on local OpenBLAS. */
#include "executor.h"

#include "clock.h"
#include "task_run.h"

#include <stdlib.h>

static int local_run(cdc_executor_t *self, cdc_shard_task_t *tasks, int count, int n,
                     int needed, const cdc_call_goal_t *goal, uint64_t *arrived)
{
    (void) self;
    (void) n;
    (void) needed; /* every task runs here: all of them always arrive */
    (void) goal;
    *arrived = 0;
    double start = cdc__clock_ms();
    for (int t = 0; t < count; t++) {
        int rc = cdc__task_run_local(&tasks[t]);
        if (rc != CDC_OK)
            return rc;
        tasks[t].elapsed_ms = cdc__clock_ms() - start;
        tasks[t].dispatched = 1;
        tasks[t].parts_in = cdc_task_parts(&tasks[t]) >= 32
                                ? UINT32_MAX
                                : (UINT32_C(1) << cdc_task_parts(&tasks[t])) - 1;
        *arrived |= UINT64_C(1) << t;
    }
    return CDC_OK;
}

static void local_destroy(cdc_executor_t *self)
{
    free(self);
}

/* No remote workers: every other op NULL (executor.c answers for them). */
static const cdc_executor_ops_t local_ops = {
    .name = "local", .run = local_run, .destroy = local_destroy};

cdc_executor_t *cdc__executor_local_new(void)
{
    cdc_executor_t *self = malloc(sizeof *self);
    if (self)
        self->ops = &local_ops;
    return self;
}
