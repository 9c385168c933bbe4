/* context.c - creating a context: configuration, executor, counters. */
#include "context.h"

#include "bits.h"
#include "blas_backend.h"
#include "clock.h"
#include "cdcgemm_testing.h"
#include "code.h"
#include "error.h"
#include "discovery.h"
#include "executor.h"
#include "keys.h"
#include "log.h"
#include "faults.h"
#include "share_thread.h"
#include "stats_json.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int count_endpoints(const char *workers)
{
    int count = 1;
    for (const char *p = workers; *p; p++)
        count += *p == ',';
    return count;
}

static int config_validate(const cdc_config_t *config)
{
    if (config->local_workers < 1 || config->local_workers > CDC_MAX_WORKERS)
        return cdc__fail(CDC_ECONFIG, "local_workers = %d: expected 1..%d",
                         config->local_workers, CDC_MAX_WORKERS);
    if (config->parity < 0 || config->parity > CDC_MAX_PARITY)
        return cdc__fail(CDC_ECONFIG, "parity = %d: expected 0..%d", config->parity,
                         CDC_MAX_PARITY);
    if (config->split != CDC_SPLIT_AUTO && config->split != CDC_SPLIT_ROWS &&
        config->split != CDC_SPLIT_COLUMNS)
        return cdc__fail(CDC_ECONFIG, "split = %d: unknown split", (int) config->split);
    if (config->replan != CDC_REPLAN_KEEP_SHARDS && config->replan != CDC_REPLAN_KEEP_PARITY)
        return cdc__fail(CDC_ECONFIG, "replan = %d: unknown policy", (int) config->replan);
    if (config->plan < CDC_PLAN_EQUAL || config->plan > CDC_PLAN_AUTO)
        return cdc__fail(CDC_ECONFIG, "plan = %d: expected %d (equal), %d (profiled) or %d (auto)",
                         (int) config->plan, CDC_PLAN_EQUAL, CDC_PLAN_PROFILED, CDC_PLAN_AUTO);
    if (config->parity_layout != CDC_LAYOUT_DEDICATED &&
        config->parity_layout != CDC_LAYOUT_ROTATED)
        return cdc__fail(CDC_ECONFIG, "parity_layout = %d: expected %d (dedicated) or %d (rotated)",
                         (int) config->parity_layout, CDC_LAYOUT_DEDICATED, CDC_LAYOUT_ROTATED);
    if (config->data_shards < 0 || config->data_shards > CDC_MAX_WORKERS)
        return cdc__fail(CDC_ECONFIG, "data_shards = %d: expected 0 (workers - r) or 1..%d",
                         config->data_shards, CDC_MAX_WORKERS);
    if (config->replicate && config->parity != 0)
        return cdc__fail(CDC_ECONFIG, "replicate = 1 needs parity = 0 (got %d)",
                         config->parity);
    if (config->verify < 0 || config->verify > 2)
        return cdc__fail(CDC_ECONFIG, "verify = %d: expected 0 (off), 1 (sampled) or 2 "
                         "(every call)", config->verify);
    if (config->wait_ms < 0 || config->timeout_ms < 1)
        return cdc__fail(CDC_ECONFIG, "wait_ms = %d / timeout_ms = %d out of range",
                         config->wait_ms, config->timeout_ms);
    if ((int) config->log_level < CDC_LOG_ERROR || config->log_level > CDC_LOG_DEBUG)
        return cdc__fail(CDC_ECONFIG, "log_level = %d out of range",
                         (int) config->log_level);
    if (memchr(config->workers, '\0', sizeof config->workers) == NULL ||
        memchr(config->code, '\0', sizeof config->code) == NULL)
        return cdc__fail(CDC_ECONFIG, "unterminated string in configuration");
    if (config->code[0] && !cdc__code_find_ops(config->code))
        return cdc__fail(CDC_ECONFIG, "code '%s': unknown code scheme", config->code);
    return CDC_OK;
}

/* Protected mode: plaintext tcp to a worker that is not on loopback is
   refused unless insecure is set; CURVE needs both of its settings. Embedded
   workers (no workers given) are ipc in a private directory and need
   nothing. Errors name the variables. */
