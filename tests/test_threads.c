/* test_threads.c - calls on one context from several threads (cdcgemm.h: "calls
   on one context are serialised internally"). Four threads share one context
   of five embedded workers (r = 1), one FC layer and one conv layer; each runs
   cdc_sgemm (a transposition of its own), FC and conv forwards with inputs of
   its own, while a fifth SIGKILLs a worker mid-run; the calls go on until
   the library's respawned worker has rejoined (SETTLE_MS after it started).
   Every result within 1e-4 of a double reference, no call failed.
   Before the context had a call lock the threads raced in the plan, the
   caches and the coded calls.

   The same through the BLAS entry points (cblas_sgemm, sgemm_) on the
   drop-in's process-wide context, configured from CDCGEMM_* as a program
   that knows nothing of cdcgemm would configure it: four threads share one
   FC weight matrix (found repeating by the operand cache, as an FC layer's
   would be) in three call forms, and each multiplies fresh operands of its
   own, while a worker is SIGKILLed mid-run and respawned: every call
   completed on the coded path (none failed over to local OpenBLAS).

   Either way the one kill counts exactly one redundancy repair, and only
   after the respawned worker ran (redundancy_repairs, docs/workers.md). */
#include "blas_context.h"
#include "blas_entry.h"
#include "cdcgemm.h"
#include "context.h"
#include "local_workers.h"
#include "reference.h"
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define ROUNDS 12       /* per thread at least                                 */
#define MAX_ROUNDS 2000 /* per thread at most, while the respawn is awaited    */
#define LIMIT_S 20.0    /* the killer's bound: the kill, the respawn, the calls */
#define SETTLE_MS 300   /* calls go on this long once the respawned worker runs */
#define REPAIR_S 5.0    /* then at most this long until its repair is counted  */
#define WORKERS 5
#define TOLERANCE 1e-4

#define FC_OUT 256
#define FC_IN 384
#define FC_BATCH 3

enum { CBLAS_ROW = 101, CBLAS_COL = 102, CBLAS_NT = 111, CBLAS_TR = 112 };
/* BLAS calls per round: three forms of the FC product, one fresh GEMM. */
#define BLAS_CALLS 4

static const cdc_ref_conv_t conv_shape = {.batch = 2, .in_channels = 8, .h = 12, .w = 12,
                                          .out_channels = 16, .kernel_h = 3, .kernel_w = 3,
                                          .stride_h = 1, .stride_w = 1, .pad_h = 1,
                                          .pad_w = 1, .dilation_h = 1, .dilation_w = 1};

typedef struct {
    cdc_context_t *context; /* NULL: the BLAS entry points' context */
    cdc_layer_t *fc, *conv;
    const float *fc_w, *fc_bias, *conv_w, *conv_bias;
    pthread_barrier_t start; /* the threads' first calls (the layers' first
                                encodes among them) all at once      */
    atomic_int rounds_done; /* by all threads */
    atomic_int settled;     /* the killer is done: the threads may stop        */
    int killed_after;       /* rounds done when the worker was killed, -1: not */
    int respawned;          /* a new worker 2 process ran after the kill       */
    uint64_t repairs_at_kill;    /* redundancy_repairs just before the kill    */
    uint64_t repairs_at_respawn; /* and once the new process was seen running  */
} shared_t;

typedef struct {
    shared_t *shared;
    int index;
    int failures;        /* calls that returned an error                  */
    double worst;        /* the largest relative error seen                */
    char first_error[256];
} thread_job_t;

static void note(thread_job_t *job, int rc, const char *what, double error)
{
    if (rc != CDC_OK && job->failures++ == 0)
        snprintf(job->first_error, sizeof job->first_error, "thread %d %s: %s (%s)",
                 job->index, what, cdc_err_name(rc), cdc_last_error());
    if (rc == CDC_OK && !isnan(job->worst) && !(error <= job->worst))
        job->worst = error; /* a NaN sticks */
}

/* C = op(A) op(B), row-major, the transposition of this thread's index:
   through cdc_sgemm, or cblas_sgemm when the threads share no context. */
