/* code.c - the shared linear algebra of every scheme: encode, decode, parity check.
 *
 * The problem: n workers each multiply one row block X_i of an operand, r more
 * multiply parity blocks P_j = sum_i G[j][i] * X_i, and some results never
 * come back or come back wrong. Because every shard's product is linear in
 * its block, the results obey the same equations as the blocks, so:
 *
 * - decode: with e data results missing and at least e parity results in,
 *   the residuals parity_j - sum over present data of G[j][i] * x_i equal
 *   G[sel, missing] times the missing results. Of the present parities we
 *   pick the e whose square submatrix is best conditioned, invert it once
 *   (e <= 3, in double) and stream the blocks through it chunk by chunk;
 * - check (code_check.c): with more parity results in than missing data
 *   results, the residuals must vanish up to rounding.
 *
 * The data structure is just the generator: G, r x n row-major, in double,
 * filled once by the scheme's ops and never changed, so one code serves any
 * number of threads. Blocks are float and every sum is accumulated in
 * double, so the only error the check must allow for is the rounding of the
 * workers' float32 dot products of length k. */
#include "code_internal.h"

#include "error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Elements per streamed chunk: r double accumulators of this length (12 KiB)
   stay in L1 while every shard's chunk passes through once. */
#define CDC_CODE_CHUNK 512

static const cdc_code_ops_t *const cdc_code_registry[] = {
    &cdc_code_sum_ops,      &cdc_code_circle_ops,   &cdc_code_rotation_ops,
    &cdc_code_chebyshev_ops, &cdc_code_gaussian_ops,
};
#define CDC_CODE_REGISTRY_COUNT (sizeof cdc_code_registry / sizeof cdc_code_registry[0])

const cdc_code_ops_t *cdc__code_default_ops(int r)
{
    /* circle has the smallest worst condition and decode error of the
       structured schemes at every measured (n, r >= 2); see docs/codes.md. */
    return r <= 1 ? &cdc_code_sum_ops : &cdc_code_circle_ops;
}

const cdc_code_ops_t *cdc__code_find_ops(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < CDC_CODE_REGISTRY_COUNT; i++)
        if (strcmp(cdc_code_registry[i]->name, name) == 0)
            return cdc_code_registry[i];
    return NULL;
}

const cdc_code_ops_t *const *cdc__code_all_ops(size_t *count)
{
    if (count)
        *count = CDC_CODE_REGISTRY_COUNT;
    return cdc_code_registry;
}

int cdc__code_new(const cdc_code_ops_t *ops, int n, int r, cdc_code_t **code_p)
{
    if (!code_p)
        return cdc__fail(CDC_EINVAL, "cdc__code_new: code_p is NULL");
    if (n < 1 || n > CDC_CODE_MAX_N)
        return cdc__fail(CDC_EINVAL, "cdc__code_new: n = %d outside [1, %d]", n,
                         CDC_CODE_MAX_N);
    if (r < 0 || r > CDC_CODE_MAX_R || r > n)
        return cdc__fail(CDC_EINVAL, "cdc__code_new: r = %d outside [0, min(%d, n = %d)]",
                         r, CDC_CODE_MAX_R, n);
    if (n + r > CDC_CODE_MAX_SHARDS)
        return cdc__fail(CDC_EINVAL, "cdc__code_new: n + r = %d > %d shards", n + r,
                         CDC_CODE_MAX_SHARDS);
    if (!ops)
        ops = cdc__code_default_ops(r);
    if (!ops->name || !ops->generator)
        return cdc__fail(CDC_EINVAL, "cdc__code_new: ops has no name or generator");
    if (r > ops->max_parity)
        return cdc__fail(CDC_EINVAL, "cdc__code_new: r = %d > max_parity %d of scheme \"%s\"",
                         r, ops->max_parity, ops->name);

    cdc_code_t *code = calloc(1, sizeof *code);
    if (!code)
        return cdc__fail(CDC_ENOMEM, "cdc__code_new: %zu bytes", sizeof *code);
    code->ops = ops;
    code->n = n;
    code->r = r;
    if (r > 0) {
        int status = ops->generator(n, r, code->g);
        if (status != CDC_OK) {
            free(code);
            return cdc__fail(status,
                             "cdc__code_new: scheme \"%s\" has no generator for n = %d, r = %d",
                             ops->name, n, r);
        }
        for (int i = 0; i < r * n; i++)
            if (!isfinite(code->g[i]) || code->g[i] == 0.0) {
                const double bad = code->g[i];
                free(code);
                return cdc__fail(CDC_EINVAL, "cdc__code_new: scheme \"%s\" gave g[%d][%d] = %g",
                                 ops->name, i / n, i % n, bad);
            }
        code->ones_row0 = 1;
        for (int i = 0; i < n; i++)
            code->ones_row0 &= code->g[i] == 1.0;
    }
    *code_p = code;
    return CDC_OK;
}

