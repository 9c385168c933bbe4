/* peer_tasks.h - how many requests each peer has queued or running on the worker.
 *
 * Without a bound, one peer could queue any number of tasks (and WEIGHTS,
 * each up to 1 GiB) ahead of everyone else, and hold their memory while they
 * wait. A peer is a principal as the transport names it (transport/server.h):
 * its CURVE key when authenticated, else its connection. */
#ifndef CDC_WORKER_PEER_TASKS_H_INCLUDED
#define CDC_WORKER_PEER_TASKS_H_INCLUDED

#include "server.h"

#include <stddef.h>

/* Default --max-peer-tasks: a coordinator has at most one task per call in
   flight on a worker, plus the WEIGHTS ahead of it and tasks of calls it
   gave up on (a slow worker); 64 leaves room for all of that. */
#define CDC_WORKER_DEFAULT_PEER_TASKS 64

typedef struct cdc_peer_tasks cdc_peer_tasks_t;

/* An empty table allowing max requests per peer (>= 1). Caller owns
   *table_p and must destroy it with cdc__peer_tasks_destroy. */
int cdc__peer_tasks_new(size_t max, cdc_peer_tasks_t **table_p);

/* Accepts NULL and *NULL; nulls *table_p. */
void cdc__peer_tasks_destroy(cdc_peer_tasks_t **table_p);

/* Count one more request of peer: CDC_OK, or CDC_ENOMEM (nothing counted)
   when it already has max, the text naming --max-peer-tasks. Thread-safe. */
int cdc__peer_tasks_acquire(cdc_peer_tasks_t *self, const cdc_peer_identity_t *peer);

/* One request of peer is done (computed, refused or dropped). Thread-safe. */
void cdc__peer_tasks_release(cdc_peer_tasks_t *self, const cdc_peer_identity_t *peer);

/* The requests peer has counted now. Thread-safe. */
size_t cdc__peer_tasks_count(cdc_peer_tasks_t *self, const cdc_peer_identity_t *peer);

#endif
