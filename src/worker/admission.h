/* admission.h - what a task costs the worker, decided before anything is allocated for it.
 *
 * The protocol bounds each matrix of a message (1 GiB), not what a task
 * costs as a whole: a 236-byte TASK_CONV (1x1 image, padding 1000) asked
 * for a 256 MB result (issue 9). Admission sums the task's working set from
 * its validated header and refuses it above --max-task-memory, and refuses
 * conv padding that is not smaller than the dilated kernel span. */
#ifndef CDC_WORKER_ADMISSION_H_INCLUDED
#define CDC_WORKER_ADMISSION_H_INCLUDED

#include "protocol.h"

#include <stddef.h>
#include <stdint.h>

/* Default --max-task-memory: every AlexNet and VGG-16 layer shard at batch 1
   fits with room to spare; the largest, VGG-16 conv1_2 on one worker, needs
   154 MB (im2col 116 MB, result 13 MB, its 13 MB input twice: received in
   chunks and gathered). docs/security.md. */
#define CDC_WORKER_DEFAULT_TASK_MEMORY ((size_t) 512 << 20)

/* The working set of a validated TASK_GEMM or TASK_CONV (zero for other
   types): cdc__task_memory_of_header's and the copies of its frames. Pure
   arithmetic on the header and the frames' addresses. */
void cdc__task_memory(const cdc_msg_t *msg, cdc_task_memory_t *memory);

/* Whether the worker runs a validated request: CDC_OK for every non-task
   message and for a task within the bounds; CDC_EDIM for conv padding not
   smaller than the dilated kernel span; CDC_ENOMEM when the working set
   exceeds max_task_memory. The text (cdc_last_error) names the limit (the
   padding and the span, or --max-task-memory with the bytes needed and the
   limit; on a 32-bit worker also its address space). Thread-safe. */
int cdc__worker_admit(const cdc_msg_t *msg, size_t max_task_memory);

#endif
