/* test_threads.c - calls on one context from several threads (cdcgemm.h: "calls
   on one context are serialised internally"). Four threads share one context
   of five embedded workers (r = 1), one FC layer and one conv layer; each runs
   cdc_sgemm (a transposition of its own), FC and conv forwards with inputs of
   its own, while a fifth SIGKILLs a worker mid-run (respawned by the
   library). Every result within 1e-4 of a double reference, no call failed.
   Before the context had a call lock the threads raced in the plan, the
   caches and the coded calls. */
#include "cdcgemm.h"
#include "context.h"
#include "local_workers.h"
#include "reference.h"
#include "testutil.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 4
#define ROUNDS 12
#define WORKERS 5
#define TOLERANCE 1e-4

#define FC_OUT 256
#define FC_IN 384
#define FC_BATCH 3

static const cdc_ref_conv_t conv_shape = {.batch = 2, .in_channels = 8, .h = 12, .w = 12,
                                          .out_channels = 16, .kernel_h = 3, .kernel_w = 3,
                                          .stride_h = 1, .stride_w = 1, .pad_h = 1,
                                          .pad_w = 1, .dilation_h = 1, .dilation_w = 1};

typedef struct {
    cdc_context_t *context;
    cdc_layer_t *fc, *conv;
    const float *fc_w, *fc_bias, *conv_w, *conv_bias;
    pthread_barrier_t start; /* the threads' first calls (the layers' first
                                encodes among them) all at once      */
    atomic_int rounds_done; /* by all threads */
    int killed_after;       /* rounds done when the worker was killed, -1: not */
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
    if (rc == CDC_OK && error > job->worst)
        job->worst = error;
}

/* C = op(A) op(B), row-major, the transposition of this thread's index. */
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
    int rc = cdc_sgemm(job->shared->context, CDC_ROW_MAJOR, ta ? CDC_TRANS : CDC_NO_TRANS,
                       tb ? CDC_TRANS : CDC_NO_TRANS, m, n, k, 1.0f, ta ? at : a, ta ? m : k,
                       tb ? bt : b, tb ? k : n, 0.0f, c, n);
    note(job, rc, "cdc_sgemm", cdc_test_rel_error(c, want, (size_t) (m * n)));
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

static void *thread_main(void *arg)
{
    thread_job_t *job = arg;
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 100 + (uint64_t) job->index);
    pthread_barrier_wait(&job->shared->start);
    for (int round = 0; round < ROUNDS; round++) {
        one_fc(job, &rng);
        one_conv(job, &rng);
        one_sgemm(job, &rng);
        atomic_fetch_add(&job->shared->rounds_done, 1);
    }
    return NULL;
}

/* The killer: worker 2 SIGKILLed once a third of the rounds are done (the
   library respawns it); 20 s at most. */
static void *killer_main(void *arg)
{
    shared_t *sh = arg;
    double start = cdc_test_now_s();
    while (atomic_load(&sh->rounds_done) < THREADS * ROUNDS / 3 &&
           cdc_test_now_s() - start < 20.0)
        cdc_test_sleep_ms(1);
    pid_t pid = cdc__local_workers_pid(sh->context->local, 2);
    if (pid > 0 && kill(pid, SIGKILL) == 0)
        sh->killed_after = atomic_load(&sh->rounds_done);
    return NULL;
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

    pthread_t threads[THREADS], killer;
    ck_assert_int_eq(pthread_barrier_init(&sh.start, NULL, THREADS), 0);
    thread_job_t jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (thread_job_t){.shared = &sh, .index = t};
        ck_assert_int_eq(pthread_create(&threads[t], NULL, thread_main, &jobs[t]), 0);
    }
    ck_assert_int_eq(pthread_create(&killer, NULL, killer_main, &sh), 0);
    pthread_join(killer, NULL);
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    cdc_stats_t stats;
    ck_assert_int_eq(cdc_context_stats(sh.context, &stats), CDC_OK);
    for (int t = 0; t < THREADS; t++) {
        ck_assert_msg(jobs[t].failures == 0, "%d calls failed; first: %s", jobs[t].failures,
                      jobs[t].first_error);
        ck_assert_msg(jobs[t].worst <= TOLERANCE, "thread %d: relative error %.3g",
                      t, jobs[t].worst);
    }
    ck_assert_uint_ge(stats.calls, THREADS * ROUNDS * 3);
    ck_assert_msg(sh.killed_after >= 0 && sh.killed_after < THREADS * ROUNDS,
                  "worker 2 not killed mid-run (after %d of %d rounds)", sh.killed_after,
                  THREADS * ROUNDS);
    pthread_barrier_destroy(&sh.start);
    cdc_layer_destroy(&sh.fc);
    cdc_layer_destroy(&sh.conv);
    cdc_context_destroy(&sh.context);
    free(fc_w), free(fc_bias), free(cw), free(cb);
}
END_TEST

static Suite *threads_suite(void)
{
    Suite *suite = suite_create("threads");
    TCase *tc = tcase_create("one_context");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_four_threads_one_context);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void)
{
    setenv("CDCGEMM_WORKER_BIN", CDC_WORKER_BIN, 1);
    return cdc_test_run_suite(threads_suite());
}
