/* cdcgemm-llm - token generation with a Llama-architecture model whose weight
 * products run on cdcgemm workers (decoder.h; docs/llm.md).
 *
 *   cdcgemm-llm write MODEL --dim D --hidden H --layers L --heads NH
 *                     [--kv-heads NKV] --vocab V --seq S [--seed N] [--unshared]
 *   cdcgemm-llm run MODEL [--prompt-tokens P] [--tokens T] [--temperature X]
 *                   [--seed N] [--check] [--json F]
 *
 * The workers, redundancy and faults come from the CDCGEMM_* environment
 * (docs/configuration.md), as for any program using the library. Without a
 * tokenizer the prompt is P token ids from the seed (token 1 first). Exit 0,
 * 1 on a failure (or a --check mismatch), 2 on bad arguments. */
#include "cdcgemm.h"
#include "checkpoint.h"
#include "decoder.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { EXIT_BAD_ARGS = 2 };

/* Largest relative error of a --check's logits against the reference's:
   each product's rounding (about sqrt(k) eps) through the layers, and a
   decode's amplification (docs/codes.md) well inside it. */
#define CHECK_TOLERANCE 1e-4

typedef struct {
    const char *command, *model, *json;
    llm_config_t config;
    unsigned long long seed;
    int prompt_tokens, tokens, check;
    double temperature;
} options_t;

static void usage(FILE *out)
{
    fputs("usage: cdcgemm-llm write MODEL --dim D --hidden H --layers L --heads NH\n"
          "                         [--kv-heads NKV] --vocab V --seq S [--seed N] [--unshared]\n"
          "       cdcgemm-llm run MODEL [--prompt-tokens P] [--tokens T] [--temperature X]\n"
          "                       [--seed N] [--check] [--json F]\n"
          "  write: a llama2.c checkpoint with weights drawn from the seed (no download)\n"
          "  run:   P prompt tokens in one batched call per matrix, then T tokens one\n"
          "         by one (greedy unless --temperature > 0), the products on the\n"
          "         CDCGEMM_* workers; --check also computes every step here and\n"
          "         compares the logits (max-norm relative error <= 1e-4, the same\n"
          "         tokens but where the reference's top two are a near-tie)\n",
          out);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec * 1e3 + (double) t.tv_nsec / 1e6;
}

/* A whole decimal in [lo, hi], or exit 2 naming the option. */
static long long number(const char *option, const char *text, long long lo, long long hi)
{
    char *end;
    errno = 0;
    long long v = text ? strtoll(text, &end, 10) : 0;
    if (!text || errno || end == text || *end || v < lo || v > hi) {
        fprintf(stderr, "cdcgemm-llm: %s '%s': expected a whole number in %lld..%lld\n", option,
                text ? text : "", lo, hi);
        exit(EXIT_BAD_ARGS);
    }
    return v;
}

static void parse_option(options_t *o, const char *option, const char *value, int *used)
{
    llm_config_t *c = &o->config;
    struct {
        const char *name;
        int *field;
        long long max;
    } ints[] = {{"--dim", &c->dim, LLM_MAX_DIM},
                {"--hidden", &c->hidden_dim, 4 * LLM_MAX_DIM},
                {"--layers", &c->n_layers, LLM_MAX_LAYERS},
                {"--heads", &c->n_heads, LLM_MAX_DIM},
                {"--kv-heads", &c->n_kv_heads, LLM_MAX_DIM},
                {"--vocab", &c->vocab_size, LLM_MAX_VOCAB},
                {"--seq", &c->seq_len, LLM_MAX_SEQ},
                {"--prompt-tokens", &o->prompt_tokens, LLM_MAX_SEQ},
                {"--tokens", &o->tokens, LLM_MAX_SEQ}};
    *used = 2;
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
        if (strcmp(option, ints[i].name) == 0) {
            *ints[i].field = (int) number(option, value, 0, ints[i].max);
            return;
        }
    if (strcmp(option, "--seed") == 0) {
        o->seed = (unsigned long long) number(option, value, 0, INT64_MAX);
    } else if (strcmp(option, "--temperature") == 0) {
        char *end;
        o->temperature = value ? strtod(value, &end) : -1.0;
        if (!value || *end || !(o->temperature >= 0.0 && o->temperature <= 100.0)) {
            fprintf(stderr, "cdcgemm-llm: --temperature '%s': expected 0..100\n",
                    value ? value : "");
            exit(EXIT_BAD_ARGS);
        }
    } else if (strcmp(option, "--json") == 0 && value) {
        o->json = value;
    } else if (strcmp(option, "--unshared") == 0) {
        c->shared_classifier = 0;
        *used = 1;
    } else if (strcmp(option, "--check") == 0) {
        o->check = 1;
        *used = 1;
    } else {
        fprintf(stderr, "cdcgemm-llm: unknown option '%s'\n", option);
        usage(stderr);
        exit(EXIT_BAD_ARGS);
    }
}

