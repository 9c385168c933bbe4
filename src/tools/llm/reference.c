/* reference.c - the teacher-forced check of a run (reference.h). */
#include "reference.h"

#include "decoder.h"
#include "generation.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The margin between the two largest logits, relative to the largest
   magnitude. */
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

/* Step s's logits compared: its error, and whether it chose another token. */
static void compare(llm_run_result_t *r, int s, const float *got, const float *want, int vocab)
{
    double e = relative_error(got, want, vocab);
    r->rel_error[s] = e;
    r->max_rel_logit_error = e > r->max_rel_logit_error ? e : r->max_rel_logit_error;
    if (llm_argmax(got, vocab) != llm_argmax(want, vocab)) {
        int tie = top2_margin(want, vocab) < LLM_TOLERANCE;
        r->near_ties += tie;
        r->mismatches += !tie;
    }
}

int llm_reference_check(const llm_checkpoint_t *ck, const char *logits_path,
                        llm_run_result_t *r, char *err, size_t err_size)
{
    int vocab = ck->config.vocab_size, rc = 0;
    llm_decoder_t *d = NULL;
    float *got = malloc((size_t) vocab * sizeof *got), *want = malloc((size_t) vocab * sizeof *want);
    FILE *in = fopen(logits_path, "rb");
    if (!got || !want || !in)
        rc = llm_fail(err, err_size, "reference: %s", in ? "out of memory" : strerror(errno));
    else
        rc = llm_decoder_new(ck, NULL, r->prompt_tokens, &d, err, err_size);
    for (int s = 0; rc == 0 && s < r->tokens; s++) {
        const int *tokens = s == 0 ? r->prompt : &r->token[s - 1];
        int count = s == 0 ? r->prompt_tokens : 1, pos = s == 0 ? 0 : r->prompt_tokens + s - 1;
        if (llm_decoder_forward(d, tokens, count, pos, want, err, err_size) != 0)
            rc = -1;
        else if (fread(got, sizeof *got, (size_t) vocab, in) != (size_t) vocab)
            rc = llm_fail(err, err_size, "reference: %s: step %d's logits missing", logits_path,
                          s);
        else
            compare(r, s, got, want, vocab);
    }
    r->checked = rc == 0;
    llm_decoder_destroy(&d);
    if (in)
        fclose(in);
    free(got);
    free(want);
    return rc;
}
