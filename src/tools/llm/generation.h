/* generation.h - one cdcgemm-llm run: a context of the run's configuration,
 * the prompt in one call per matrix, then the tokens one by one, chaos
 * acting on the workers meanwhile; every step's logits appended to a file
 * for the reference (reference.h) to check. Runs in a process of its own. */
#ifndef LLM_GENERATION_H_INCLUDED
#define LLM_GENERATION_H_INCLUDED

#include "chaos.h"
#include "checkpoint.h"
#include "run_result.h"

#include <stdint.h>

/* Attempts of one step before the run gives up on it. */
#define LLM_STEP_TRIES 3

typedef struct {
    cdc_config_t config;           /* the environment's, with the options'
                                      workers, parity and faults           */
    const cdc_chaos_spec_t *chaos; /* during the generated tokens; or NULL */
    double temperature;            /* 0: greedy                            */
    uint64_t seed;                 /* the prompt's ids and the draws       */
    const char *logits_path;       /* each step's logits, vocab floats     */
    const int *prompt;             /* the prompt's P ids (a text's, from
                                      the tokenizer); NULL: from the seed */
} llm_run_options_t;

/* P prompt token ids from seed into prompt: token 1 (BOS in llama2.c's
   vocabulary) first. The reference makes the same. */
void llm_make_prompt(uint64_t seed, int vocab, int count, int *prompt);

/* Greedy: the first of the largest logits. */
int llm_argmax(const float *logits, int count);

/* Run r->steps steps of ck's model as o says, filling r (r->error says why
   it stopped early). 0 when every step gave a token, else -1. */
int llm_generate(const llm_checkpoint_t *ck, const llm_run_options_t *o, llm_run_result_t *r);

#endif
