/* blas_context.c - the lazily created process-wide context of the BLAS entry points.
 *
 * Life cycle. The CDCGEMM_* environment is read on the first BLAS call (for
 * the threshold); the context (and with it any workers) is created on the
 * first call above the threshold, and destroyed at exit (atexit), which also
 * writes CDCGEMM_STATS.
 *
 * fork(). A child must not use its parent's context: the executor's threads,
 * sockets and worker processes belong to the parent (and threads do not
 * survive fork). A pthread_atfork child handler therefore forgets the
 * parent's context and weight cache without touching them (they leak in the
 * child, copy-on-write) and re-initialises the lock, which another parent
 * thread may have held at the fork. The child's next coded call creates its
 * own context; its stats file is CDCGEMM_STATS.<pid> so it does not overwrite
 * the parent's. No prepare handler takes the lock, so a fork from inside a
 * coded call (e.g. while spawning workers) cannot deadlock. */
#include "blas_context.h"

#include "cdcgemm_testing.h"
#include "driver.h"
#include "error.h"
#include "log.h"
#include "operand_cache.h"
#include "stats_json.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Bounds of the weight cache: entries (candidates included) and bytes of
   packed copies plus parity blocks. */
enum { CACHE_ENTRIES = 64 };
#define CACHE_BYTES ((size_t) 1 << 30)

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static cdc_config_t env_config;
double cdc__blas_min_flops_value = INFINITY, cdc__blas_min_flops_vector_value = INFINITY;

static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static cdc_context_t *state_context;
static cdc_operand_cache_t *state_cache;
static int state_failed;  /* context creation failed: stay local, say it once */
static int state_forked;  /* this process is a child forked after creation   */

static void env_read(void)
{
    cdc_config_init(&env_config);
    if (cdc_config_from_env(&env_config) != CDC_OK) {
        /* The BLAS interface has no error return: say it once, stay correct. */
        CDC_LOG_ERRORF("cdcgemm: %s; BLAS calls run on local OpenBLAS", cdc_last_error());
        cdc__blas_min_flops_value = cdc__blas_min_flops_vector_value = INFINITY;
        return;
    }
    /* Under a measured plan (auto, profiled) the latency model decides
       (plan.c, cdc__plan_prefer_here); CDCGEMM_MIN_FLOPS stays an override. */
    double unset = env_config.plan != CDC_PLAN_EQUAL ? CDC_BLAS_MIN_FLOPS_PLANNED
                                                     : CDC_BLAS_MIN_FLOPS_DEFAULT;
    cdc__blas_min_flops_value = env_config.min_flops < 0 ? unset : env_config.min_flops;
    cdc__blas_min_flops_vector_value =
        env_config.min_flops < 0 ? CDC_BLAS_MIN_FLOPS_DEFAULT : env_config.min_flops;
}

/* Set once env_read has run: the fast path is then one acquire load (a
   plain load on x86), not a call into pthread_once. */
int cdc__blas_min_flops_ready;

static void env_read_once(void)
{
    env_read();
    __atomic_store_n(&cdc__blas_min_flops_ready, 1, __ATOMIC_RELEASE);
}

double cdc__blas_min_flops(void)
{
    if (__builtin_expect(!__atomic_load_n(&cdc__blas_min_flops_ready, __ATOMIC_ACQUIRE), 0))
        pthread_once(&env_once, env_read_once);
    return cdc__blas_min_flops_value;
}

double cdc__blas_min_flops_vector(void)
{
    cdc__blas_min_flops();
    return cdc__blas_min_flops_vector_value;
}

static void state_at_fork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    state_lock = fresh;
    state_context = NULL;
    state_cache = NULL;
    state_failed = 0;
    state_forked = 1;
}

/* Destroy the context (lock held), writing its counters when asked to. */
static void state_destroy_locked(void)
{
    if (state_context) {
        const char *path = state_context->config.stats_path;
        if (path[0]) {
            cdc_stats_t stats;
            cdc_profile_report_t profile;
            char child_path[CDC_CONFIG_STR + 24];
            if (state_forked) {
                snprintf(child_path, sizeof child_path, "%s.%ld", path, (long) getpid());
                path = child_path;
            }
            cdc__context_profile_report(state_context, &profile);
            if (cdc_context_stats(state_context, &stats) != CDC_OK ||
                cdc__stats_write_json(&stats, &profile, path) != CDC_OK)
                CDC_LOG_ERRORF("cdcgemm: CDCGEMM_STATS: %s", cdc_last_error());
        }
    }
    cdc__operand_cache_destroy(&state_cache);
    cdc_context_destroy(&state_context);
}

static void state_at_exit(void)
{
    pthread_mutex_lock(&state_lock);
    state_destroy_locked();
    pthread_mutex_unlock(&state_lock);
}

static void hooks_install(void)
{
    if (pthread_atfork(NULL, NULL, state_at_fork_child) != 0 || atexit(state_at_exit) != 0)
        CDC_LOG_WARNF("cdcgemm: cannot install fork/exit handlers");
}

void cdc__blas_context_shutdown(void)
{
    state_at_exit();
}

int cdc__blas_context_stats(cdc_stats_t *stats)
{
    pthread_mutex_lock(&state_lock);
    int rc = state_context ? cdc_context_stats(state_context, stats)
                           : cdc__fail(CDC_ESTATE, "no BLAS context yet");
    pthread_mutex_unlock(&state_lock);
    return rc;
}

