/* bench_cache.c - weight cache insert time; a real worker's memory against --max-memory. */
#include "bench_cache.h"

#include "bench_util.h"
#include "cdcgemm.h"
#include "client.h"
#include "clock.h"
#include "error.h"
#include "footprint.h"
#include "weight_cache.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    long entries;
    size_t max_memory, entry_bytes, max_entries; /* max_entries 0: the worker's default */
    double fill;
    const char *worker;
} cache_options_t;

static void release_free(void *owner)
{
    free(owner);
}

/* (i) N distinct 64-byte matrices, each its own allocation, into one cache. */
static int bench_insert(long entries)
{
    cdc_weight_cache_t *cache = NULL;
    /* No memory bound to speak of: 16 GiB, or all a 32-bit size_t holds
       ((size_t) 1 << 34 was 0 there). */
    uint64_t want = UINT64_C(1) << 34;
    size_t unbounded = want > SIZE_MAX ? SIZE_MAX : (size_t) want;
    if (cdc__weight_cache_new(unbounded, (size_t) entries, &cache) != CDC_OK)
        return 1;
    double start = cdc__clock_ms();
    for (long i = 0; i < entries; i++) {
        float *data = calloc(16, sizeof(float));
        cdc_weight_value_t v = {4, 4, data, cdc__alloc_footprint(16 * sizeof(float)), data,
                                release_free};
        if (!data || cdc__weight_cache_put(cache, (cdc_weight_key_t){(uint64_t) i + 1, 0}, &v) !=
                         CDC_OK) {
            fprintf(stderr, "cache: insert %ld: %s\n", i, cdc_last_error());
            return 1;
        }
    }
    double insert_ms = cdc__clock_ms() - start;
    start = cdc__clock_ms();
    long found = 0;
    for (long i = 0; i < entries; i++)
        found += cdc__weight_cache_get(cache, (cdc_weight_key_t){(uint64_t) i + 1, 0}) != NULL;
    double lookup_ms = cdc__clock_ms() - start;
    cdc_weight_cache_stats_t stats;
    cdc__weight_cache_stats(cache, &stats);
    start = cdc__clock_ms();
    cdc__weight_cache_destroy(&cache);
    double destroy_ms = cdc__clock_ms() - start;
    printf("cache_insert entries=%ld insert_s=%.3f lookup_s=%.3f found=%ld destroy_s=%.3f "
           "charged_bytes=%zu index_bytes=%zu\n",
           entries, insert_ms / 1e3, lookup_ms / 1e3, found, destroy_ms / 1e3, stats.bytes,
           stats.index_bytes);
    return found == entries ? 0 : 1;
}

static pid_t spawn_worker(const cache_options_t *o, const char *endpoint)
{
    char memory[32], entries[32], error[512];
    snprintf(memory, sizeof memory, "%zu", o->max_memory);
    snprintf(entries, sizeof entries, "%zu", o->max_entries);
    /* A call here sends 64 tasks and 64 WEIGHTS to one worker, far more than
       a coordinator does (one task per worker per call): above the default
       --max-peer-tasks of 64. */
    const char *args[] = {"--max-memory", memory, "--max-peer-tasks", "256",
                          o->max_entries ? "--max-entries" : NULL, entries, NULL};
    cdc_test_worker_t w = {.bin = o->worker, .endpoint = endpoint, .log = "info", .args = args};
    pid_t pid = cdc_test_worker_spawn(&w, error, sizeof error);
    if (pid < 0)
        fprintf(stderr, "cache: spawn: %s\n", error);
    return pid;
}

/* One call of 64 tasks, each with a one-column inline bt and, when cached,
   weights under a new key (so each sends a WEIGHTS message the worker
   caches); else inline weights. */
static int send_round(cdc_client_t *client, const float *a, const float *bt, float *results,
                      int64_t rows, int64_t k, uint64_t *next_key, int cached)
{
    enum { TASKS = 64 };
    cdc_shard_task_t tasks[TASKS];
    memset(tasks, 0, sizeof tasks);
    for (int t = 0; t < TASKS; t++) {
        tasks[t].kind = CDC_TASK_GEMM;
        tasks[t].shard = t;
        tasks[t].cover = t;
        tasks[t].a = a;
        tasks[t].a_rows = rows;
        tasks[t].k = k;
        /* Spread like the content hashes real keys are: small consecutive
           numbers would collide once the client mixes in the shard index. */
        tasks[t].a_key = cached ? (*next_key)++ * UINT64_C(0x9e3779b97f4a7c15) | 1 : 0;
        tasks[t].bt = bt;
        tasks[t].cols = 1;
        tasks[t].result = results + (size_t) t * (size_t) rows;
    }
    uint64_t arrived = 0;
    int rc = cdc__client_run(client, tasks, TASKS, TASKS, TASKS, 10000, 30000, &arrived);
    if (rc == CDC_OK && arrived != UINT64_MAX) {
        cdc_remote_counters_t c;
        cdc__client_counters(client, &c);
        rc = cdc__fail(CDC_ETIMEDOUT,
                       "results missing (mask %016llx; sent %llu, failures %llu, skipped %llu, "
                       "errors %llu, misses %llu)",
                       (unsigned long long) arrived, (unsigned long long) c.tasks_sent,
                       (unsigned long long) c.send_failures,
                       (unsigned long long) c.dead_skipped, (unsigned long long) c.error_replies,
                       (unsigned long long) c.misses);
    }
    return rc;
}

