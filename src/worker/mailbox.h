/* mailbox.h - a FIFO of pointers between two threads (mutex + condition variable). */
#ifndef CDC_MAILBOX_H_INCLUDED
#define CDC_MAILBOX_H_INCLUDED

typedef struct cdc_mailbox cdc_mailbox_t;

/* An empty mailbox. Caller owns *mailbox_p and must destroy it with
   cdc__mailbox_destroy. CDC_ENOMEM when out of memory. */
int cdc__mailbox_new(cdc_mailbox_t **mailbox_p);

/* Free the mailbox (not the items still in it: drain it first); accepts NULL
   and *NULL; nulls *mailbox_p. */
void cdc__mailbox_destroy(cdc_mailbox_t **mailbox_p);

/* Append item (NULL is a valid item, e.g. "stop"). CDC_ENOMEM when out of
   memory. Thread-safe. */
int cdc__mailbox_push(cdc_mailbox_t *self, void *item);

/* Take the oldest item, waiting for one. Thread-safe. */
void *cdc__mailbox_pop(cdc_mailbox_t *self);

/* Take the oldest item without waiting: 1 and *item set, or 0 when empty.
   Thread-safe. */
int cdc__mailbox_try_pop(cdc_mailbox_t *self, void **item);

#endif
