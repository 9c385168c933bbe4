/* bench_status.c - `cdcgemm-bench status` (see bench_status.h). */
#include "bench_status.h"

#include "bench_util.h"
#include "cdcgemm.h"
#include "cdcgemm_testing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The worker's own average compute rate since it started (its PONG's
   flops over busy_us), or "-" before it has computed. */
static void lifetime_gflops(const cdc_testing_worker_status_t *r, char *out, size_t size)
{
    if (r->busy_us > 0)
        snprintf(out, size, "%.2f", (double) r->flops / ((double) r->busy_us * 1e3));
    else
        snprintf(out, size, "-");
}

static void print_table(const cdc_testing_worker_status_t *s, int count)
{
    printf("%-3s %-28s %-5s %8s %5s %12s %7s %12s %9s %5s %9s %7s\n", "w", "endpoint", "alive",
           "rtt_ms", "proto", "cache_bytes", "entries", "max_memory", "tasks", "load", "busy_ms",
           "gflops");
    for (int w = 0; w < count; w++) {
        const cdc_testing_worker_status_t *r = &s[w];
        char rtt[16] = "-", gflops[16];
        if (s[w].rtt_ms >= 0)
            snprintf(rtt, sizeof rtt, "%.1f", s[w].rtt_ms);
        lifetime_gflops(r, gflops, sizeof gflops);
        printf("%-3d %-28s %-5s %8s %5d %12llu %7llu %12llu %9llu %5llu %9llu %7s\n", w,
               s[w].endpoint, s[w].live ? "yes" : "no", rtt, s[w].protocol,
               (unsigned long long) r->cache_bytes, (unsigned long long) r->cache_entries,
               (unsigned long long) r->max_memory, (unsigned long long) r->tasks,
               (unsigned long long) r->load, (unsigned long long) (r->busy_us / 1000), gflops);
    }
}

/* The workers, then the profile this short-lived coordinator formed of
   them (round trips and memory; rates need calls). */
static void print_json(const cdc_testing_worker_status_t *s, int count, const char *profile)
{
    printf("{\"workers\": [");
    for (int w = 0; w < count; w++) {
        const cdc_testing_worker_status_t *r = &s[w];
        printf("%s\n  {\"endpoint\": \"%s\", \"alive\": %s, \"rtt_ms\": %.3f, "
               "\"protocol\": %d, \"status\": %s, \"cache_bytes\": %llu, "
               "\"cache_entries\": %llu, \"max_memory\": %llu, \"tasks\": %llu, "
               "\"load\": %llu, \"busy_us\": %llu, \"flops\": %llu}",
               w ? "," : "", s[w].endpoint, s[w].live ? "true" : "false", s[w].rtt_ms,
               s[w].protocol, s[w].has_status ? "true" : "false",
               (unsigned long long) r->cache_bytes, (unsigned long long) r->cache_entries,
               (unsigned long long) r->max_memory, (unsigned long long) r->tasks,
               (unsigned long long) r->load, (unsigned long long) r->busy_us,
               (unsigned long long) r->flops);
    }
    printf("\n],\n");
    fputs(profile ? profile : "\"profile\": []", stdout);
    printf("}\n");
}

int cdc_bench_status(int argc, char **argv)
{
    int json = argc == 2 && strcmp(argv[1], "--json") == 0;
    if (argc > 2 || (argc == 2 && !json)) {
        fprintf(stderr, "usage: cdcgemm-bench status [--json]\n");
        return 2;
    }
    cdc_context_t *context = NULL;
    if (cdc_context_new_from_env(&context) != CDC_OK) {
        fprintf(stderr, "cdcgemm-bench status: %s\n", cdc_last_error());
        return 1;
    }
    cdc_test_sleep_ms(300); /* a few heartbeats: round trips and status */
    static cdc_testing_worker_status_t status[CDC_MAX_WORKERS];
    int count = cdc_testing_worker_status(context, status, CDC_MAX_WORKERS);
    char *profile = cdc_bench_profile_json(context);
    cdc_context_destroy(&context);
    if (json)
        print_json(status, count, profile);
    else
        print_table(status, count);
    free(profile);
    int alive = 0;
    for (int w = 0; w < count; w++)
        alive += status[w].live;
    return count > 0 && alive == count ? 0 : 1;
}
