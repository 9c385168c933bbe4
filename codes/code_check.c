/* code_check.c - the parity consistency check shared by every scheme
 * (cdc__code_check).
 *
 * The results obey the same equations as the blocks (code.c), so with a > e
 * parity results in (e data results missing) the a residuals must vanish up
 * to rounding. Combinations of them that the missing shards do not enter (a
 * left null basis of G[sel, missing], d = a - e rows) are compared with a
 * tolerance scaled by the operands' row and column norms; with d >= 2 the
 * direction of the residual names the bad shard (least squares over each
 * candidate's signature). Every sum is accumulated in double, so the only
 * error the check must allow for is the rounding of the workers' float32 dot
 * products of length k: the tolerance below. */
#include "code_internal.h"

#include "error.h"

#include <float.h>
#include <math.h>
#include <stdint.h>

/* Rounding-aware tolerance of the check: a residual element may reach
   CDC_CODE_CHECK_C * eps32 * sqrt(k) * (sum of the shards' |row| * |col|).
   Clean float32 OpenBLAS results measured at most 0.093 of that bound without
   the constant (k = 27..9216, n = 4..16), so 0.5 leaves a 5x margin against
   false alarms while a 1% error of a shard's largest value still exceeds it
   for k up to ~10^4 (docs/codes.md). */
#define CDC_CODE_CHECK_C 0.5

/* Short dot products get the worst-case term too: for k of a few, the
   probabilistic bound falls below the rounding of the float32 parity block
   itself plus one product, about (k + 1) * eps / 2 (seen as false alarms in the
   reference BLAS tests, whose k goes down to 1). Capped so that long products
   keep their detection power. */
#define CDC_CODE_CHECK_SMALL_K 16

/* Rows of an orthonormal basis (d x a, row-major) of the vectors orthogonal to
   the e columns of b (a x e): combinations of the parity residuals in which
   the missing data shards cancel. Returns d = a - e (0 when singular). */
static int cdc_code_left_null(const double *b, int a, int e, double *basis)
{
    double q[CDC_CODE_MAX_R][CDC_CODE_MAX_R]; /* orthonormal columns of b */
    for (int j = 0; j < e; j++) {
        double v[CDC_CODE_MAX_R];
        for (int i = 0; i < a; i++)
            v[i] = b[i * e + j];
        for (int pass = 0; pass < 2; pass++) /* twice for orthogonality */
            for (int t = 0; t < j; t++) {
                double dot = 0;
                for (int i = 0; i < a; i++)
                    dot += q[t][i] * v[i];
                for (int i = 0; i < a; i++)
                    v[i] -= dot * q[t][i];
            }
        double norm = 0;
        for (int i = 0; i < a; i++)
            norm += v[i] * v[i];
        norm = sqrt(norm);
        if (norm < 1e-12)
            return 0;
        for (int i = 0; i < a; i++)
            q[j][i] = v[i] / norm;
    }
    /* Complete with unit vectors, keeping those that add the most. */
    int d = 0;
    for (int u = 0; u < a && e + d < a; u++) {
        double v[CDC_CODE_MAX_R];
        for (int i = 0; i < a; i++)
            v[i] = i == u ? 1.0 : 0.0;
        for (int pass = 0; pass < 2; pass++) {
            for (int t = 0; t < e; t++) {
                double dot = 0;
                for (int i = 0; i < a; i++)
                    dot += q[t][i] * v[i];
                for (int i = 0; i < a; i++)
                    v[i] -= dot * q[t][i];
            }
            for (int t = 0; t < d; t++) {
                double dot = 0;
                for (int i = 0; i < a; i++)
                    dot += basis[t * a + i] * v[i];
                for (int i = 0; i < a; i++)
                    v[i] -= dot * basis[t * a + i];
            }
        }
        double norm = 0;
        for (int i = 0; i < a; i++)
            norm += v[i] * v[i];
        norm = sqrt(norm);
        if (norm < 0.3) /* nearly inside the span already: try the next unit */
            continue;
        for (int i = 0; i < a; i++)
            basis[d * a + i] = v[i] / norm;
        d++;
    }
    return d;
}

/* The check's view of one call: which shards are in, the d combinations of
   the a present parities' residuals that the e missing data shards do not
   enter (the rows of basis), and the signature an error in each candidate
   shard (a present data or parity shard) leaves in those combinations. */
typedef struct {
    int n_present, e, a, d, n_cand;
    int present_data[CDC_CODE_MAX_N];
    int missing[CDC_CODE_MAX_N];
    int sel[CDC_CODE_MAX_R];                       /* present parities         */
    double basis[CDC_CODE_MAX_R * CDC_CODE_MAX_R]; /* d x a                    */
    double sig[(CDC_CODE_MAX_N + CDC_CODE_MAX_R) * CDC_CODE_MAX_R]; /* n_cand x d */
    int cand_shard[CDC_CODE_MAX_N + CDC_CODE_MAX_R];
    double unit;      /* tolerance per unit of sum |row| * |col| (rounding) */
    double floor_abs; /* tolerance floor of every residual (underflow)      */
} cdc_code_check_plan_t;

