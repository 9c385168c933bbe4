/* bench_hostile.c - issue 9's acceptance, measured: strangers, a misbehaving
 * allowed peer and a fake worker against real processes (bench_hostile.h). */
#include "bench_hostile.h"

#include "attacker.h"
#include "bench_util.h"
#include "cdcgemm.h"
#include "keys.h"
#include "protocol.h"

#include <cblas.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FC_OUT 2048
#define FC_IN 2048
#define BATCH 16
#define WORKER_MAX_MEMORY ((size_t) 48 << 20) /* 16 MB of the coordinator's weights + room */

typedef struct {
    int calls, quick;
    char worker[4096];
    char dir[64], endpoint[64];
    cdc_curve_cert_t worker_cert, coordinator, stranger, rogue;
    pid_t worker_pid;
    float *w, *x, *y, *want;
    int failed; /* a bound that did not hold */
} hostile_t;

/* ---- set-up ----------------------------------------------------------- */

/* dir/name (+ _secret) made and loaded (secret) into *cert. */
static int make_cert(hostile_t *h, const char *name, const char *endpoint, cdc_curve_cert_t *cert)
{
    if (cdc_test_keygen(h->dir, name, endpoint, cert) != CDC_OK) {
        fprintf(stderr, "hostile: certificate %s/%s: %s\n", h->dir, name, cdc_last_error());
        return -1;
    }
    return 0;
}

/* bin (the worker, or this program as a fake one) with options. */
static pid_t spawn(const char *bin, const cdc_test_worker_t *options)
{
    char error[512];
    cdc_test_worker_t w = *options;
    w.bin = bin;
    pid_t pid = cdc_test_worker_spawn(&w, error, sizeof error);
    if (pid < 0)
        fprintf(stderr, "hostile: %s\n", error);
    return pid;
}

static void stop(pid_t pid)
{
    if (pid > 0)
        cdc_test_worker_stop(pid, 10.0);
}

/* Certificates (the coordinator and the rogue allowed, the stranger not)
   and a CURVE worker on a loopback port. */
static int start_worker(hostile_t *h)
{
    if (cdc_test_dir_make(h->dir, sizeof h->dir, "cdc-hostile") != 0)
        return -1;
    snprintf(h->endpoint, sizeof h->endpoint, "tcp://127.0.0.1:%d", cdc_test_free_port());
    char allow[96], memory[32], secret[128];
    snprintf(allow, sizeof allow, "%s/allow", h->dir);
    if (mkdir(allow, 0700) != 0 || make_cert(h, "worker", h->endpoint, &h->worker_cert) ||
        make_cert(h, "allow/coordinator", NULL, &h->coordinator) ||
        make_cert(h, "allow/rogue", NULL, &h->rogue) ||
        make_cert(h, "stranger", NULL, &h->stranger))
        return -1;
    /* zauth reads every file in the directory: keep only public ones there. */
    char command[256];
    snprintf(command, sizeof command, "mv %s/*_secret %s/", allow, h->dir);
    if (system(command) != 0)
        return -1;
    snprintf(memory, sizeof memory, "%zu", WORKER_MAX_MEMORY);
    snprintf(secret, sizeof secret, "%s/worker_secret", h->dir);
    const char *args[] = {"--max-memory", memory, NULL};
    cdc_test_worker_t w = {.endpoint = h->endpoint, .curve_secret = secret,
                           .curve_allow = allow, .log = "error", .args = args};
    h->worker_pid = spawn(h->worker, &w);
    return h->worker_pid > 0 ? 0 : -1;
}

/* ---- the allowed coordinator -------------------------------------------- */

