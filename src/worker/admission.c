/* admission.c - a task's working set and conv padding, checked before it is queued.
 *
 * Everything is counted that the worker allocates for a task, besides the
 * message itself: the operands it carries (libzmq already holds them, and
 * they stay until the task is done), a copy of any operand that is not one
 * float-aligned frame (compute.c gathers chunks and misaligned frames),
 * the result, and for a conv the im2col matrix. Cached operands are not
 * counted: --max-memory bounds the cache. The protocol bounds each matrix
 * to 2^28 floats and each dimension to 2^24, so every product and sum here
 * fits in 64 bits; they are kept in 64 bits on a 32-bit worker too, where
 * the sum of a task's matrices can pass what size_t holds. */
#include "admission.h"

#include "error.h"

#include <stdalign.h>
#include <stdint.h>

/* An inline payload is used in place when it is one aligned frame; one in
   several chunks, or misaligned, is gathered into a copy (compute.c). */
static uint64_t copy_of(const cdc_msg_payload_t *payload)
{
    int in_place = payload->count == 1 &&
                   (uintptr_t) payload->frames[0].data % alignof(float) == 0;
    return payload->size > 0 && !in_place ? payload->size : 0;
}

void cdc__task_memory(const cdc_msg_t *msg, cdc_task_memory_t *memory)
{
    cdc__task_memory_of_header(&msg->header, memory);
    memory->copy_bytes = copy_of(&msg->payload[0]) + copy_of(&msg->payload[1]);
    memory->total += memory->copy_bytes;
}

int cdc__worker_admit(const cdc_msg_t *msg, size_t max_task_memory)
{
    const cdc_msg_header_t *h = &msg->header;
    int rc = CDC_OK;
    if (h->type == CDC_MSG_TASK_CONV)
        rc = cdc__conv_geometry_check_padding(&h->geometry);
    if (rc != CDC_OK)
        return rc;
    cdc_task_memory_t memory;
    cdc__task_memory(msg, &memory);
    if (memory.total > (uint64_t) max_task_memory)
        return cdc__fail(CDC_ENOMEM,
                         "it needs %llu bytes (operands %llu, result %llu, im2col %llu), over "
                         "this worker's --max-task-memory %zu%s",
                         (unsigned long long) memory.total,
                         (unsigned long long) (memory.inline_bytes + memory.copy_bytes),
                         (unsigned long long) memory.result_bytes,
                         (unsigned long long) memory.im2col_bytes, max_task_memory,
                         SIZE_MAX <= UINT32_MAX ? " (a 32-bit worker: at most 4 GiB - 1)" : "");
    return CDC_OK;
}