static options_t parse(int argc, char **argv)
{
    options_t o;
    memset(&o, 0, sizeof o);
    o.config.shared_classifier = 1;
    o.seed = 1;
    o.prompt_tokens = 8;
    o.tokens = 32;
    if (argc < 3 || (strcmp(argv[1], "write") != 0 && strcmp(argv[1], "run") != 0)) {
        usage(argc >= 2 && strcmp(argv[1], "--help") == 0 ? stdout : stderr);
        exit(argc >= 2 && strcmp(argv[1], "--help") == 0 ? 0 : EXIT_BAD_ARGS);
    }
    o.command = argv[1];
    o.model = argv[2];
    for (int i = 3, used; i < argc; i += used)
        parse_option(&o, argv[i], i + 1 < argc ? argv[i + 1] : NULL, &used);
    if (o.config.n_kv_heads == 0)
        o.config.n_kv_heads = o.config.n_heads;
    return o;
}

static int write_model(const options_t *o)
{
    char err[512];
    if (llm_checkpoint_write(o->model, &o->config, o->seed, err, sizeof err) != 0) {
        fprintf(stderr, "cdcgemm-llm write: %s\n", err);
        return strstr(err, "expected") || strstr(err, "divide") ? EXIT_BAD_ARGS : 1;
    }
    printf("wrote %s: dim %d, hidden %d, %d layers, %d heads (%d kv), vocab %d%s, seq %d\n",
           o->model, o->config.dim, o->config.hidden_dim, o->config.n_layers, o->config.n_heads,
           o->config.n_kv_heads, o->config.vocab_size,
           o->config.shared_classifier ? "" : " (classifier apart)", o->config.seq_len);
    return 0;
}

static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* Greedy (temperature 0): the largest logit; else a draw from the softmax
   of logits / temperature. */
static int sample(const float *logits, int vocab, double temperature, uint64_t *rng)
{
    int best = 0;
    for (int i = 1; i < vocab; i++)
        best = logits[i] > logits[best] ? i : best;
    if (temperature <= 0.0)
        return best;
    double sum = 0.0, u = (double) (next_random(rng) >> 11) / (double) (UINT64_C(1) << 53);
    for (int i = 0; i < vocab; i++)
        sum += exp((logits[i] - logits[best]) / temperature);
    double acc = 0.0;
    for (int i = 0; i < vocab; i++) {
        acc += exp((logits[i] - logits[best]) / temperature) / sum;
        if (u < acc)
            return i;
    }
    return vocab - 1;
}

/* max |got - want| / max |want| (the max-norm). */
static double relative_error(const float *got, const float *want, int n)
{
    double diff = 0.0, norm = 0.0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double) got[i] - want[i]), w = fabs((double) want[i]);
        diff = d > diff ? d : diff;
        norm = w > norm ? w : norm;
    }
    return norm > 0.0 ? diff / norm : diff;
}

/* The reference's margin between its two largest logits, relative to the
   largest magnitude: below CHECK_TOLERANCE a different argmax is a tie the
   rounding may break either way. */
