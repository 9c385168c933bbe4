/* report.c - turn request records into the benchmark JSON, CSV and a PNG plot. */
#include "report.h"

#include "bench_plan.h"

#include "bench_util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *split_name(cdc_split_t split)
{
    return split == CDC_SPLIT_ROWS ? "output" : split == CDC_SPLIT_COLUMNS ? "spatial" : "auto";
}

void cdc_run_summarize(const cdc_run_t *run, int first, int last, cdc_run_summary_t *s)
{
    memset(s, 0, sizeof *s);
    if (last > run->requests)
        last = run->requests;
    int count = last > first ? last - first : 0;
    s->requests = count;
    if (count == 0)
        return;
    double *latency = cdc_bench_xmalloc((size_t) count * sizeof *latency);
    double *oracle = cdc_bench_xmalloc((size_t) count * sizeof *oracle);
    for (int i = 0; i < count; i++) {
        const cdc_request_record_t *r = &run->records[first + i];
        latency[i] = r->latency_ms;
        oracle[i] = r->oracle_ms;
        s->mean += r->latency_ms / count;
        s->max = r->latency_ms > s->max ? r->latency_ms : s->max;
        s->max_rel_error = r->rel_error > s->max_rel_error ? r->rel_error : s->max_rel_error;
        s->ok += r->outcome == CDC_OUTCOME_OK;
        s->recovered += r->outcome == CDC_OUTCOME_RECOVERED;
        s->fallbacks += r->outcome == CDC_OUTCOME_FALLBACK;
        s->lost += r->outcome == CDC_OUTCOME_LOST;
        s->wrong += r->outcome == CDC_OUTCOME_WRONG;
    }
    s->p50 = cdc_bench_percentile(latency, (size_t) count, 50);
    s->p95 = cdc_bench_percentile(latency, (size_t) count, 95);
    s->p99 = cdc_bench_percentile(latency, (size_t) count, 99);
    s->oracle_p50 = cdc_bench_percentile(oracle, (size_t) count, 50);
    s->oracle_p99 = cdc_bench_percentile(oracle, (size_t) count, 99);
    free(latency);
    free(oracle);
}

