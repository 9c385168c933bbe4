/* device.h - the worker's emulated device: one task at a time, in arrival order.
 *
 * Pure (no clock, no socket): times are ms on whatever clock the caller
 * uses. A task arrives at ready_ms with an emulated service time (its real
 * compute plus what the slow, delay and link faults add) and an extra
 * latency that does not occupy the device (the link's propagation). Tasks
 * are served in the order they were pushed:
 *
 *     start[i]  = max(ready[i], finish[i-1])   (finish[-1]: the device's free time)
 *     finish[i] = start[i] + service[i]
 *     due[i]    = finish[i] + latency[i]       (when its reply leaves)
 *
 * so a slow or delayed task holds back every task behind it. A task that
 * is cancelled before it starts is removed (the tasks behind it move up);
 * one cancelled while in service stops being served at the cancel time
 * (the device is free from then on; nothing of it is sent). */
#ifndef CDC_WORKER_DEVICE_H_INCLUDED
#define CDC_WORKER_DEVICE_H_INCLUDED

#include <stddef.h>

typedef struct {
    double ready_ms;   /* earliest start                                  */
    double service_ms; /* time the device is busy with it                 */
    double latency_ms; /* added to its departure, device not busy          */
    void *item;        /* the caller's (a held reply); NULL: nothing to send */
} cdc_device_task_t;

typedef struct {
    double free_ms; /* when the last task taken off the queue finished      */
    cdc_device_task_t *tasks;
    size_t count, capacity;
} cdc_device_t;

/* An idle device with an empty queue. */
void cdc__device_init(cdc_device_t *device);

/* Free the queue (items are the caller's: take them out first). */
void cdc__device_release(cdc_device_t *device);

/* Queue a task behind the others. CDC_OK or CDC_ENOMEM (nothing queued). */
int cdc__device_push(cdc_device_t *device, double ready_ms, double service_ms,
                     double latency_ms, void *item);

/* Tasks queued (sent or not yet). */
size_t cdc__device_queued(const cdc_device_t *device);

/* When the first queued task is due (its reply leaves); INFINITY if none. */
double cdc__device_next_due(const cdc_device_t *device);

/* When queued task i finishes (0: the first), as the queue stands now;
   INFINITY if there is no such task. For tests and logs. */
double cdc__device_finish(const cdc_device_t *device, size_t i);

/* Take the first task off the queue if it is due at now: returns 1 and its
   item in *item (NULL for a task that was cancelled in service: nothing to
   send), 0 when none is due. */
int cdc__device_pop_due(cdc_device_t *device, double now, void **item);

/* Cancel, at now, every queued task whose item match(item, ctx) accepts
   (never called for NULL items): one not started by now is removed, one in
   service is served until now and then stops; release(item, ctx) gets each
   cancelled item (may be NULL). Returns how many were cancelled. */
size_t cdc__device_cancel(cdc_device_t *device, double now, int (*match)(void *item, void *ctx),
                          void (*release)(void *item, void *ctx), void *ctx);

/* Take every queued item out (for the caller to release), emptying the
   queue; returns how many items were given to take(item, ctx). */
size_t cdc__device_drain(cdc_device_t *device, void (*take)(void *item, void *ctx), void *ctx);

#endif