static int security_validate(const cdc_config_t *config)
{
    if (memchr(config->curve_secret, '\0', sizeof config->curve_secret) == NULL ||
        memchr(config->curve_server, '\0', sizeof config->curve_server) == NULL)
        return cdc__fail(CDC_ECONFIG, "unterminated string in configuration");
    if (!config->curve_secret[0] != !config->curve_server[0])
        return cdc__fail(CDC_ECONFIG, "CDCGEMM_CURVE_SECRET and CDCGEMM_CURVE_SERVER go "
                                      "together: set both for CURVE, or neither");
    int udp_port;
    int discover = cdc__discovery_parse(config->workers, &udp_port);
    if (discover < 0)
        return cdc__fail(CDC_ECONFIG, "CDCGEMM_WORKERS: '%s': expected discover or "
                                      "discover:PORT with PORT in 1..65535", config->workers);
    if (discover && !config->curve_secret[0])
        return cdc__fail(CDC_ECONFIG,
                         "CDCGEMM_WORKERS=discover admits only workers whose key is in "
                         "CDCGEMM_CURVE_SERVER: set CDCGEMM_CURVE_SECRET and "
                         "CDCGEMM_CURVE_SERVER (docs/deploy.md)");
    if (discover || config->curve_secret[0] || config->insecure || !config->workers[0])
        return CDC_OK;
    const char *item = config->workers;
    for (int i = 1; *item; i++) {
        const char *comma = strchr(item, ',');
        size_t len = comma ? (size_t) (comma - item) : strlen(item);
        char endpoint[CDC_CONFIG_STR];
        snprintf(endpoint, sizeof endpoint, "%.*s", (int) len, item);
        if (cdc__endpoint_needs_curve(endpoint))
            return cdc__fail(CDC_ECONFIG,
                             "CDCGEMM_WORKERS: endpoint %d '%s' is plaintext tcp to a host "
                             "that is not loopback: anyone on the path could read or change "
                             "results. Set CDCGEMM_CURVE_SECRET and CDCGEMM_CURVE_SERVER "
                             "(docs/security.md), or CDCGEMM_INSECURE=1 to accept that",
                             i, endpoint);
        item += len + (comma ? 1 : 0);
    }
    return CDC_OK;
}

/* The supervisor's liveness view (its thread): who answers heartbeats now. */
static int heartbeat_live(void *arg, uint64_t *mask)
{
    return cdc__executor_heartbeat_live(((cdc_context_t *) arg)->executor, mask);
}

/* The supervisor respawned worker w on a fresh endpoint (its thread): the
   client reconnects w's sockets there, w keeping its place in the plan. */
static void worker_moved(void *arg, int w, const char *endpoint)
{
    if (cdc__executor_worker_moved(((cdc_context_t *) arg)->executor, w, endpoint) != CDC_OK)
        CDC_LOG_WARNF("local worker %d: %s", w, cdc_last_error());
}

/* Stop the supervisor (nothing respawned after); its counters outlive it:
   CDCGEMM_STATS may be written later. */
static void supervisor_stop(cdc_context_t *self)
{
    cdc__supervisor_stop(&self->supervisor, &self->respawns, &self->given_up);
}

static void supervisor_stop_at_exit(void *context)
{
    supervisor_stop(context);
}

/* The embedded default: spawn the workers, then talk to them like any
   others, and (config->respawn) keep them alive. They answer within ms of
   binding; the bound is only for a machine under heavy load. */
static int local_start(cdc_context_t *self, const cdc_config_t *config)
{
    int rc = cdc__local_workers_new(config->local_workers, config->faults,
                                    config->log_level, &self->local);
    if (rc != CDC_OK)
        return rc;
    int wait = config->timeout_ms > 5000 ? config->timeout_ms : 5000;
    char *endpoints = malloc(CDC_LOCAL_ENDPOINTS_MAX);
    if (!endpoints) {
        cdc__local_workers_destroy(&self->local);
        return cdc__fail(CDC_ENOMEM, "local workers: endpoints");
    }
    cdc__local_workers_endpoints(self->local, endpoints, CDC_LOCAL_ENDPOINTS_MAX);
    rc = cdc__executor_zmq_new(config, endpoints, wait, &self->executor);
    free(endpoints);
    if (rc == CDC_OK && config->respawn) {
        rc = cdc__supervisor_start(self->local, heartbeat_live, worker_moved, self,
                                   &self->supervisor);
        if (rc == CDC_OK)
            cdc__local_workers_before_stop(self->local, supervisor_stop_at_exit, self);
        if (rc != CDC_OK) {
            self->executor->ops->destroy(self->executor);
            self->executor = NULL;
        }
    }
    if (rc != CDC_OK)
        cdc__local_workers_destroy(&self->local);
    return rc;
}