void cdc__code_destroy(cdc_code_t **code_p)
{
    if (!code_p || !*code_p)
        return;
    free(*code_p);
    *code_p = NULL;
}

int cdc__code_n(const cdc_code_t *code)
{
    return code ? code->n : 0;
}

int cdc__code_r(const cdc_code_t *code)
{
    return code ? code->r : 0;
}

const char *cdc__code_name(const cdc_code_t *code)
{
    return code ? code->ops->name : NULL;
}

const double *cdc__code_generator(const cdc_code_t *code)
{
    return code ? code->g : NULL;
}

/* ---- small dense linear algebra (k <= CDC_CODE_MAX_R) ---------------------- */

/* 2-norm condition number of a k x k row-major matrix by one-sided Jacobi:
   rotate column pairs until orthogonal; the column norms are then the
   singular values. Infinite when singular. */
static double cdc_code_cond2(const double *a, int k)
{
    double u[CDC_CODE_MAX_R * CDC_CODE_MAX_R];
    memcpy(u, a, sizeof(double) * (size_t) (k * k));
    for (int sweep = 0; sweep < 60; sweep++) {
        int rotated = 0;
        for (int p = 0; p < k; p++)
            for (int q = p + 1; q < k; q++) {
                double alpha = 0, beta = 0, gamma = 0;
                for (int i = 0; i < k; i++) {
                    alpha += u[i * k + p] * u[i * k + p];
                    beta += u[i * k + q] * u[i * k + q];
                    gamma += u[i * k + p] * u[i * k + q];
                }
                if (fabs(gamma) <= 1e-15 * sqrt(alpha * beta))
                    continue;
                rotated = 1;
                double zeta = (beta - alpha) / (2.0 * gamma);
                double t = (zeta >= 0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1.0 + zeta * zeta));
                double c = 1.0 / sqrt(1.0 + t * t), s = c * t;
                for (int i = 0; i < k; i++) {
                    double up = u[i * k + p], uq = u[i * k + q];
                    u[i * k + p] = c * up - s * uq;
                    u[i * k + q] = s * up + c * uq;
                }
            }
        if (!rotated)
            break;
    }
    double smax = 0.0, smin = INFINITY;
    for (int j = 0; j < k; j++) {
        double norm = 0.0;
        for (int i = 0; i < k; i++)
            norm += u[i * k + j] * u[i * k + j];
        norm = sqrt(norm);
        smax = fmax(smax, norm);
        smin = fmin(smin, norm);
    }
    return smin > 0.0 ? smax / smin : INFINITY;
}

/* Inverse of a k x k row-major matrix through LU with partial pivoting.
   Returns 0, or -1 when a pivot vanishes. */
static int cdc_code_invert(const double *a, int k, double *inv)
{
    double lu[CDC_CODE_MAX_R * CDC_CODE_MAX_R];
    int piv[CDC_CODE_MAX_R];
    memcpy(lu, a, sizeof(double) * (size_t) (k * k));
    for (int c = 0; c < k; c++) {
        int best = c;
        for (int i = c + 1; i < k; i++)
            if (fabs(lu[i * k + c]) > fabs(lu[best * k + c]))
                best = i;
        piv[c] = best;
        if (lu[best * k + c] == 0.0)
            return -1;
        if (best != c)
            for (int j = 0; j < k; j++) {
                double t = lu[c * k + j];
                lu[c * k + j] = lu[best * k + j];
                lu[best * k + j] = t;
            }
        for (int i = c + 1; i < k; i++) {
            lu[i * k + c] /= lu[c * k + c];
            for (int j = c + 1; j < k; j++)
                lu[i * k + j] -= lu[i * k + c] * lu[c * k + j];
        }
    }
    /* Solve for each column of the identity, permuted as the rows were. */
    for (int col = 0; col < k; col++) {
        double x[CDC_CODE_MAX_R];
        for (int i = 0; i < k; i++)
            x[i] = i == col ? 1.0 : 0.0;
        for (int c = 0; c < k; c++) {
            double t = x[c];
            x[c] = x[piv[c]];
            x[piv[c]] = t;
        }
        for (int i = 0; i < k; i++)
            for (int j = 0; j < i; j++)
                x[i] -= lu[i * k + j] * x[j];
        for (int i = k - 1; i >= 0; i--) {
            for (int j = i + 1; j < k; j++)
                x[i] -= lu[i * k + j] * x[j];
            x[i] /= lu[i * k + i];
        }
        for (int i = 0; i < k; i++)
            inv[i * k + col] = x[i];
    }
    return 0;
}

