/* mailbox.c - a growable ring of pointers under one mutex. */
#include "mailbox.h"

#include "cdcgemm.h"
#include "error.h"

#include <pthread.h>
#include <stdlib.h>

struct cdc_mailbox {
    pthread_mutex_t lock;
    pthread_cond_t ready;
    void **items; /* ring of capacity slots */
    size_t head, count, capacity;
};

int cdc__mailbox_new(cdc_mailbox_t **mailbox_p)
{
    cdc_mailbox_t *self = calloc(1, sizeof *self);
    if (!self)
        return cdc__fail(CDC_ENOMEM, "mailbox");
    pthread_mutex_init(&self->lock, NULL);
    pthread_cond_init(&self->ready, NULL);
    *mailbox_p = self;
    return CDC_OK;
}

void cdc__mailbox_destroy(cdc_mailbox_t **mailbox_p)
{
    if (!mailbox_p || !*mailbox_p)
        return;
    cdc_mailbox_t *self = *mailbox_p;
    pthread_cond_destroy(&self->ready);
    pthread_mutex_destroy(&self->lock);
    free(self->items);
    free(self);
    *mailbox_p = NULL;
}

/* Double the ring, unrolling it so head is 0. Called with the lock held. */
static int grow(cdc_mailbox_t *self)
{
    size_t capacity = self->capacity ? 2 * self->capacity : 16;
    void **items = malloc(capacity * sizeof *items);
    if (!items)
        return cdc__fail(CDC_ENOMEM, "mailbox of %zu items", capacity);
    for (size_t i = 0; i < self->count; i++)
        items[i] = self->items[(self->head + i) % self->capacity];
    free(self->items);
    self->items = items;
    self->head = 0;
    self->capacity = capacity;
    return CDC_OK;
}

int cdc__mailbox_push(cdc_mailbox_t *self, void *item)
{
    pthread_mutex_lock(&self->lock);
    int rc = self->count == self->capacity ? grow(self) : CDC_OK;
    if (rc == CDC_OK) {
        self->items[(self->head + self->count) % self->capacity] = item;
        self->count++;
        pthread_cond_signal(&self->ready);
    }
    pthread_mutex_unlock(&self->lock);
    return rc;
}

static void *take(cdc_mailbox_t *self)
{
    void *item = self->items[self->head];
    self->head = (self->head + 1) % self->capacity;
    self->count--;
    return item;
}

void *cdc__mailbox_pop(cdc_mailbox_t *self)
{
    pthread_mutex_lock(&self->lock);
    while (self->count == 0)
        pthread_cond_wait(&self->ready, &self->lock);
    void *item = take(self);
    pthread_mutex_unlock(&self->lock);
    return item;
}

int cdc__mailbox_try_pop(cdc_mailbox_t *self, void **item)
{
    pthread_mutex_lock(&self->lock);
    int got = self->count > 0;
    if (got)
        *item = take(self);
    pthread_mutex_unlock(&self->lock);
    return got;
}