int cdc_context_new(const cdc_config_t *config, cdc_context_t **context_p)
{
    if (!config || !context_p)
        return cdc__fail(CDC_EINVAL, "cdc_context_new: NULL argument");
    int rc = config_validate(config);
    if (rc == CDC_OK)
        rc = security_validate(config);
    if (rc != CDC_OK)
        return rc;
    rc = cdc__blas_ready();
    if (rc != CDC_OK)
        return rc;

    cdc_context_t *self = calloc(1, sizeof *self);
    if (!self)
        return cdc__fail(CDC_ENOMEM, "context");
    self->config = *config;
    cdc_fault_plan_t faults; /* the coordinator's own rule, if any (workers take theirs) */
    if (config->faults[0] && cdc__fault_plan_parse(config->faults, &faults) == CDC_OK) {
        cdc_emulated_device_t coordinator = cdc__fault_coordinator(&faults);
        self->local_gflops = coordinator.gflops;
        self->local_gbps = coordinator.gbps;
    }
    /* Before spawning and connecting, so what they log obeys the level. */
    cdc__log_level = (int) config->log_level;
    int udp_port;
    self->discover = cdc__discovery_parse(config->workers, &udp_port) == 1;
    self->workers = config->workers[0] ? count_endpoints(config->workers)
                                       : config->local_workers;
    int n;
    rc = cdc__context_data_shards(self, config->parity, &n);
    if (rc != CDC_OK)
        goto fail_config;
    if (config->workers[0]) {
        /* W = the endpoints given: one shard per live worker. */
        int wait = config->timeout_ms < 1000 ? config->timeout_ms : 1000;
        rc = cdc__executor_zmq_new(config, NULL, wait, &self->executor);
        if (rc != CDC_OK)
            goto fail_config;
    } else if (config->in_process) {
        /* Shards run on this thread, on local_workers virtual workers. */
        self->executor = cdc__executor_local_new();
        if (!self->executor) {
            rc = cdc__fail(CDC_ENOMEM, "executor");
            goto fail_config;
        }
    } else if ((rc = local_start(self, config)) != CDC_OK) {
        goto fail_config;
    }
    if (pthread_mutex_init(&self->lock, NULL) != 0) {
        rc = cdc__fail(CDC_ENOMEM, "context mutex");
        goto fail_executor;
    }
    if (pthread_mutex_init(&self->call_lock, NULL) != 0) {
        pthread_mutex_destroy(&self->lock);
        rc = cdc__fail(CDC_ENOMEM, "context call mutex");
        goto fail_executor;
    }
    *context_p = self;
    return CDC_OK;

fail_executor:
    supervisor_stop(self); /* it reads the executor */
    self->executor->ops->destroy(self->executor);
    cdc__local_workers_destroy(&self->local);
fail_config:
    free(self);
    return rc;
}

int cdc_context_new_from_env(cdc_context_t **context_p)
{
    cdc_config_t config;
    cdc_config_init(&config);
    int rc = cdc_config_from_env(&config);
    if (rc != CDC_OK)
        return rc;
    return cdc_context_new(&config, context_p);
}

void cdc_context_destroy(cdc_context_t **context_p)
{
    if (!context_p || !*context_p)
        return;
    cdc_context_t *self = *context_p;
    if (self->config.stats_path[0]) {
        cdc_stats_t stats;
        cdc_profile_report_t profile;
        cdc_context_stats(self, &stats);
        cdc__context_profile_report(self, &profile);
        if (cdc__stats_write_json(&stats, &profile, self->config.stats_path) != CDC_OK)
            CDC_LOG_WARNF("CDCGEMM_STATS: %s", cdc_last_error());
    }
    supervisor_stop(self); /* before the executor it reads */
    self->executor->ops->destroy(self->executor);
    cdc__local_workers_destroy(&self->local); /* after the sockets are closed */
    cdc__share_thread_free(&self->share_thread);
    for (int r = 0; r <= CDC_CODE_MAX_R; r++)
        for (int n = 0; n <= CDC_CODE_MAX_N; n++)
            cdc__code_destroy(&self->codes[r][n]);
    pthread_mutex_destroy(&self->call_lock);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *context_p = NULL;
}

void cdc__context_call_begin(cdc_context_t *context)
{
    pthread_mutex_lock(&context->call_lock);
    context->call_began_ms = cdc__clock_ms();
    context->call_ran_engine = 0;
}

void cdc__context_call_end(cdc_context_t *context)
{
    if (context->call_ran_engine) {
        double total = cdc__clock_ms() - context->call_began_ms;
        pthread_mutex_lock(&context->lock);
        context->steps.calls++;
        context->steps.total_ms += total;
        pthread_mutex_unlock(&context->lock);
    }
    pthread_mutex_unlock(&context->call_lock);
}

