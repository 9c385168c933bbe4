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

#include "context.h"
#include "error.h"
#include "layer.h"
#include "log.h"
#include "matmul_coded.h"
#include "operand_cache.h"
#include "plan.h"
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
double cdc__blas_min_flops_value = INFINITY;

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
        cdc__blas_min_flops_value = INFINITY;
        return;
    }
    cdc__blas_min_flops_value = env_config.min_flops < 0 ? CDC_BLAS_MIN_FLOPS_DEFAULT
                                         : env_config.min_flops;
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
            char child_path[CDC_CONFIG_STR + 24];
            if (state_forked) {
                snprintf(child_path, sizeof child_path, "%s.%ld", path, (long) getpid());
                path = child_path;
            }
            if (cdc_context_stats(state_context, &stats) != CDC_OK ||
                cdc__stats_write_json(&stats, path) != CDC_OK)
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

/* The coded product T (m x n) = op_a · op_btᵀ with the lock held. */
static int coded_product_locked(int col_major, const cdc_operand_t *op_a,
                                const cdc_operand_t *op_bt, float *t)
{
    cdc_context_t *ctx = state_context;
    int64_t m = op_a->rows, n = op_bt->rows, k = op_a->k;
    int r = cdc__context_parity(ctx, CDC_PARITY_DEFAULT), shards;
    const cdc_code_t *code = NULL;
    int rc = cdc__context_data_shards(ctx, r, &shards);
    if (rc == CDC_OK)
        rc = cdc__context_code(ctx, shards, r, &code);
    if (rc != CDC_OK)
        return rc;

    int side;
    cdc_operand_entry_t *weights;
    rc = cdc__operand_cache_match(state_cache, op_a, op_bt, &side, &weights);
    if (rc != CDC_OK)
        return rc;

    /* Which operand's rows are cut: the configured split is the caller's
       (rows of C = output/channel), which is Bt's rows in column-major. */
    cdc_split_t split = ctx->config.split;
    int shard_a;
    if (split == CDC_SPLIT_ROWS || split == CDC_SPLIT_COLUMNS)
        shard_a = (split == CDC_SPLIT_ROWS) != col_major;
    else
        shard_a = cdc__plan_matmul_split(m, n, k, shards, r, side == 1, side == 2) !=
                  CDC_SPLIT_COLUMNS;
    const cdc_operand_t *cut = shard_a ? op_a : op_bt;
    const cdc_operand_t *whole = shard_a ? op_bt : op_a;
    int cut_side = shard_a ? 1 : 2;

    /* Pack what is not cached: the per-call input(s). */
    size_t count = 0;
    if (side != cut_side)
        count += (size_t) cut->rows * (size_t) k;
    if (side == 0 || side == cut_side)
        count += (size_t) whole->rows * (size_t) k;
    float *packed = count ? malloc(count * sizeof(float)) : NULL;
    if (count && !packed)
        return cdc__fail(CDC_ENOMEM, "packing %lld x %lld x %lld", (long long) m,
                         (long long) n, (long long) k);
    float *next = packed;
    const float *cut_data = NULL, *whole_data = NULL;
    uint64_t set_key = 0, whole_key = 0;
    int encoded = 0;
    const cdc_shard_set_t *set = NULL;
    cdc_shard_set_t *call_set = NULL;
    if (side == cut_side) {
        /* The weights are cut: row blocks + parity encoded once, kept by workers. */
        rc = cdc__operand_entry_shards(state_cache, weights, code, shards, &set, &encoded);
        set_key = weights->key ^ 0x5d1a;
    } else {
        cdc__operand_pack(cut, next);
        cut_data = next;
        next += (size_t) cut->rows * (size_t) k;
        rc = cdc__shard_set_new(code, shards, cut_data, cut->rows, k, &call_set);
        set = call_set;
    }
    const double *whole_norms = NULL;
    if (side != 0 && side != cut_side) {
        /* The weights go whole to every worker, once (keyed); their row norms
           (the parity check's scale) are computed once too. */
        whole_data = weights->packed;
        whole_key = weights->key ^ 0x3e7b;
        encoded = !weights->whole_ready;
        weights->whole_ready = 1;
        if (rc == CDC_OK)
            rc = cdc__operand_entry_norms(state_cache, weights, &whole_norms);
    } else {
        cdc__operand_pack(whole, next);
        whole_data = next;
    }
    if (rc == CDC_OK) {
        cdc_shard_side_t shard_side = shard_a ? CDC_SHARD_A : CDC_SHARD_BT;
        const float *a_whole = shard_a ? NULL : whole_data;
        const float *bt_whole = shard_a ? whole_data : NULL;
        rc = whole_norms ? cdc__matmul_coded_normed(ctx, code, shard_side, set, set_key,
                                                    whole_key, a_whole, m, bt_whole, n, k,
                                                    whole_norms, t, n)
                         : cdc__matmul_coded(ctx, code, shard_side, set, set_key, whole_key,
                                             a_whole, m, bt_whole, n, k, t, n);
        if (rc == CDC_OK && side != 0)
            count_weights(ctx, encoded, !encoded);
    }
    cdc__shard_set_destroy(&call_set);
    free(packed);
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
    m = op_a.rows; /* T's rows and columns (swapped for a column-major call) */
    n = op_bt.rows;
    float *t = malloc((size_t) m * (size_t) n * sizeof(float));
    if (!t)
        return cdc__fail(CDC_ENOMEM, "result of %lld x %lld", (long long) m, (long long) n);

    pthread_mutex_lock(&state_lock);
    int rc = state_ready_locked();
    if (rc == CDC_OK)
        rc = coded_product_locked(col_major, &op_a, &op_bt, t);
    if (rc == CDC_OK)
        cdc__context_count_call(state_context);
    pthread_mutex_unlock(&state_lock);

    if (rc == CDC_OK)
        cdc__gemm_store(c, ldc, t, m, n, alpha, beta);
    free(t);
    return rc;
}
