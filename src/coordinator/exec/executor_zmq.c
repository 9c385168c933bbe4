/* executor_zmq.c - the executor that runs shard tasks on ZeroMQ worker
 * processes, and keeps their live profile (profile.h) from what its client
 * observes. */
#include "executor.h"

#include "client.h"
#include "discovery.h"
#include "error.h"
#include "geometry.h"
#include "log.h"
#include "profile.h"
#include "task_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cdc_executor_t base; /* first: the ops table sees a cdc_executor_t */
    cdc_client_t *client;
    cdc_profile_t *profile; /* fed by the client's observer; outlives it */
    int wait_ms, timeout_ms;
} zmq_executor_t;

/* The client's observer (client.h): straight into the profile table. */
static void observe_pong(void *ctx, int w, double rtt_ms, const cdc_status_report_t *status)
{
    cdc__profile_pong(ctx, w, rtt_ms, status);
}

static void observe_call(void *ctx, int w, double elapsed_ms, double flops, double streamed,
                         double bytes)
{
    cdc__profile_transfer(ctx, w, elapsed_ms, flops, streamed, bytes);
}

static void observe_cut(void *ctx, int w, double elapsed_ms, double flops, double streamed,
                        double bytes)
{
    cdc__profile_cut(ctx, w, elapsed_ms, flops, streamed, bytes);
}

/* The coordinator's own compute since the last look (its local fallbacks). */
static void profile_self(zmq_executor_t *self)
{
    cdc_task_meter_t meter;
    cdc__task_run_meter(&meter);
    cdc__profile_self(self->profile, meter.flops, meter.busy_us);
}

/* Workers refuse conv tasks whose padding is not smaller than the dilated
   kernel span (their extra output is all padding, and a tiny request could
   ask for a huge result: issue 9). The layer API accepts such padding, as
   PyTorch does, so those tasks are never sent: none arrives, and the coded
   call computes the data shards here (counted in fallbacks). */
static int workers_refuse(const cdc_shard_task_t *tasks, int count)
{
    for (int t = 0; t < count; t++)
        if (tasks[t].kind == CDC_TASK_CONV &&
            cdc__conv_geometry_check_padding(tasks[t].geometry) != CDC_OK) {
            CDC_LOG_DEBUGF("conv computed locally: %s", cdc_last_error());
            return 1;
        }
    return 0;
}

/* The executor's own ops see its struct (base is its first member). */
static zmq_executor_t *zmq_of(cdc_executor_t *base)
{
    return (zmq_executor_t *) base;
}

static int zmq_run(cdc_executor_t *base, cdc_shard_task_t *tasks, int count, int n,
                   int needed, const cdc_call_goal_t *goal, uint64_t *arrived)
{
    zmq_executor_t *self = zmq_of(base);
    profile_self(self); /* the previous call's fallbacks are done by now */
    if (workers_refuse(tasks, count)) {
        *arrived = 0;
        return CDC_OK;
    }
    return cdc__client_run_goal(self->client, tasks, count, n, needed, goal, self->wait_ms,
                                self->timeout_ms, arrived);
}

static void zmq_destroy(cdc_executor_t *base)
{
    zmq_executor_t *self = zmq_of(base);
    cdc__client_destroy(&self->client); /* joins the thread that feeds the profile */
    cdc__profile_destroy(&self->profile);
    free(self);
}

static int zmq_live(cdc_executor_t *base, uint64_t *mask)
{
    return cdc__client_planned(zmq_of(base)->client, mask);
}

static int zmq_profile(cdc_executor_t *base, cdc_worker_profile_t *out, int max,
                       cdc_worker_profile_t *coordinator)
{
    zmq_executor_t *self = zmq_of(base);
    int count = cdc__client_worker_count(self->client);
    count = count < max ? count : max;
    uint64_t live;
    cdc__client_live(self->client, &live);
    profile_self(self);
    cdc__profile_snapshot(self->profile, out, count, coordinator);
    for (int w = 0; w < count; w++)
        out[w].live = (live >> w) & 1;
    return count;
}

static void zmq_remote_counters(cdc_executor_t *base, cdc_remote_counters_t *counters)
{
    cdc__client_counters(zmq_of(base)->client, counters);
}

static int zmq_worker_count(cdc_executor_t *base)
{
    return cdc__client_admitted(zmq_of(base)->client);
}

static int zmq_worker_status(cdc_executor_t *base, cdc_worker_status_t *out, int max)
{
    return cdc__client_status(zmq_of(base)->client, out, max);
}

static int zmq_heartbeat_live(cdc_executor_t *base, uint64_t *mask)
{
    return cdc__client_live(zmq_of(base)->client, mask);
}

static int zmq_free_workers(cdc_executor_t *base, uint64_t *mask)
{
    return cdc__client_free_workers(zmq_of(base)->client, mask);
}

static int zmq_repairing(cdc_executor_t *base)
{
    return cdc__client_repairing(zmq_of(base)->client);
}

static int zmq_worker_moved(cdc_executor_t *base, int w, const char *endpoint)
{
    return cdc__client_move(zmq_of(base)->client, w, endpoint);
}

static int zmq_set_homes(cdc_executor_t *base, const int *home_of_slot, int slots)
{
    return cdc__client_set_homes(zmq_of(base)->client, home_of_slot, slots);
}

static int zmq_stage(cdc_executor_t *base, uint64_t token, int needed,
                     const cdc_slot_weight_t *block, int count, const int *order)
{
    return cdc__client_stage(zmq_of(base)->client, token, needed, block, count, order);
}