/* G[rows_sel, cols_sel] as a k x k row-major matrix. */
static void cdc_code_submatrix(const cdc_code_t *code, const int *rows_sel,
                               const int *cols_sel, int k, double *sub)
{
    for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++)
            sub[i * k + j] = code->g[rows_sel[i] * code->n + cols_sel[j]];
}

/* Next k-subset of {0..m-1} in lexicographic order; 0 when exhausted. */
static int cdc_code_next_subset(int *idx, int k, int m)
{
    int i = k - 1;
    while (i >= 0 && idx[i] == m - k + i)
        i--;
    if (i < 0)
        return 0;
    idx[i]++;
    for (int j = i + 1; j < k; j++)
        idx[j] = idx[j - 1] + 1;
    return 1;
}

double cdc__code_worst_condition(const cdc_code_t *code)
{
    if (!code)
        return NAN;
    double worst = code->r > 0 ? 1.0 : 0.0;
    for (int k = 1; k <= code->r; k++) {
        int rows_sel[CDC_CODE_MAX_R], cols_sel[CDC_CODE_MAX_R];
        for (int i = 0; i < k; i++)
            rows_sel[i] = i;
        do {
            for (int i = 0; i < k; i++)
                cols_sel[i] = i;
            do {
                double sub[CDC_CODE_MAX_R * CDC_CODE_MAX_R];
                cdc_code_submatrix(code, rows_sel, cols_sel, k, sub);
                worst = fmax(worst, cdc_code_cond2(sub, k));
            } while (cdc_code_next_subset(cols_sel, k, code->n));
        } while (cdc_code_next_subset(rows_sel, k, code->r));
    }
    return worst;
}

/* ---- argument checks shared by encode, decode and check -------------------- */

int cdc__code_check_shape(const char *fn, int64_t rows, int64_t cols, int64_t ld,
                          const char *ld_name)
{
    if (rows < 0 || cols < 0)
        return cdc__fail(CDC_EDIM, "%s: rows = %lld, cols = %lld must be >= 0", fn,
                         (long long) rows, (long long) cols);
    if (ld < (cols > 1 ? cols : 1))
        return cdc__fail(CDC_ELD, "%s: %s = %lld < max(1, cols = %lld)", fn, ld_name,
                         (long long) ld, (long long) cols);
    if (rows > 0 && ld > INT64_MAX / rows)
        return cdc__fail(CDC_EDIM, "%s: rows = %lld x %s = %lld overflows", fn,
                         (long long) rows, ld_name, (long long) ld);
    return CDC_OK;
}

/* Walk a rows x cols block (leading dimension ld) as runs of contiguous
   elements: one run when the rows are packed, else one per row. */
typedef struct {
    int64_t runs;
    int64_t run_len;
    int64_t stride;
} cdc_code_walk_t;

static cdc_code_walk_t cdc_code_walk(int64_t rows, int64_t cols, int64_t ld)
{
    cdc_code_walk_t w;
    if (ld == cols || rows == 1) {
        w.runs = rows > 0 && cols > 0 ? 1 : 0;
        w.run_len = rows * cols;
        w.stride = 0;
    } else {
        w.runs = cols > 0 ? rows : 0;
        w.run_len = cols;
        w.stride = ld;
    }
    return w;
}

/* ---- encode ------------------------------------------------------------------ */

/* The streaming kernels are the only hot loops of the module: GCC at -O2
   (RelWithDebInfo) leaves their float -> double loops scalar, at about a third
   of the speed. Ask for -O3 here only; other compilers ignore the pragma. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("O3")
#endif

/* One chunk of m elements of every block: parity = G * data in double. Called
   with the constant CDC_CODE_CHUNK for full chunks so the compiler sees a fixed
   trip count and vectorises at -O2. */
