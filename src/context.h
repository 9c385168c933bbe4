/* context.h - the context's internals, shared by the coordinator modules. */
#ifndef CDC_CONTEXT_H_INCLUDED
#define CDC_CONTEXT_H_INCLUDED

#include "cdcgemm.h"
#include "code.h"
#include "executor.h"

#include <pthread.h>

struct cdc_context {
    cdc_config_t config;
    pthread_mutex_t lock; /* serialises calls and guards stats / erase_next */
    cdc_stats_t stats;
    uint64_t erase_next;  /* shards the next coded call treats as lost       */
    cdc_call_report_t last_call;
    int workers;          /* W: shards a call can be spread over             */
    cdc_executor_t *executor;
    cdc_code_t *codes[CDC_CODE_MAX_R + 1][CDC_CODE_MAX_N + 1]; /* [r][n], lazily */
};

/* Data shards for parity r on this context: W - r. CDC_ECONFIG when r is out
   of range for the worker count (r > n or n < 1). */
int cdc__context_data_shards(const cdc_context_t *context, int parity, int *n);

/* The layer/call parity: the context's unless overridden (>= 0). */
int cdc__context_parity(const cdc_context_t *context, int parity_override);

#endif
