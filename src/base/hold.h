/* hold.h - a reference count on memory that outlives the call that sent it.
 *
 * A weight shard sent with zmq_msg_init_data is read by libzmq's I/O thread
 * after the send returns, and the client keeps a slot's weights to re-ship
 * them to a returning worker in the background: both must keep the memory
 * alive after its owner (a layer, the BLAS operand cache) lets go. The owner
 * embeds a cdc_hold_t, starts it with one reference (its own) and retires it
 * instead of freeing; the memory goes when the last reference does, on
 * whichever thread drops it (libzmq's I/O thread included).
 *
 * Retired also tells a holder that keeps a reference for later (the client's
 * slot manifest) that nobody will ask for this memory again: it should drop
 * the reference rather than ship the memory anywhere. */
#ifndef CDC_HOLD_H_INCLUDED
#define CDC_HOLD_H_INCLUDED

#include <stdatomic.h>
#include <stddef.h>

typedef struct cdc_hold cdc_hold_t;
struct cdc_hold {
    atomic_int refs;
    atomic_int retired;
    void (*free_fn)(cdc_hold_t *self); /* frees the object embedding the hold */
};

/* One reference (the owner's), not retired. free_fn runs when the count
   reaches zero and must free everything the hold protects. */
void cdc__hold_init(cdc_hold_t *hold, void (*free_fn)(cdc_hold_t *hold));

/* Another reference; returns hold. Accepts NULL (returns NULL). */
cdc_hold_t *cdc__hold_retain(cdc_hold_t *hold);

/* Drop a reference; the last one runs free_fn. Accepts NULL. */
void cdc__hold_release(cdc_hold_t *hold);

/* The owner is done with it: mark it retired and drop the owner's
   reference. Accepts NULL. */
void cdc__hold_retire(cdc_hold_t *hold);

/* Whether the owner has retired it. */
int cdc__hold_retired(cdc_hold_t *hold);

/* The current count of references (tests and assertions: another thread may
   change it at any time). */
int cdc__hold_refs(cdc_hold_t *hold);

/* A buffer of `bytes` bytes (64-byte aligned) and its hold in one
   allocation: *data is the buffer, the hold has the owner's reference, and
   the last release frees both. NULL (with cdc_last_error set) when out of
   memory. */
cdc_hold_t *cdc__hold_alloc(size_t bytes, void **data);

/* One 64-byte aligned allocation: a head of `head` bytes (a multiple of 64,
   the object that owns the buffer) and a buffer of `bytes` after it,
   *data. Freed with free(). NULL (cdc_last_error naming what) when out of
   memory. */
void *cdc__head_alloc(size_t head, size_t bytes, void **data, const char *what);

#endif