static int coordinator_new(hostile_t *h, const char *workers, int curve, int parity,
                           cdc_context_t **context, cdc_layer_t **layer)
{
    cdc_config_t config;
    cdc_config_init(&config);
    snprintf(config.workers, sizeof config.workers, "%s", workers);
    if (curve) {
        snprintf(config.curve_secret, sizeof config.curve_secret, "%s/coordinator_secret",
                 h->dir);
        snprintf(config.curve_server, sizeof config.curve_server, "%s/worker", h->dir);
    }
    config.parity = parity;
    config.plan = CDC_PLAN_EQUAL; /* every call on the workers under attack: the
                                     adaptive plan computes this layer here */
    config.timeout_ms = 5000;
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = CDC_SPLIT_ROWS;
    int rc = cdc_context_new(&config, context);
    if (rc == CDC_OK)
        rc = cdc_fc_new(*context, FC_OUT, FC_IN, h->w, NULL, &options, layer);
    if (rc != CDC_OK)
        fprintf(stderr, "hostile: coordinator: %s\n", cdc_last_error());
    return rc;
}

/* One call, checked against OpenBLAS; its milliseconds, or -1 when wrong. */
static double timed_call(hostile_t *h, cdc_layer_t *layer)
{
    double start = cdc_bench_now_ms();
    int rc = cdc_fc_forward(layer, BATCH, h->x, h->y);
    double ms = cdc_bench_now_ms() - start;
    size_t count = (size_t) BATCH * FC_OUT;
    if (rc != CDC_OK || cdc_bench_rel_error(h->y, h->want, count) > 1e-5) {
        fprintf(stderr, "hostile: wrong or failed call: %s\n",
                rc != CDC_OK ? cdc_last_error() : "result differs");
        return -1;
    }
    return ms;
}

/* Warm up until a call is served by the workers (no fallback), 10 s at most. */
static int warm_up(hostile_t *h, cdc_context_t *context, cdc_layer_t *layer)
{
    for (int i = 0; i < 100; i++) {
        cdc_stats_t before, after;
        cdc_context_stats(context, &before);
        if (timed_call(h, layer) >= 0) {
            cdc_context_stats(context, &after);
            if (after.fallbacks == before.fallbacks && after.shards_sent > before.shards_sent)
                return 0;
        }
        cdc_test_sleep_ms(100);
    }
    fprintf(stderr, "hostile: the workers never served a call\n");
    return -1;
}

typedef struct {
    double p50, p99;
    int calls;
    long wrong, max_rss_kib;
    uint64_t fallbacks;
} calls_t;

#define MAX_CALLS 20000 /* bound on a phase that runs until an attack ends */

/* At least calls calls, and more while *until (may be NULL) is 0, timed;
   sample sample_pid's RSS after each (0: none). */
static calls_t run_calls(hostile_t *h, cdc_context_t *context, cdc_layer_t *layer, int calls,
                         long sample_pid, const atomic_int *until)
{
    calls_t out = {0};
    double *ms = cdc_bench_xmalloc(MAX_CALLS * sizeof *ms);
    cdc_stats_t before, after;
    cdc_context_stats(context, &before);
    int timed = 0;
    for (int i = 0; i < MAX_CALLS && (i < calls || (until && !atomic_load(until))); i++) {
        double t = timed_call(h, layer);
        if (t < 0)
            out.wrong++;
        else
            ms[timed++] = t;
        out.calls++;
        long rss = sample_pid ? cdc_test_rss_kib((pid_t) sample_pid) : 0;
        if (rss > out.max_rss_kib)
            out.max_rss_kib = rss;
    }
    cdc_context_stats(context, &after);
    out.fallbacks = after.fallbacks - before.fallbacks;
    out.p50 = timed ? cdc_bench_percentile(ms, (size_t) timed, 50) : -1;
    out.p99 = timed ? cdc_bench_percentile(ms, (size_t) timed, 99) : -1;
    free(ms);
    return out;
}

static void check(hostile_t *h, int holds, const char *what)
{
    if (!holds) {
        fprintf(stderr, "hostile: FAILED: %s\n", what);
        h->failed = 1;
    }
}

/* ---- phase 1: a stranger -------------------------------------------------- */

typedef struct {
    hostile_t *h;
    atomic_int done; /* set by the stranger when its rounds are over */
    int rounds_max;
    long rounds, raw_bytes, multipart_frames, random_sent, replies;
} stranger_t;

