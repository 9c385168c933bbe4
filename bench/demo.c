/* demo.c - the demo: AlexNet on 5 emulated edge devices (r = 1, the default
   parity layout), one device crashes mid-run; then the same run uncoded.
   Prints a side-by-side table and writes cdcgemm-demo.png: latency over
   request number with the crash marked, above the latency histograms. */
#include "demo.h"

#include "report.h"
#include "run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DEMO_REQUESTS = 40, DEMO_WARMUP = 2, DEMO_WORKERS = 5, DEMO_CRASHED = 1 };

/* Raspberry-Pi-class devices on WiFi: 94 Mbit/s, 0.3 ms latency as measured in
   the thesis; compute stretched to a few GFLOP/s per device so that the run
   takes seconds, not minutes. */
#define DEMO_DEVICES "slow@*:gflops=4;link@*:mbit=94,lat=0.3;seed=1"

static int demo_run(const cdc_workload_t *workload, int parity, const char *label,
                    cdc_run_t *run)
{
    cdc_config_t config;
    cdc_config_init(&config);
    if (cdc_config_from_env(&config) != CDC_OK) {
        fprintf(stderr, "demo: %s\n", cdc_last_error());
        return 1;
    }
    config.local_workers = DEMO_WORKERS;
    config.parity = parity;
    config.workers[0] = '\0';
    int crash_at = DEMO_REQUESTS / 2;
    snprintf(config.faults, sizeof config.faults, "%s;crash@w%d:after=%d", DEMO_DEVICES,
             DEMO_CRASHED, (DEMO_WARMUP + crash_at) * workload->count);
    memset(run, 0, sizeof *run);
    run->label = label;
    run->crash_at = crash_at;
    run->crash_worker = DEMO_CRASHED;
    run->progress = 1;
    return cdc_run_execute(workload, &config, CDC_SPLIT_AUTO, DEMO_REQUESTS, DEMO_WARMUP, run);
}

static void demo_row(const char *what, double coded, double uncoded, const char *unit)
{
    printf("  %-34s %12.1f %12.1f  %s\n", what, coded, uncoded, unit);
}

int cdc_bench_demo(int argc, char **argv)
{
    (void) argc;
    (void) argv;
    cdc_workload_t workload = {0};
    if (cdc_workload_add_model(&workload, "alexnet") || cdc_workload_prepare(&workload, 7u))
        return 1;
    printf("cdcgemm demo: AlexNet (5 conv + 3 FC layers) on %d emulated edge devices\n"
           "(%s), worker w%d crashes at request %d of %d.\n\n",
           DEMO_WORKERS, DEMO_DEVICES, DEMO_CRASHED, DEMO_REQUESTS / 2, DEMO_REQUESTS);
    cdc_run_t runs[2];
    int failed = demo_run(&workload, 1, "coded r=1", &runs[0]);
    if (!failed)
        failed = demo_run(&workload, 0, "uncoded", &runs[1]);
    if (failed) {
        cdc_workload_free(&workload);
        return 1;
    }
    cdc_run_summary_t before[2], after[2], all[2];
    for (int i = 0; i < 2; i++) {
        cdc_run_summarize(&runs[i], 0, runs[i].crash_at, &before[i]);
        cdc_run_summarize(&runs[i], runs[i].crash_at, runs[i].requests, &after[i]);
        cdc_run_summarize(&runs[i], 0, runs[i].requests, &all[i]);
    }
    printf("  %-34s %12s %12s\n", "",
           runs[0].config.parity_layout == CDC_LAYOUT_ROTATED ? "rotated r=1" : "coded (4+1)",
           "uncoded (5)");
    demo_row("median latency before the crash", before[0].p50, before[1].p50, "ms");
    demo_row("median latency after the crash", after[0].p50, after[1].p50, "ms");
    demo_row("p99 latency after the crash", after[0].p99, after[1].p99, "ms");
    demo_row("requests lost", all[0].lost, all[1].lost, "");
    demo_row("requests wrong", all[0].wrong, all[1].wrong, "");
    demo_row("requests rebuilt from parity", all[0].recovered, all[1].recovered, "");
    demo_row("requests finished locally (fallback)", all[0].fallbacks, all[1].fallbacks, "");
    printf("\n  worst output error vs the uncoded reference: %.2e (coded), %.2e (uncoded)\n",
           all[0].max_rel_error, all[1].max_rel_error);
    char title[160];
    snprintf(title, sizeof title,
             "AlexNet on %d emulated edge devices: w%d crashes at request %d (dashed line)",
             DEMO_WORKERS, DEMO_CRASHED, DEMO_REQUESTS / 2);
    int plot_failed = cdc_report_plot("cdcgemm-demo.png", runs, 2, title);
    if (!plot_failed)
        printf("  latency over requests, the crash marked, and histograms: cdcgemm-demo.png\n");
    int bad = all[0].lost + all[0].wrong + all[1].lost + all[1].wrong;
    for (int i = 0; i < 2; i++)
        cdc_run_free(&runs[i]);
    cdc_workload_free(&workload);
    return bad ? 3 : 0;
}
