/* plan_model.c - the sizing rules under both planners (plan_model.h). */
#include "plan_model.h"

#include <math.h>

void cdc__plan_equal_lengths(int n, int64_t rows, int64_t *len)
{
    for (int i = 0; i < n; i++)
        len[i] = rows / n + (i < rows % n);
}

void cdc__plan_here_line(cdc_block_cost_t *cost, double one_ms, double all_ms, int64_t rows)
{
    cost->here_per_row_ms = (all_ms - one_ms) / (double) (rows - 1);
    cost->here_fixed_ms = one_ms - cost->here_per_row_ms;
}

double cdc__plan_budget_rows(uint64_t max_memory, const cdc_block_cost_t *cost)
{
    if (max_memory == 0 || cost->held_per_row <= 0.0)
        return 0.0;
    double room = (double) max_memory - cost->held_fixed - CDC_PLAN_BUDGET_ENTRY_SLACK;
    double rows = floor(room / cost->held_per_row);
    return rows >= 1.0 ? rows : 0.5;
}