void cdc_run_write_json(FILE *out, const cdc_run_t *run, const char *model)
{
    cdc_run_summary_t s;
    cdc_run_summarize(run, 0, run->requests, &s);
    const cdc_config_t *c = &run->config;
    int workers = c->workers[0] ? 1 : c->local_workers;
    for (const char *p = c->workers; c->workers[0] && *p; p++)
        workers += *p == ',';
    if (strncmp(c->workers, "discover", 8) == 0) {
        /* Discovered workers: as many as the widest call used. */
        workers = 0;
        for (int i = 0; i < run->requests; i++)
            if (run->records[i].shards > workers)
                workers = run->records[i].shards;
    }
    fprintf(out, "{\"label\": ");
    cdc_bench_json_string(out, run->label);
    fprintf(out, ", \"model\": ");
    cdc_bench_json_string(out, model);
    fprintf(out,
            ", \"workers\": %d, \"parity\": %d, \"split\": \"%s\", \"plan\": \"%s\", "
            "\"parity_layout\": \"%s\", \"faults\": ",
            workers, c->parity, split_name(c->split),
            c->plan == CDC_PLAN_PROFILED ? "profiled"
            : c->plan == CDC_PLAN_AUTO   ? "auto"
                                         : "equal",
            c->parity_layout == CDC_LAYOUT_ROTATED ? "rotated" : "dedicated");
    cdc_bench_json_string(out, c->faults);
    fprintf(out,
            ", \"requests\": %d, \"ok\": %d, \"wrong\": %d, \"lost\": %d, \"recovered\": %d, "
            "\"fallbacks\": %d,\n  \"latency_ms\": {\"p50\": %.3f, \"p95\": %.3f, \"p99\": "
            "%.3f, \"max\": %.3f, \"mean\": %.3f},\n  \"oracle_ms\": {\"p50\": %.3f, \"p99\": "
            "%.3f}, \"max_rel_error\": %.3e",
            s.requests, s.ok, s.wrong, s.lost, s.recovered, s.fallbacks, s.p50, s.p95, s.p99,
            s.max, s.mean, s.oracle_p50, s.oracle_p99, s.max_rel_error);
    if (run->crash_at >= 0) {
        cdc_run_summary_t before, after;
        cdc_run_summarize(run, 0, run->crash_at, &before);
        cdc_run_summarize(run, run->crash_at, run->requests, &after);
        fprintf(out,
                ",\n  \"crash_at\": %d, \"before_crash\": {\"p50\": %.3f, \"p99\": %.3f}, "
                "\"after_crash\": {\"p50\": %.3f, \"p99\": %.3f}",
                run->crash_at, before.p50, before.p99, after.p50, after.p99);
    }
    const cdc_stats_t *t = &run->stats;
    fprintf(out,
            ",\n  \"counters\": {\"calls\": %llu, \"shards_sent\": %llu, \"shards_erased\": "
            "%llu, \"results_decoded\": %llu, \"fallbacks\": %llu, \"bytes_out\": %llu, "
            "\"bytes_in\": %llu, \"weight_bytes\": %llu,\n    \"worker_deaths\": %llu, "
            "\"worker_rejoins\": %llu, \"worker_goodbyes\": %llu, \"worker_respawns\": %llu, "
            "\"respawns_given_up\": %llu, \"cancels_sent\": %llu,\n    \"degraded_calls\": %llu, "
            "\"background_weight_bytes\": %llu, \"redundancy_repairs\": %llu, "
            "\"repair_ms_mean\": %.3f, \"repair_ms_max\": %.3f, \"budget_fallbacks\": %llu, "
            "\"planned_local\": %llu,\n    \"rotated_calls\": %llu, \"late_blocks\": %llu, "
            "\"budget_erasures\": %llu, \"oversized_skipped\": %llu, \"parity_on_demand\": %llu,\n"
            "    \"weights_stored_asked\": %llu, \"weights_stored_missing\": %llu}",
            (unsigned long long) t->calls, (unsigned long long) t->shards_sent,
            (unsigned long long) t->shards_erased, (unsigned long long) t->results_decoded,
            (unsigned long long) t->fallbacks, (unsigned long long) t->bytes_out,
            (unsigned long long) t->bytes_in, (unsigned long long) t->weight_bytes,
            (unsigned long long) t->worker_deaths,
            (unsigned long long) t->worker_rejoins, (unsigned long long) t->worker_goodbyes,
            (unsigned long long) t->worker_respawns, (unsigned long long) t->respawns_given_up,
            (unsigned long long) t->cancels_sent, (unsigned long long) t->degraded_calls,
            (unsigned long long) t->background_weight_bytes,
            (unsigned long long) t->redundancy_repairs,
            t->redundancy_repairs ? (double) t->repair_us_sum / (double) t->redundancy_repairs / 1000.0
                                  : 0.0,
            (double) t->repair_us_max / 1000.0, (unsigned long long) t->budget_fallbacks,
            (unsigned long long) t->planned_local, (unsigned long long) t->rotated_calls,
            (unsigned long long) t->late_blocks, (unsigned long long) t->budget_erasures,
            (unsigned long long) t->oversized_skipped, (unsigned long long) t->parity_on_demand,
            (unsigned long long) t->weights_stored_asked,
            (unsigned long long) t->weights_stored_missing);
    fprintf(out, ",\n  \"chaos\": [");
    for (int i = 0; i < run->event_count; i++) {
        const cdc_chaos_event_t *e = &run->events[i];
        fprintf(out, "%s\n    {\"t_ms\": %.1f, \"request\": %d, \"action\": ", i ? "," : "",
                e->t_ms, e->request);
        cdc_bench_json_string(out, e->action);
        fprintf(out, ", \"worker\": %d, \"pid\": %ld}", e->worker, e->pid);
    }
    fprintf(out, "%s],\n  \"samples\": [", run->event_count ? "\n  " : "");
    for (int i = 0; i < run->sample_count; i++) {
        const cdc_run_sample_t *m = &run->samples[i];
        fprintf(out, "%s\n    {\"request\": %d, \"rss_kib\": %ld, \"fds\": %d, \"threads\": %d}",
                i ? "," : "", m->request, m->rss_kib, m->fds, m->threads);
    }
    fprintf(out, "%s]", run->sample_count ? "\n  " : "");
    cdc_bench_plan_write_json(out, run);
    fputs(",\n  ", out);
    /* At the end of the run. */
    fputs(run->profile_json ? run->profile_json : "\"profile\": []", out);
    fputs("}", out);
}

int cdc_report_json(const char *path, const cdc_run_t *runs, int count, const char *model)
{
    FILE *out = fopen(path, "w");
    if (!out) {
        perror(path);
        return 1;
    }
    fprintf(out, "%s", count == 1 ? "" : "[\n");
    for (int i = 0; i < count; i++) {
        cdc_run_write_json(out, &runs[i], model);
        fprintf(out, "%s\n", i + 1 < count ? "," : "");
    }
    fprintf(out, "%s", count == 1 ? "" : "]\n");
    return fclose(out) != 0;
}