static double top2_margin(const float *logits, int n)
{
    double first = -INFINITY, second = -INFINITY, norm = 0.0;
    for (int i = 0; i < n; i++) {
        double v = logits[i];
        norm = fabs(v) > norm ? fabs(v) : norm;
        if (v > first) {
            second = first;
            first = v;
        } else if (v > second) {
            second = v;
        }
    }
    return norm > 0.0 && n > 1 ? (first - second) / norm : INFINITY;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static double percentile(double *values, int count, double p)
{
    if (count == 0)
        return 0.0;
    qsort(values, (size_t) count, sizeof *values, compare_doubles);
    int i = (int) ceil(p * count) - 1;
    return values[i < 0 ? 0 : i];
}

/* What a run measured. */
typedef struct {
    int *generated;
    double prompt_ms, *token_ms, check_error;
    int mismatches, near_ties, steps;
} run_result_t;

/* The prompt: token 1 (BOS in llama2.c's vocabulary), then ids from seed. */
static void make_prompt(const options_t *o, int vocab, int *prompt)
{
    uint64_t rng = o->seed * UINT64_C(0x9e3779b97f4a7c15) | 1;
    prompt[0] = vocab > 1 ? 1 : 0;
    for (int i = 1; i < o->prompt_tokens; i++)
        prompt[i] = (int) (next_random(&rng) % (uint64_t) vocab);
}

/* One step on the decoder, and on the reference beside it (--check): the
   logits compared, the tokens they choose too. */
static int step(llm_decoder_t *d, llm_decoder_t *ref, const int *tokens, int count, int pos,
                float *logits, float *ref_logits, int vocab, run_result_t *r)
{
    char err[512];
    if (llm_decoder_forward(d, tokens, count, pos, logits, err, sizeof err) != 0) {
        fprintf(stderr, "cdcgemm-llm: %s\n", err);
        return -1;
    }
    if (!ref)
        return 0;
    if (llm_decoder_forward(ref, tokens, count, pos, ref_logits, err, sizeof err) != 0) {
        fprintf(stderr, "cdcgemm-llm: reference: %s\n", err);
        return -1;
    }
    double e = relative_error(logits, ref_logits, vocab);
    r->check_error = e > r->check_error ? e : r->check_error;
    uint64_t unused = 1;
    int differ = sample(logits, vocab, 0.0, &unused) != sample(ref_logits, vocab, 0.0, &unused);
    int tie = differ && top2_margin(ref_logits, vocab) < CHECK_TOLERANCE;
    r->near_ties += tie;
    r->mismatches += e > CHECK_TOLERANCE || (differ && !tie);
    r->steps++;
    return 0;
}

/* The prompt in one call per matrix, then the tokens one by one. */
static int generate(const options_t *o, int vocab, llm_decoder_t *d, llm_decoder_t *ref,
                    run_result_t *r)
{
    int *prompt = malloc((size_t) o->prompt_tokens * sizeof *prompt);
    float *logits = malloc((size_t) vocab * sizeof *logits);
    float *ref_logits = malloc((size_t) vocab * sizeof *ref_logits);
    int rc = prompt && logits && ref_logits ? 0 : -1;
    uint64_t rng = o->seed | 1;
    if (rc == 0) {
        make_prompt(o, vocab, prompt);
        double started = now_ms();
        rc = step(d, ref, prompt, o->prompt_tokens, 0, logits, ref_logits, vocab, r);
        r->prompt_ms = now_ms() - started;
    }
    for (int t = 0; rc == 0 && t < o->tokens; t++) {
        r->generated[t] = sample(logits, vocab, o->temperature, &rng);
        if (t + 1 == o->tokens)
            break;
        double started = now_ms();
        rc = step(d, ref, &r->generated[t], 1, o->prompt_tokens + t, logits, ref_logits, vocab,
                  r);
        r->token_ms[t] = now_ms() - started;
    }
    free(prompt);
    free(logits);
    free(ref_logits);
    return rc;
}

static void report(const options_t *o, cdc_context_t *context, run_result_t *r)
{
    int timed = o->tokens > 1 ? o->tokens - 1 : 0;
    double total = 0.0;
    for (int t = 0; t < timed; t++)
        total += r->token_ms[t];
    printf("tokens:");
    for (int t = 0; t < o->tokens; t++)
        printf(" %d", r->generated[t]);
    double p50 = percentile(r->token_ms, timed, 0.5), p99 = percentile(r->token_ms, timed, 0.99);
    printf("\nprompt %d tokens %.1f ms; %d tokens: p50 %.2f ms, p99 %.2f ms, %.1f tokens/s\n",
           o->prompt_tokens, r->prompt_ms, timed, p50, p99, timed ? 1e3 * timed / total : 0.0);
    cdc_stats_t stats;
    memset(&stats, 0, sizeof stats);
    cdc_context_stats(context, &stats);
    printf("calls %llu (coded %llu), results decoded %llu, fallbacks %llu, worker deaths %llu\n",
           (unsigned long long) stats.calls, (unsigned long long) stats.coded_calls,
           (unsigned long long) stats.results_decoded, (unsigned long long) stats.fallbacks,
           (unsigned long long) stats.worker_deaths);
    if (o->check)
        printf("check: %d steps, logits max relative error %.2e, %d near-ties, %d mismatches: "
               "%s\n", r->steps, r->check_error, r->near_ties, r->mismatches,
               r->mismatches ? "FAIL" : "ok");
    FILE *json = o->json ? fopen(o->json, "w") : NULL;
    if (o->json && !json)
        fprintf(stderr, "cdcgemm-llm: --json %s: %s\n", o->json, strerror(errno));
    if (json) {
        fprintf(json, "{\"prompt_tokens\": %d, \"tokens\": %d, \"prompt_ms\": %.3f, "
                      "\"token_ms\": {\"p50\": %.3f, \"p99\": %.3f}, \"tokens_per_s\": %.3f, "
                      "\"calls\": %llu, \"results_decoded\": %llu, \"fallbacks\": %llu, "
                      "\"worker_deaths\": %llu, \"check\": %s, \"check_error\": %.3e, "
                      "\"near_ties\": %d, \"mismatches\": %d}\n",
                o->prompt_tokens, o->tokens, r->prompt_ms, p50, p99,
                timed ? 1e3 * timed / total : 0.0, (unsigned long long) stats.calls,
                (unsigned long long) stats.results_decoded, (unsigned long long) stats.fallbacks,
                (unsigned long long) stats.worker_deaths, o->check ? "true" : "false",
                r->check_error, r->near_ties, r->mismatches);
        fclose(json);
    }
}

static int run_model(const options_t *o)
{
    char err[512];
    llm_checkpoint_t ck;
    if (llm_checkpoint_open(o->model, &ck, err, sizeof err) != 0) {
        fprintf(stderr, "cdcgemm-llm: %s\n", err);
        return 1;
    }
    const llm_config_t *c = &ck.config;
    if (o->prompt_tokens < 1 || o->tokens < 1 ||
        (long long) o->prompt_tokens + o->tokens > c->seq_len) {
        fprintf(stderr, "cdcgemm-llm: --prompt-tokens %d + --tokens %d must be at least 1 each "
                "and fit the model's seq_len %d\n", o->prompt_tokens, o->tokens, c->seq_len);
        llm_checkpoint_close(&ck);
        return EXIT_BAD_ARGS;
    }
    cdc_context_t *context = NULL;
    llm_decoder_t *d = NULL, *ref = NULL;
    run_result_t r = {calloc((size_t) o->tokens, sizeof(int)), 0.0,
                      calloc((size_t) o->tokens, sizeof(double)), 0.0, 0, 0, 0};
    int rc = r.generated && r.token_ms ? cdc_context_new_from_env(&context) : CDC_ENOMEM;
    if (rc != CDC_OK) {
        fprintf(stderr, "cdcgemm-llm: %s: %s\n", cdc_err_name(rc), cdc_last_error());
    } else if (llm_decoder_new(&ck, context, o->prompt_tokens, &d, err, sizeof err) != 0 ||
               (o->check &&
                llm_decoder_new(&ck, NULL, o->prompt_tokens, &ref, err, sizeof err) != 0)) {
        fprintf(stderr, "cdcgemm-llm: %s\n", err);
        rc = -1;
    } else if ((rc = generate(o, c->vocab_size, d, ref, &r)) == 0) {
        report(o, context, &r);
    }
    llm_decoder_destroy(&ref);
    llm_decoder_destroy(&d);
    cdc_context_destroy(&context);
    llm_checkpoint_close(&ck);
    free(r.generated);
    free(r.token_ms);
    return rc != 0 ? 1 : r.mismatches ? 1 : 0;
}

int main(int argc, char **argv)
{
    options_t o = parse(argc, argv);
    if (strcmp(o.command, "write") == 0)
        return write_model(&o);
    return run_model(&o);
}