static void *stranger_main(void *arg)
{
    stranger_t *s = arg;
    hostile_t *h = s->h;
    int port = atoi(strrchr(h->endpoint, ':') + 1);
    /* Bounded: a few rounds, each a few seconds at most. */
    for (int round = 0; round < s->rounds_max; round++) {
        s->raw_bytes += cdc_attack_raw_frames("127.0.0.1", port, 300, (size_t) 1 << 20);
        cdc_attacker_t *keyed = cdc_attacker_new(h->endpoint, &h->worker_cert, &h->stranger);
        cdc_attacker_t *plain = cdc_attacker_new(h->endpoint, NULL, NULL);
        if (!keyed || !plain)
            break;
        cdc_attack_padding_conv(keyed, 1000 + (uint64_t) round);
        cdc_attack_padding_conv(plain, 2000 + (uint64_t) round);
        s->random_sent += cdc_attack_random_messages(keyed, 5000, 17 + (uint64_t) round);
        s->random_sent += cdc_attack_random_messages(plain, 5000, 23 + (uint64_t) round);
        s->multipart_frames += cdc_attack_unfinished_multipart(keyed, 300, (size_t) 1 << 20);
        cdc_test_sleep_ms(800); /* the silence a refused peer waits through */
        s->replies += cdc_attacker_replies(keyed) + cdc_attacker_replies(plain);
        cdc_attacker_destroy(&keyed);
        cdc_attacker_destroy(&plain);
        s->rounds++;
    }
    atomic_store(&s->done, 1);
    return NULL;
}

static void phase_stranger(hostile_t *h, cdc_context_t *context, cdc_layer_t *layer)
{
    calls_t quiet = run_calls(h, context, layer, h->calls, h->worker_pid, NULL);
    long before_kib = cdc_test_rss_kib(h->worker_pid);
    stranger_t s = {.h = h, .rounds_max = h->quick ? 1 : 5};
    atomic_init(&s.done, 0);
    pthread_t thread;
    pthread_create(&thread, NULL, stranger_main, &s);
    /* The coordinator's calls run for as long as the attacks do. */
    calls_t loud = run_calls(h, context, layer, h->calls, h->worker_pid, &s.done);
    pthread_join(thread, NULL);
    long after_kib = cdc_test_rss_kib(h->worker_pid);
    long peak = loud.max_rss_kib > after_kib ? loud.max_rss_kib : after_kib;
    long rise_kib = peak - before_kib;
    printf("hostile_stranger rounds=%ld raw_bytes_accepted=%ld multipart_frames_queued=%ld "
           "random_messages=%ld replies=%ld worker_rss_before_kib=%ld worker_rss_peak_kib=%ld "
           "rise_kib=%ld calls=%d+%d wrong=%ld fallbacks=%llu p50_quiet_ms=%.2f p99_quiet_ms=%.2f "
           "p50_attacked_ms=%.2f p99_attacked_ms=%.2f p50_ratio=%.3f\n",
           s.rounds, s.raw_bytes, s.multipart_frames, s.random_sent, s.replies, before_kib, peak,
           rise_kib, quiet.calls, loud.calls, quiet.wrong + loud.wrong,
           (unsigned long long) (quiet.fallbacks + loud.fallbacks), quiet.p50, quiet.p99,
           loud.p50, loud.p99, loud.p50 / quiet.p50);
    check(h, s.replies == 0, "the stranger got a reply");
    check(h, rise_kib < 10 * 1024, "the worker grew by 10 MB or more under the stranger");
    check(h, quiet.wrong + loud.wrong == 0, "a call failed or was wrong");
    check(h, quiet.fallbacks + loud.fallbacks == 0, "a call fell back to local compute");
}

/* ---- phase 2: an allowed peer that misbehaves ------------------------------- */