static inline void cdc_code_encode_chunk(const cdc_code_t *code, const float *const *data,
                                         float *const *parity, int64_t off_d, int64_t off_p,
                                         int64_t m)
{
    const int n = code->n, r = code->r;
    double acc[CDC_CODE_MAX_R][CDC_CODE_CHUNK];
    for (int i = 0; i < n; i++) {
        const float *x = data[i] + off_d;
        const double g0 = code->g[i];
        if (r == 1) {
            if (i == 0)
                for (int64_t c = 0; c < m; c++)
                    acc[0][c] = g0 * x[c];
            else
                for (int64_t c = 0; c < m; c++)
                    acc[0][c] += g0 * x[c];
        } else if (r == 2) {
            const double g1 = code->g[n + i];
            if (i == 0)
                for (int64_t c = 0; c < m; c++) {
                    const double v = x[c];
                    acc[0][c] = g0 * v;
                    acc[1][c] = g1 * v;
                }
            else
                for (int64_t c = 0; c < m; c++) {
                    const double v = x[c];
                    acc[0][c] += g0 * v;
                    acc[1][c] += g1 * v;
                }
        } else {
            const double g1 = code->g[n + i], g2 = code->g[2 * n + i];
            if (i == 0)
                for (int64_t c = 0; c < m; c++) {
                    const double v = x[c];
                    acc[0][c] = g0 * v;
                    acc[1][c] = g1 * v;
                    acc[2][c] = g2 * v;
                }
            else
                for (int64_t c = 0; c < m; c++) {
                    const double v = x[c];
                    acc[0][c] += g0 * v;
                    acc[1][c] += g1 * v;
                    acc[2][c] += g2 * v;
                }
        }
    }
    for (int j = 0; j < r; j++) {
        float *out = parity[j] + off_p;
        for (int64_t c = 0; c < m; c++)
            out[c] = (float) acc[j][c];
    }
}

int cdc__code_encode(const cdc_code_t *code, int64_t rows, int64_t cols,
                     const float *const *data, int64_t ld_data,
                     float *const *parity, int64_t ld_parity)
{
    static const char fn[] = "cdc__code_encode";
    if (!code)
        return cdc__fail(CDC_EINVAL, "%s: code is NULL", fn);
    int status = cdc__code_check_shape(fn, rows, cols, ld_data, "ld_data");
    if (status == CDC_OK)
        status = cdc__code_check_shape(fn, rows, cols, ld_parity, "ld_parity");
    if (status != CDC_OK)
        return status;
    const int n = code->n, r = code->r;
    if (r == 0)
        return CDC_OK;
    if (!data || !parity)
        return cdc__fail(CDC_EINVAL, "%s: %s is NULL", fn, data ? "parity" : "data");
    for (int i = 0; i < n; i++)
        if (!data[i])
            return cdc__fail(CDC_EINVAL, "%s: data[%d] is NULL", fn, i);
    for (int j = 0; j < r; j++)
        if (!parity[j])
            return cdc__fail(CDC_EINVAL, "%s: parity[%d] is NULL", fn, j);

    /* Separate walks: data and parity may have different leading dimensions. */
    for (int64_t p = 0; p < (cols > 0 ? rows : 0);) {
        int packed = ld_data == cols && ld_parity == cols;
        int64_t len = packed ? rows * cols : cols;
        const int64_t off_d = p * ld_data, off_p = p * ld_parity;
        for (int64_t c0 = 0; c0 < len; c0 += CDC_CODE_CHUNK) {
            if (len - c0 >= CDC_CODE_CHUNK)
                cdc_code_encode_chunk(code, data, parity, off_d + c0, off_p + c0,
                                      CDC_CODE_CHUNK);
            else
                cdc_code_encode_chunk(code, data, parity, off_d + c0, off_p + c0, len - c0);
        }
        p += packed ? rows : 1;
    }
    return CDC_OK;
}

/* ---- decode ------------------------------------------------------------------ */

/* Rebuild e missing data shards from e parities: residual_j = parity_j -
   sum over present data of g_ji x_i (double), then missing = W * residual. */
/* Rebuild e missing data shards from e parities over one chunk of m elements:
   residual_j = parity_j - sum over present data of g_ji x_i (double), then
   missing = W * residual. Full chunks pass the constant CDC_CODE_CHUNK so the
   loops have a fixed trip count and vectorise at -O2. */