static int cdc_code_check_args(const char *fn, const cdc_code_t *code, int64_t rows,
                               int64_t cols, const float *const *shards, int64_t ld,
                               uint64_t present, const cdc_shard_scale_t *scales, int64_t k,
                               const int *bad_shard)
{
    if (!code)
        return cdc__fail(CDC_EINVAL, "%s: code is NULL", fn);
    int status = cdc__code_check_shape(fn, rows, cols, ld, "ld");
    if (status != CDC_OK)
        return status;
    if (!shards || !scales || !bad_shard)
        return cdc__fail(CDC_EINVAL, "%s: %s is NULL", fn,
                         !shards ? "shards" : !scales ? "scales" : "bad_shard");
    if (k < 1)
        return cdc__fail(CDC_EDIM, "%s: k = %lld < 1", fn, (long long) k);
    const int total = code->n + code->r;
    if (total < 64 && (present >> total) != 0)
        return cdc__fail(CDC_EINVAL, "%s: present = 0x%llx names shards beyond n + r = %d",
                         fn, (unsigned long long) present, total);
    for (int s = 0; s < total; s++)
        if (present >> s & 1) {
            if (!shards[s])
                return cdc__fail(CDC_EINVAL, "%s: shards[%d] is NULL", fn, s);
            if ((rows > 0 && !scales[s].row) || (cols > 0 && !scales[s].col))
                return cdc__fail(CDC_EINVAL, "%s: scales[%d] has a NULL row or col", fn, s);
        }
    return CDC_OK;
}

/* Sort the shards into present data, missing data and present parities. */
static void cdc_code_check_sort(const cdc_code_t *code, uint64_t present,
                                cdc_code_check_plan_t *plan)
{
    plan->n_present = plan->e = plan->a = 0;
    for (int i = 0; i < code->n; i++) {
        if (present >> i & 1)
            plan->present_data[plan->n_present++] = i;
        else
            plan->missing[plan->e++] = i;
    }
    for (int j = 0; j < code->r; j++)
        if (present >> (code->n + j) & 1)
            plan->sel[plan->a++] = j;
}

/* basis (d x a): combinations of the parity residuals that the missing shards
   do not enter. With every data shard present it is the identity; d = 0 when
   the missing shards use up the redundancy. */
static void cdc_code_check_basis(const cdc_code_t *code, cdc_code_check_plan_t *plan)
{
    const int a = plan->a, e = plan->e;
    plan->d = a - e;
    if (e == 0) {
        for (int i = 0; i < a * a; i++)
            plan->basis[i] = i % (a + 1) == 0 ? 1.0 : 0.0;
        return;
    }
    double b[CDC_CODE_MAX_R * CDC_CODE_MAX_R];
    for (int j = 0; j < a; j++)
        for (int t = 0; t < e; t++)
            b[j * e + t] = code->g[plan->sel[j] * code->n + plan->missing[t]];
    plan->d = cdc_code_left_null(b, a, e, plan->basis);
}

/* Signature of an error in each candidate shard: data i moves residual j by
   g_ji, parity j only itself; projected by the basis. */
static void cdc_code_check_signatures(const cdc_code_t *code, cdc_code_check_plan_t *plan)
{
    const int n = code->n, a = plan->a, d = plan->d, n_present = plan->n_present;
    plan->n_cand = n_present + a;
    for (int c = 0; c < plan->n_cand; c++) {
        for (int t = 0; t < d; t++) {
            double v = 0;
            for (int j = 0; j < a; j++) {
                double col = c < n_present ? code->g[plan->sel[j] * n + plan->present_data[c]]
                                           : (c - n_present == j ? 1.0 : 0.0);
                v += plan->basis[t * a + j] * col;
            }
            plan->sig[c * d + t] = v;
        }
        plan->cand_shard[c] =
            c < n_present ? plan->present_data[c] : n + plan->sel[c - n_present];
    }
}

/* Element (p, q) at offset off: its parity residuals projected by the basis
   into y (d entries) with their tolerances ty. 1 when some entry exceeds its
   tolerance (NaN counts as bad). */
