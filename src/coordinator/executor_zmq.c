/* executor_zmq.c - the executor that runs shard tasks on ZeroMQ worker processes. */
#include "executor.h"

#include "client.h"
#include "error.h"

#include <stdlib.h>

typedef struct {
    cdc_executor_t base; /* first: the ops table sees a cdc_executor_t */
    cdc_client_t *client;
    int wait_ms, timeout_ms;
} zmq_executor_t;

static int zmq_run(cdc_executor_t *base, cdc_shard_task_t *tasks, int count, int needed,
                   uint64_t *arrived)
{
    zmq_executor_t *self = (zmq_executor_t *) base;
    return cdc_client_run(self->client, tasks, count, needed, self->wait_ms,
                          self->timeout_ms, arrived);
}

static void zmq_destroy(cdc_executor_t *base)
{
    zmq_executor_t *self = (zmq_executor_t *) base;
    cdc_client_destroy(&self->client);
    free(self);
}

static int zmq_live(cdc_executor_t *base, uint64_t *mask)
{
    return cdc_client_planned(((zmq_executor_t *) base)->client, mask);
}

static const cdc_executor_ops_t zmq_ops = {"zmq", zmq_run, zmq_destroy, zmq_live};

int cdc__executor_zmq_new(const cdc_config_t *config, const char *endpoints,
                          int connect_wait_ms, cdc_executor_t **executor_p)
{
    zmq_executor_t *self = calloc(1, sizeof *self);
    if (!self)
        return cdc__fail(CDC_ENOMEM, "zmq executor");
    self->base.ops = &zmq_ops;
    self->wait_ms = config->wait_ms;
    self->timeout_ms = config->timeout_ms;
    int rc = cdc_client_new(endpoints ? endpoints : config->workers, connect_wait_ms,
                            &self->client);
    if (rc != CDC_OK) {
        free(self);
        return rc;
    }
    *executor_p = &self->base;
    return CDC_OK;
}

int cdc__executor_remote_counters(cdc_executor_t *executor, cdc_remote_counters_t *counters)
{
    if (!executor || !counters || executor->ops != &zmq_ops)
        return cdc__fail(CDC_EINVAL, "not a ZeroMQ executor");
    cdc_client_counters(((zmq_executor_t *) executor)->client, counters);
    return CDC_OK;
}

int cdc__executor_live(cdc_executor_t *executor, uint64_t *mask)
{
    if (executor->ops->live)
        return executor->ops->live(executor, mask);
    if (mask)
        *mask = ~UINT64_C(0);
    return -1; /* every worker */
}
