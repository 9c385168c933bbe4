/* generation.c - one cdcgemm-llm run (generation.h). */
#include "generation.h"

#include "bench_util.h"
#include "cdcgemm_testing.h"
#include "decoder.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void llm_make_prompt(uint64_t seed, int vocab, int count, int *prompt)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, seed);
    for (int i = 0; i < count; i++)
        prompt[i] = i == 0 && vocab > 1 ? 1 : (int) (cdc_test_rng_next(&rng) % (uint64_t) vocab);
}

int llm_argmax(const float *logits, int count)
{
    int best = 0;
    for (int i = 1; i < count; i++)
        best = logits[i] > logits[best] ? i : best;
    return best;
}

/* Greedy (temperature 0), else a draw from the softmax of logits / temperature. */
static int sample(const float *logits, int vocab, double temperature, cdc_test_rng_t *rng)
{
    int best = llm_argmax(logits, vocab);
    if (temperature <= 0.0)
        return best;
    double sum = 0.0, u = cdc_test_rng_uniform(rng, 0.0, 1.0);
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

static pid_t embedded_pid(void *context, int worker)
{
    return (pid_t) cdc_testing_local_worker_pid(context, worker);
}

/* What one run holds while it goes. */
typedef struct {
    const llm_run_options_t *o;
    llm_run_result_t *r;
    cdc_context_t *context;
    llm_decoder_t *decoder;
    float *logits;
    FILE *logits_out;
    int vocab;
    atomic_int step; /* the chaos actor's "request" */
} run_t;

/* Step s: count tokens at pos, tried until one attempt gives logits (each
   failed one a lost token) or LLM_STEP_TRIES have failed. */
static int step(run_t *run, int s, const int *tokens, int count, int pos, double origin_ms)
{
    llm_run_result_t *r = run->r;
    char err[512];
    atomic_store(&run->step, s);
    r->start_ms[s] = cdc_bench_now_ms() - origin_ms;
    for (r->tries[s] = 1;; r->tries[s]++) {
        if (llm_decoder_forward(run->decoder, tokens, count, pos, run->logits, err,
                                sizeof err) == 0)
            break;
        r->lost_tokens++;
        if (r->tries[s] == LLM_STEP_TRIES) {
            snprintf(r->error, sizeof r->error, "step %d failed %d times, last: %.400s", s,
                     LLM_STEP_TRIES, err);
            return -1;
        }
    }
    r->step_ms[s] = cdc_bench_now_ms() - origin_ms - r->start_ms[s];
    if (fwrite(run->logits, sizeof(float), (size_t) run->vocab, run->logits_out) !=
        (size_t) run->vocab) {
        snprintf(r->error, sizeof r->error, "%s: %s", run->o->logits_path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The chaos actor over the embedded workers, from origin_ms. */
static int start_chaos(run_t *run, double origin_ms, cdc_chaos_actor_t **actor)
{
    cdc_chaos_targets_t targets = {cdc_testing_local_worker_count(run->context), embedded_pid,
                                   NULL, run->context};
    char error[CDC_CHAOS_ERROR_BYTES];
    if (cdc_chaos_check(run->o->chaos, targets.workers, 0, error, sizeof error)) {
        snprintf(run->r->error, sizeof run->r->error, "--chaos: %s", error);
        return -1;
    }
    if (cdc_chaos_actor_start(run->o->chaos, &targets, origin_ms, &run->step, actor)) {
        snprintf(run->r->error, sizeof run->r->error, "--chaos: cannot start its thread");
        return -1;
    }
    return 0;
}

static void keep_events(llm_run_result_t *r, cdc_chaos_actor_t *actor)
{
    cdc_chaos_event_t *events = NULL;
    int count = 0;
    cdc_chaos_actor_stop(actor, &events, &count);
    r->event_count = count;
    memcpy(r->events, events,
           sizeof *events * (size_t) (count < LLM_MAX_EVENTS ? count : LLM_MAX_EVENTS));
    free(events);
}

/* The prompt's step, then the generated tokens' with chaos meanwhile. */
static int steps(run_t *run)
{
    llm_run_result_t *r = run->r;
    int P = r->prompt_tokens, rc;
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, run->o->seed ^ UINT64_C(0x5851f42d4c957f2d));
    if (run->o->prompt)
        memcpy(r->prompt, run->o->prompt, (size_t) P * sizeof *r->prompt);
    else
        llm_make_prompt(run->o->seed, run->vocab, P, r->prompt);
    double origin = cdc_bench_now_ms();
    if ((rc = step(run, 0, r->prompt, P, 0, origin)) != 0)
        return rc;
    r->prompt_ms = r->step_ms[0];
    r->token[0] = sample(run->logits, run->vocab, run->o->temperature, &rng);
    r->tokens = 1;
    cdc_chaos_actor_t *actor = NULL;
    double prompt_origin = origin;
    origin = cdc_bench_now_ms(); /* times from the first generated token's step: */
    r->start_ms[0] = prompt_origin - origin; /* the prompt's before it           */
    if (run->o->chaos && start_chaos(run, origin, &actor) != 0)
        return -1;
    for (int s = 1; s < r->steps && rc == 0; s++)
        if ((rc = step(run, s, &r->token[s - 1], 1, P + s - 1, origin)) == 0) {
            r->token[s] = sample(run->logits, run->vocab, run->o->temperature, &rng);
            r->tokens++;
        }
    r->generate_ms = cdc_bench_now_ms() - origin;
    if (actor)
        keep_events(r, actor);
    return rc;
}

int llm_generate(const llm_checkpoint_t *ck, const llm_run_options_t *o, llm_run_result_t *r)
{
    run_t run = {.o = o, .r = r, .vocab = ck->config.vocab_size};
    char err[512];
    int rc = -1;
    run.logits = malloc((size_t) run.vocab * sizeof(float));
    run.logits_out = fopen(o->logits_path, "wb");
    if (!run.logits || !run.logits_out) {
        snprintf(r->error, sizeof r->error, "%s", run.logits ? strerror(errno) : "out of memory");
    } else if ((rc = cdc_context_new(&o->config, &run.context)) != CDC_OK) {
        snprintf(r->error, sizeof r->error, "%s: %s", cdc_err_name(rc), cdc_last_error());
        rc = -1;
    } else if (llm_decoder_new(ck, run.context, r->prompt_tokens, &run.decoder, err,
                               sizeof err) != 0) {
        snprintf(r->error, sizeof r->error, "%s", err);
    } else {
        const cdc_config_t *used = cdc_context_config(run.context);
        r->workers = used->local_workers;
        r->parity = used->parity;
        double shipping = cdc_bench_now_ms();
        rc = llm_decoder_ship(run.decoder, err, sizeof err);
        r->ship_ms = cdc_bench_now_ms() - shipping;
        if (rc != 0)
            snprintf(r->error, sizeof r->error, "%s", err);
        else
            rc = steps(&run);
        r->coordinator_rss_kib = cdc_test_peak_rss_kib(getpid());
        cdc_context_stats(run.context, &r->stats);
    }
    if (run.logits_out && fclose(run.logits_out) != 0 && rc == 0) {
        snprintf(r->error, sizeof r->error, "%s: %s", o->logits_path, strerror(errno));
        rc = -1;
    }
    llm_decoder_destroy(&run.decoder);
    cdc_context_destroy(&run.context);
    free(run.logits);
    r->ran = 1;
    return rc;
}
