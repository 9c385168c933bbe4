/* worker_options.c - a worker's defaults and its counters (worker_options.h). */
#include "worker_options.h"

#include "admission.h"
#include "peer_tasks.h"

#include <string.h>

void cdc__worker_options_init(cdc_worker_options_t *options)
{
    memset(options, 0, sizeof *options);
    options->max_memory = (size_t) 1 << 30;
    options->max_task_memory = CDC_WORKER_DEFAULT_TASK_MEMORY;
    options->max_peer_tasks = CDC_WORKER_DEFAULT_PEER_TASKS;
    options->threads = 1;
}

size_t cdc__worker_task_memory_limit(const cdc_worker_options_t *options)
{
    return options->max_task_memory ? options->max_task_memory : CDC_WORKER_DEFAULT_TASK_MEMORY;
}

void cdc__worker_counters_add(cdc_worker_counters_t *into, const cdc_worker_counters_t *from)
{
    into->messages += from->messages;
    into->tasks += from->tasks;
    into->weights_cached += from->weights_cached;
    into->misses += from->misses;
    into->stored_loaded += from->stored_loaded;
    into->invalid += from->invalid;
    into->evictions += from->evictions;
    into->pings += from->pings;
    into->delayed += from->delayed;
    into->dropped += from->dropped;
    into->corrupted += from->corrupted;
    into->hangs += from->hangs;
    into->cancelled += from->cancelled;
    into->over_budget += from->over_budget;
    into->replies_dropped += from->replies_dropped;
    into->refused += from->refused;
    into->dropped_at_exit += from->dropped_at_exit;
}