static void one_sgemm(thread_job_t *job, cdc_test_rng_t *rng)
{
    const int64_t m = 72, n = 40, k = 96;
    int ta = job->index & 1, tb = (job->index >> 1) & 1;
    float *a = cdc_test_alloc(sizeof(float) * m * k), *b = cdc_test_alloc(sizeof(float) * k * n);
    float *at = cdc_test_alloc(sizeof(float) * m * k), *bt = cdc_test_alloc(sizeof(float) * k * n);
    float *c = cdc_test_alloc(sizeof(float) * m * n);
    double *want = cdc_test_alloc(sizeof(double) * m * n);
    cdc_test_fill_uniform(rng, a, (size_t) (m * k));
    cdc_test_fill_uniform(rng, b, (size_t) (k * n));
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < k; j++)
            at[j * m + i] = a[i * k + j];
    for (int64_t i = 0; i < k; i++)
        for (int64_t j = 0; j < n; j++)
            bt[j * k + i] = b[i * n + j];
    cdc_ref_gemm(m, n, k, a, k, b, n, want, n);
    cdc_test_fill_uniform(rng, c, (size_t) (m * n)); /* beta = 0 must overwrite it */
    int rc = CDC_OK;
    if (job->shared->context)
        rc = cdc_sgemm(job->shared->context, CDC_ROW_MAJOR, ta ? CDC_TRANS : CDC_NO_TRANS,
                       tb ? CDC_TRANS : CDC_NO_TRANS, m, n, k, 1.0f, ta ? at : a, ta ? m : k,
                       tb ? bt : b, tb ? k : n, 0.0f, c, n);
    else
        cblas_sgemm(CBLAS_ROW, ta ? CBLAS_TR : CBLAS_NT, tb ? CBLAS_TR : CBLAS_NT, (int) m,
                    (int) n, (int) k, 1.0f, ta ? at : a, (int) (ta ? m : k), tb ? bt : b,
                    (int) (tb ? k : n), 0.0f, c, (int) n);
    note(job, rc, job->shared->context ? "cdc_sgemm" : "cblas_sgemm",
         cdc_test_rel_error(c, want, (size_t) (m * n)));
    free(a), free(b), free(at), free(bt), free(c), free(want);
}

static void one_fc(thread_job_t *job, cdc_test_rng_t *rng)
{
    const shared_t *sh = job->shared;
    float *x = cdc_test_alloc(sizeof(float) * FC_BATCH * FC_IN);
    float *y = cdc_test_alloc(sizeof(float) * FC_BATCH * FC_OUT);
    double *want = cdc_test_alloc(sizeof(double) * FC_BATCH * FC_OUT);
    cdc_test_fill_uniform(rng, x, FC_BATCH * FC_IN);
    cdc_ref_fc(FC_BATCH, FC_IN, FC_OUT, x, sh->fc_w, sh->fc_bias, 0, want);
    int rc = cdc_fc_forward(sh->fc, FC_BATCH, x, y);
    note(job, rc, "cdc_fc_forward", cdc_test_rel_error(y, want, FC_BATCH * FC_OUT));
    free(x), free(y), free(want);
}

static void one_conv(thread_job_t *job, cdc_test_rng_t *rng)
{
    const shared_t *sh = job->shared;
    const cdc_ref_conv_t *s = &conv_shape;
    size_t in = (size_t) (s->batch * s->in_channels * s->h * s->w);
    size_t out = (size_t) (s->batch * s->out_channels * s->h * s->w); /* pad 1: same size */
    float *x = cdc_test_alloc(sizeof(float) * in), *y = cdc_test_alloc(sizeof(float) * out);
    double *want = cdc_test_alloc(sizeof(double) * out);
    cdc_test_fill_uniform(rng, x, in);
    ck_assert_int_eq(cdc_ref_conv2d(s, x, sh->conv_w, sh->conv_bias, want), 0);
    int rc = cdc_conv2d_forward(sh->conv, s->batch, s->h, s->w, x, y);
    note(job, rc, "cdc_conv2d_forward", cdc_test_rel_error(y, want, out));
    free(x), free(y), free(want);
}

/* The FC product Y = X·Wᵀ with the shared W, through the BLAS entry points
   in the three forms a program uses: cblas_sgemm row-major (Y, batch x out),
   cblas_sgemm column-major (Yᵀ = W·Xᵀ, out x batch column-major: the same
   memory as Y) and Fortran sgemm_ with alpha and beta (Yᵀ = 1.5·W·Xᵀ +
   0.5·C0). Each output starts as other numbers, which must not survive. */
