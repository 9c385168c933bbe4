/* sum.c - the single-parity scheme: the parity is the plain sum of the data blocks. */
#include "code.h"

#include "cdcgemm.h"

static int cdc_code_sum_generator(int n, int r, double *g)
{
    if (r != 1)
        return CDC_EINVAL;
    for (int i = 0; i < n; i++)
        g[i] = 1.0;
    return CDC_OK;
}

const cdc_code_ops_t cdc_code_sum_ops = {
    .name = "sum",
    .max_parity = 1,
    .generator = cdc_code_sum_generator,
};
