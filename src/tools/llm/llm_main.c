/* cdcgemm-llm - token generation with a Llama-architecture model whose weight
 * products run on cdcgemm workers (docs/llm.md has the contract).
 *
 *   cdcgemm-llm --random dim=D,hidden=H,layers=L,heads=NH,kv_heads=KV,vocab=V,seq=S
 *               --save PATH [--seed N]
 *   cdcgemm-llm --model PATH [--prompt-tokens P] [--tokens N] [--workers W]
 *               [--parity R] [--faults SPEC] [--chaos SPEC] [--baseline uncoded]
 *               [--temperature X] [--seed N] [--json F] [--csv F] [--plot F.png]
 *
 * What the options leave unset comes from the CDCGEMM_* environment
 * (docs/configuration.md). Each run (the coded one, then the baseline) has
 * a process of its own, and so has each run's reference, which follows it
 * (generation.h, reference.h). Exit 0; 1 on a failure or a check that does
 * not hold; 2 on bad arguments. */
#include "generation.h"
#include "plot.h"
#include "reference.h"
#include "report.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { EXIT_BAD_ARGS = 2 };

typedef struct {
    const char *random, *save, *model, *faults, *chaos, *baseline, *json, *csv, *plot;
    const char *tokenizer, *prompt;
    unsigned long long seed;
    int prompt_tokens, tokens, workers, parity;
    double temperature;
} options_t;

static void usage(FILE *out)
{
    fputs("usage: cdcgemm-llm --random dim=D,hidden=H,layers=L,heads=NH,kv_heads=KV,vocab=V,"
          "seq=S[,shared=0]\n"
          "                   --save PATH [--seed N]\n"
          "       cdcgemm-llm --model PATH [--prompt-tokens P] [--tokens N] [--workers W]\n"
          "                   [--parity R] [--faults SPEC] [--chaos SPEC] [--baseline uncoded]\n"
          "                   [--temperature X] [--seed N] [--json F] [--csv F]\n"
          "                   [--plot F.png] [--tokenizer tokenizer.bin [--prompt TEXT]]\n"
          "  --random: a llama2.c checkpoint with weights drawn from the seed (no download);\n"
          "            shared=0 stores the classifier apart from the embedding\n"
          "  --model:  P prompt tokens (default 8) in one call per matrix, then N tokens\n"
          "            (default 32) one by one, greedy unless --temperature > 0, the\n"
          "            products on W workers with r parity (default: CDCGEMM_*); every\n"
          "            step's logits then checked against an uncoded reference computed\n"
          "            in double, teacher-forced on the run's tokens (max-norm relative\n"
          "            error <= 1e-4, the same tokens but for near-ties). --baseline\n"
          "            uncoded also runs r = 0 on the same workers, faults and chaos;\n"
          "            --plot draws the inter-token latency over time (gnuplot);\n"
          "            --tokenizer (llama2.c's tokenizer.bin) prints the prompt and the\n"
          "            tokens as text, and --prompt TEXT is the prompt, encoded by it\n"
          "            (in place of --prompt-tokens)\n",
          out);
}

