/* executor_local.c - the in-process executor: shard tasks on local OpenBLAS. */
#include "executor.h"

#include "clock.h"
#include "task_run.h"

#include <stdlib.h>
#include <string.h>

/* Operands built from their sources (operand_source.h) that the virtual
   workers keep, as real workers keep what they were sent: building them
   every call would cost a copy and an encode per call. An entry holds its
   owner (the task's a_hold) and goes once the owner is retired. */
enum { KEPT_OPERANDS = 256 };

typedef struct {
    const cdc_operand_source_t *source; /* NULL: a free entry             */
    cdc_hold_t *owner;                  /* the source's owner, retained    */
    const float *data;
    cdc_hold_t *data_hold;
    uint64_t used;                      /* LRU stamp                       */
} kept_operand_t;

typedef struct {
    cdc_executor_t base;
    kept_operand_t kept[KEPT_OPERANDS];
    uint64_t stamp;
} local_executor_t;

static void kept_drop(kept_operand_t *entry)
{
    cdc__hold_release(entry->data_hold);
    cdc__hold_release(entry->owner);
    memset(entry, 0, sizeof *entry);
}

/* Task's operand: the one kept for its source, or built now and kept
   (the least recently used or a retired owner's entry replaced). */
static int kept_operand(local_executor_t *self, const cdc_shard_task_t *task,
                        const float **data)
{
    kept_operand_t *slot = NULL;
    for (int i = 0; i < KEPT_OPERANDS; i++) {
        kept_operand_t *entry = &self->kept[i];
        if (entry->source && cdc__hold_retired(entry->owner))
            kept_drop(entry);
        if (entry->source == task->a_source && entry->owner == task->a_hold) {
            entry->used = ++self->stamp;
            *data = entry->data;
            return CDC_OK;
        }
        if (!slot || (slot->source && (!entry->source || entry->used < slot->used)))
            slot = entry;
    }
    kept_drop(slot);
    int rc = task->a_source->open(task->a_source, &slot->data, &slot->data_hold);
    if (rc != CDC_OK)
        return rc;
    slot->source = task->a_source;
    slot->owner = cdc__hold_retain(task->a_hold);
    slot->used = ++self->stamp;
    *data = slot->data;
    return CDC_OK;
}

/* Run task here, its operand built from its source when it has no other. */
static int run_here(local_executor_t *self, const cdc_shard_task_t *task)
{
    if (task->a || !task->a_source)
        return cdc__task_run_local(task);
    cdc_shard_task_t built = *task;
    int rc = kept_operand(self, task, &built.a);
    return rc == CDC_OK ? cdc__task_run_local(&built) : rc;
}

static int local_run(cdc_executor_t *base, cdc_shard_task_t *tasks, int count, int n,
                     int needed, const cdc_call_goal_t *goal, uint64_t *arrived)
{
    local_executor_t *self = (local_executor_t *) base;
    (void) n;
    (void) needed; /* every task runs here: all of them always arrive */
    (void) goal;
    *arrived = 0;
    double start = cdc__clock_ms();
    for (int t = 0; t < count; t++) {
        /* No data task here is ever lost or late: an on-demand task runs
           only when wanted anyway (CDC_ON_DEMAND_FREE). */
        tasks[t].released = tasks[t].on_demand == CDC_ON_DEMAND_FREE;
        if (tasks[t].on_demand == CDC_ON_DEMAND_LATE) {
            tasks[t].dispatched = 0;
            tasks[t].parts_in = 0;
            continue;
        }
        int rc = run_here(self, &tasks[t]);
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

static void local_destroy(cdc_executor_t *base)
{
    local_executor_t *self = (local_executor_t *) base;
    for (int i = 0; i < KEPT_OPERANDS; i++)
        kept_drop(&self->kept[i]);
    free(self);
}

/* No remote workers: every other op NULL (executor.c answers for them). */
static const cdc_executor_ops_t local_ops = {
    .name = "local", .run = local_run, .destroy = local_destroy};

cdc_executor_t *cdc__executor_local_new(void)
{
    local_executor_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->base.ops = &local_ops;
    return &self->base;
}