static inline void cdc_code_decode_chunk(const cdc_code_t *code, float *const *shards,
                                         int64_t off, int64_t m, const int *present_data,
                                         int n_present, const int *sel, const int *missing,
                                         int e, const double *w)
{
    const int n = code->n;
    double res[CDC_CODE_MAX_R][CDC_CODE_CHUNK];
    for (int j = 0; j < e; j++) {
        const float *pj = shards[n + sel[j]] + off;
        for (int64_t c = 0; c < m; c++)
            res[j][c] = pj[c];
    }
    if (e == 1 && code->ones_row0 && sel[0] == 0) {
        /* The plain sum: no multiplies, no matrix. */
        for (int t = 0; t < n_present; t++) {
            const float *x = shards[present_data[t]] + off;
            for (int64_t c = 0; c < m; c++)
                res[0][c] -= x[c];
        }
        float *out = shards[missing[0]] + off;
        for (int64_t c = 0; c < m; c++)
            out[c] = (float) res[0][c];
        return;
    }
    for (int t = 0; t < n_present; t++) {
        const int i = present_data[t];
        const float *x = shards[i] + off;
        const double g0 = code->g[sel[0] * n + i];
        if (e == 1) {
            for (int64_t c = 0; c < m; c++)
                res[0][c] -= g0 * x[c];
        } else if (e == 2) {
            const double g1 = code->g[sel[1] * n + i];
            for (int64_t c = 0; c < m; c++) {
                const double v = x[c];
                res[0][c] -= g0 * v;
                res[1][c] -= g1 * v;
            }
        } else {
            const double g1 = code->g[sel[1] * n + i];
            const double g2 = code->g[sel[2] * n + i];
            for (int64_t c = 0; c < m; c++) {
                const double v = x[c];
                res[0][c] -= g0 * v;
                res[1][c] -= g1 * v;
                res[2][c] -= g2 * v;
            }
        }
    }
    for (int a = 0; a < e; a++) {
        float *out = shards[missing[a]] + off;
        const double w0 = w[a * e], w1 = e > 1 ? w[a * e + 1] : 0.0,
                     w2 = e > 2 ? w[a * e + 2] : 0.0;
        if (e == 1)
            for (int64_t c = 0; c < m; c++)
                out[c] = (float) (w0 * res[0][c]);
        else if (e == 2)
            for (int64_t c = 0; c < m; c++)
                out[c] = (float) (w0 * res[0][c] + w1 * res[1][c]);
        else
            for (int64_t c = 0; c < m; c++)
                out[c] = (float) (w0 * res[0][c] + w1 * res[1][c] + w2 * res[2][c]);
    }
}