const cdc_config_t *cdc_context_config(const cdc_context_t *context)
{
    return context ? &context->config : NULL;
}

int cdc_context_erase_next(cdc_context_t *context, uint64_t mask)
{
    if (!context)
        return cdc__fail(CDC_EINVAL, "cdc_context_erase_next: context is NULL");
    pthread_mutex_lock(&context->lock);
    context->erase_next = mask;
    pthread_mutex_unlock(&context->lock);
    return CDC_OK;
}

int cdc_context_corrupt_next(cdc_context_t *context, uint64_t mask)
{
    if (!context)
        return cdc__fail(CDC_EINVAL, "cdc_context_corrupt_next: context is NULL");
    pthread_mutex_lock(&context->lock);
    context->corrupt_next = mask;
    pthread_mutex_unlock(&context->lock);
    return CDC_OK;
}

int cdc_context_set_homes(cdc_context_t *context, const int *home_of_slot, int slots)
{
    if (!context)
        return cdc__fail(CDC_EINVAL, "cdc_context_set_homes: context is NULL");
    return cdc__executor_set_homes(context->executor, home_of_slot, slots);
}

int cdc_testing_force_block_weights(cdc_context_t *context, const double *weights, int n)
{
    if (!context || n < 0 || n > CDC_CODE_MAX_N)
        return cdc__fail(CDC_EINVAL, "cdc_testing_force_block_weights: context %p, n = %d",
                         (void *) context, n);
    if (!weights)
        n = 0;
    for (int i = 0; i < n; i++)
        if (!(weights[i] > 0.0 && weights[i] <= DBL_MAX))
            return cdc__fail(CDC_EINVAL, "cdc_testing_force_block_weights: weight %d = %g",
                             i, weights[i]);
    pthread_mutex_lock(&context->lock);
    for (int i = 0; i < n; i++)
        context->block_weights[i] = weights[i];
    context->block_weights_n = n;
    pthread_mutex_unlock(&context->lock);
    return CDC_OK;
}

int cdc_context_stats(cdc_context_t *context, cdc_stats_t *stats)
{
    if (!context || !stats)
        return cdc__fail(CDC_EINVAL, "cdc_context_stats: NULL argument");
    pthread_mutex_lock(&context->lock);
    *stats = context->stats;
    pthread_mutex_unlock(&context->lock);
    cdc_remote_counters_t remote;
    if (cdc__executor_remote_counters(context->executor, &remote) == CDC_OK) {
        /* What really crossed the wire (payloads; 192-byte headers aside). */
        stats->bytes_out = remote.bytes_out;
        stats->bytes_in = remote.bytes_in;
        stats->late_replies = remote.late_replies;
        stats->late_blocks = remote.late_blocks;
        stats->heartbeats_missed = remote.heartbeats_missed;
        stats->worker_deaths = remote.worker_deaths;
        stats->worker_rejoins = remote.worker_rejoins;
        stats->worker_goodbyes = remote.worker_goodbyes;
        stats->invalid_messages = remote.invalid_replies;
        stats->weights_sent = remote.weights_sent;
        stats->weight_bytes = remote.weight_bytes;
        stats->cancels_sent = remote.cancels_sent;
        stats->background_weight_bytes = remote.background_weight_bytes;
        stats->redundancy_repairs = remote.redundancy_repairs;
        stats->repair_us_sum = remote.repair_us_sum;
        stats->repair_us_max = remote.repair_us_max;
        stats->oversized_skipped = remote.oversized_skipped;
        stats->weights_stored_asked = remote.stored_asked;
        stats->weights_stored_missing = remote.stored_missing;
    }
    stats->worker_respawns = context->respawns;
    stats->respawns_given_up = context->given_up;
    if (context->supervisor)
        cdc__supervisor_counters(context->supervisor, &stats->worker_respawns,
                                 &stats->respawns_given_up);
    return CDC_OK;
}

void cdc__context_count_call(cdc_context_t *context)
{
    pthread_mutex_lock(&context->lock);
    context->stats.calls++;
    pthread_mutex_unlock(&context->lock);
}

int cdc_context_last_call(cdc_context_t *context, cdc_call_report_t *report)
{
    if (!context || !report)
        return cdc__fail(CDC_EINVAL, "cdc_context_last_call: NULL argument");
    pthread_mutex_lock(&context->lock);
    *report = context->last_call;
    pthread_mutex_unlock(&context->lock);
    return CDC_OK;
}