static void blas_fc(thread_job_t *job, cdc_test_rng_t *rng)
{
    const float *w = job->shared->fc_w;
    const int out = FC_OUT, in = FC_IN, batch = FC_BATCH;
    const float alpha = 1.5f, beta = 0.5f;
    const size_t count = (size_t) FC_BATCH * FC_OUT;
    float *x = cdc_test_alloc(sizeof(float) * FC_BATCH * FC_IN);
    float *y = cdc_test_alloc(sizeof(float) * count), *c0 = cdc_test_alloc(sizeof(float) * count);
    double *want = cdc_test_alloc(sizeof(double) * count);
    double *scaled = cdc_test_alloc(sizeof(double) * count);
    cdc_test_fill_uniform(rng, x, FC_BATCH * FC_IN);
    cdc_test_fill_uniform(rng, c0, count);
    cdc_ref_fc(FC_BATCH, FC_IN, FC_OUT, x, w, NULL, 0, want);
    for (size_t i = 0; i < count; i++)
        scaled[i] = alpha * want[i] + beta * (double) c0[i];

    cdc_test_fill_uniform(rng, y, count);
    cblas_sgemm(CBLAS_ROW, CBLAS_NT, CBLAS_TR, batch, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
    note(job, CDC_OK, "cblas_sgemm row-major", cdc_test_rel_error(y, want, count));
    cdc_test_fill_uniform(rng, y, count);
    cblas_sgemm(CBLAS_COL, CBLAS_TR, CBLAS_NT, out, batch, in, 1.0f, w, in, x, in, 0.0f, y, out);
    note(job, CDC_OK, "cblas_sgemm column-major", cdc_test_rel_error(y, want, count));
    memcpy(y, c0, sizeof(float) * count);
    sgemm_("T", "N", &out, &batch, &in, &alpha, w, &in, x, &in, &beta, y, &out, 1, 1);
    note(job, CDC_OK, "sgemm_", cdc_test_rel_error(y, scaled, count));
    free(x), free(y), free(c0), free(want), free(scaled);
}

static void *thread_main(void *arg)
{
    thread_job_t *job = arg;
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 100 + (uint64_t) job->index);
    pthread_barrier_wait(&job->shared->start);
    for (int round = 0;
         round < ROUNDS || (round < MAX_ROUNDS && !atomic_load(&job->shared->settled));
         round++) {
        if (job->shared->context) {
            one_fc(job, &rng);
            one_conv(job, &rng);
        } else {
            blas_fc(job, &rng);
        }
        one_sgemm(job, &rng);
        atomic_fetch_add(&job->shared->rounds_done, 1);
    }
    return NULL;
}

/* Worker 2's process now: from the context's table, or, for the BLAS entry
   points' process-wide context, among this process's children. */
static pid_t victim_pid(shared_t *sh)
{
    return sh->context ? cdc__local_workers_pid(sh->context->local, 2) : cdc_test_worker_child(2);
}

/* The context's redundancy_repairs (the BLAS one's when sh has none). */
static uint64_t repairs_of(const shared_t *sh)
{
    cdc_stats_t stats;
    int rc = sh->context ? cdc_context_stats(sh->context, &stats) : cdc__blas_context_stats(&stats);
    ck_assert_int_eq(rc, CDC_OK);
    return stats.redundancy_repairs;
}

/* The killer: worker 2 SIGKILLed once a third of the rounds are done; the
   library respawns it, and the threads go on calling until the new process
   has run for SETTLE_MS (it rejoins and is sent its weights while they call);
   LIMIT_S at most in all. */
static void *killer_main(void *arg)
{
    shared_t *sh = arg;
    double start = cdc_test_now_s();
    while (atomic_load(&sh->rounds_done) < THREADS * ROUNDS / 3 &&
           cdc_test_now_s() - start < LIMIT_S)
        cdc_test_sleep_ms(1);
    pid_t pid = victim_pid(sh), next = -1;
    sh->repairs_at_kill = repairs_of(sh);
    if (pid > 0 && kill(pid, SIGKILL) == 0) {
        sh->killed_after = atomic_load(&sh->rounds_done);
        while (((next = victim_pid(sh)) <= 0 || next == pid) &&
               cdc_test_now_s() - start < LIMIT_S)
            cdc_test_sleep_ms(2);
        sh->respawned = next > 0 && next != pid;
        /* The new process holds nothing yet: no repair can be complete. */
        sh->repairs_at_respawn = repairs_of(sh);
        if (sh->respawned)
            cdc_test_sleep_ms(SETTLE_MS);
    }
    atomic_store(&sh->settled, 1);
    return NULL;
}

/* After the threads: one SIGKILL is one loss of redundancy, so exactly one
   repair, and none before the new process ran (it must first be sent its
   slot's blocks). Calls of both kinds (cached weights, per-call operands)
   go on, on this thread, until the repair is counted (REPAIR_S at most),
   then a few more: the count must stay. Before the slots followed the
   calls' shards, the FC calls (a 3-row batch in 4 blocks: shard 3 empty,
   not sent, 4 tasks) made slot 4's home a spare standing in for the dead
   worker, the calls with all 5 tasks took it back, and every flip
   counted another repair (11-65 for one kill). */
