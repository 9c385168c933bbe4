/* bench_run.c - the benchmark driver: a model or layers, N requests, a
   configuration and fault schedule, an optional baseline; JSON/CSV/PNG out. */
#include "bench_run.h"

#include "bench_plan.h"

#include "chaos.h"
#include "report.h"
#include "run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cdc_bench_run_usage(FILE *out)
{
    fprintf(out,
            "usage: cdcgemm-bench [--model alexnet|vgg16] [--layer SPEC]... [options]\n"
            "  --layer fc:OUTxIN[:batch] | conv:CxHxW:COUT:K:STRIDE:PAD\n"
            "  --requests N      recorded requests (default 100)\n"
            "  --warmup N        unrecorded requests first (default 3)\n"
            "  --workers W       local workers (default CDCGEMM_LOCAL_WORKERS or 5)\n"
            "  --parity R        parity shards (default CDCGEMM_PARITY or 1)\n"
            "  --split S         auto|output|channel|spatial (default auto)\n"
            "  --plan P          auto|equal|profiled: blocks equal, or sized and placed by\n"
            "                    the measured devices; auto starts equal and sizes once\n"
            "                    they are measured (default CDCGEMM_PLAN or auto)\n"
            "  --faults SPEC     fault schedule (docs/faults.md)\n"
            "  --crash-at Q      crash worker --crash-worker (default 1) at request Q\n"
            "  --max-memory B    every worker's --max-memory (B bytes, K/M/G suffixes):\n"
            "                    sets CDCGEMM_WORKER_MAX_MEMORY for the workers it starts\n"
            "  --chaos SPEC      kill/stop/restart worker processes from outside on a seeded\n"
            "                    schedule during the timed requests (docs/faults.md), e.g.\n"
            "                    'kill@random:every=2s;stop@w2:every=10s,for=1s;seed=7'\n"
            "  --external W      start W cdcgemm-worker processes here and use them as\n"
            "                    CDCGEMM_WORKERS endpoints (not the library's children:\n"
            "                    never respawned; --chaos restart needs these)\n"
            "  --layout L        rotated|dedicated: where the parity lives (default\n"
            "                    CDCGEMM_PARITY_LAYOUT or rotated; docs/codes.md)\n"
            "  --baseline B      also run uncoded (r = 0, same workers), replicate (2MR:\n"
            "                    each of the n data shards on two workers), local (one\n"
            "                    worker), or dedicated|rotated (the same r, that layout)\n"
            "  --in-process      run shards in this process (no worker processes)\n"
            "  --json F  --csv F  --plot F.png\n");
}

static int parse_count(const char *flag, const char *text, int lo, int *out)
{
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (!text[0] || *end || v < lo || v > 1000000) {
        fprintf(stderr, "cdcgemm-bench: %s '%s': expected an integer >= %d\n", flag, text, lo);
        return 1;
    }
    *out = (int) v;
    return 0;
}

/* --baseline dedicated|rotated: 1 and the layout in *layout (may be NULL). */
static int baseline_layout(const char *name, int32_t *layout)
{
    int rotated = strcmp(name, "rotated") == 0;
    if (!rotated && strcmp(name, "dedicated") != 0)
        return 0;
    if (layout)
        *layout = rotated ? CDC_LAYOUT_ROTATED : CDC_LAYOUT_DEDICATED;
    return 1;
}

static void print_summary(const cdc_run_t *run)
{
    cdc_run_summary_t s;
    cdc_run_summarize(run, 0, run->requests, &s);
    printf("%-9s r=%d workers=%-2d requests=%d ok=%d recovered=%d fallbacks=%d lost=%d "
           "wrong=%d latency_ms p50=%.2f p95=%.2f p99=%.2f max=%.2f mean=%.2f oracle_ms "
           "p50=%.2f p99=%.2f max_rel_error=%.2e\n",
           run->label, run->config.parity,
           run->external > 0 ? run->external : run->config.local_workers, s.requests, s.ok,
           s.recovered, s.fallbacks, s.lost, s.wrong, s.p50, s.p95, s.p99, s.max, s.mean,
           s.oracle_p50, s.oracle_p99, s.max_rel_error);
}

int cdc_bench_run(int argc, char **argv)
{
    return cdc_bench_run_mode(argc, argv, 0);
}

