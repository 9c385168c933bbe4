/* plot.c - cdcgemm-llm's latency plot (plot.h). */
#include "plot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const colors[] = {"#1f77b4", "#d62728"};

/* Each run's generated tokens: seconds since the first one's step, and its
   step's milliseconds; a gnuplot data block per run. */
static int write_data(char *path, llm_run_result_t *const *runs, int count)
{
    int fd = mkstemp(path);
    FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!out) {
        fprintf(stderr, "cdcgemm-llm: --plot: a temporary file: %s\n", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    for (int i = 0; i < count; i++) {
        for (int s = 1; s < runs[i]->tokens; s++)
            fprintf(out, "%.4f %.3f\n", runs[i]->start_ms[s] / 1e3, runs[i]->step_ms[s]);
        fputs(i + 1 < count ? "\n\n" : "", out);
    }
    return fclose(out) == 0 ? 0 : -1;
}

/* A dashed line at each kill and stop of the run (its color), labelled
   while there are few; past that a stop is a tick at the bottom, so the
   kills and the latencies stay readable under a long churn. */
static void mark_events(FILE *gp, const llm_run_result_t *r, const char *color)
{
    int shown = r->event_count < LLM_MAX_EVENTS ? r->event_count : LLM_MAX_EVENTS;
    for (int e = 0; e < shown; e++) {
        const cdc_chaos_event_t *ev = &r->events[e];
        if (strcmp(ev->action, "cont") == 0)
            continue;
        double top = shown > 24 && strcmp(ev->action, "stop") == 0 ? 0.03 : 1.0;
        fprintf(gp, "set arrow from %.3f, graph 0 to %.3f, graph %.2f nohead dt (6,4) "
                    "lc rgb '%s' front\n", ev->t_ms / 1e3, ev->t_ms / 1e3, top, color);
        if (shown <= 24)
            fprintf(gp, "set label '%s w%d' at %.3f, graph %.2f offset 0.4,0 tc rgb '%s' "
                        "font ',9' front\n", ev->action, ev->worker, ev->t_ms / 1e3,
                    0.95 - 0.04 * (e % 4), color);
    }
}

int llm_plot(const char *path, llm_run_result_t *const *runs, int count, const char *title)
{
    char data[] = "/tmp/cdcgemm-llm-plot-XXXXXX";
    if (count > 2 || write_data(data, runs, count) != 0)
        return -1;
    FILE *gp = popen("gnuplot", "w");
    int rc = -1;
    if (gp) {
        fprintf(gp, "set terminal pngcairo noenhanced size 1000,500 font ',11'; set output '%s'\n"
                    "set title '%s'; set key above horizontal; set grid ytics\n"
                    "set xlabel 'seconds since the first generated token'\n"
                    "set ylabel 'inter-token latency (ms)'; set yrange [0:*]\n",
                path, title);
        for (int i = 0; i < count; i++)
            mark_events(gp, runs[i], colors[i]);
        fputs("plot ", gp);
        for (int i = 0; i < count; i++)
            fprintf(gp, "%s'%s' index %d using 1:2 with points pt 7 ps 0.35 lc rgb '%s' "
                        "title '%s, r = %d'",
                    i ? ", " : "", data, i, colors[i], runs[i]->label, runs[i]->parity);
        fputs("\n", gp);
        rc = pclose(gp) == 0 ? 0 : -1;
    }
    if (rc != 0)
        fprintf(stderr, "cdcgemm-llm: --plot %s: gnuplot %s\n", path,
                gp ? "failed" : "is missing (Debian: gnuplot-nox)");
    unlink(data);
    return rc;
}