static void phase_rogue(hostile_t *h, cdc_context_t *context, cdc_layer_t *layer)
{
    cdc_attacker_t *rogue = cdc_attacker_new(h->endpoint, &h->worker_cert, &h->rogue);
    if (!rogue) {
        check(h, 0, "the rogue peer could not connect");
        return;
    }
    char text[1100];
    cdc_attack_padding_conv(rogue, 42);
    int type = cdc_attacker_wait_reply(rogue, 5000, text, sizeof text);
    long weights = h->quick ? 50000 : 200000;
    long before_kib = cdc_test_rss_kib(h->worker_pid);
    double start = cdc_bench_now_ms();
    int flood_rc = cdc_attack_weights_flood(rogue, weights, UINT64_C(0x1234567), 60000);
    double flood_s = (cdc_bench_now_ms() - start) / 1e3;
    long after_kib = cdc_test_rss_kib(h->worker_pid);
    cdc_attacker_destroy(&rogue);
    /* The coordinator still gets right results (its weights may have been
       evicted by the flood: MISS, then WEIGHTS again). */
    calls_t after = run_calls(h, context, layer, h->calls / 4 + 1, 0, NULL);
    double growth = (double) (after_kib - before_kib) * 1024.0;
    printf("hostile_rogue padding_reply=%s padding_error=\"%s\" weights=%ld flood_s=%.2f "
           "worker_rss_before_kib=%ld worker_rss_after_kib=%ld max_memory=%zu "
           "growth_over_max=%.3f calls_after=%d wrong=%ld\n",
           cdc__msg_type_name(type), text, weights, flood_s, before_kib, after_kib,
           WORKER_MAX_MEMORY, growth / (double) WORKER_MAX_MEMORY, h->calls / 4 + 1,
           after.wrong);
    check(h, type == CDC_MSG_ERROR && (strstr(text, "padding") || strstr(text, "max-task")),
          "the padding-1000 conv got no ERROR naming the limit");
    check(h, flood_rc == 0, "the worker did not answer after the WEIGHTS flood");
    check(h, growth <= 1.10 * (double) WORKER_MAX_MEMORY,
          "the WEIGHTS flood grew the worker past --max-memory + 10%");
    check(h, after.wrong == 0, "a call after the flood failed or was wrong");
}

/* ---- phase 3: a fake worker ------------------------------------------------- */

static void phase_fake_worker(hostile_t *h)
{
    char real[96], fake[96], workers[200], self[4096];
    snprintf(real, sizeof real, "ipc://%s/real", h->dir);
    snprintf(fake, sizeof fake, "ipc://%s/fake", h->dir);
    snprintf(workers, sizeof workers, "%s,%s", real, fake);
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    /* The fake worker is this program: "cdcgemm-bench hostile --fake-worker". */
    const char *fake_args[] = {"hostile", "--fake-worker", fake, NULL};
    pid_t real_pid = spawn(h->worker, &(cdc_test_worker_t){.endpoint = real, .log = "error"});
    pid_t fake_pid = spawn(self, &(cdc_test_worker_t){.args = fake_args});
    cdc_context_t *context = NULL;
    cdc_layer_t *layer = NULL;
    /* n = 1, r = 1: the data shard goes to the real worker, the parity to
       the fake one, so every call can finish without it. */
    if (real_pid < 0 || fake_pid < 0 || coordinator_new(h, workers, 0, 1, &context, &layer) ||
        warm_up(h, context, layer)) {
        check(h, 0, "the fake-worker phase could not start");
    } else {
        long before_kib = cdc_test_rss_kib(getpid());
        /* Between calls first (finding 5: the flood was held there), then
           calls while it goes on, then between calls again. */
        cdc_test_sleep_ms(3000);
        long idle_kib = cdc_test_rss_kib(getpid());
        calls_t calls = run_calls(h, context, layer, h->calls * 2, getpid(), NULL);
        cdc_test_sleep_ms(1000);
        calls_t last = run_calls(h, context, layer, 5, getpid(), NULL);
        long after_kib = cdc_test_rss_kib(getpid());
        long peak = calls.max_rss_kib > last.max_rss_kib ? calls.max_rss_kib : last.max_rss_kib;
        peak = idle_kib > peak ? idle_kib : peak;
        cdc_stats_t stats;
        cdc_context_stats(context, &stats);
        printf("hostile_fake_worker calls=%d wrong=%ld coordinator_rss_before_kib=%ld "
               "coordinator_rss_idle_kib=%ld coordinator_rss_peak_kib=%ld coordinator_rss_after_kib=%ld growth_kib=%ld "
               "invalid_messages=%llu late_replies=%llu\n",
               h->calls * 2 + 5, calls.wrong + last.wrong, before_kib, idle_kib, peak, after_kib,
               peak - before_kib, (unsigned long long) stats.invalid_messages,
               (unsigned long long) stats.late_replies);
        check(h, calls.wrong + last.wrong == 0, "a call beside the fake worker was wrong");
        check(h, peak - before_kib < 50 * 1024, "the coordinator grew by 50 MB or more");
    }
    cdc_layer_destroy(&layer);
    cdc_context_destroy(&context);
    stop(fake_pid);
    stop(real_pid);
}