static void cdc_code_decode_run(const cdc_code_t *code, float *const *shards, int64_t off,
                                int64_t len, const int *present_data, int n_present,
                                const int *sel, const int *missing, int e, const double *w)
{
    for (int64_t c0 = 0; c0 < len; c0 += CDC_CODE_CHUNK) {
        if (len - c0 >= CDC_CODE_CHUNK)
            cdc_code_decode_chunk(code, shards, off + c0, CDC_CODE_CHUNK, present_data,
                                  n_present, sel, missing, e, w);
        else
            cdc_code_decode_chunk(code, shards, off + c0, len - c0, present_data, n_present,
                                  sel, missing, e, w);
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* Error amplification of decoding with parity rows sel: ||G[sel, M]^-1||_2 times
   the size of those parity rows, used to break ties between equal conditions. */
static double cdc_code_amplification(const cdc_code_t *code, const int *sel, int e,
                                     const double *inv)
{
    double frob = 0.0, rows = 0.0;
    for (int i = 0; i < e * e; i++)
        frob += inv[i] * inv[i];
    for (int j = 0; j < e; j++)
        for (int i = 0; i < code->n; i++)
            rows += code->g[sel[j] * code->n + i] * code->g[sel[j] * code->n + i];
    return sqrt(frob * rows);
}

/* Choose e of the present parities whose submatrix G[sel, missing] has the
   smallest condition number, and its inverse. -1 when every choice is singular. */
static int cdc_code_choose_parities(const cdc_code_t *code, const int *avail, int n_avail,
                                    const int *missing, int e, int *sel, double *w)
{
    int idx[CDC_CODE_MAX_R];
    double best_cond = INFINITY, best_amp = INFINITY;
    int found = -1;
    for (int i = 0; i < e; i++)
        idx[i] = i;
    do {
        int cand[CDC_CODE_MAX_R];
        double sub[CDC_CODE_MAX_R * CDC_CODE_MAX_R], inv[CDC_CODE_MAX_R * CDC_CODE_MAX_R];
        for (int i = 0; i < e; i++)
            cand[i] = avail[idx[i]];
        cdc_code_submatrix(code, cand, missing, e, sub);
        double cond = e == 1 ? 1.0 : cdc_code_cond2(sub, e);
        if (!isfinite(cond) || cdc_code_invert(sub, e, inv) != 0)
            continue;
        double amp = cdc_code_amplification(code, cand, e, inv);
        /* Conditions equal to rounding (always so for e = 1) fall to the
           amplification, which prefers the all-ones row. */
        int better = cond < best_cond * (1.0 - 1e-9) ||
                     (cond <= best_cond * (1.0 + 1e-9) && amp < best_amp);
        if (better) {
            best_cond = cond;
            best_amp = amp;
            memcpy(sel, cand, sizeof(int) * (size_t) e);
            memcpy(w, inv, sizeof(double) * (size_t) (e * e));
            found = 0;
        }
    } while (cdc_code_next_subset(idx, e, n_avail));
    return found;
}

int cdc__code_decode(const cdc_code_t *code, int64_t rows, int64_t cols,
                     float *const *shards, int64_t ld, uint64_t present)
{
    static const char fn[] = "cdc__code_decode";
    if (!code)
        return cdc__fail(CDC_EINVAL, "%s: code is NULL", fn);
    int status = cdc__code_check_shape(fn, rows, cols, ld, "ld");
    if (status != CDC_OK)
        return status;
    if (!shards)
        return cdc__fail(CDC_EINVAL, "%s: shards is NULL", fn);
    const int n = code->n, r = code->r, total = n + r;
    if (total < 64 && (present >> total) != 0)
        return cdc__fail(CDC_EINVAL, "%s: present = 0x%llx names shards beyond n + r = %d",
                         fn, (unsigned long long) present, total);

    int missing[CDC_CODE_MAX_N], present_data[CDC_CODE_MAX_N], avail[CDC_CODE_MAX_R];
    int e = 0, n_present = 0, n_avail = 0;
    for (int i = 0; i < n; i++) {
        if (present >> i & 1)
            present_data[n_present++] = i;
        else
            missing[e++] = i;
        if (!shards[i])
            return cdc__fail(CDC_EINVAL, "%s: shards[%d] is NULL", fn, i);
    }
    for (int j = 0; j < r; j++)
        if (present >> (n + j) & 1) {
            if (!shards[n + j])
                return cdc__fail(CDC_EINVAL, "%s: shards[%d] (parity %d) is NULL", fn,
                                 n + j, j);
            avail[n_avail++] = j;
        }
    if (e == 0)
        return CDC_OK;
    if (e > n_avail)
        return cdc__fail(CDC_EDECODE, "%s: %d data shards missing, %d parities present",
                         fn, e, n_avail);

    int sel[CDC_CODE_MAX_R];
    double w[CDC_CODE_MAX_R * CDC_CODE_MAX_R];
    if (cdc_code_choose_parities(code, avail, n_avail, missing, e, sel, w) != 0)
        return cdc__fail(CDC_EDECODE, "%s: every %d x %d parity submatrix is singular",
                         fn, e, e);

    cdc_code_walk_t walk = cdc_code_walk(rows, cols, ld);
    for (int64_t s = 0; s < walk.runs; s++)
        cdc_code_decode_run(code, shards, s * walk.stride, walk.run_len, present_data,
                            n_present, sel, missing, e, w);
    return CDC_OK;
}

double cdc__code_decode_amplification(const cdc_code_t *code, uint64_t present)
{
    const int n = code->n, r = code->r, total = n + r;
    if (total < 64 && (present >> total) != 0)
        return INFINITY;
    int missing[CDC_CODE_MAX_N], avail[CDC_CODE_MAX_R];
    int e = 0, n_avail = 0;
    for (int i = 0; i < n; i++)
        if (!(present >> i & 1))
            missing[e++] = i;
    for (int j = 0; j < r; j++)
        if (present >> (n + j) & 1)
            avail[n_avail++] = j;
    if (e == 0)
        return 0.0;
    int sel[CDC_CODE_MAX_R];
    double w[CDC_CODE_MAX_R * CDC_CODE_MAX_R];
    if (e > n_avail || cdc_code_choose_parities(code, avail, n_avail, missing, e, sel, w) != 0)
        return INFINITY;
    return cdc_code_amplification(code, sel, e, w);
}
