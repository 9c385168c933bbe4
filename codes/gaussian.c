/* gaussian.c - seeded random normal generator, kept only to compare conditioning. */
#include "code.h"

#include "cdcgemm.h"

#include <math.h>
#include <stdint.h>

/* xorshift64*: the same generator on every machine for the same (n, r). */
static uint64_t cdc_code_gaussian_next(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * UINT64_C(2685821657736338717);
}

static double cdc_code_gaussian_uniform(uint64_t *state)
{
    /* (0, 1]: 53 random bits, never 0 so the logarithm below is finite. */
    return ((double) (cdc_code_gaussian_next(state) >> 11) + 1.0) * 0x1.0p-53;
}

static int cdc_code_gaussian_generator(int n, int r, double *g)
{
    const double two_pi = 6.283185307179586476925;
    /* One fixed seed per n so the r = 2 code is a prefix of the r = 3 one. */
    uint64_t state = UINT64_C(0x9E3779B97F4A7C15) ^ (uint64_t) n;
    for (int k = 0; k < r * n; k++) {
        double u1 = cdc_code_gaussian_uniform(&state), u2 = cdc_code_gaussian_uniform(&state);
        g[k] = sqrt(-2.0 * log(u1)) * cos(two_pi * u2);
        if (g[k] == 0.0) /* the code rejects zero entries; vanishingly rare */
            g[k] = 1e-3;
    }
    return CDC_OK;
}

const cdc_code_ops_t cdc_code_gaussian_ops = {
    .name = "gaussian",
    .max_parity = 3,
    .generator = cdc_code_gaussian_generator,
};
