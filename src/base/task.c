/* task.c - the parts of a streamed shard task (task.h). */
#include "task.h"

#include <stddef.h>

cdc_shard_task_t cdc__task_part(const cdc_shard_task_t *task, int part, int64_t *first_row)
{
    cdc_shard_task_t piece = *task;
    piece.lead_rows = piece.part_rows = 0;
    piece.tail = NULL;
    *first_row = 0;
    if (cdc_task_parts(task) == 1)
        return piece;
    if (part == 0) {
        piece.a_rows = task->lead_rows;
        return piece;
    }
    int64_t first = task->lead_rows + (int64_t) (part - 1) * task->part_rows;
    int64_t rows = task->a_rows - first;
    piece.a_rows = rows < task->part_rows ? rows : task->part_rows;
    piece.a = task->a ? task->a + first * task->k : NULL; /* (NULL: built when needed) */
    piece.result = task->tail ? task->tail + (first - task->lead_rows) * task->cols : NULL;
    *first_row = first;
    return piece;
}

uint64_t cdc__task_bytes_out(const cdc_shard_task_t *task)
{
    if (task->kind == CDC_TASK_GEMM)
        return (uint64_t) task->cols * (uint64_t) task->k * sizeof(float);
    const cdc_conv_geometry_t *g = task->geometry;
    return (uint64_t) task->batch * (uint64_t) (g->channels * g->h * g->w) * sizeof(float);
}
