/* circle.c - rows 1, c_u + rho cos t_i, c_v + rho sin t_i: points on a shifted circle,
   tuned per n so that the worst decode is as well conditioned as we could find. */
#include "code.h"

#include "cdcgemm.h"

#include <math.h>

/* A column is the point (u_i, v_i) on a circle; row 0 stays all ones so
   parity 0 is the plain sum. What limits decoding is (docs/codes.md):
   - 2 x 2 with row 0: [1 1; u_a u_b] needs the u's (and v's) well apart;
   - 2 x 2 of rows 1, 2: no two points in line with the origin;
   - 3 x 3: the triangle of three points must not be thin (never zero: three
     distinct points of a circle are never collinear);
   - 1 x 1: no coordinate near zero.
   An arc inside the first quadrant (rotation.c) crowds all of these; the whole
   circle, shifted off the origin and turned, spreads them. The parameters for
   n <= 16 come from a seeded random search minimising the worst error
   amplification ||G[S,M]^-1|| * ||G[S,:]|| over every square submatrix; beyond
   16 one fixed regular polygon that the same search found good on average. */
typedef struct {
    double cu, cv, rho, phase, span; /* t_i = phase + span * (i + 0.5) / n */
} cdc_circle_param_t;

static const cdc_circle_param_t cdc_circle_tuned[] = {
    {0.452764, -1.060529, 1.612431, 1.509886, 4.731628}, /* n = 2: 2.00, r2 2.00 */
    {-0.459083, -0.457914, 1.418739, 0.305915, 7.241624}, /* n = 3: 4.75, r2 4.74 */
    {0.768810, 0.074462, 1.516883, 1.984426, 6.483210}, /* n = 4: 7.95, r2 7.95 */
    {0.575799, -0.581747, 1.695041, 0.026987, 4.657628}, /* n = 5: 13.50, r2 13.50 */
    {0.609541, 0.811988, 1.628172, 1.328861, 4.678959}, /* n = 6: 21.20, r2 20.88 */
    {0.749982, 0.380671, 1.450956, 1.142220, 5.323587}, /* n = 7: 30.13, r2 30.12 */
    {0.178784, -0.058193, 1.119487, 1.277569, 6.319485}, /* n = 8: 35.19, r2 35.19 */
    {0.645468, 0.250030, 1.266952, 0.730470, 5.733908}, /* n = 9: 63.52, r2 63.50 */
    {-0.059707, 0.257140, 1.225680, 2.309261, 6.365265}, /* n = 10: 74.21, r2 74.21 */
    {0.173383, 0.016309, 1.162799, 0.698943, 5.762027}, /* n = 11: 87.70, r2 78.53 */
    {-0.027277, 0.129424, 1.212334, 0.698462, 6.289991}, /* n = 12: 95.94, r2 93.92 */
    {0.066374, 0.916159, 1.421964, 1.672508, 5.819151}, /* n = 13: 152.93, r2 152.93 */
    {0.299419, -0.259744, 1.163330, -0.593423, 6.353888}, /* n = 14: 168.63, r2 168.38 */
    {0.005399, 0.111984, 1.337686, 1.700664, 5.891748}, /* n = 15: 184.88, r2 184.88 */
    {-0.101499, -0.016367, 1.225854, 1.306901, 6.292293}, /* n = 16: 195.20, r2 195.20 */
};
#define CDC_CIRCLE_TUNED_MAX_N 16

static int cdc_code_circle_generator(int n, int r, double *g)
{
    const double pi = 3.14159265358979323846;
    cdc_circle_param_t p;
    if (n >= 2 && n <= CDC_CIRCLE_TUNED_MAX_N)
        p = cdc_circle_tuned[n - 2];
    else
        p = (cdc_circle_param_t){-0.15, 0.0, 1.2, -0.3 * pi / n, 2.0 * pi};
    for (int i = 0; i < n; i++) {
        const double t = p.phase + p.span * (i + 0.5) / n;
        const double row[3] = {1.0, p.cu + p.rho * cos(t), p.cv + p.rho * sin(t)};
        for (int j = 0; j < r; j++)
            g[j * n + i] = row[j];
    }
    return CDC_OK;
}

const cdc_code_ops_t cdc_code_circle_ops = {
    .name = "circle",
    .max_parity = 3,
    .generator = cdc_code_circle_generator,
};