/* The reason on stderr, then exit 2. */
static _Noreturn __attribute__((format(printf, 1, 2))) void bad_args(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fputs("cdcgemm-llm: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    exit(EXIT_BAD_ARGS);
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

/* The option at argv[i] and its value into *o. */
static void parse_option(options_t *o, const char *option, const char *value)
{
    struct {
        const char *name;
        const char **field;
    } texts[] = {{"--random", &o->random},   {"--save", &o->save},   {"--model", &o->model},
                 {"--faults", &o->faults},   {"--chaos", &o->chaos}, {"--baseline", &o->baseline},
                 {"--json", &o->json},       {"--csv", &o->csv},     {"--plot", &o->plot},
                 {"--tokenizer", &o->tokenizer}, {"--prompt", &o->prompt}};
    struct {
        const char *name;
        int *field;
        long long lo, hi;
    } ints[] = {{"--prompt-tokens", &o->prompt_tokens, 1, LLM_MAX_SEQ},
                {"--tokens", &o->tokens, 1, LLM_MAX_SEQ},
                {"--workers", &o->workers, 1, CDC_MAX_WORKERS},
                {"--parity", &o->parity, 0, CDC_MAX_PARITY}};
    if (!value)
        bad_args("%s: expected a value after it", option);
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
        if (strcmp(option, texts[i].name) == 0) {
            *texts[i].field = value;
            return;
        }
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
        if (strcmp(option, ints[i].name) == 0) {
            *ints[i].field = (int) number(option, value, ints[i].lo, ints[i].hi);
            return;
        }
    if (strcmp(option, "--seed") == 0) {
        o->seed = (unsigned long long) number(option, value, 0, INT64_MAX);
    } else if (strcmp(option, "--temperature") == 0) {
        char *end;
        o->temperature = strtod(value, &end);
        if (*end || !(o->temperature >= 0.0 && o->temperature <= 100.0))
            bad_args("--temperature '%s': expected 0..100", value);
    } else {
        fprintf(stderr, "cdcgemm-llm: unknown option '%s'\n", option);
        usage(stderr);
        exit(EXIT_BAD_ARGS);
    }
}

static options_t parse(int argc, char **argv)
{
    options_t o = {.seed = 1, .tokens = 32, .workers = -1, .parity = -1};
    if (argc == 2 && strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        exit(0);
    }
    if (argc % 2 == 0) {
        parse_option(&o, argv[argc - 1], NULL); /* names the option missing its value */
    }
    for (int i = 1; i + 1 < argc; i += 2)
        parse_option(&o, argv[i], argv[i + 1]);
    if (!o.random == !o.model || (o.random && !o.save) || (o.save && !o.random)) {
        usage(stderr);
        bad_args("expected --random SPEC --save PATH, or --model PATH");
    }
    if (o.baseline && strcmp(o.baseline, "uncoded") != 0)
        bad_args("--baseline '%s': expected uncoded", o.baseline);
    if (o.prompt && (!o.tokenizer || o.prompt_tokens))
        bad_args(o.prompt_tokens ? "--prompt and --prompt-tokens: the text sets the count"
                                 : "--prompt needs --tokenizer (llama2.c's tokenizer.bin)");
    if (!o.prompt && !o.prompt_tokens)
        o.prompt_tokens = 8;
    return o;
}

/* --random's dim=D,hidden=H,... into *c; exit 2 naming a bad or missing key. */
static void parse_random(const char *spec, llm_config_t *c)
{
    struct {
        const char *name;
        int *field;
        long long max;
        int required;
    } keys[] = {{"dim", &c->dim, LLM_MAX_DIM, 1},          {"hidden", &c->hidden_dim, 4 * LLM_MAX_DIM, 1},
                {"layers", &c->n_layers, LLM_MAX_LAYERS, 1}, {"heads", &c->n_heads, LLM_MAX_DIM, 1},
                {"kv_heads", &c->n_kv_heads, LLM_MAX_DIM, 0}, {"vocab", &c->vocab_size, LLM_MAX_VOCAB, 1},
                {"seq", &c->seq_len, LLM_MAX_SEQ, 1},        {"shared", &c->shared_classifier, 1, 0}};
    enum { KEYS = sizeof keys / sizeof *keys };
    int seen[KEYS] = {0};
    *c = (llm_config_t){.shared_classifier = 1};
    char copy[512];
    if (snprintf(copy, sizeof copy, "%s", spec) >= (int) sizeof copy)
        bad_args("--random '%s': too long", spec);
    for (char *save = NULL, *item = strtok_r(copy, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        size_t k = 0;
        if (eq)
            *eq = '\0';
        while (k < KEYS && strcmp(item, keys[k].name) != 0)
            k++;
        if (!eq || k == KEYS)
            bad_args("--random: '%s': expected one of dim, hidden, layers, heads, kv_heads, "
                     "vocab, seq, shared = a number", item);
        char option[32];
        snprintf(option, sizeof option, "--random %s", keys[k].name);
        *keys[k].field = (int) number(option, eq + 1, k == KEYS - 1 ? 0 : 1, keys[k].max);
        seen[k] = 1;
    }
    for (size_t k = 0; k < KEYS; k++)
        if (keys[k].required && !seen[k])
            bad_args("--random '%s': %s= missing", spec, keys[k].name);
    if (!seen[4])
        c->n_kv_heads = c->n_heads;
}

static int write_random(const options_t *o)
{
    llm_config_t c;
    char err[512];
    parse_random(o->random, &c);
    if (llm_checkpoint_write(o->save, &c, o->seed, err, sizeof err) != 0) {
        fprintf(stderr, "cdcgemm-llm --random: %s\n", err);
        return strstr(err, "expected") || strstr(err, "divide") ? EXIT_BAD_ARGS : 1;
    }
    printf("wrote %s: dim %d, hidden %d, %d layers, %d heads (%d kv), vocab %d%s, seq %d\n",
           o->save, c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size,
           c.shared_classifier ? "" : " (classifier apart)", c.seq_len);
    return 0;
}

/* The environment's configuration with the options' workers, parity and
   faults; exit 2 naming what is wrong. */
static cdc_config_t run_config(const options_t *o)
{
    cdc_config_t config;
    cdc_config_init(&config);
    if (cdc_config_from_env(&config) != CDC_OK)
        bad_args("%s", cdc_last_error());
    if (o->workers > 0)
        config.local_workers = o->workers;
    if (o->parity >= 0)
        config.parity = o->parity;
    if (o->faults && snprintf(config.faults, sizeof config.faults, "%s", o->faults) >=
                         (int) sizeof config.faults)
        bad_args("--faults '%.40s...': longer than %d bytes", o->faults, CDC_CONFIG_STR - 1);
    return config;
}

/* fn(arg) in a child process; 0 when it exited 0, else -1 with why in
   r->error (unless it said already). */
static int in_child(int (*fn)(void *), void *arg, llm_run_result_t *r, const char *what)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        exit(fn(arg) == 0 ? 0 : 1);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        snprintf(r->error, sizeof r->error, "%s: cannot start its process: %s", what,
                 strerror(errno));
        return -1;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (!r->error[0])
        snprintf(r->error, sizeof r->error, "%s: its process %s %d", what,
                 WIFSIGNALED(status) ? "died of signal" : "exited",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    return -1;
}

/* One run and its check, each in a process of its own. */
typedef struct {
    const llm_checkpoint_t *ck;
    llm_run_options_t options;
    llm_run_result_t *r;
} run_job_t;

static int generate_job(void *arg)
{
    run_job_t *job = arg;
    return llm_generate(job->ck, &job->options, job->r);
}

static int reference_job(void *arg)
{
    run_job_t *job = arg;
    char err[512];
    if (llm_reference_check(job->ck, job->options.logits_path, job->r, err, sizeof err) == 0)
        return 0;
    snprintf(job->r->error, sizeof job->r->error, "reference: %.480s", err);
    return -1;
}

static void run_and_check(run_job_t *job)
{
    const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char logits[4096];
    int fd = snprintf(logits, sizeof logits, "%s/cdcgemm-llm-logits.XXXXXX", dir) <
                     (int) sizeof logits
                 ? mkstemp(logits)
                 : -1;
    if (fd < 0) {
        snprintf(job->r->error, sizeof job->r->error, "a temporary file for the logits in %s: %s",
                 dir, strerror(errno));
        return;
    }
    close(fd);
    job->options.logits_path = logits;
    in_child(generate_job, job, job->r, "the run");
    if (job->r->tokens > 0) /* checked as far as it went, even when it stopped early */
        in_child(reference_job, job, job->r, "the reference");
    unlink(logits);
}

/* The prompt: --prompt's text encoded by the tokenizer into *ids (*P of
   them), or P = --prompt-tokens ids from the seed (*ids NULL); either must
   leave room for --tokens in seq_len. The tokenizer, when given, into *tok.
   0, or the exit status with why on stderr. */
static int prompt_of(const options_t *o, const llm_checkpoint_t *ck, llm_tokenizer_t **tok,
                     int **ids, int *P)
{
    char err[512];
    int room = ck->config.seq_len - o->tokens;
    *tok = NULL;
    *ids = NULL;
    *P = o->prompt_tokens;
    if (o->tokenizer &&
        llm_tokenizer_open(o->tokenizer, ck->config.vocab_size, tok, err, sizeof err) != 0) {
        fprintf(stderr, "cdcgemm-llm: %s\n", err);
        return 1;
    }
    if (o->prompt && room < 1) {
        fprintf(stderr, "cdcgemm-llm: --tokens %d leaves no room for --prompt in the model's "
                        "seq_len %d\n", o->tokens, ck->config.seq_len);
        return EXIT_BAD_ARGS;
    }
    if (o->prompt) {
        *ids = malloc((size_t) room * sizeof **ids);
        if (!*ids || llm_tokenizer_encode(*tok, o->prompt, *ids, room, P, err, sizeof err)) {
            fprintf(stderr, "cdcgemm-llm: --prompt: %s with --tokens %d in the model's seq_len "
                            "%d\n", *ids ? err : "out of memory", o->tokens, ck->config.seq_len);
            return EXIT_BAD_ARGS;
        }
    } else if ((long long) *P + o->tokens > ck->config.seq_len) {
        fprintf(stderr, "cdcgemm-llm: --prompt-tokens %d + --tokens %d must fit the model's "
                        "seq_len %d\n", *P, o->tokens, ck->config.seq_len);
        return EXIT_BAD_ARGS;
    }
    return 0;
}

static int generate_from(const options_t *o)
{
    char err[512];
    llm_checkpoint_t ck;
    if (llm_checkpoint_open(o->model, &ck, err, sizeof err) != 0) {
        fprintf(stderr, "cdcgemm-llm: %s\n", err);
        return 1;
    }
    llm_tokenizer_t *tok;
    int *prompt, P, rc = prompt_of(o, &ck, &tok, &prompt, &P);
    if (rc != 0) {
        llm_tokenizer_close(&tok);
        free(prompt);
        llm_checkpoint_close(&ck);
        return rc;
    }
    cdc_chaos_spec_t chaos;
    char error[CDC_CHAOS_ERROR_BYTES];
    if (o->chaos && cdc_chaos_parse(o->chaos, &chaos, error, sizeof error) != 0)
        bad_args("--chaos: %s", error);
    run_job_t jobs[2];
    llm_run_result_t *results[2] = {NULL, NULL};
    int runs = o->baseline ? 2 : 1;
    for (int i = 0; i < runs; i++) {
        jobs[i] = (run_job_t){&ck, {run_config(o), o->chaos ? &chaos : NULL, o->temperature,
                                    o->seed, NULL, prompt},
                              results[i] = llm_run_result_new(i ? "uncoded" : "coded", P,
                                                              o->tokens)};
        if (!jobs[i].r) {
            fprintf(stderr, "cdcgemm-llm: cannot map a run's results: %s\n", strerror(errno));
            runs = i;
            rc = 1;
            break;
        }
        if (i == 1)
            jobs[i].options.config.parity = 0;
        run_and_check(&jobs[i]);
    }
    llm_model_facts_t model = {llm_weight_bytes(&ck.config), (int64_t) ck.size};
    for (int i = 0; i < runs; i++) {
        llm_report_text(stdout, results[i], &model);
        if (tok)
            llm_report_decoded(stdout, results[i], tok);
        rc |= !llm_run_passed(results[i]);
    }
    rc |= llm_report_files(o->json, o->csv, results, runs, &model) != 0;
    if (o->plot) {
        char title[160];
        snprintf(title, sizeof title, "cdcgemm-llm: dim %d, %d layers, vocab %d; %d tokens",
                 ck.config.dim, ck.config.n_layers, ck.config.vocab_size, o->tokens);
        rc |= llm_plot(o->plot, results, runs, title) != 0;
    }
    for (int i = 0; i < runs; i++)
        llm_run_result_free(results[i]);
    llm_tokenizer_close(&tok);
    free(prompt);
    llm_checkpoint_close(&ck);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    options_t o = parse(argc, argv);
    return o.random ? write_random(&o) : generate_from(&o);
}
