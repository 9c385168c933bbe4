/* bench_status.c - `cdcgemm-bench status` (see bench_status.h). */
#include "bench_status.h"

#include "bench_util.h"
#include "cdcgemm.h"
#include "context.h"
#include "executor.h"

#include <stdio.h>
#include <string.h>

static void print_table(const cdc_worker_status_t *s, int count)
{
    printf("%-3s %-28s %-5s %8s %5s %12s %7s %12s %9s %5s\n", "w", "endpoint", "alive",
           "rtt_ms", "proto", "cache_bytes", "entries", "max_memory", "tasks", "load");
    for (int w = 0; w < count; w++) {
        const cdc_status_report_t *r = &s[w].status;
        char rtt[16] = "-";
        if (s[w].rtt_ms >= 0)
            snprintf(rtt, sizeof rtt, "%.1f", s[w].rtt_ms);
        printf("%-3d %-28s %-5s %8s %5d %12llu %7llu %12llu %9llu %5llu\n", w, s[w].endpoint,
               s[w].live ? "yes" : "no", rtt, s[w].version,
               (unsigned long long) r->cache_bytes, (unsigned long long) r->cache_entries,
               (unsigned long long) r->max_memory, (unsigned long long) r->tasks,
               (unsigned long long) r->load);
    }
}

static void print_json(const cdc_worker_status_t *s, int count)
{
    printf("{\"workers\": [");
    for (int w = 0; w < count; w++) {
        const cdc_status_report_t *r = &s[w].status;
        printf("%s\n  {\"endpoint\": \"%s\", \"alive\": %s, \"rtt_ms\": %.3f, "
               "\"protocol\": %d, \"status\": %s, \"cache_bytes\": %llu, "
               "\"cache_entries\": %llu, \"max_memory\": %llu, \"tasks\": %llu, "
               "\"load\": %llu}",
               w ? "," : "", s[w].endpoint, s[w].live ? "true" : "false", s[w].rtt_ms,
               s[w].version, s[w].has_status ? "true" : "false",
               (unsigned long long) r->cache_bytes, (unsigned long long) r->cache_entries,
               (unsigned long long) r->max_memory, (unsigned long long) r->tasks,
               (unsigned long long) r->load);
    }
    printf("\n]}\n");
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
    cdc_bench_sleep_ms(300); /* a few heartbeats: round trips and status */
    static cdc_worker_status_t status[CDC_MAX_WORKERS];
    int count = cdc__executor_worker_status(context->executor, status, CDC_MAX_WORKERS);
    cdc_context_destroy(&context);
    if (json)
        print_json(status, count);
    else
        print_table(status, count);
    int alive = 0;
    for (int w = 0; w < count; w++)
        alive += status[w].live;
    return count > 0 && alive == count ? 0 : 1;
}