static int state_ready_locked(void);

int cdc__blas_context_erase_next(uint64_t mask)
{
    pthread_once(&env_once, env_read_once);
    pthread_mutex_lock(&state_lock);
    int rc = state_ready_locked();
    if (rc == CDC_OK)
        rc = cdc_context_erase_next(state_context, mask);
    pthread_mutex_unlock(&state_lock);
    return rc;
}

/* The context and cache, created on first use (lock held). */
static int state_ready_locked(void)
{
    if (state_context)
        return CDC_OK;
    if (state_failed)
        return cdc__fail(CDC_ESTATE, "BLAS context could not be created");
    pthread_once(&hooks_once, hooks_install);
    int rc = cdc_context_new(&env_config, &state_context);
    /* BLAS callers are owed BLAS accuracy: a shard rebuilt from parity may be
       used only where its rounding error stays within a few times a direct
       product's (the reference tests allow 16 ulps of |A||B|). */
    if (rc == CDC_OK)
        state_context->decode_guard = CDC_BLAS_DECODE_GUARD;
    if (rc == CDC_OK)
        rc = cdc__operand_cache_new(CACHE_ENTRIES, CACHE_BYTES, &state_cache);
    if (rc != CDC_OK) {
        CDC_LOG_ERRORF("cdcgemm: cannot create the BLAS context (%s); BLAS calls run "
                       "on local OpenBLAS",
                       cdc_last_error());
        cdc_context_destroy(&state_context);
        state_failed = 1;
    }
    return rc;
}

static void count_weights(cdc_context_t *context, int encoded, int hit)
{
    pthread_mutex_lock(&context->lock);
    context->stats.weight_encodes += (uint64_t) encoded;
    context->stats.weight_hits += (uint64_t) hit;
    pthread_mutex_unlock(&context->lock);
}

/* A cache entry lent to the driver as weights: notes whether this call
   encoded something of it. */
static void blas_weights_encoded(cdc_weights_t *weights)
{
    *(int *) weights->owner = 1;
}

/* C = alpha·T + beta·C for T = op_a · op_btᵀ with the lock held: the operand
   the cache finds repeating is described as weights, the rest is the
   driver's. The configured split is in the caller's terms (rows of C), which
   for a column-major call are T's columns: the driver maps it. */
static int coded_product_locked(int col_major, const cdc_operand_t *op_a,
                                const cdc_operand_t *op_bt, float alpha, float beta,
                                float *c, int64_t ldc)
{
    cdc_context_t *ctx = state_context;
    int side;
    cdc_operand_entry_t *entry;
    int rc = cdc__operand_cache_match(state_cache, op_a, op_bt, &side, &entry);
    if (rc != CDC_OK)
        return rc;
    cdc_gemm_desc_t desc;
    memset(&desc, 0, sizeof desc);
    desc.a.view = *op_a;
    desc.bt.view = *op_bt;
    desc.transposed = col_major;
    desc.epilogue = (cdc_epilogue_t){.kind = CDC_EPILOGUE_STORE, .out = c, .ld = ldc,
                                     .alpha = alpha, .beta = beta};
    cdc_weights_t weights;
    int encoded_now = 0;
    if (side != 0) {
        /* Distinct keys: the row blocks and the whole matrix live side by side
           on the workers. */
        weights = (cdc_weights_t){.hold = entry->packed_hold,
                                  .set_key = entry->key ^ 0x5d1a,
                                  .whole_key = entry->key ^ 0x3e7b,
                                  .store = &entry->encoded,
                                  .encoded = blas_weights_encoded,
                                  .owner = &encoded_now};
        if (side == 1)
            desc.a.weights = &weights;
        else
            desc.bt.weights = &weights;
    }
    cdc_call_plan_t plan;
    cdc__context_call_begin(ctx); /* the driver's contract; state_lock already
                                     makes this context's calls one at a time */
    rc = cdc__plan_resolve(ctx, CDC_PARITY_DEFAULT, CDC_SPLIT_AUTO, &plan);
    if (rc == CDC_OK)
        rc = cdc__driver_gemm(ctx, &desc, &plan);
    cdc__context_call_end(ctx);
    if (side != 0)
        cdc__operand_entry_settle(state_cache, entry);
    if (rc == CDC_OK && side != 0) {
        /* Weights sent whole count as encoded the first time only. */
        int cut = (plan.cut == CDC_SHARD_A) == (side == 1);
        int encoded = cut ? encoded_now : !entry->whole_ready;
        entry->whole_ready |= !cut;
        count_weights(ctx, encoded, !encoded);
    }
    return rc;
}

int cdc__blas_context_sgemm(int col_major, int trans_a, int trans_b, int64_t m,
                            int64_t n, int64_t k, float alpha, const float *a,
                            int64_t lda, const float *b, int64_t ldb, float beta,
                            float *c, int64_t ldc)
{
    pthread_once(&env_once, env_read_once);
    cdc_operand_t op_a, op_bt;
    cdc__gemm_operands(col_major, trans_a, trans_b, m, n, k, a, lda, b, ldb, &op_a, &op_bt);
    pthread_mutex_lock(&state_lock);
    int rc = state_ready_locked();
    if (rc == CDC_OK)
        rc = coded_product_locked(col_major, &op_a, &op_bt, alpha, beta, c, ldc);
    pthread_mutex_unlock(&state_lock);
    return rc;
}