int cdc_bench_run_mode(int argc, char **argv, int plan_table)
{
    cdc_workload_t workload = {0};
    cdc_config_t config;
    cdc_config_init(&config);
    if (cdc_config_from_env(&config) != CDC_OK) {
        fprintf(stderr, "cdcgemm-bench: %s\n", cdc_last_error());
        return 2;
    }
    int requests = 100, warmup = 3, crash_at = -1, crash_worker = 1;
    int external = 0;
    const char *model = NULL, *baseline = NULL, *json = NULL, *csv = NULL, *plot = NULL;
    cdc_chaos_spec_t chaos;
    int with_chaos = 0;
    const char *chaos_text = "";
    cdc_split_t split = config.split;
    int bad = 0;
    for (int i = 1; i < argc && !bad; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes_value = strcmp(a, "--in-process") != 0 && strcmp(a, "--help") != 0;
        if (takes_value && !v) {
            fprintf(stderr, "cdcgemm-bench: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "--help") == 0) {
            cdc_bench_run_usage(stdout);
            return 0;
        } else if (strcmp(a, "--in-process") == 0) {
            config.in_process = 1;
            continue;
        } else if (strcmp(a, "--model") == 0) {
            bad = cdc_workload_add_model(&workload, v);
            model = v;
        } else if (strcmp(a, "--layer") == 0) {
            bad = cdc_workload_add_spec(&workload, v);
        } else if (strcmp(a, "--requests") == 0) {
            bad = parse_count(a, v, 1, &requests);
        } else if (strcmp(a, "--warmup") == 0) {
            bad = parse_count(a, v, 0, &warmup);
        } else if (strcmp(a, "--workers") == 0) {
            bad = parse_count(a, v, 1, &config.local_workers);
        } else if (strcmp(a, "--parity") == 0) {
            bad = parse_count(a, v, 0, &config.parity);
        } else if (strcmp(a, "--crash-at") == 0) {
            bad = parse_count(a, v, 0, &crash_at);
        } else if (strcmp(a, "--crash-worker") == 0) {
            bad = parse_count(a, v, 0, &crash_worker);
        } else if (strcmp(a, "--split") == 0) {
            if (cdc_split_parse(v, &split) != CDC_OK) {
                fprintf(stderr, "cdcgemm-bench: %s\n", cdc_last_error());
                bad = 1;
            }
        } else if (strcmp(a, "--plan") == 0) {
            if (strcmp(v, "equal") == 0 || strcmp(v, "profiled") == 0 || strcmp(v, "auto") == 0) {
                config.plan = v[0] == 'e'   ? CDC_PLAN_EQUAL
                              : v[0] == 'p' ? CDC_PLAN_PROFILED
                                            : CDC_PLAN_AUTO;
            } else {
                fprintf(stderr, "cdcgemm-bench: --plan '%s': expected auto, equal or profiled\n",
                        v);
                bad = 1;
            }
        } else if (strcmp(a, "--max-memory") == 0) {
            /* Every worker's budget: the embedded ones and --external ones
               inherit it (cdcgemm-worker reads it; it validates it too). */
            bad = setenv("CDCGEMM_WORKER_MAX_MEMORY", v, 1) != 0;
        } else if (strcmp(a, "--external") == 0) {
            bad = parse_count(a, v, 1, &external);
        } else if (strcmp(a, "--chaos") == 0) {
            char error[CDC_CHAOS_ERROR_BYTES];
            if (cdc_chaos_parse(v, &chaos, error, sizeof error)) {
                fprintf(stderr, "cdcgemm-bench: --chaos: %s\n", error);
                bad = 1;
            }
            with_chaos = 1;
            chaos_text = v;
        } else if (strcmp(a, "--faults") == 0) {
            snprintf(config.faults, sizeof config.faults, "%s", v);
        } else if (strcmp(a, "--layout") == 0) {
            if (strcmp(v, "rotated") != 0 && strcmp(v, "dedicated") != 0) {
                fprintf(stderr, "cdcgemm-bench: --layout '%s': expected rotated or dedicated\n",
                        v);
                bad = 1;
            }
            config.parity_layout = strcmp(v, "rotated") == 0 ? CDC_LAYOUT_ROTATED
                                                             : CDC_LAYOUT_DEDICATED;
        } else if (strcmp(a, "--baseline") == 0) {
            baseline = v;
            if (strcmp(v, "uncoded") != 0 && strcmp(v, "local") != 0 &&
                strcmp(v, "replicate") != 0 && !baseline_layout(v, NULL)) {
                fprintf(stderr,
                        "cdcgemm-bench: --baseline '%s': expected uncoded, replicate, local, "
                        "dedicated or rotated\n",
                        v);
                bad = 1;
            }
        } else if (strcmp(a, "--json") == 0) {
            json = v;
        } else if (strcmp(a, "--csv") == 0) {
            csv = v;
        } else if (strcmp(a, "--plot") == 0) {
            plot = v;
        } else {
            fprintf(stderr, "cdcgemm-bench: unknown option '%s'\n", a);
            cdc_bench_run_usage(stderr);
            return 2;
        }
        i++;
    }
    if (bad || workload.count == 0) {
        if (!bad)
            fprintf(stderr, "cdcgemm-bench: give --model or --layer\n");
        cdc_workload_free(&workload);
        return 2;
    }
    config.split = split;
    if (with_chaos) {
        /* Refuse a spec that cannot fit before any worker starts. */
        char error[CDC_CHAOS_ERROR_BYTES];
        int known = external > 0 || (!config.workers[0] && !config.in_process);
        int workers = external > 0 ? external : config.local_workers;
        if (!known) {
            fprintf(stderr, "cdcgemm-bench: --chaos needs worker processes the bench knows: the "
                            "embedded ones or --external W (not CDCGEMM_WORKERS or in process)\n");
            bad = 1;
        } else if (cdc_chaos_check(&chaos, workers, external > 0, error, sizeof error)) {
            fprintf(stderr, "cdcgemm-bench: --chaos: %s\n", error);
            bad = 1;
        }
        if (bad) {
            cdc_workload_free(&workload);
            return 2;
        }
    }
    if (crash_at >= 0) {
        /* Each request sends every worker one task per layer; warm-up included. */
        size_t used = strlen(config.faults);
        snprintf(config.faults + used, sizeof config.faults - used, "%scrash@w%d:after=%d",
                 used ? ";" : "", crash_worker, (warmup + crash_at) * workload.count);
    }
    if (cdc_workload_prepare(&workload, 2021u)) {
        cdc_workload_free(&workload);
        return 1;
    }

    cdc_run_t runs[2];
    int count = 0, failed = 0;
    memset(runs, 0, sizeof runs);
    runs[0].label = config.parity > 0 ? "coded" : config.replicate ? "replicate" : "uncoded";
    runs[0].crash_at = crash_at;
    runs[0].crash_worker = crash_worker;
    runs[0].chaos = with_chaos ? &chaos : NULL;
    runs[0].external = external;
    runs[0].progress = 1;
    runs[0].plan_table = plan_table;
    if (external > 0 && config.in_process) {
        fprintf(stderr, "cdcgemm-bench: --external and --in-process exclude each other\n");
        cdc_workload_free(&workload);
        return 2;
    }
    failed = cdc_run_execute(&workload, &config, split, requests, warmup, &runs[count++]);
    if (!failed && baseline) {
        cdc_config_t base = config;
        base.parity = 0;
        if (baseline_layout(baseline, &base.parity_layout)) {
            base.parity = config.parity; /* the same code, the other layout */
        } else if (strcmp(baseline, "local") == 0) {
            base.local_workers = 1;
            base.workers[0] = '\0';
        } else if (strcmp(baseline, "replicate") == 0) {
            /* 2MR over the same n data shards: twice n workers. */
            int data = config.local_workers - config.parity;
            base.local_workers = 2 * (data > 0 ? data : 1);
            base.replicate = 1;
        }
        runs[1].label = baseline;
        runs[1].crash_at = strcmp(baseline, "local") == 0 ? -1 : crash_at;
        runs[1].crash_worker = crash_worker;
        runs[1].progress = 1;
        /* The same chaos on the same kind of workers; one local device gets none. */
        runs[1].chaos = strcmp(baseline, "local") == 0 ? NULL : runs[0].chaos;
        runs[1].external = strcmp(baseline, "local") == 0 ? 0
                           : strcmp(baseline, "replicate") == 0 && external ? base.local_workers
                                                                            : external;
        if (runs[1].crash_at < 0 && crash_at >= 0) {
            /* One device cannot lose a worker and go on: run it fault-free. */
            snprintf(base.faults, sizeof base.faults, "%s", "");
        }
        failed = cdc_run_execute(&workload, &base, split, requests, warmup, &runs[count++]);
    }
    /* The plot's title: the model, or the layers as given. */
    char title[256];
    snprintf(title, sizeof title, "%s", model ? model : "");
    for (int i = 0; !model && i < workload.count; i++) {
        size_t used = strlen(title);
        snprintf(title + used, sizeof title - used, "%s%s", i ? " " : "",
                 workload.layers[i].name);
    }
    if (with_chaos) {
        size_t used = strlen(title);
        snprintf(title + used, sizeof title - used, ", chaos %s", chaos_text);
    }
    int lost_or_wrong = 0;
    for (int i = 0; i < count && !failed; i++) {
        print_summary(&runs[i]);
        cdc_run_summary_t s;
        cdc_run_summarize(&runs[i], 0, runs[i].requests, &s);
        lost_or_wrong += s.lost + s.wrong;
    }
    if (!failed && plan_table)
        cdc_bench_plan_print(stdout, &runs[0]);
    if (!failed && json)
        failed |= cdc_report_json(json, runs, count, model ? model : "layers");
    if (!failed && csv)
        failed |= cdc_report_csv(csv, runs, count);
    if (!failed && plot)
        failed |= cdc_report_plot(plot, runs, count, title);
    for (int i = 0; i < count; i++)
        cdc_run_free(&runs[i]);
    cdc_workload_free(&workload);
    return failed ? 1 : lost_or_wrong ? 3 : 0;
}