int cdc_report_csv(const char *path, const cdc_run_t *runs, int count)
{
    FILE *out = fopen(path, "w");
    if (!out) {
        perror(path);
        return 1;
    }
    fprintf(out, "run,request,latency_ms,oracle_ms,outcome,decoded,rel_error,r,redundancy,"
                 "start_ms\n");
    for (int i = 0; i < count; i++)
        for (int q = 0; q < runs[i].requests; q++) {
            const cdc_request_record_t *r = &runs[i].records[q];
            fprintf(out, "%s,%d,%.3f,%.3f,%s,%d,%.3e,%d,%d,%.1f\n", runs[i].label, q, r->latency_ms,
                    r->oracle_ms, cdc_outcome_name(r->outcome), r->decoded, r->rel_error, r->r,
                    r->redundancy, r->start_ms);
        }
    return fclose(out) != 0;
}

static const char *const plot_colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};

/* Per run a data block: request, latency_ms, redundancy, the latency
   drawn (clipped at ceiling) and 1 where it was clipped. */
static int plot_data(char *path, const cdc_run_t *runs, int count, double ceiling,
                     int *max_parity)
{
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        return 1;
    }
    FILE *out = fdopen(fd, "w");
    *max_parity = 0;
    for (int i = 0; i < count; i++) {
        if (runs[i].config.parity > *max_parity)
            *max_parity = runs[i].config.parity;
        for (int q = 0; q < runs[i].requests; q++) {
            double ms = runs[i].records[q].latency_ms;
            fprintf(out, "%d %.3f %d %.3f %d\n", q, ms, runs[i].records[q].redundancy,
                    ms > ceiling ? ceiling : ms, ms > ceiling);
        }
        fprintf(out, "\n\n"); /* one gnuplot data block per run */
    }
    return fclose(out) != 0;
}

/* Whether run i's event e is also in another run (same request, action and
   worker: the same fault injected in both); *first: no earlier run has it. */
static int event_shared(const cdc_run_t *runs, int count, int i, const cdc_chaos_event_t *ev,
                        int *first)
{
    int shared = 0;
    *first = 1;
    for (int j = 0; j < count; j++)
        for (int e = 0; j != i && e < runs[j].event_count; e++) {
            const cdc_chaos_event_t *o = &runs[j].events[e];
            if (o->request == ev->request && o->worker == ev->worker &&
                strcmp(o->action, ev->action) == 0) {
                shared = 1;
                *first &= j > i;
            }
        }
    return shared;
}

/* A dashed vertical line per fault or chaos event (not the SIGCONTs) in the
   run's colour (dark grey when every run has it, drawn once), labelled while
   there are few. */
static void plot_events(FILE *gp, const cdc_run_t *runs, int count)
{
    int marks = 0;
    for (int i = 0; i < count; i++)
        for (int e = 0; e < runs[i].event_count; e++)
            marks += strcmp(runs[i].events[e].action, "cont") != 0;
    int drawn = 0;
    for (int i = 0; i < count; i++) {
        for (int e = 0; e < runs[i].event_count; e++) {
            const cdc_chaos_event_t *ev = &runs[i].events[e];
            int first;
            int shared = event_shared(runs, count, i, ev, &first);
            if (strcmp(ev->action, "cont") == 0 || !first)
                continue;
            const char *color = shared ? "#404040" : plot_colors[i % 4];
            fprintf(gp,
                    "set arrow from %d, graph 0 to %d, graph 1 nohead lw 1.5 dt (6,4) "
                    "lc rgb '%s' front\n",
                    ev->request, ev->request, color);
            if (marks <= 12)
                fprintf(gp,
                        "set label '%s w%d' at %d, graph %.2f offset 0.6,0 tc rgb '%s' "
                        "front font ',10'\n",
                        ev->action, ev->worker, ev->request, 0.95 - 0.05 * (drawn % 3), color);
            drawn++;
        }
    }
}

/* The latency axis ends at 1.5x the largest p95 of the runs, or at the
   largest latency when that is lower: one outlier (a request computed on the
   coordinator) would otherwise flatten every other line. (Not the p99: in a
   run of 80 requests that is the outlier itself.) */
