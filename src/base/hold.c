/* hold.c - reference counts for memory shared with libzmq and the client. */
#include "hold.h"

#include "error.h"

#include <stdint.h>
#include <stdlib.h>

void cdc__hold_init(cdc_hold_t *hold, void (*free_fn)(cdc_hold_t *hold))
{
    atomic_init(&hold->refs, 1);
    atomic_init(&hold->retired, 0);
    hold->free_fn = free_fn;
}

cdc_hold_t *cdc__hold_retain(cdc_hold_t *hold)
{
    if (hold)
        atomic_fetch_add_explicit(&hold->refs, 1, memory_order_relaxed);
    return hold;
}

void cdc__hold_release(cdc_hold_t *hold)
{
    /* acq_rel: every write made under any reference happens before free_fn. */
    if (hold && atomic_fetch_sub_explicit(&hold->refs, 1, memory_order_acq_rel) == 1)
        hold->free_fn(hold);
}

void cdc__hold_retire(cdc_hold_t *hold)
{
    if (!hold)
        return;
    atomic_store_explicit(&hold->retired, 1, memory_order_release);
    cdc__hold_release(hold);
}

int cdc__hold_retired(cdc_hold_t *hold)
{
    return atomic_load_explicit(&hold->retired, memory_order_acquire);
}

int cdc__hold_refs(cdc_hold_t *hold)
{
    return atomic_load_explicit(&hold->refs, memory_order_acquire);
}

/* The hold sits at the start of the allocation, the buffer one alignment
   step after it. */
#define HOLD_ALIGN 64

static void hold_block_free(cdc_hold_t *hold)
{
    free(hold);
}

void *cdc__head_alloc(size_t head, size_t bytes, void **data, const char *what)
{
    *data = NULL;
    if (bytes > SIZE_MAX - 2 * head - HOLD_ALIGN) {
        cdc__fail(CDC_ENOMEM, "%s of %zu bytes", what, bytes);
        return NULL;
    }
    /* aligned_alloc wants a multiple of the alignment. */
    size_t total = (head + bytes + HOLD_ALIGN - 1) / HOLD_ALIGN * HOLD_ALIGN;
    char *block = aligned_alloc(HOLD_ALIGN, total);
    if (!block) {
        cdc__fail(CDC_ENOMEM, "%s of %zu bytes", what, bytes);
        return NULL;
    }
    *data = block + head;
    return block;
}

cdc_hold_t *cdc__hold_alloc(size_t bytes, void **data)
{
    _Static_assert(sizeof(cdc_hold_t) <= HOLD_ALIGN, "hold fits ahead of the buffer");
    cdc_hold_t *hold = cdc__head_alloc(HOLD_ALIGN, bytes, data, "held buffer");
    if (hold)
        cdc__hold_init(hold, hold_block_free);
    return hold;
}
