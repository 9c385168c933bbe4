/* run_result.c - a run's result in shared memory (run_result.h). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "run_result.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

/* The struct, then the per-step arrays, in one shared anonymous mapping. */
static size_t mapping_size(int prompt_tokens, int steps)
{
    return sizeof(llm_run_result_t) + (size_t) prompt_tokens * sizeof(int) +
           (size_t) steps * (2 * sizeof(int) + 3 * sizeof(double));
}

llm_run_result_t *llm_run_result_new(const char *label, int prompt_tokens, int steps)
{
    size_t size = mapping_size(prompt_tokens, steps);
    void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        return NULL;
    llm_run_result_t *r = map; /* zeroed by the kernel */
    snprintf(r->label, sizeof r->label, "%s", label);
    r->prompt_tokens = prompt_tokens;
    r->steps = steps;
    double *d = (double *) (r + 1); /* the doubles first: aligned */
    r->start_ms = d;
    r->step_ms = d + steps;
    r->rel_error = d + 2 * (size_t) steps;
    int *i = (int *) (d + 3 * (size_t) steps);
    r->token = i;
    r->tries = i + steps;
    r->prompt = i + 2 * (size_t) steps;
    return r;
}

void llm_run_result_free(llm_run_result_t *r)
{
    if (r)
        munmap(r, mapping_size(r->prompt_tokens, r->steps));
}
