/* run_result.h - what one cdcgemm-llm run measured, in memory shared by the
 * processes that fill it: the run's own process (generation.c) writes the
 * tokens, times and counters, the reference's process (reference.c) the
 * logits' errors, and the first process reports them (report.c). Each run
 * and its reference get a process of their own so that the coordinator's
 * peak memory is the run's alone. */
#ifndef LLM_RUN_RESULT_H_INCLUDED
#define LLM_RUN_RESULT_H_INCLUDED

#include "cdcgemm.h"
#include "chaos_actor.h"

/* Chaos events kept per run (every one is counted). */
#define LLM_MAX_EVENTS 4096

typedef struct {
    /* Set before the run. */
    char label[16];     /* "coded", "uncoded"                                */
    int prompt_tokens;  /* P                                                 */
    int steps;          /* N: step 0 is the prompt's call (giving token 0),
                           step s >= 1 token s - 1's (giving token s)     */
    /* The run's process. */
    int ran;            /* 1: the run's process got to its end            */
    char error[512];    /* why it stopped early; "" when it did not        */
    int workers, parity; /* what the context used                         */
    int tokens;         /* tokens generated (steps that gave one)          */
    int lost_tokens;    /* step attempts that gave no token (an error or a
                           timeout: the step was tried again)             */
    double ship_ms;     /* the weights' first shipping, before step 0
                           (llm_decoder_ship)                             */
    double prompt_ms;   /* step 0                                          */
    double generate_ms; /* from step 1's start to the last step's end     */
    long coordinator_rss_kib; /* the run's peak VmHWM                      */
    cdc_stats_t stats;  /* the context's counters at the end              */
    int event_count;    /* chaos events (the first LLM_MAX_EVENTS kept)    */
    cdc_chaos_event_t events[LLM_MAX_EVENTS]; /* .request: the step        */
    /* The reference's process. */
    int checked;        /* 1: every generated token's logits compared     */
    double max_rel_logit_error;
    int near_ties, mismatches;
    /* Per step (steps entries each) and the prompt (prompt_tokens). */
    int *prompt, *token, *tries;
    double *start_ms, *step_ms, *rel_error;
} llm_run_result_t;

/* A result for P prompt tokens and N steps in memory shared with the
   processes forked after it; NULL when it cannot be mapped. */
llm_run_result_t *llm_run_result_new(const char *label, int prompt_tokens, int steps);

void llm_run_result_free(llm_run_result_t *r);

#endif