static inline int cdc_code_check_element(const cdc_code_t *code,
                                         const cdc_code_check_plan_t *plan,
                                         const float *const *shards,
                                         const cdc_shard_scale_t *scales, int64_t p, int64_t q,
                                         int64_t off, double *y, double *ty)
{
    const int n = code->n, a = plan->a;
    double res[CDC_CODE_MAX_R], tol[CDC_CODE_MAX_R];
    for (int j = 0; j < a; j++) {
        const int s = n + plan->sel[j];
        res[j] = shards[s][off];
        tol[j] = scales[s].row[p] * scales[s].col[q];
    }
    for (int t = 0; t < plan->n_present; t++) {
        const int i = plan->present_data[t];
        const double x = shards[i][off];
        const double sc = scales[i].row[p] * scales[i].col[q];
        for (int j = 0; j < a; j++) {
            const double g = code->g[plan->sel[j] * n + i];
            res[j] -= g * x;
            tol[j] += fabs(g) * sc;
        }
    }
    int bad = 0;
    for (int t = 0; t < plan->d; t++) {
        y[t] = 0;
        ty[t] = plan->floor_abs;
        for (int j = 0; j < a; j++) {
            y[t] += plan->basis[t * a + j] * res[j];
            ty[t] += fabs(plan->basis[t * a + j]) * plan->unit * tol[j];
        }
        bad |= !(fabs(y[t]) <= ty[t]);
    }
    return bad;
}

/* A flagged element (d >= 2): least-squares fit of its scaled residual y
   along each candidate's signature; score[c] gathers the misfit of
   candidate c, *energy the residual itself. */
static inline void cdc_code_check_score(const cdc_code_check_plan_t *plan, double *y,
                                        const double *ty, double *score, double *energy)
{
    const int d = plan->d;
    double yy = 0;
    for (int t = 0; t < d; t++) {
        y[t] /= ty[t];
        yy += y[t] * y[t];
    }
    if (!isfinite(yy))
        return;
    *energy += yy;
    for (int c = 0; c < plan->n_cand; c++) {
        double vy = 0, vv = 0;
        for (int t = 0; t < d; t++) {
            const double v = plan->sig[c * d + t] / ty[t];
            vy += v * y[t];
            vv += v * v;
        }
        score[c] += yy - vy * vy / vv;
    }
}

/* The shard to blame, or -1: located only when one candidate explains nearly
   all of the residual and no other comes close (else two shards are bad, or
   they look alike). */
static int cdc_code_check_locate(const cdc_code_check_plan_t *plan, const double *score,
                                 double energy)
{
    int best = 0;
    for (int c = 1; c < plan->n_cand; c++)
        if (score[c] < score[best])
            best = c;
    double second = INFINITY;
    for (int c = 0; c < plan->n_cand; c++)
        if (c != best)
            second = fmin(second, score[c]);
    if (score[best] <= 0.1 * energy && second >= 4.0 * score[best])
        return plan->cand_shard[best];
    return -1;
}

int cdc__code_check(const cdc_code_t *code, int64_t rows, int64_t cols,
                    const float *const *shards, int64_t ld, uint64_t present,
                    const cdc_shard_scale_t *scales, int64_t k, int *bad_shard)
{
    static const char fn[] = "cdc__code_check";
    int status = cdc_code_check_args(fn, code, rows, cols, shards, ld, present, scales, k,
                                     bad_shard);
    if (status != CDC_OK)
        return status;
    cdc_code_check_plan_t plan;
    cdc_code_check_sort(code, present, &plan);
    *bad_shard = -1;
    if (plan.a <= plan.e)
        return CDC_OK; /* no redundancy left to check */
    cdc_code_check_basis(code, &plan);
    if (plan.d == 0)
        return CDC_OK;
    cdc_code_check_signatures(code, &plan);
    plan.unit = FLT_EPSILON * (CDC_CODE_CHECK_C * sqrt((double) k) +
                               (double) (k < CDC_CODE_CHECK_SMALL_K ? k
                                                                    : CDC_CODE_CHECK_SMALL_K));
    plan.floor_abs = (double) FLT_MIN * (double) k * (double) (code->n + 1);

    double score[CDC_CODE_MAX_N + CDC_CODE_MAX_R] = {0};
    double energy = 0.0;
    int64_t flagged = 0;
    for (int64_t p = 0; p < rows; p++)
        for (int64_t q = 0; q < cols; q++) {
            double y[CDC_CODE_MAX_R], ty[CDC_CODE_MAX_R];
            if (!cdc_code_check_element(code, &plan, shards, scales, p, q, p * ld + q, y, ty))
                continue;
            flagged++;
            if (plan.d >= 2)
                cdc_code_check_score(&plan, y, ty, score, &energy);
        }
    if (flagged == 0)
        return CDC_OK;
    if (plan.d >= 2 && energy > 0)
        *bad_shard = cdc_code_check_locate(&plan, score, energy);
    return cdc__fail(CDC_ECORRUPT, "%s: %lld elements fail the parity check; bad shard %d",
                     fn, (long long) flagged, *bad_shard);
}
