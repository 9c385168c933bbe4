/* blas_client.c - an inference-style BLAS client that knows nothing of cdcgemm.
 *
 * Compiled against <cblas.h> and linked against OpenBLAS only. Runs conv
 * layers (im2col + GEMM) and FC layers, each in row-major (cblas_sgemm) and
 * column-major form (cblas_sgemm ColMajor, Fortran sgemm_), reusing every
 * layer's weights across iterations, and checks each result against its own
 * double-precision reference. Prints one line:
 *   blas_client: calls=N weights=W max_rel_error=E result=PASS|FAIL
 * where W is the number of weight matrices (each reused across calls). */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sgemm_(const char *transa, const char *transb, const int *m, const int *n,
            const int *k, const float *alpha, const float *a, const int *lda,
            const float *b, const int *ldb, const float *beta, float *c, const int *ldc);

typedef struct {
    int cin, h, w, cout, kernel, pad;
} conv_t;

static unsigned long long rng_state = 0x2545F4914F6CDD1Dull;

static float rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (float) ((double) ((rng_state * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0 *
                    2.0 - 1.0);
}

static void *xalloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "blas_client: out of memory\n");
        exit(2);
    }
    return p;
}

/* col (cin*k*k x oh*ow, row-major) of one image, stride 1, zero padding. */
static void im2col(const conv_t *c, const float *x, float *col)
{
    int oh = c->h + 2 * c->pad - c->kernel + 1, ow = c->w + 2 * c->pad - c->kernel + 1;
    for (int ch = 0; ch < c->cin; ch++)
        for (int ki = 0; ki < c->kernel; ki++)
            for (int kj = 0; kj < c->kernel; kj++) {
                float *row = col + ((size_t) (ch * c->kernel + ki) * c->kernel + kj) *
                                       (size_t) (oh * ow);
                for (int i = 0; i < oh; i++)
                    for (int j = 0; j < ow; j++) {
                        int y = i + ki - c->pad, xx = j + kj - c->pad;
                        row[i * ow + j] = (y >= 0 && y < c->h && xx >= 0 && xx < c->w)
                                              ? x[((size_t) ch * c->h + y) * c->w + xx]
                                              : 0.0f;
                    }
            }
}

static double max_error;
static int failures, calls;

/* ||got - alpha·want - beta·prev|| / ||alpha·want + beta·prev|| over m x n row-major. */
static void check(const char *what, const float *got, const double *want, const float *prev,
                  double alpha, double beta, int m, int n)
{
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < (size_t) m * (size_t) n; i++) {
        double ref = alpha * want[i] + (prev ? beta * prev[i] : 0.0);
        diff += (got[i] - ref) * (got[i] - ref);
        norm += ref * ref;
    }
    double rel = norm > 0 ? sqrt(diff / norm) : sqrt(diff);
    if (!(rel <= 1e-5)) {
        fprintf(stderr, "blas_client: %s: relative error %.3g\n", what, rel);
        failures++;
    }
    if (!(rel <= max_error))
        max_error = rel != rel ? INFINITY : rel;
    calls++;
}

/* want (m x n) = a (m x k) · b (k x n), row-major, in double. */
static void reference(int m, int n, int k, const float *a, const float *b, double *want)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int p = 0; p < k; p++)
                s += (double) a[(size_t) i * k + p] * b[(size_t) p * n + j];
            want[(size_t) i * n + j] = s;
        }
}

