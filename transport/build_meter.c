/* build_meter.c - built operands in libzmq's hands, counted (build_meter.h). */
#include "build_meter.h"

#include "error.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct cdc_build_meter {
    pthread_mutex_t lock;
    pthread_cond_t drained;
    size_t budget, outstanding;
    int refs; /* the owner's and one per tracker alive */
};

typedef struct {
    cdc_hold_t hold; /* first: the tracker is its hold */
    cdc_build_meter_t *meter;
    cdc_hold_t *built;
    size_t bytes;
} tracker_t;

cdc_build_meter_t *cdc__build_meter_new(size_t budget)
{
    cdc_build_meter_t *meter = calloc(1, sizeof *meter);
    if (!meter) {
        cdc__fail(CDC_ENOMEM, "build meter");
        return NULL;
    }
    pthread_mutex_init(&meter->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&meter->drained, &attr);
    pthread_condattr_destroy(&attr);
    meter->budget = budget;
    meter->refs = 1;
    return meter;
}

/* Drop a reference taken under the lock; the last frees the meter. */
static void meter_unref_locked(cdc_build_meter_t *meter)
{
    int last = --meter->refs == 0;
    pthread_mutex_unlock(&meter->lock);
    if (!last)
        return;
    pthread_cond_destroy(&meter->drained);
    pthread_mutex_destroy(&meter->lock);
    free(meter);
}

void cdc__build_meter_release(cdc_build_meter_t *meter)
{
    if (!meter)
        return;
    pthread_mutex_lock(&meter->lock);
    meter_unref_locked(meter);
}

int cdc__build_meter_wait(cdc_build_meter_t *meter, int wait_ms)
{
    if (!meter)
        return 0;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += wait_ms / 1000;
    until.tv_nsec += (long) (wait_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    int timed_out = 0;
    pthread_mutex_lock(&meter->lock);
    while (meter->outstanding >= meter->budget && !timed_out)
        timed_out = pthread_cond_timedwait(&meter->drained, &meter->lock, &until) == ETIMEDOUT;
    pthread_mutex_unlock(&meter->lock);
    return timed_out;
}

/* The tracker's last reference (libzmq's I/O thread, usually): uncounted. */
static void tracker_free(cdc_hold_t *hold)
{
    tracker_t *tracker = (tracker_t *) hold;
    cdc_build_meter_t *meter = tracker->meter;
    cdc__hold_release(tracker->built);
    pthread_mutex_lock(&meter->lock);
    meter->outstanding -= tracker->bytes;
    pthread_cond_broadcast(&meter->drained);
    meter_unref_locked(meter);
    free(tracker);
}

cdc_hold_t *cdc__build_meter_track(cdc_build_meter_t *meter, cdc_hold_t *built, size_t bytes)
{
    tracker_t *tracker = malloc(sizeof *tracker);
    if (!tracker) {
        cdc__hold_release(built);
        cdc__fail(CDC_ENOMEM, "build tracker");
        return NULL;
    }
    cdc__hold_init(&tracker->hold, tracker_free);
    tracker->meter = meter;
    tracker->built = built;
    tracker->bytes = bytes;
    pthread_mutex_lock(&meter->lock);
    meter->outstanding += bytes;
    meter->refs++;
    pthread_mutex_unlock(&meter->lock);
    return &tracker->hold;
}

size_t cdc__build_meter_outstanding(cdc_build_meter_t *meter)
{
    pthread_mutex_lock(&meter->lock);
    size_t outstanding = meter->outstanding;
    pthread_mutex_unlock(&meter->lock);
    return outstanding;
}