static void zmq_unstage(cdc_executor_t *base, uint64_t token)
{
    cdc__client_unstage(zmq_of(base)->client, token);
}

static void zmq_last_call(cdc_executor_t *base, int *sent_to, int *answered_by, int max)
{
    cdc__client_last_call(zmq_of(base)->client, sent_to, answered_by, max);
}

static const cdc_executor_ops_t zmq_ops = {
    .name = "zmq",
    .run = zmq_run,
    .destroy = zmq_destroy,
    .live = zmq_live,
    .heartbeat_live = zmq_heartbeat_live,
    .free_workers = zmq_free_workers,
    .repairing = zmq_repairing,
    .worker_moved = zmq_worker_moved,
    .set_homes = zmq_set_homes,
    .stage = zmq_stage,
    .unstage = zmq_unstage,
    .last_call = zmq_last_call,
    .worker_count = zmq_worker_count,
    .worker_status = zmq_worker_status,
    .profile = zmq_profile,
    .remote_counters = zmq_remote_counters,
};

/* The CURVE certificates for config->workers: this coordinator's secret one
   into *client, and one worker certificate per endpoint into servers (from
   CDCGEMM_CURVE_SERVER: a file for all, or the directory's certificate that
   names the endpoint). Errors name the variable. */
static int load_curve(const cdc_config_t *config, cdc_curve_cert_t *client,
                      cdc_curve_cert_t *servers)
{
    if (cdc__curve_load_secret(config->curve_secret, client) != CDC_OK)
        return cdc__fail_within(CDC_ECONFIG, "CDCGEMM_CURVE_SECRET");
    const char *item = config->workers;
    for (int w = 0; *item && w < CDC_MAX_WORKERS; w++) {
        const char *comma = strchr(item, ',');
        size_t len = comma ? (size_t) (comma - item) : strlen(item);
        char endpoint[CDC_CONFIG_STR];
        snprintf(endpoint, sizeof endpoint, "%.*s", (int) len, item);
        if (cdc__curve_server_cert(config->curve_server, endpoint, &servers[w]) != CDC_OK) {
            cdc__curve_cert_clear(client);
            return cdc__fail_within(CDC_ECONFIG, "CDCGEMM_CURVE_SERVER");
        }
        item += len + (comma ? 1 : 0);
    }
    return CDC_OK;
}

/* CDCGEMM_WORKERS=discover[:PORT]: the workers that announce a key in
   CDCGEMM_CURVE_SERVER (the context checked CURVE is configured). */
static int client_discover(const cdc_config_t *config, int udp_port, int connect_wait_ms,
                           cdc_client_t **client_p)
{
    cdc_curve_cert_t client;
    if (cdc__curve_load_secret(config->curve_secret, &client) != CDC_OK)
        return cdc__fail_within(CDC_ECONFIG, "CDCGEMM_CURVE_SECRET");
    cdc_discovery_where_t where = {udp_port, config->discover_interface};
    int rc = cdc__client_new_discover(&where, config->discover_wait_ms, connect_wait_ms,
                                      &client, config->curve_server, client_p);
    cdc__curve_cert_clear(&client);
    return rc;
}

/* The client for endpoints; over CURVE when configured for config->workers
   (embedded workers, endpoints != NULL, are ipc in a private directory). */
static int client_open(const cdc_config_t *config, const char *endpoints, int connect_wait_ms,
                       cdc_client_t **client_p)
{
    int udp_port;
    if (!endpoints && cdc__discovery_parse(config->workers, &udp_port) == 1)
        return client_discover(config, udp_port, connect_wait_ms, client_p);
    if (endpoints || !config->curve_secret[0])
        return cdc__client_new(endpoints ? endpoints : config->workers, connect_wait_ms,
                               client_p);
    cdc_curve_cert_t client, *servers = calloc(CDC_MAX_WORKERS, sizeof *servers);
    if (!servers)
        return cdc__fail(CDC_ENOMEM, "worker certificates");
    int rc = load_curve(config, &client, servers);
    if (rc == CDC_OK)
        rc = cdc__client_new_curve(config->workers, connect_wait_ms, &client, servers,
                                   client_p);
    cdc__curve_cert_clear(&client);
    free(servers);
    return rc;
}

int cdc__executor_zmq_new(const cdc_config_t *config, const char *endpoints,
                          int connect_wait_ms, cdc_executor_t **executor_p)
{
    zmq_executor_t *self = calloc(1, sizeof *self);
    if (!self)
        return cdc__fail(CDC_ENOMEM, "zmq executor");
    self->base.ops = &zmq_ops;
    self->wait_ms = config->wait_ms;
    self->timeout_ms = config->timeout_ms;
    int rc = cdc__profile_new(&self->profile);
    if (rc == CDC_OK) {
        profile_self(self); /* the baseline: what this process computed before */
        rc = client_open(config, endpoints, connect_wait_ms, &self->client);
    }
    if (rc != CDC_OK) {
        cdc__profile_destroy(&self->profile);
        free(self);
        return rc;
    }
    /* From here: the PONGs while the client waited for its workers only
       lack their round trips in the profile. */
    cdc__client_observe(self->client,
                        &(cdc_client_observer_t){.pong = observe_pong,
                                                 .call_done = observe_call,
                                                 .call_cut = observe_cut,
                                                 .ctx = self->profile});
    *executor_p = &self->base;
    return CDC_OK;
}


