/* hold.c - reference counts for memory shared with libzmq and the client. */
#include "hold.h"

#include <stddef.h>

void cdc_hold_init(cdc_hold_t *hold, void (*free_fn)(cdc_hold_t *hold))
{
    atomic_init(&hold->refs, 1);
    atomic_init(&hold->retired, 0);
    hold->free_fn = free_fn;
}

cdc_hold_t *cdc_hold_retain(cdc_hold_t *hold)
{
    if (hold)
        atomic_fetch_add_explicit(&hold->refs, 1, memory_order_relaxed);
    return hold;
}

void cdc_hold_release(cdc_hold_t *hold)
{
    /* acq_rel: every write made under any reference happens before free_fn. */
    if (hold && atomic_fetch_sub_explicit(&hold->refs, 1, memory_order_acq_rel) == 1)
        hold->free_fn(hold);
}

void cdc_hold_retire(cdc_hold_t *hold)
{
    if (!hold)
        return;
    atomic_store_explicit(&hold->retired, 1, memory_order_release);
    cdc_hold_release(hold);
}

int cdc_hold_retired(cdc_hold_t *hold)
{
    return atomic_load_explicit(&hold->retired, memory_order_acquire);
}
