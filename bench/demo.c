/* demo.c - the demo: AlexNet on 5 emulated edge devices and an edge-class
   coordinator (r = 1, the default parity layout), one device crashes at
   request 20 of 80 and is respawned; then the same run uncoded. Prints a
   side-by-side table (with when full redundancy came back) and writes
   cdcgemm-demo.png: latency over request number with the crash marked and
   the redundancy shaded, above the latency histograms. */
#include "demo.h"

#include "report.h"
#include "run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 60 requests after the crash: the respawned device takes its slot's
   weights back in the background (about 61 MB over its 94 Mbit/s link,
   5-6 s), and the run goes on long enough to show the redundancy restored.
   The warm-up goes on until the plan has staged and confirmed no re-sized
   blocks for 10 requests in a row (at most DEMO_SETTLE_S): on this host the
   FC layers' measured speed often moves their blocks once more after the
   first calls (fc6's and fc7's, 160 MB, one device at a time, ~14 s), and
   the timed requests would run one parity short for that long. It is at
   least 30 requests: the plan moves the slots' homes at once, not on
   confirmation, when the estimates it sizes by change, and before the
   devices had a bandwidth term (DEMO_DEVICES) they changed as late as the
   21st request (the warm-up had ended at 20: the move's staging ran
   through the crash). The crash is then a SIGKILL from the bench at its
   request, not a count of tasks the warm-up's length would move. */
enum {
    DEMO_REQUESTS = 80,
    DEMO_CRASH_AT = 20,
    DEMO_WARMUP = 30,
    DEMO_SETTLE_S = 45,
    DEMO_WORKERS = 5,
    DEMO_CRASHED = 1
};

/* Raspberry-Pi-class devices on WiFi: 94 Mbit/s, 0.3 ms latency as measured in
   the thesis; compute stretched to a few GFLOP/s per device so that the run
   takes seconds, not minutes, and memory at 1 GB/s (docs/faults.md). The
   coordinator is such a device too (what it computes itself, a fallback,
   takes a device's time, not this host's). Without the bandwidth term the
   FC layers' weights streamed at whatever this host's memory gave five
   workers at once (0.5-8 GB/s, moving by the second): the plan's estimates
   followed it and re-sized fc6's and fc7's blocks, and a staging that
   overlapped the crash kept the redundancy from coming back (5 of 24 runs). */
#define DEMO_DEVICES "slow@*:gflops=4,gbps=1;slow@c:gflops=4,gbps=1;link@*:mbit=94,lat=0.3;seed=1"

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
    snprintf(config.faults, sizeof config.faults, "%s", DEMO_DEVICES);
    memset(run, 0, sizeof *run);
    run->label = label;
    run->crash_at = DEMO_CRASH_AT;
    run->crash_worker = DEMO_CRASHED;
    run->crash_kill = 1;
    run->settle_s = DEMO_SETTLE_S;
    run->progress = 1;
    return cdc_run_execute(workload, &config, CDC_SPLIT_AUTO, DEMO_REQUESTS, DEMO_WARMUP, run);
}

static void demo_row(const char *what, double coded, double uncoded, const char *unit)
{
    printf("  %-34s %12.1f %12.1f  %s\n", what, coded, uncoded, unit);
}

/* Seconds from the crash request's start to the first request from which
   every request had the run's full redundancy (r), or -1 if it never came
   back (or the run has no parity). */
static double redundancy_back_s(const cdc_run_t *run)
{
    int r = run->config.parity, back = -1;
    if (r < 1 || run->crash_at < 0 || run->crash_at >= run->requests)
        return -1.0;
    for (int q = run->requests - 1; q > run->crash_at; q--) {
        if (run->records[q].redundancy < r)
            break;
        back = q;
    }
    return back < 0 ? -1.0
                    : (run->records[back].start_ms - run->records[run->crash_at].start_ms) /
                          1000.0;
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
           DEMO_WORKERS, DEMO_DEVICES, DEMO_CRASHED, DEMO_CRASH_AT, DEMO_REQUESTS);
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
    double back = redundancy_back_s(&runs[0]);
    if (back >= 0.0)
        printf("  %-34s %12.1f %12s  s after the crash\n", "full redundancy again", back, "-");
    else
        printf("  %-34s %12s %12s\n", "full redundancy again", "not yet", "-");
    printf("\n  worst output error vs the uncoded reference: %.2e (coded), %.2e (uncoded)\n",
           all[0].max_rel_error, all[1].max_rel_error);
    printf("  warm-up: %d requests coded, %d uncoded (%d, then until the plan had moved no "
           "blocks for 10)\n",
           DEMO_WARMUP + runs[0].settle_requests, DEMO_WARMUP + runs[1].settle_requests,
           DEMO_WARMUP);
    char title[160];
    snprintf(title, sizeof title,
             "AlexNet on %d emulated edge devices: w%d crashes at request %d (dashed line)",
             DEMO_WORKERS, DEMO_CRASHED, DEMO_CRASH_AT);
    int plot_failed = cdc_report_plot("cdcgemm-demo.png", runs, 2, title);
    if (!plot_failed)
        printf("  latency over requests, the crash marked, and histograms: cdcgemm-demo.png\n");
    int bad = all[0].lost + all[0].wrong + all[1].lost + all[1].wrong;
    for (int i = 0; i < 2; i++)
        cdc_run_free(&runs[i]);
    cdc_workload_free(&workload);
    return bad ? 3 : 0;
}
