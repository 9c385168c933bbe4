/* report.c - turn request records into the benchmark JSON, CSV and a PNG plot. */
#include "report.h"

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

static void json_string(FILE *out, const char *text)
{
    fputc('"', out);
    for (const char *p = text; *p; p++) {
        if (*p == '"' || *p == '\\')
            fputc('\\', out);
        if ((unsigned char) *p >= 0x20)
            fputc(*p, out);
    }
    fputc('"', out);
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
    json_string(out, run->label);
    fprintf(out, ", \"model\": ");
    json_string(out, model);
    fprintf(out, ", \"workers\": %d, \"parity\": %d, \"split\": \"%s\", \"faults\": ", workers,
            c->parity, split_name(c->split));
    json_string(out, c->faults);
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
            "\"respawns_given_up\": %llu, \"cancels_sent\": %llu}}",
            (unsigned long long) t->calls, (unsigned long long) t->shards_sent,
            (unsigned long long) t->shards_erased, (unsigned long long) t->results_decoded,
            (unsigned long long) t->fallbacks, (unsigned long long) t->bytes_out,
            (unsigned long long) t->bytes_in, (unsigned long long) t->weight_bytes,
            (unsigned long long) t->worker_deaths,
            (unsigned long long) t->worker_rejoins, (unsigned long long) t->worker_goodbyes,
            (unsigned long long) t->worker_respawns, (unsigned long long) t->respawns_given_up,
            (unsigned long long) t->cancels_sent);
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
    fprintf(out, "run,request,latency_ms,oracle_ms,outcome,decoded,rel_error\n");
    for (int i = 0; i < count; i++)
        for (int q = 0; q < runs[i].requests; q++) {
            const cdc_request_record_t *r = &runs[i].records[q];
            fprintf(out, "%s,%d,%.3f,%.3f,%s,%d,%.3e\n", runs[i].label, q, r->latency_ms,
                    r->oracle_ms, cdc_outcome_name(r->outcome), r->decoded, r->rel_error);
        }
    return fclose(out) != 0;
}

int cdc_report_plot(const char *path, const cdc_run_t *runs, int count, const char *title)
{
    char data[] = "/tmp/cdcgemm-plot-XXXXXX";
    int fd = mkstemp(data);
    if (fd < 0) {
        perror("mkstemp");
        return 1;
    }
    FILE *out = fdopen(fd, "w");
    double max = 0;
    for (int i = 0; i < count; i++) {
        for (int q = 0; q < runs[i].requests; q++) {
            fprintf(out, "%.3f\n", runs[i].records[q].latency_ms);
            max = runs[i].records[q].latency_ms > max ? runs[i].records[q].latency_ms : max;
        }
        fprintf(out, "\n\n"); /* one gnuplot data block per run */
    }
    fclose(out);
    double bin = max > 0 ? max / 40.0 : 1.0;
    char script[4096];
    int used = snprintf(script, sizeof script,
                        "set terminal pngcairo size 900,500; set output '%s';"
                        "set title '%s'; set xlabel 'request latency (ms)';"
                        "set ylabel 'requests'; set style fill transparent solid 0.5;"
                        "set boxwidth %g absolute; bin(x)=%g*floor(x/%g)+%g/2; plot ",
                        path, title, bin, bin, bin, bin);
    for (int i = 0; i < count && used < (int) sizeof script; i++)
        used += snprintf(script + used, sizeof script - (size_t) used,
                         "%s'%s' index %d using (bin($1)):(1) smooth frequency with boxes "
                         "title '%s'",
                         i ? ", " : "", data, i, runs[i].label);
    FILE *gp = popen("gnuplot", "w");
    int rc = 1;
    if (gp) {
        fprintf(gp, "%s\n", script);
        rc = pclose(gp) != 0;
    }
    if (rc)
        fprintf(stderr, "cdcgemm-bench: gnuplot could not draw %s (is gnuplot installed?)\n",
                path);
    unlink(data);
    return rc;
}