/* Fill the worker with fill x max_memory bytes of distinct matrices. */
static int fill_worker(const cache_options_t *o, const char *endpoint, pid_t pid,
                       long *idle_kib, long *full_kib, long *messages)
{
    cdc_client_t *client = NULL;
    int rc = cdc__client_new(endpoint, 5000, &client);
    if (rc != CDC_OK)
        return rc;
    for (int i = 0; i < 500 && cdc__client_live(client, NULL) < 1; i++)
        cdc__sleep_ms(10);
    int64_t k = 16, rows = (int64_t) (o->entry_bytes / sizeof(float) / (size_t) k);
    if (rows < 1)
        rows = 1;
    float *a = calloc((size_t) (rows * k), sizeof(float));
    float *bt = calloc((size_t) k, sizeof(float));
    float *results = calloc((size_t) rows * 64, sizeof(float));
    uint64_t key = 1;
    rc = a && bt && results ? CDC_OK : CDC_ENOMEM;
    /* Warm-up (BLAS, buffers), retried while the data socket still connects. */
    for (int tries = 0; rc == CDC_OK && tries < 50; tries++) {
        if (send_round(client, a, bt, results, rows, k, &key, 0) == CDC_OK)
            break;
        cdc__sleep_ms(100);
    }
    cdc__sleep_ms(200);
    *idle_kib = cdc_test_rss_kib(pid);
    size_t target = (size_t) (o->fill * (double) o->max_memory);
    size_t sent = 0;
    while (rc == CDC_OK && sent < target) {
        rc = send_round(client, a, bt, results, rows, k, &key, 1);
        sent += 64 * (size_t) (rows * k) * sizeof(float);
    }
    cdc__sleep_ms(200);
    *full_kib = cdc_test_rss_kib(pid);
    *messages = (long) key - 1;
    cdc__client_destroy(&client);
    free(a);
    free(bt);
    free(results);
    return rc;
}

/* (ii) a real worker's RSS growth while it is filled past --max-memory. */
static int bench_worker_rss(const cache_options_t *o)
{
    char dir[64], endpoint[96];
    if (cdc_test_dir_make(dir, sizeof dir, "cdc-bench-cache") != 0) {
        fprintf(stderr, "cache: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    snprintf(endpoint, sizeof endpoint, "ipc://%s/w", dir);
    pid_t pid = spawn_worker(o, endpoint);
    if (pid < 0)
        return 1;
    long idle = 0, full = 0, messages = 0;
    double start = cdc__clock_ms();
    int rc = fill_worker(o, endpoint, pid, &idle, &full, &messages);
    double fill_s = (cdc__clock_ms() - start) / 1e3;
    cdc_test_worker_stop(pid, 10.0);
    cdc_test_dir_remove(dir);
    if (rc != CDC_OK) {
        fprintf(stderr, "cache: fill: %s: %s\n", cdc_strerror(rc), cdc_last_error());
        return 1;
    }
    double growth = (double) (full - idle) * 1024.0;
    printf("cache_worker_rss max_memory=%zu max_entries=%zu entry_bytes=%zu weights_sent=%ld "
           "fill_s=%.2f rss_idle_kib=%ld rss_full_kib=%ld growth_bytes=%.0f "
           "growth_over_max=%.3f\n",
           o->max_memory, o->max_entries, o->entry_bytes, messages, fill_s, idle, full, growth,
           growth / (double) o->max_memory);
    return growth <= 1.10 * (double) o->max_memory ? 0 : 1;
}

static int parse(int argc, char **argv, cache_options_t *o)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!value) {
            fprintf(stderr, "cache: '%s' needs a value\n", argv[i]);
            return -1;
        }
        char *end = NULL;
        if (strcmp(argv[i], "--worker") == 0) {
            o->worker = value;
            i++;
            continue;
        }
        if (strcmp(argv[i], "--entries") == 0)
            o->entries = strtol(value, &end, 10);
        else if (strcmp(argv[i], "--max-memory") == 0)
            o->max_memory = (size_t) strtoull(value, &end, 10) << 20; /* MiB */
        else if (strcmp(argv[i], "--max-entries") == 0)
            o->max_entries = (size_t) strtoull(value, &end, 10);
        else if (strcmp(argv[i], "--entry-bytes") == 0)
            o->entry_bytes = (size_t) strtoull(value, &end, 10);
        else if (strcmp(argv[i], "--fill") == 0)
            o->fill = strtod(value, &end);
        if (!end || *end != '\0') {
            fprintf(stderr, "cache: bad option '%s %s'\n", argv[i], value);
            return -1;
        }
        i++;
    }
    return 0;
}

int cdc_bench_cache(int argc, char **argv)
{
    static char worker[4200];
    cdc_bench_worker_path(worker, sizeof worker);
    cache_options_t o = {200000, (size_t) 64 << 20, 4096, 0, 3.0, worker};
    int parsed = parse(argc, argv, &o);
    if (parsed != 0) {
        fprintf(parsed > 0 ? stdout : stderr,
                "usage: cdcgemm-bench cache [--entries N] [--max-memory MIB] "
                "[--max-entries N] [--entry-bytes B] [--fill F] [--worker PATH]\n");
        return parsed > 0 ? 0 : 2;
    }
    int status = bench_insert(o.entries);
    if (o.max_memory > 0)
        status |= bench_worker_rss(&o);
    return status;
}