int cdc__context_parity(const cdc_context_t *context, int parity_override)
{
    return parity_override >= 0 ? parity_override : context->config.parity;
}

int cdc__context_data_shards(const cdc_context_t *context, int parity, int *n)
{
    if (parity < 0 || parity > CDC_MAX_PARITY)
        return cdc__fail(CDC_ECONFIG, "parity r = %d: expected 0..%d", parity,
                         CDC_MAX_PARITY);
    int total = cdc__context_worker_total(context);
    int data = context->config.data_shards > 0 ? context->config.data_shards : total - parity;
    if (context->config.data_shards > 0 && data + parity > total)
        return cdc__fail(CDC_ECONFIG,
                         "CDCGEMM_DATA_SHARDS = %d with parity r = %d needs %d workers, "
                         "there are %d",
                         data, parity, data + parity, total);
    if (data < 1 || (parity > 0 && parity > data))
        return cdc__fail(CDC_ECONFIG,
                         "parity r = %d with %d workers leaves n = %d data shards "
                         "(need n >= 1 and r <= n)",
                         parity, total, data);
    int live = cdc__context_plan_workers(context, NULL);
    if (context->config.replicate && parity == 0) {
        /* Two copies of every data shard: half as many shards as workers. */
        int workers = live > 0 ? live : total;
        *n = workers >= 2 ? workers / 2 : 1;
        return CDC_OK;
    }
    if (live == 0) {
        *n = data; /* nothing will be sent: every shard is computed here */
        return CDC_OK;
    }
    if (context->config.replan == CDC_REPLAN_KEEP_SHARDS) {
        /* Latency first: shards keep their size while enough workers live.
           The slots of the dead are erasures, decoded from parity, until
           their workers are back or a spare stands in (cdc__context_code
           keeps r while n live); fewer than n: n shrinks, r goes. */
        *n = live < data ? live : data;
        return CDC_OK;
    }
    int r = parity <= live / 2 ? parity : live / 2;
    *n = live - r < data ? live - r : data;
    return CDC_OK;
}

int cdc__context_code(cdc_context_t *context, int n, int r, const cdc_code_t **code)
{
    *code = NULL;
    /* The plan over the workers in it: n came from cdc__context_data_shards;
       lower r so that the n + r shards fit them (r <= n). With none the
       call is local anyway: keep r. */
    int live = cdc__context_plan_workers(context, NULL);
    /* keep-shards with n live: the missing workers' slots are erasures
       (decodable while at most r), so no weight shard moves. */
    int erasures_ok = context->config.replan == CDC_REPLAN_KEEP_SHARDS && live >= n;
    if (live > 0 && n + r > live && !erasures_ok)
        r = live - n > 0 ? live - n : 0;
    return cdc__context_code_exact(context, n, r > n ? n : r, code);
}

int cdc__context_code_exact(cdc_context_t *context, int n, int r, const cdc_code_t **code)
{
    *code = NULL;
    if (r == 0)
        return CDC_OK;
    if (n < 1 || n > CDC_CODE_MAX_N || r < 0 || r > CDC_CODE_MAX_R || r > n)
        return cdc__fail(CDC_EINVAL, "no code for n = %d, r = %d", n, r);
    pthread_mutex_lock(&context->lock);
    cdc_code_t **slot = &context->codes[r][n];
    int rc = CDC_OK;
    if (!*slot) {
        const cdc_code_ops_t *ops = context->config.code[0]
                                        ? cdc__code_find_ops(context->config.code)
                                        : NULL;
        if (ops && ops->max_parity < r)
            ops = NULL; /* the named scheme cannot do r: use the default */
        rc = cdc__code_new(ops, n, r, slot);
    }
    *code = *slot;
    pthread_mutex_unlock(&context->lock);
    return rc;
}

int cdc__context_worker_total(const cdc_context_t *context)
{
    if (!context->discover)
        return context->workers;
    int found = context->executor ? cdc__executor_worker_count(context->executor) : 0;
    int floor = context->config.parity + 1;
    return found > floor ? found : floor;
}

int cdc__context_plan_workers(const cdc_context_t *context, uint64_t *mask)
{
    int live = context->executor ? cdc__executor_live(context->executor, mask) : -1;
    int total = cdc__context_worker_total(context);
    if (live < 0 || live > total) {
        live = total;
        if (mask)
            *mask = cdc__low_bits(live);
    }
    return live;
}
