/* rotation.c - rows 1, cos t_i, sin t_i: points on a circle arc inside (0, pi/2). */
#include "code.h"

#include "cdcgemm.h"

#include <math.h>

/* Angle interval [lo, hi] in radians: a grid search for the smallest worst
   error amplification at n = 8..16, r = 3 (docs/codes.md); the whole quadrant
   minus a margin that keeps cos and sin away from zero. Inside the open first quadrant every entry is positive and
   every 2 x 2 and 3 x 3 minor is nonzero (the angles are distinct and span
   less than pi), so every square submatrix a decode may use is nonsingular. */
#define CDC_ROTATION_LO 0.02
#define CDC_ROTATION_HI 1.55

static int cdc_code_rotation_generator(int n, int r, double *g)
{
    for (int i = 0; i < n; i++) {
        /* Evenly spaced, half a step in from each end. */
        double t = CDC_ROTATION_LO + (CDC_ROTATION_HI - CDC_ROTATION_LO) * (i + 0.5) / n;
        const double row[3] = {1.0, cos(t), sin(t)};
        for (int j = 0; j < r; j++)
            g[j * n + i] = row[j];
    }
    return CDC_OK;
}

const cdc_code_ops_t cdc_code_rotation_ops = {
    .name = "rotation",
    .max_parity = 3,
    .generator = cdc_code_rotation_generator,
};
