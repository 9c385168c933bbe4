/* report.c - cdcgemm-llm's summary, JSON and CSV (report.h). */
#include "report.h"

#include "bench_util.h"
#include "cdcgemm_testing.h"
#include "reference.h"

#include <errno.h>
#include <string.h>

/* ids[0..count-1] as text after token prev, escaped (report.h). */
static void decoded_line(FILE *out, const char *label, const llm_tokenizer_t *tok, int prev,
                         const int *ids, int count)
{
    fprintf(out, "  %s \"", label);
    for (int i = 0; i < count; prev = ids[i++]) {
        size_t len;
        const unsigned char *piece =
            (const unsigned char *) llm_tokenizer_piece(tok, prev, ids[i], &len);
        for (size_t b = 0; b < len; b++) {
            int c = piece[b];
            if (c == '"' || c == '\\')
                fprintf(out, "\\%c", c);
            else if (c == '\n' || c == '\t')
                fputs(c == '\n' ? "\\n" : "\\t", out);
            else if (c < 0x20 || c > 0x7e)
                fprintf(out, "\\x%02x", c);
            else
                fputc(c, out);
        }
    }
    fputs("\"\n", out);
}

void llm_report_decoded(FILE *out, const llm_run_result_t *r, const llm_tokenizer_t *tok)
{
    int P = r->prompt_tokens;
    decoded_line(out, "prompt:", tok, r->prompt[0], r->prompt + 1, P - 1); /* after BOS */
    decoded_line(out, "text:  ", tok, r->prompt[P - 1], r->token, r->tokens);
}

int llm_run_passed(const llm_run_result_t *r)
{
    return r->ran && !r->error[0] && r->checked && r->tokens == r->steps &&
           r->max_rel_logit_error <= LLM_TOLERANCE && r->mismatches == 0;
}

/* The generated tokens' steps (1 ..): inter-token times. */
typedef struct {
    double p50, p99, max, tokens_per_s;
} token_times_t;

static token_times_t token_times(const llm_run_result_t *r)
{
    token_times_t t = {0};
    int timed = r->tokens > 1 ? r->tokens - 1 : 0;
    if (timed == 0)
        return t;
    const double *ms = r->step_ms + 1;
    t.p50 = cdc_bench_percentile(ms, (size_t) timed, 50);
    t.p99 = cdc_bench_percentile(ms, (size_t) timed, 99);
    t.max = cdc_bench_percentile(ms, (size_t) timed, 100);
    t.tokens_per_s = r->generate_ms > 0.0 ? 1e3 * timed / r->generate_ms : 0.0;
    return t;
}

void llm_report_text(FILE *out, const llm_run_result_t *r, const llm_model_facts_t *model)
{
    token_times_t t = token_times(r);
    fprintf(out, "%s (%d workers, r = %d): %d of %d tokens, %d lost; weights shipped in "
                 "%.1f ms, prompt of %d tokens %.1f ms; %.2f tokens/s, inter-token p50 "
                 "%.2f ms, p99 %.2f ms, max %.2f ms\n",
            r->label, r->workers, r->parity, r->tokens, r->steps, r->lost_tokens,
            r->ship_ms, r->prompt_tokens, r->prompt_ms, t.tokens_per_s, t.p50, t.p99, t.max);
    fprintf(out, "  tokens:");
    for (int s = 0; s < r->tokens; s++)
        fprintf(out, " %d", r->token[s]);
    fprintf(out, "\n  calls %llu (coded %llu), results decoded %llu, fallbacks %llu, worker "
                 "deaths %llu, chaos events %d; coordinator peak RSS %ld KiB (weights %lld "
                 "KiB, checkpoint %lld KiB)\n",
            (unsigned long long) r->stats.calls, (unsigned long long) r->stats.coded_calls,
            (unsigned long long) r->stats.results_decoded,
            (unsigned long long) r->stats.fallbacks,
            (unsigned long long) r->stats.worker_deaths, r->event_count,
            r->coordinator_rss_kib, (long long) (model->weight_bytes / 1024),
            (long long) (model->checkpoint_bytes / 1024));
    if (r->error[0])
        fprintf(out, "  stopped: %s\n", r->error);
    if (r->checked)
        fprintf(out, "  check: logits max relative error %.2e, %d near-ties, %d mismatches: "
                     "%s\n", r->max_rel_logit_error, r->near_ties, r->mismatches,
                llm_run_passed(r) ? "ok" : "FAIL");
    else
        fprintf(out, "  check: not done: FAIL\n");
}