/* ---- driver ----------------------------------------------------------------- */

static int parse(int argc, char **argv, hostile_t *h)
{
    for (int i = 1; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--quick") == 0) {
            h->quick = 1;
            h->calls = 40;
        } else if (strcmp(argv[i], "--calls") == 0 && value && atoi(value) > 0) {
            h->calls = atoi(value);
            i++;
        } else if (strcmp(argv[i], "--worker") == 0 && value) {
            snprintf(h->worker, sizeof h->worker, "%s", value);
            i++;
        } else {
            fprintf(stderr, "usage: cdcgemm-bench hostile [--calls N] [--quick] "
                            "[--worker PATH] | --fake-worker ENDPOINT\n");
            return -1;
        }
    }
    return 0;
}

static void make_data(hostile_t *h)
{
    unsigned seed = 9;
    h->w = cdc_bench_xmalloc((size_t) FC_OUT * FC_IN * sizeof(float));
    h->x = cdc_bench_xmalloc((size_t) BATCH * FC_IN * sizeof(float));
    h->y = cdc_bench_xmalloc((size_t) BATCH * FC_OUT * sizeof(float));
    h->want = cdc_bench_xmalloc((size_t) BATCH * FC_OUT * sizeof(float));
    cdc_bench_fill(h->w, (size_t) FC_OUT * FC_IN, &seed);
    cdc_bench_fill(h->x, (size_t) BATCH * FC_IN, &seed);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, BATCH, FC_OUT, FC_IN, 1.0f, h->x,
                FC_IN, h->w, FC_IN, 0.0f, h->want, FC_OUT);
}

int cdc_bench_hostile(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--fake-worker") == 0)
        return cdc_fake_worker_main(argv[2], 2000, (size_t) 1 << 20, 120);
    hostile_t h = {.calls = 200};
    cdc_bench_worker_path(h.worker, sizeof h.worker);
    if (parse(argc, argv, &h) != 0)
        return 2;
    make_data(&h);
    cdc_context_t *context = NULL;
    cdc_layer_t *layer = NULL;
    /* The fake worker first: the coordinator's RSS is then not blurred by
       what earlier phases allocated and freed. */
    if (start_worker(&h) == 0)
        phase_fake_worker(&h);
    if (h.worker_pid <= 0 || coordinator_new(&h, h.endpoint, 1, 0, &context, &layer) ||
        warm_up(&h, context, layer)) {
        check(&h, 0, "the CURVE worker and its coordinator did not start");
    } else {
        phase_stranger(&h, context, layer);
        phase_rogue(&h, context, layer);
    }
    cdc_layer_destroy(&layer);
    cdc_context_destroy(&context);
    stop(h.worker_pid);
    if (h.dir[0] && cdc_test_dir_remove(h.dir) != 0)
        fprintf(stderr, "hostile: could not remove %s\n", h.dir);
    printf("hostile_verdict ok=%d\n", !h.failed);
    free(h.w);
    free(h.x);
    free(h.y);
    free(h.want);
    return h.failed ? 1 : 0;
}
