/* chebyshev.c - Vandermonde rows 1, x, x^2 at Chebyshev-spaced positive nodes. */
#include "code.h"

#include "cdcgemm.h"

#include <math.h>

/* Node interval [lo, hi]: a grid search for the smallest worst error
   amplification ||G[S,M]^-1|| * ||G[S,:]|| at n = 8..16, r = 3 (docs/codes.md).
   Positive, distinct nodes make the Vandermonde rows totally positive: every
   minor is positive, so every square submatrix a decode may use is nonsingular. */
#define CDC_CHEBYSHEV_LO 0.05
#define CDC_CHEBYSHEV_HI 1.32

static int cdc_code_chebyshev_generator(int n, int r, double *g)
{
    const double pi = 3.14159265358979323846;
    const double mid = 0.5 * (CDC_CHEBYSHEV_LO + CDC_CHEBYSHEV_HI);
    const double half = 0.5 * (CDC_CHEBYSHEV_HI - CDC_CHEBYSHEV_LO);
    for (int i = 0; i < n; i++) {
        /* Ascending Chebyshev points of the first kind mapped to [lo, hi]. */
        double x = mid - half * cos((2.0 * i + 1.0) * pi / (2.0 * n));
        double power = 1.0;
        for (int j = 0; j < r; j++) {
            g[j * n + i] = power;
            power *= x;
        }
    }
    return CDC_OK;
}

const cdc_code_ops_t cdc_code_chebyshev_ops = {
    .name = "chebyshev",
    .max_parity = 3,
    .generator = cdc_code_chebyshev_generator,
};