static void assert_one_repair(shared_t *sh)
{
    thread_job_t job = {.shared = sh, .index = 0};
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 99);
    ck_assert_msg(sh->repairs_at_respawn == sh->repairs_at_kill,
                  "%llu repairs counted before worker 2's new process ran",
                  (unsigned long long) (sh->repairs_at_respawn - sh->repairs_at_kill));
    double start = cdc_test_now_s();
    int after = 0;
    while (after < 10 && cdc_test_now_s() - start < REPAIR_S) {
        after += repairs_of(sh) > sh->repairs_at_kill;
        if (sh->context) {
            one_fc(&job, &rng);
            one_conv(&job, &rng);
        } else {
            blas_fc(&job, &rng);
        }
        one_sgemm(&job, &rng);
    }
    ck_assert_msg(job.failures == 0, "%s", job.first_error);
    ck_assert_uint_eq(repairs_of(sh), sh->repairs_at_kill + 1);
}

static cdc_layer_t *conv_layer(cdc_context_t *context, const float *w, const float *bias)
{
    const cdc_ref_conv_t *s = &conv_shape;
    cdc_conv2d_desc_t desc = {.in_channels = s->in_channels, .out_channels = s->out_channels,
                              .kernel_h = s->kernel_h, .kernel_w = s->kernel_w,
                              .stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 1,
                              .dilation_h = 1, .dilation_w = 1};
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_conv2d_new(context, &desc, w, bias, NULL, &layer), CDC_OK);
    return layer;
}

/* The four threads and the killer on sh, then every thread's tally: no
   call failed, every result within TOLERANCE, the worker killed mid-run. */
static void run_threads(shared_t *sh)
{
    pthread_t threads[THREADS], killer;
    ck_assert_int_eq(pthread_barrier_init(&sh->start, NULL, THREADS), 0);
    thread_job_t jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (thread_job_t){.shared = sh, .index = t};
        ck_assert_int_eq(pthread_create(&threads[t], NULL, thread_main, &jobs[t]), 0);
    }
    ck_assert_int_eq(pthread_create(&killer, NULL, killer_main, sh), 0);
    pthread_join(killer, NULL);
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    pthread_barrier_destroy(&sh->start);
    for (int t = 0; t < THREADS; t++) {
        ck_assert_msg(jobs[t].failures == 0, "%d calls failed; first: %s", jobs[t].failures,
                      jobs[t].first_error);
        ck_assert_msg(jobs[t].worst <= TOLERANCE, "thread %d: relative error %.3g",
                      t, jobs[t].worst);
    }
    ck_assert_msg(sh->killed_after >= 0 && sh->killed_after < THREADS * ROUNDS,
                  "worker 2 not killed mid-run (after %d of %d rounds)", sh->killed_after,
                  THREADS * ROUNDS);
    ck_assert_msg(sh->respawned, "worker 2 not respawned within %.0f s", LIMIT_S);
}

START_TEST(test_four_threads_one_context)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.local_workers = WORKERS;
    config.parity = 1;
    config.timeout_ms = 10000;
    config.log_level = getenv("CDC_TEST_LOG") ? CDC_LOG_INFO : CDC_LOG_ERROR;
    shared_t sh = {.killed_after = -1};
    ck_assert_int_eq(cdc_context_new(&config, &sh.context), CDC_OK);
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 7);
    const cdc_ref_conv_t *s = &conv_shape;
    size_t conv_w = (size_t) (s->out_channels * s->in_channels * s->kernel_h * s->kernel_w);
    float *fc_w = cdc_test_alloc(sizeof(float) * FC_OUT * FC_IN);
    float *fc_bias = cdc_test_alloc(sizeof(float) * FC_OUT);
    float *cw = cdc_test_alloc(sizeof(float) * conv_w);
    float *cb = cdc_test_alloc(sizeof(float) * (size_t) s->out_channels);
    cdc_test_fill_uniform(&rng, fc_w, FC_OUT * FC_IN);
    cdc_test_fill_uniform(&rng, fc_bias, FC_OUT);
    cdc_test_fill_uniform(&rng, cw, conv_w);
    cdc_test_fill_uniform(&rng, cb, (size_t) s->out_channels);
    ck_assert_int_eq(cdc_fc_new(sh.context, FC_OUT, FC_IN, fc_w, fc_bias, NULL, &sh.fc), CDC_OK);
    sh.conv = conv_layer(sh.context, cw, cb);
    sh.fc_w = fc_w, sh.fc_bias = fc_bias, sh.conv_w = cw, sh.conv_bias = cb;

    run_threads(&sh);
    cdc_stats_t stats;
    ck_assert_int_eq(cdc_context_stats(sh.context, &stats), CDC_OK);
    ck_assert_uint_ge(stats.calls, (uint64_t) atomic_load(&sh.rounds_done) * 3);
    assert_one_repair(&sh);
    cdc_layer_destroy(&sh.fc);
    cdc_layer_destroy(&sh.conv);
    cdc_context_destroy(&sh.context);
    free(fc_w), free(fc_bias), free(cw), free(cb);
}
END_TEST

