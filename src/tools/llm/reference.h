/* reference.h - the check of a cdcgemm-llm run: the same checkpoint run
 * uncoded here, every product computed in double, teacher-forced on the
 * tokens the run produced, each step's logits compared with the run's (read
 * back from the file it wrote). Runs in a process of its own, after the
 * run's, so that it counts in neither the run's time nor its memory. */
#ifndef LLM_REFERENCE_H_INCLUDED
#define LLM_REFERENCE_H_INCLUDED

#include "checkpoint.h"
#include "run_result.h"

/* Largest max-norm relative error of a step's logits against the
   reference's: each product's rounding (about sqrt(k) eps) through the
   layers, and a decode's amplification (docs/codes.md), well inside it. A
   different argmax where the reference's top two are closer than this is
   a near-tie, which rounding may break either way. */
#define LLM_TOLERANCE 1e-4

/* Check r's r->tokens steps against the reference: fills r->rel_error,
   r->max_rel_logit_error, r->near_ties, r->mismatches (a step over the
   tolerance, or another argmax but for a near-tie) and r->checked. 0, or
   -1 with the reason in err. */
int llm_reference_check(const llm_checkpoint_t *ck, const char *logits_path,
                        llm_run_result_t *r, char *err, size_t err_size);

#endif
