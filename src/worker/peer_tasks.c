/* peer_tasks.c - per-peer counts of requests queued or running, under one lock.
 *
 * A record exists only while its peer has requests counted, so the table
 * holds at most one record per peer with work in the worker: a few with
 * CURVE (only allowed keys get a message through), one per connection
 * otherwise. A linear search over that is cheaper than a hash. */
#include "peer_tasks.h"

#include "error.h"
#include "grow.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cdc_peer_identity_t peer;
    size_t count;
} record_t;

struct cdc_peer_tasks {
    pthread_mutex_t lock;
    size_t max;
    record_t *records;
    size_t used, capacity;
};

/* Same principal: the same key, or (no key) the same connection. */
static int same_peer(const cdc_peer_identity_t *a, const cdc_peer_identity_t *b)
{
    if (a->user_id[0] || b->user_id[0])
        return strcmp(a->user_id, b->user_id) == 0;
    return a->connection == b->connection;
}

static record_t *find(cdc_peer_tasks_t *self, const cdc_peer_identity_t *peer)
{
    for (size_t i = 0; i < self->used; i++)
        if (same_peer(&self->records[i].peer, peer))
            return &self->records[i];
    return NULL;
}

int cdc__peer_tasks_new(size_t max, cdc_peer_tasks_t **table_p)
{
    *table_p = NULL;
    if (max < 1)
        return cdc__fail(CDC_EINVAL, "--max-peer-tasks must be at least 1");
    cdc_peer_tasks_t *self = calloc(1, sizeof *self);
    if (!self)
        return cdc__fail(CDC_ENOMEM, "peer task table");
    pthread_mutex_init(&self->lock, NULL);
    self->max = max;
    *table_p = self;
    return CDC_OK;
}

void cdc__peer_tasks_destroy(cdc_peer_tasks_t **table_p)
{
    if (!table_p || !*table_p)
        return;
    pthread_mutex_destroy(&(*table_p)->lock);
    free((*table_p)->records);
    free(*table_p);
    *table_p = NULL;
}

/* A new record for peer at the end of the table; NULL when out of memory. */
static record_t *append(cdc_peer_tasks_t *self, const cdc_peer_identity_t *peer)
{
    record_t *records = cdc__grow(self->records, &self->capacity, self->used, sizeof *records, 8);
    if (!records)
        return NULL;
    self->records = records;
    record_t *record = &self->records[self->used++];
    record->peer = *peer;
    record->count = 0;
    return record;
}

int cdc__peer_tasks_acquire(cdc_peer_tasks_t *self, const cdc_peer_identity_t *peer)
{
    pthread_mutex_lock(&self->lock);
    record_t *record = find(self, peer);
    int rc = CDC_OK;
    if (record && record->count >= self->max)
        rc = cdc__fail(CDC_ENOMEM,
                       "this peer already has %zu requests queued or running on the "
                       "worker, its --max-peer-tasks %zu",
                       record->count, self->max);
    else if (!record && !(record = append(self, peer)))
        rc = cdc__fail(CDC_ENOMEM, "peer task record");
    if (rc == CDC_OK)
        record->count++;
    pthread_mutex_unlock(&self->lock);
    return rc;
}

void cdc__peer_tasks_release(cdc_peer_tasks_t *self, const cdc_peer_identity_t *peer)
{
    pthread_mutex_lock(&self->lock);
    record_t *record = find(self, peer);
    if (record && --record->count == 0)
        *record = self->records[--self->used]; /* order does not matter */
    pthread_mutex_unlock(&self->lock);
}

size_t cdc__peer_tasks_count(cdc_peer_tasks_t *self, const cdc_peer_identity_t *peer)
{
    pthread_mutex_lock(&self->lock);
    record_t *record = find(self, peer);
    size_t count = record ? record->count : 0;
    pthread_mutex_unlock(&self->lock);
    return count;
}