static double plot_ceiling(const cdc_run_t *runs, int count)
{
    double max = 0.0, p95 = 0.0;
    for (int i = 0; i < count; i++) {
        cdc_run_summary_t all;
        cdc_run_summarize(&runs[i], 0, runs[i].requests, &all);
        p95 = all.p95 > p95 ? all.p95 : p95;
        for (int q = 0; q < runs[i].requests; q++)
            max = runs[i].records[q].latency_ms > max ? runs[i].records[q].latency_ms : max;
    }
    return max < 1.5 * p95 || p95 <= 0.0 ? (max > 0.0 ? max : 1.0) : 1.5 * p95;
}

/* Top: latency over request number, one line per run, fault and chaos events
   marked, the redundancy each request could use shaded behind (right axis),
   latencies past the axis drawn at its top with a triangle and their value;
   bottom: the latency histogram (the clipped ones in its last bin). */
int cdc_report_plot(const char *path, const cdc_run_t *runs, int count, const char *title)
{
    char data[] = "/tmp/cdcgemm-plot-XXXXXX";
    int max_parity = 0;
    double ceiling = plot_ceiling(runs, count);
    if (plot_data(data, runs, count, ceiling, &max_parity))
        return 1;
    int requests = 1;
    for (int i = 0; i < count; i++)
        requests = runs[i].requests > requests ? runs[i].requests : requests;
    double bin = ceiling / 40.0;
    char safe[512]; /* inside gnuplot's single quotes */
    snprintf(safe, sizeof safe, "%s", title);
    for (char *p = safe; *p; p++)
        if (*p == '\'' || *p == '\\' || *p == '\n')
            *p = ' ';
    title = safe;
    FILE *gp = popen("gnuplot", "w");
    int rc = 1;
    if (gp) {
        fprintf(gp,
                "set terminal pngcairo noenhanced size 1000,900 font ',11'; set output '%s'\n"
                "set multiplot title '%s' font ',13'\n"
                "set origin 0,0.38; set size 1,0.58; set key above horizontal\n"
                "set xlabel 'request'; set ylabel 'latency (ms)'; set xrange [0:%d]\n"
                "set yrange [0:%g]; set grid ytics lc rgb '#dddddd'\n"
                "set y2range [0:%d]; set y2tics 0,1 nomirror; set ytics nomirror\n"
                "set y2label 'redundancy (parity shards usable), shaded'\n",
                path, title, requests > 1 ? requests - 1 : 1, ceiling * 1.08,
                max_parity > 0 ? max_parity : 1);
        plot_events(gp, runs, count);
        fprintf(gp, "plot ");
        for (int i = 0; i < count; i++)
            fprintf(gp,
                    "%s'%s' index %d using 1:3 axes x1y2 with fillsteps "
                    "fs transparent solid 0.12 noborder lc rgb '%s' notitle",
                    i ? ", " : "", data, i, plot_colors[i % 4]);
        for (int i = 0; i < count; i++)
            fprintf(gp,
                    ", '%s' index %d using 1:4 with lines lw 1.5 lc rgb '%s' title '%s'"
                    ", '%s' index %d using 1:($5 > 0 ? $4 : NaN) with points pt 9 ps 1.6 "
                    "lc rgb '%s' notitle"
                    ", '%s' index %d using 1:($5 > 0 ? $4 : NaN):(sprintf('%%.0f ms', $2)) "
                    "with labels offset 0,-1.2 right tc rgb '%s' font ',9' notitle",
                    data, i, plot_colors[i % 4], runs[i].label, data, i, plot_colors[i % 4],
                    data, i, plot_colors[i % 4]);
        fprintf(gp,
                "\nunset arrow; unset label; unset y2tics; unset y2label; set y2range [*:*]\n"
                "set origin 0,0; set size 1,0.38; set xrange [0:%g]; set yrange [0:*]\n"
                "set key inside top right; set xlabel 'request latency (ms)'; set ylabel 'requests'\n"
                "set style fill transparent solid 0.5; set boxwidth %g absolute\n"
                "bin(x)=%g*floor(x/%g)+%g/2\nplot ",
                ceiling * 1.03, bin, bin, bin, bin);
        for (int i = 0; i < count; i++)
            fprintf(gp,
                    "%s'%s' index %d using (bin($4 < %g ? $4 : %g)):(1) smooth frequency "
                    "with boxes "
                    "lc rgb '%s' title '%s'",
                    i ? ", " : "", data, i, ceiling - bin / 2, ceiling - bin / 2,
                    plot_colors[i % 4], runs[i].label);
        fprintf(gp, "\nunset multiplot\n");
        rc = pclose(gp) != 0;
    }
    if (rc)
        fprintf(stderr, "cdcgemm-bench: gnuplot could not draw %s (is gnuplot installed?)\n",
                path);
    unlink(data);
    return rc;
}