/* ,\n  "name": [ids...] */
static void json_ids(FILE *out, const char *name, const int *ids, int count)
{
    fprintf(out, ",\n  \"%s\": [", name);
    for (int i = 0; i < count; i++)
        fprintf(out, "%s%d", i ? ", " : "", ids[i]);
    fputs("]", out);
}

static void write_run_json(FILE *out, const llm_run_result_t *r, const llm_model_facts_t *model)
{
    token_times_t t = token_times(r);
    fputs("{\"label\": ", out);
    cdc_bench_json_string(out, r->label);
    fprintf(out, ", \"workers\": %d, \"parity\": %d, \"prompt_tokens\": %d, \"tokens\": %d, "
                 "\"lost_tokens\": %d, \"tokens_per_s\": %.3f, \"ship_ms\": %.3f, "
                 "\"prompt_ms\": %.3f,\n  "
                 "\"inter_token_ms\": {\"p50\": %.3f, \"p99\": %.3f, \"max\": %.3f}, "
                 "\"max_rel_logit_error\": %.3e, \"tokens_match\": %s, \"near_ties\": %d,\n  "
                 "\"coordinator_rss_kib\": %ld, \"weight_bytes\": %lld, \"checkpoint_bytes\": "
                 "%lld, \"checked\": %s, \"error\": ",
            r->workers, r->parity, r->prompt_tokens, r->tokens, r->lost_tokens, t.tokens_per_s,
            r->ship_ms, r->prompt_ms, t.p50, t.p99, t.max, r->max_rel_logit_error,
            r->checked && r->mismatches == 0 ? "true" : "false", r->near_ties,
            r->coordinator_rss_kib, (long long) model->weight_bytes,
            (long long) model->checkpoint_bytes, r->checked ? "true" : "false");
    cdc_bench_json_string(out, r->error);
    json_ids(out, "prompt_ids", r->prompt, r->prompt_tokens);
    json_ids(out, "token_ids", r->token, r->tokens);
    fputs(",\n  \"counters\": {", out);
    cdc_testing_stats_json(&r->stats, out);
    fprintf(out, "},\n  \"chaos_events\": %d, \"chaos\": [", r->event_count);
    for (int i = 0; i < r->event_count && i < LLM_MAX_EVENTS; i++) {
        const cdc_chaos_event_t *e = &r->events[i];
        fprintf(out, "%s{\"t_ms\": %.1f, \"step\": %d, \"action\": ", i ? ", " : "", e->t_ms,
                e->request);
        cdc_bench_json_string(out, e->action);
        fprintf(out, ", \"worker\": %d, \"pid\": %ld}", e->worker, e->pid);
    }
    fputs("]}", out);
}

/* Open path, let write fill it, close: 0, or -1 naming the file. */
static int write_file(const char *path, const char *what,
                      void (*write)(FILE *, llm_run_result_t *const *, int,
                                    const llm_model_facts_t *),
                      llm_run_result_t *const *runs, int count, const llm_model_facts_t *model)
{
    FILE *out = fopen(path, "w");
    if (!out) {
        fprintf(stderr, "cdcgemm-llm: %s %s: %s\n", what, path, strerror(errno));
        return -1;
    }
    write(out, runs, count, model);
    int failed = ferror(out);
    if (fclose(out) != 0 || failed) {
        fprintf(stderr, "cdcgemm-llm: %s %s: write error\n", what, path);
        return -1;
    }
    return 0;
}

static void json_of(FILE *out, llm_run_result_t *const *runs, int count,
                    const llm_model_facts_t *model)
{
    fputs(count > 1 ? "[" : "", out);
    for (int i = 0; i < count; i++) {
        fputs(i ? ",\n" : "", out);
        write_run_json(out, runs[i], model);
    }
    fputs(count > 1 ? "]\n" : "\n", out);
}

static void csv_of(FILE *out, llm_run_result_t *const *runs, int count,
                   const llm_model_facts_t *model)
{
    (void) model;
    fputs("label,step,start_ms,ms,token,tries,rel_logit_error\n", out);
    for (int i = 0; i < count; i++)
        for (int s = 0; s < runs[i]->tokens; s++)
            fprintf(out, "%s,%d,%.3f,%.3f,%d,%d,%.3e\n", runs[i]->label, s,
                    runs[i]->start_ms[s], runs[i]->step_ms[s], runs[i]->token[s],
                    runs[i]->tries[s], runs[i]->rel_error[s]);
}

int llm_report_files(const char *json, const char *csv, llm_run_result_t *const *runs,
                     int count, const llm_model_facts_t *model)
{
    int rc = 0;
    if (json && write_file(json, "--json", json_of, runs, count, model) != 0)
        rc = -1;
    if (csv && write_file(csv, "--csv", csv_of, runs, count, model) != 0)
        rc = -1;
    return rc;
}
