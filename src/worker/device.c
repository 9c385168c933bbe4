/* device.c - the emulated device's queue (device.h): finish times are
 * recomputed from the queue as it stands, so removing a task moves every
 * task behind it up without bookkeeping. The queue is short (bounded by the
 * replies a worker holds), so the linear passes cost nothing that matters. */
#include "device.h"

#include "error.h"
#include "grow.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void cdc__device_init(cdc_device_t *device)
{
    memset(device, 0, sizeof *device);
    device->free_ms = -INFINITY;
}

void cdc__device_release(cdc_device_t *device)
{
    free(device->tasks);
    cdc__device_init(device);
}

int cdc__device_push(cdc_device_t *device, double ready_ms, double service_ms,
                     double latency_ms, void *item)
{
    cdc_device_task_t *tasks =
        cdc__grow(device->tasks, &device->capacity, device->count, sizeof *tasks, 16);
    if (!tasks)
        return cdc__fail(CDC_ENOMEM, "emulated device queue");
    device->tasks = tasks;
    device->tasks[device->count++] = (cdc_device_task_t){
        ready_ms, service_ms > 0 ? service_ms : 0, latency_ms > 0 ? latency_ms : 0, item};
    return CDC_OK;
}

size_t cdc__device_queued(const cdc_device_t *device)
{
    return device->count;
}

/* Start of task i given the finish of the one before it. */
static double start_after(const cdc_device_task_t *task, double previous_finish)
{
    return task->ready_ms > previous_finish ? task->ready_ms : previous_finish;
}

double cdc__device_finish(const cdc_device_t *device, size_t i)
{
    if (i >= device->count)
        return INFINITY;
    double finish = device->free_ms;
    for (size_t j = 0; j <= i; j++)
        finish = start_after(&device->tasks[j], finish) + device->tasks[j].service_ms;
    return finish;
}

double cdc__device_next_due(const cdc_device_t *device)
{
    if (device->count == 0)
        return INFINITY;
    return cdc__device_finish(device, 0) + device->tasks[0].latency_ms;
}

int cdc__device_pop_due(cdc_device_t *device, double now, void **item)
{
    *item = NULL;
    if (device->count == 0)
        return 0;
    double finish = cdc__device_finish(device, 0);
    if (finish + device->tasks[0].latency_ms > now)
        return 0;
    *item = device->tasks[0].item;
    device->free_ms = finish;
    device->count--;
    memmove(device->tasks, device->tasks + 1, device->count * sizeof *device->tasks);
    return 1;
}

size_t cdc__device_cancel(cdc_device_t *device, double now, int (*match)(void *item, void *ctx),
                          void (*release)(void *item, void *ctx), void *ctx)
{
    size_t cancelled = 0, kept = 0;
    double finish = device->free_ms; /* of the task before, as the queue stands */
    for (size_t i = 0; i < device->count; i++) {
        cdc_device_task_t task = device->tasks[i];
        double start = start_after(&task, finish), end = start + task.service_ms;
        if (task.item && match(task.item, ctx)) {
            cancelled++;
            if (release)
                release(task.item, ctx);
            if (start >= now)
                continue; /* not started: gone, the tasks behind move up */
            /* In service: the device was busy with it from start until now
               (or its end, if that came first); it stays as a placeholder
               that holds the device that long and sends nothing. Tasks before
               it finished by start < now, so no later cancel changes start. */
            task.item = NULL;
            task.service_ms = (end < now ? end : now) - start;
            task.latency_ms = 0;
            end = start + task.service_ms;
        }
        finish = end;
        device->tasks[kept++] = task;
    }
    device->count = kept;
    return cancelled;
}

size_t cdc__device_drain(cdc_device_t *device, void (*take)(void *item, void *ctx), void *ctx)
{
    size_t taken = 0;
    for (size_t i = 0; i < device->count; i++)
        if (device->tasks[i].item) {
            take(device->tasks[i].item, ctx);
            taken++;
        }
    device->count = 0;
    return taken;
}