int main(void)
{
    const conv_t convs[] = {{3, 32, 32, 16, 3, 1}, {16, 16, 16, 32, 3, 1}, {8, 12, 12, 24, 5, 2}};
    const int fcs[][3] = {{512, 256, 4}, {256, 10, 4}, {300, 200, 1}}; /* in, out, batch */
    const int iterations = 4;
    int nconv = sizeof convs / sizeof *convs, nfc = sizeof fcs / sizeof *fcs;
    float *weights[8];
    for (int l = 0; l < nconv; l++) {
        size_t count = (size_t) convs[l].cout * convs[l].cin * convs[l].kernel * convs[l].kernel;
        weights[l] = xalloc(count * sizeof(float));
        for (size_t i = 0; i < count; i++)
            weights[l][i] = rnd();
    }
    for (int l = 0; l < nfc; l++) {
        size_t count = (size_t) fcs[l][0] * fcs[l][1];
        weights[nconv + l] = xalloc(count * sizeof(float));
        for (size_t i = 0; i < count; i++)
            weights[nconv + l][i] = rnd();
    }
    /* One im2col buffer for every layer, as Caffe-style code keeps it. */
    size_t col_max = 0, out_max = 0;
    for (int l = 0; l < nconv; l++) {
        size_t kk = (size_t) convs[l].cin * convs[l].kernel * convs[l].kernel;
        size_t hw = (size_t) convs[l].h * convs[l].w;
        col_max = kk * hw > col_max ? kk * hw : col_max;
        out_max = (size_t) convs[l].cout * hw > out_max ? (size_t) convs[l].cout * hw : out_max;
    }
    for (int l = 0; l < nfc; l++) {
        size_t x = (size_t) fcs[l][0] * fcs[l][2], y = (size_t) fcs[l][1] * fcs[l][2];
        col_max = x > col_max ? x : col_max;
        out_max = y > out_max ? y : out_max;
    }
    float *col = xalloc(col_max * sizeof(float)), *image = xalloc(col_max * sizeof(float));
    float *out = xalloc(out_max * sizeof(float)), *prev = xalloc(out_max * sizeof(float));
    double *want = xalloc(out_max * sizeof(double));

    for (int it = 0; it < iterations; it++) {
        for (int l = 0; l < nconv; l++) {
            const conv_t *c = &convs[l];
            int kk = c->cin * c->kernel * c->kernel, hw = c->h * c->w;
            for (int i = 0; i < c->cin * hw; i++)
                image[i] = rnd();
            im2col(c, image, col);
            reference(c->cout, hw, kk, weights[l], col, want);
            /* Row-major: out (cout x hw) = W · col. */
            for (int i = 0; i < c->cout * hw; i++)
                out[i] = NAN; /* beta = 0 must overwrite */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c->cout, hw, kk, 1.0f,
                        weights[l], kk, col, hw, 0.0f, out, hw);
            check("conv row-major", out, want, NULL, 1.0, 0.0, c->cout, hw);
            /* Column-major: outᵀ (hw x cout) = colᵀ · Wᵀ, same memory, beta = 1. */
            for (int i = 0; i < c->cout * hw; i++)
                prev[i] = out[i] = rnd();
            cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, hw, c->cout, kk, 0.5f, col,
                        hw, weights[l], kk, 1.0f, out, hw);
            check("conv column-major", out, want, prev, 0.5, 1.0, c->cout, hw);
        }
        for (int l = 0; l < nfc; l++) {
            int in = fcs[l][0], o = fcs[l][1], batch = fcs[l][2];
            const float *w = weights[nconv + l];
            for (int i = 0; i < in * batch; i++)
                col[i] = rnd();
            /* want (batch x o) = x (batch x in) · Wᵀ, W is o x in row-major. */
            for (int b = 0; b < batch; b++)
                for (int j = 0; j < o; j++) {
                    double s = 0.0;
                    for (int p = 0; p < in; p++)
                        s += (double) col[(size_t) b * in + p] * w[(size_t) j * in + p];
                    want[(size_t) b * o + j] = s;
                }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, o, in, 1.0f, col, in,
                        w, in, 0.0f, out, o);
            check("fc row-major", out, want, NULL, 1.0, 0.0, batch, o);
            /* Fortran, column-major: yᵀ (o x batch) = Wᵀ(in x o)ᵀ · xᵀ (in x batch). */
            const float one = 1.0f, zero = 0.0f;
            for (int i = 0; i < o * batch; i++)
                out[i] = NAN;
            sgemm_("T", "N", &o, &batch, &in, &one, w, &in, col, &in, &zero, out, &o);
            /* out is o x batch column-major = batch x o row-major. */
            check("fc fortran", out, want, NULL, 1.0, 0.0, batch, o);
        }
    }
    printf("blas_client: calls=%d weights=%d max_rel_error=%.3g result=%s\n", calls,
           nconv + nfc, max_error, failures ? "FAIL" : "PASS");
    for (int l = 0; l < nconv + nfc; l++)
        free(weights[l]);
    free(col);
    free(image);
    free(out);
    free(prev);
    free(want);
    return failures ? 1 : 0;
}
