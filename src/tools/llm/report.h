/* report.h - cdcgemm-llm's report of its runs: a summary on stdout, the JSON
 * of the contract (docs/llm.md: one object per run, a list with the
 * baseline) and a CSV of every step. */
#ifndef LLM_REPORT_H_INCLUDED
#define LLM_REPORT_H_INCLUDED

#include "checkpoint.h"
#include "run_result.h"
#include "tokenizer.h"

#include <stdio.h>

/* What is reported beside the runs. */
typedef struct {
    int64_t weight_bytes;     /* llm_weight_bytes                    */
    int64_t checkpoint_bytes; /* the file's size                     */
} llm_model_facts_t;

/* Whether run r passed: it ran every step, the reference checked it, its
   logits are within LLM_TOLERANCE and its tokens match. */
int llm_run_passed(const llm_run_result_t *r);

void llm_report_text(FILE *out, const llm_run_result_t *r, const llm_model_facts_t *model);

/* Run r's prompt and generated tokens as text (tok's pieces), each on a line
   of its own in double quotes, a quote, a backslash and any byte that is
   not printable ASCII escaped (\n, \t, \xNN), so the line is one line. */
void llm_report_decoded(FILE *out, const llm_run_result_t *r, const llm_tokenizer_t *tok);

/* count runs as JSON to path (one object, or a list of them when count > 1)
   and, when csv is not NULL, their steps as CSV. 0, or -1 with a message
   on stderr naming the file. */
int llm_report_files(const char *json, const char *csv, llm_run_result_t *const *runs,
                     int count, const llm_model_facts_t *model);

#endif
