/* share_thread.c - a helper thread that runs one job at a time. */
#include "share_thread.h"

#include "error.h"

#include <pthread.h>
#include <stdlib.h>

struct cdc_share_thread {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int (*job)(void *arg); /* posted, not yet done                */
    void *arg;
    int done, rc, stop;
};

static void *share_main(void *p)
{
    cdc_share_thread_t *self = p;
    pthread_mutex_lock(&self->lock);
    for (;;) {
        while (!self->job && !self->stop)
            pthread_cond_wait(&self->changed, &self->lock);
        if (!self->job)
            break;
        int (*job)(void *) = self->job;
        void *arg = self->arg;
        pthread_mutex_unlock(&self->lock);
        int rc = job(arg);
        pthread_mutex_lock(&self->lock);
        self->job = NULL;
        self->rc = rc;
        self->done = 1;
        pthread_cond_broadcast(&self->changed);
    }
    pthread_mutex_unlock(&self->lock);
    return NULL;
}

int cdc__share_thread_new(cdc_share_thread_t **thread_p)
{
    cdc_share_thread_t *self = calloc(1, sizeof *self);
    if (!self)
        return cdc__fail(CDC_ENOMEM, "share thread");
    pthread_mutex_init(&self->lock, NULL);
    pthread_cond_init(&self->changed, NULL);
    if (pthread_create(&self->thread, NULL, share_main, self) != 0) {
        pthread_cond_destroy(&self->changed);
        pthread_mutex_destroy(&self->lock);
        free(self);
        return cdc__fail(CDC_ENOMEM, "share thread: pthread_create failed");
    }
    *thread_p = self;
    return CDC_OK;
}

void cdc__share_thread_post(cdc_share_thread_t *self, int (*job)(void *arg), void *arg)
{
    pthread_mutex_lock(&self->lock);
    self->job = job;
    self->arg = arg;
    self->done = 0;
    pthread_cond_broadcast(&self->changed);
    pthread_mutex_unlock(&self->lock);
}

int cdc__share_thread_wait(cdc_share_thread_t *self)
{
    pthread_mutex_lock(&self->lock);
    while (!self->done)
        pthread_cond_wait(&self->changed, &self->lock);
    int rc = self->rc;
    pthread_mutex_unlock(&self->lock);
    return rc;
}

void cdc__share_thread_free(cdc_share_thread_t **thread_p)
{
    if (!thread_p || !*thread_p)
        return;
    cdc_share_thread_t *self = *thread_p;
    pthread_mutex_lock(&self->lock);
    self->stop = 1;
    pthread_cond_broadcast(&self->changed);
    pthread_mutex_unlock(&self->lock);
    pthread_join(self->thread, NULL);
    pthread_cond_destroy(&self->changed);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *thread_p = NULL;
}