/* The BLAS runs: the drop-in as a program's environment configures it
   (auto split: the FC calls cut the input and send the weights whole), then
   with the split forced to the caller's output rows, so that the
   column-major forms cut the cached weights, in either parity layout. */
static const struct {
    const char *split, *layout;
} blas_runs[] = {{NULL, "rotated"}, {"output", "rotated"}, {"output", "dedicated"}};

/* The drop-in's configuration as a program's environment gives it: every
   call coded (threshold 0) on 5 worker processes, r = 1, in the split
   (NULL: the default) and parity layout given. Read at the first call, in
   this test's own process (Check's fork mode: each test is a fresh child). */
static void blas_environment(const char *split, const char *layout)
{
    setenv("CDCGEMM_MIN_FLOPS", "0", 1);
    setenv("CDCGEMM_PLAN", "equal", 1); /* no call planned here either */
    setenv("CDCGEMM_LOCAL_WORKERS", "5", 1);
    setenv("CDCGEMM_PARITY", "1", 1);
    setenv("CDCGEMM_IN_PROCESS", "0", 1);
    setenv("CDCGEMM_TIMEOUT_MS", "10000", 1);
    setenv("CDCGEMM_RESPAWN", "1", 1);
    setenv("CDCGEMM_PARITY_LAYOUT", layout, 1);
    if (split)
        setenv("CDCGEMM_SPLIT", split, 1);
    else
        unsetenv("CDCGEMM_SPLIT");
    setenv("CDCGEMM_LOG", getenv("CDC_TEST_LOG") ? "info" : "error", 1);
    unsetenv("CDCGEMM_WORKERS");
    unsetenv("CDCGEMM_FAULTS");
    ck_assert_msg(cdc__blas_min_flops() == 0.0,
                  "the BLAS configuration was read already: run this suite in fork mode");
}

/* Loop index: the run of blas_runs. */
START_TEST(test_four_threads_blas)
{
    blas_environment(blas_runs[_i].split, blas_runs[_i].layout);
    shared_t sh = {.killed_after = -1};
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 11);
    float *fc_w = cdc_test_alloc(sizeof(float) * FC_OUT * FC_IN);
    cdc_test_fill_uniform(&rng, fc_w, FC_OUT * FC_IN);
    sh.fc_w = fc_w;

    run_threads(&sh);
    cdc_stats_t stats;
    ck_assert_int_eq(cdc__blas_context_stats(&stats), CDC_OK);
    /* Nothing lost: every call completed on the coded path (a coded call
       that failed would have been computed locally, uncounted). */
    ck_assert_uint_eq(stats.calls, (uint64_t) atomic_load(&sh.rounds_done) * BLAS_CALLS);
    ck_assert_uint_eq(stats.coded_calls, stats.calls);
    ck_assert_uint_ge(stats.weight_hits, 1);
    if (blas_runs[_i].split && strcmp(blas_runs[_i].layout, "rotated") == 0)
        ck_assert_uint_ge(stats.rotated_calls, 1);
    else if (strcmp(blas_runs[_i].layout, "dedicated") == 0)
        ck_assert_uint_eq(stats.rotated_calls, 0);
    ck_assert_uint_ge(stats.worker_deaths, 1);
    ck_assert_uint_ge(stats.worker_respawns, 1);
    assert_one_repair(&sh);
    cdc__blas_context_shutdown(); /* its workers stopped and reaped */
    ck_assert_int_eq(cdc_test_worker_child(2), -1);
    free(fc_w);
}
END_TEST

static Suite *threads_suite(void)
{
    Suite *suite = suite_create("threads");
    TCase *tc = tcase_create("one_context");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_four_threads_one_context);
    suite_add_tcase(suite, tc);
    TCase *blas = tcase_create("blas_process_context");
    tcase_set_timeout(blas, 120);
    tcase_add_loop_test(blas, test_four_threads_blas, 0,
                        (int) (sizeof blas_runs / sizeof blas_runs[0]));
    suite_add_tcase(suite, blas);
    return suite;
}

int main(void)
{
    setenv("CDCGEMM_WORKER_BIN", CDC_WORKER_BIN, 1);
    return cdc_test_run_suite(threads_suite());
}
