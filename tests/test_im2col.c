/* test_im2col.c - im2col geometry and unfolding, conv/FC as GEMM against naive
   double references, and the golden PyTorch cases against those references. */
#include "blas_backend.h"
#include "cdcgemm.h"
#include "golden.h"
#include "im2col.h"
#include "reference.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOLERANCE 1e-5

static cdc_conv_geometry_t geometry_of(const cdc_ref_conv_t *s)
{
    cdc_conv_geometry_t g;
    memset(&g, 0, sizeof g);
    g.channels = s->in_channels;
    g.h = s->h;
    g.w = s->w;
    g.kernel_h = s->kernel_h;
    g.kernel_w = s->kernel_w;
    g.stride_h = s->stride_h;
    g.stride_w = s->stride_w;
    g.pad_h = s->pad_h;
    g.pad_w = s->pad_w;
    g.dilation_h = s->dilation_h;
    g.dilation_w = s->dilation_w;
    return g;
}

/* Conv as the library runs it: per image, im2col then weights (Cout x K) * cols
   (K x N, leading dimension ld), then bias and ReLU. */
static void conv_by_im2col(const cdc_ref_conv_t *s, int64_t ld, const float *x,
                           const float *weights, const float *bias, float *y)
{
    cdc_conv_geometry_t g = geometry_of(s);
    ck_assert_int_eq(cdc__conv_geometry_finish(&g), CDC_OK);
    const int64_t k = s->in_channels * s->kernel_h * s->kernel_w;
    const int64_t n = g.out_h * g.out_w;
    ck_assert_int_ge(ld, n);
    float *cols = cdc_test_alloc(sizeof(float) * (size_t) (k * ld));
    for (int64_t b = 0; b < s->batch; b++) {
        const float *xb = x + (size_t) (b * s->in_channels * s->h * s->w);
        float *yb = y + (size_t) (b * s->out_channels * n);
        cdc__im2col(&g, xb, cols, ld);
        cdc__blas_sgemm_rm(0, 0, s->out_channels, n, k, 1.0f, weights, k, cols, ld, 0.0f,
                           yb, n);
        for (int64_t o = 0; o < s->out_channels; o++) {
            for (int64_t p = 0; p < n; p++) {
                float v = yb[o * n + p] + (bias ? bias[o] : 0.0f);
                yb[o * n + p] = (s->relu && v < 0.0f) ? 0.0f : v;
            }
        }
    }
    free(cols);
}

/* Checks every element of im2col against the index formula, and that the
   columns between n and ld are never written. */
static void check_im2col_elements(const cdc_ref_conv_t *s, int64_t extra_ld,
                                  cdc_test_rng_t *rng)
{
    cdc_conv_geometry_t g = geometry_of(s);
    ck_assert_int_eq(cdc__conv_geometry_finish(&g), CDC_OK);
    const int64_t rows = g.channels * g.kernel_h * g.kernel_w;
    const int64_t n = g.out_h * g.out_w, ld = n + extra_ld;
    const size_t image = (size_t) (g.channels * g.h * g.w);
    float *x = cdc_test_alloc(sizeof(float) * image);
    float *cols = cdc_test_alloc(sizeof(float) * (size_t) (rows * ld));
    cdc_test_fill_uniform(rng, x, image);
    for (int64_t e = 0; e < rows * ld; e++)
        cols[e] = NAN;
    cdc__im2col(&g, x, cols, ld);
    for (int64_t c = 0; c < g.channels; c++)
        for (int64_t i = 0; i < g.kernel_h; i++)
            for (int64_t j = 0; j < g.kernel_w; j++) {
                const int64_t r = (c * g.kernel_h + i) * g.kernel_w + j;
                for (int64_t oh = 0; oh < g.out_h; oh++)
                    for (int64_t ow = 0; ow < g.out_w; ow++) {
                        int64_t ih = oh * g.stride_h - g.pad_h + i * g.dilation_h;
                        int64_t iw = ow * g.stride_w - g.pad_w + j * g.dilation_w;
                        float want = (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w)
                                         ? x[(c * g.h + ih) * g.w + iw]
                                         : 0.0f;
                        float got = cols[r * ld + oh * g.out_w + ow];
                        ck_assert_msg(got == want,
                                      "im2col row %lld (c %lld i %lld j %lld) col (%lld,%lld)"
                                      ": got %g want %g",
                                      (long long) r, (long long) c, (long long) i,
                                      (long long) j, (long long) oh, (long long) ow,
                                      (double) got, (double) want);
                    }
                for (int64_t e = n; e < ld; e++)
                    ck_assert_msg(isnan(cols[r * ld + e]),
                                  "im2col wrote past n into the ld gap (row %lld)",
                                  (long long) r);
            }
    free(x);
    free(cols);
}

/* ---- geometry ---------------------------------------------------------- */

static cdc_conv_geometry_t valid_geometry(void)
{
    cdc_conv_geometry_t g = {.channels = 3, .h = 224, .w = 224, .kernel_h = 11,
                             .kernel_w = 11, .stride_h = 4, .stride_w = 4, .pad_h = 2,
                             .pad_w = 2, .dilation_h = 1, .dilation_w = 1};
    return g;
}

START_TEST(test_geometry_valid)
{
    cdc_conv_geometry_t g = valid_geometry();
    ck_assert_int_eq(cdc__conv_geometry_finish(&g), CDC_OK);
    ck_assert_int_eq(g.out_h, 55); /* AlexNet conv1 */
    ck_assert_int_eq(g.out_w, 55);

    /* Non-square, dilated, strided: (20 + 2 - 3*2 - 1)/3 + 1 = 6, (9 + 6 - 1 - 1)/1 + 1 = 14 */
    cdc_conv_geometry_t h = {.channels = 2, .h = 20, .w = 9, .kernel_h = 3, .kernel_w = 2,
                             .stride_h = 3, .stride_w = 1, .pad_h = 1, .pad_w = 3,
                             .dilation_h = 3, .dilation_w = 1};
    ck_assert_int_eq(cdc__conv_geometry_finish(&h), CDC_OK);
    ck_assert_int_eq(h.out_h, 6);
    ck_assert_int_eq(h.out_w, 14);

    /* Kernel exactly covering the padded input: one output position. */
    cdc_conv_geometry_t k = {.channels = 1, .h = 3, .w = 1, .kernel_h = 3, .kernel_w = 5,
                             .stride_h = 4, .stride_w = 2, .pad_h = 1, .pad_w = 0,
                             .dilation_h = 2, .dilation_w = 1};
    k.w = 5;
    ck_assert_int_eq(cdc__conv_geometry_finish(&k), CDC_OK);
    ck_assert_int_eq(k.out_h, 1);
    ck_assert_int_eq(k.out_w, 1);
}
END_TEST

START_TEST(test_geometry_invalid)
{
    cdc_conv_geometry_t g;
    const int64_t big = INT64_MAX / 2 + 1;
    /* Each entry changes one field of a valid geometry to a value that must fail. */
    struct {
        const char *what;
        size_t offset;
        int64_t value;
    } cases[] = {
        {"channels 0", offsetof(cdc_conv_geometry_t, channels), 0},
        {"channels -3", offsetof(cdc_conv_geometry_t, channels), -3},
        {"h 0", offsetof(cdc_conv_geometry_t, h), 0},
        {"w -1", offsetof(cdc_conv_geometry_t, w), -1},
        {"kernel_h 0", offsetof(cdc_conv_geometry_t, kernel_h), 0},
        {"kernel_w -2", offsetof(cdc_conv_geometry_t, kernel_w), -2},
        {"stride_h 0", offsetof(cdc_conv_geometry_t, stride_h), 0},
        {"stride_w -1", offsetof(cdc_conv_geometry_t, stride_w), -1},
        {"pad_h -1", offsetof(cdc_conv_geometry_t, pad_h), -1},
        {"pad_w -5", offsetof(cdc_conv_geometry_t, pad_w), -5},
        {"dilation_h 0", offsetof(cdc_conv_geometry_t, dilation_h), 0},
        {"dilation_w -1", offsetof(cdc_conv_geometry_t, dilation_w), -1},
        {"kernel larger than padded input", offsetof(cdc_conv_geometry_t, kernel_h), 229},
        {"dilated kernel larger than input", offsetof(cdc_conv_geometry_t, dilation_w), 23},
        {"h + 2 pad overflows", offsetof(cdc_conv_geometry_t, pad_h), big},
        {"h near INT64_MAX", offsetof(cdc_conv_geometry_t, h), INT64_MAX},
        {"dilation * kernel overflows", offsetof(cdc_conv_geometry_t, dilation_h),
         INT64_MAX / 5},
        {"channels * kh * kw overflows", offsetof(cdc_conv_geometry_t, channels),
         INT64_MAX / 100},
        {"input bytes overflow", offsetof(cdc_conv_geometry_t, w), (int64_t) 1 << 50},
    };
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        g = valid_geometry();
        g.out_h = g.out_w = -7;
        memcpy((char *) &g + cases[t].offset, &cases[t].value, sizeof(int64_t));
        int status = cdc__conv_geometry_finish(&g);
        ck_assert_msg(status == CDC_EDIM, "%s: got %s, want CDC_EDIM", cases[t].what,
                      cdc_err_name(status));
        ck_assert_msg(strlen(cdc_last_error()) > 0, "%s: no detail recorded",
                      cases[t].what);
        ck_assert_msg(g.out_h == -7 && g.out_w == -7, "%s: outputs written on failure",
                      cases[t].what);
    }
    ck_assert_int_eq(cdc__conv_geometry_finish(NULL), CDC_EDIM);

    /* Input byte count overflows: 2^62 floats. */
    cdc_conv_geometry_t wide = {.channels = 1, .h = (int64_t) 1 << 31,
                                .w = (int64_t) 1 << 31, .kernel_h = 1, .kernel_w = 1,
                                .stride_h = 1, .stride_w = 1, .pad_h = 0, .pad_w = 0,
                                .dilation_h = 1, .dilation_w = 1};
    ck_assert_int_eq(cdc__conv_geometry_finish(&wide), CDC_EDIM);
    /* The input fits (2^50 floats) but the unfolded matrix, 2^30 x 2^40, does not. */
    cdc_conv_geometry_t tall = {.channels = 1024, .h = (int64_t) 1 << 20,
                                .w = (int64_t) 1 << 20, .kernel_h = 1025, .kernel_w = 1025,
                                .stride_h = 1, .stride_w = 1, .pad_h = 512, .pad_w = 512,
                                .dilation_h = 1, .dilation_w = 1};
    ck_assert_int_eq(cdc__conv_geometry_finish(&tall), CDC_EDIM);
}
END_TEST

/* ---- element-level im2col ---------------------------------------------- */

START_TEST(test_im2col_elements)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 11);
    /* {c, h, w, kh, kw, sh, sw, ph, pw, dh, dw} */
    static const int64_t shapes[][11] = {
        {1, 5, 5, 3, 3, 1, 1, 0, 0, 1, 1}, {2, 6, 7, 3, 3, 1, 1, 1, 1, 1, 1},
        {3, 9, 8, 3, 2, 2, 3, 2, 1, 2, 3}, {1, 4, 4, 5, 5, 1, 1, 3, 3, 1, 1},
        {2, 7, 1, 3, 1, 1, 1, 1, 0, 2, 1}, {1, 1, 9, 1, 4, 1, 2, 0, 3, 1, 3},
        {4, 11, 13, 1, 1, 1, 1, 0, 0, 1, 1}, {2, 10, 12, 4, 6, 3, 4, 3, 2, 2, 1},
        {1, 3, 3, 7, 7, 2, 2, 3, 3, 1, 1}, {3, 12, 12, 3, 3, 4, 4, 0, 0, 3, 3},
        /* Extreme but valid: one output position, all padding, no overflow inside. */
        {1, 1, 2, 1, 2, INT64_MAX, INT64_MAX, INT64_C(1) << 61, INT64_C(1) << 61, 1, 1},
    };
    for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
        const int64_t *v = shapes[t];
        cdc_ref_conv_t s = {1, v[0], v[1], v[2], 1, v[3], v[4], v[5], v[6],
                            v[7], v[8], v[9], v[10], 0};
        check_im2col_elements(&s, 0, &rng);
        check_im2col_elements(&s, 5, &rng);
    }
}
END_TEST

/* ---- random conv shapes ------------------------------------------------ */

/* A random conv shape with a non-empty output; every fourth one has a kernel that
   covers the whole padded input along at least one axis. */
static cdc_ref_conv_t random_conv(cdc_test_rng_t *rng, int cover)
{
    for (;;) {
        cdc_ref_conv_t s;
        int64_t oh, ow;
        s.batch = cdc_test_rng_int(rng, 1, 3);
        s.in_channels = cdc_test_rng_int(rng, 1, 6);
        s.out_channels = cdc_test_rng_int(rng, 1, 9);
        s.h = cdc_test_rng_int(rng, 1, 24);
        s.w = cdc_test_rng_int(rng, 1, 24);
        s.kernel_h = cdc_test_rng_int(rng, 1, 7);
        s.kernel_w = cdc_test_rng_int(rng, 1, 7);
        s.stride_h = cdc_test_rng_int(rng, 1, 4);
        s.stride_w = cdc_test_rng_int(rng, 1, 4);
        s.pad_h = cdc_test_rng_int(rng, 0, 3);
        s.pad_w = cdc_test_rng_int(rng, 0, 3);
        s.dilation_h = cdc_test_rng_int(rng, 1, 3);
        s.dilation_w = cdc_test_rng_int(rng, 1, 3);
        s.relu = (int) cdc_test_rng_int(rng, 0, 1);
        if (cover) {
            int64_t span_h = s.dilation_h * (s.kernel_h - 1) + 1;
            int64_t span_w = s.dilation_w * (s.kernel_w - 1) + 1;
            int axis = (int) cdc_test_rng_int(rng, 0, 2); /* h, w or both */
            if (axis != 1)
                s.h = span_h - 2 * s.pad_h;
            if (axis != 0)
                s.w = span_w - 2 * s.pad_w;
        }
        if (cdc_ref_conv2d_output(&s, &oh, &ow) == 0)
            return s;
    }
}

START_TEST(test_conv_random)
{
    cdc_test_rng_t rng;
    int covered = 0, padded = 0, dilated = 0, strided = 0;
    cdc_test_rng_seed(&rng, 20240601);
    for (int t = 0; t < 240; t++) {
        cdc_ref_conv_t s = random_conv(&rng, t % 4 == 3);
        int64_t oh, ow;
        ck_assert_int_eq(cdc_ref_conv2d_output(&s, &oh, &ow), 0);
        cdc_conv_geometry_t g = geometry_of(&s);
        ck_assert_int_eq(cdc__conv_geometry_finish(&g), CDC_OK);
        ck_assert_int_eq(g.out_h, oh);
        ck_assert_int_eq(g.out_w, ow);

        const size_t nx = (size_t) (s.batch * s.in_channels * s.h * s.w);
        const size_t nw = (size_t) (s.out_channels * s.in_channels * s.kernel_h * s.kernel_w);
        const size_t ny = (size_t) (s.batch * s.out_channels * oh * ow);
        float *x = cdc_test_alloc(sizeof(float) * nx);
        float *w = cdc_test_alloc(sizeof(float) * nw);
        float *bias = cdc_test_alloc(sizeof(float) * (size_t) s.out_channels);
        float *y = cdc_test_alloc(sizeof(float) * ny);
        double *want = cdc_test_alloc(sizeof(double) * ny);
        cdc_test_fill_uniform(&rng, x, nx);
        cdc_test_fill_uniform(&rng, w, nw);
        cdc_test_fill_uniform(&rng, bias, (size_t) s.out_channels);
        const float *b = (t % 5 == 0) ? NULL : bias;

        ck_assert_int_eq(cdc_ref_conv2d(&s, x, w, b, want), 0);
        conv_by_im2col(&s, oh * ow + (t % 3), x, w, b, y);
        double err = cdc_test_rel_error(y, want, ny);
        ck_assert_msg(err <= TOLERANCE,
                      "case %d: batch %lld c %lld->%lld in %lldx%lld k %lldx%lld s %lldx%lld "
                      "p %lldx%lld d %lldx%lld: rel error %g",
                      t, (long long) s.batch, (long long) s.in_channels,
                      (long long) s.out_channels, (long long) s.h, (long long) s.w,
                      (long long) s.kernel_h, (long long) s.kernel_w, (long long) s.stride_h,
                      (long long) s.stride_w, (long long) s.pad_h, (long long) s.pad_w,
                      (long long) s.dilation_h, (long long) s.dilation_w, err);
        if (t < 60)
            check_im2col_elements(&s, t % 2, &rng);

        covered += (oh == 1 && s.h + 2 * s.pad_h == s.dilation_h * (s.kernel_h - 1) + 1) ||
                   (ow == 1 && s.w + 2 * s.pad_w == s.dilation_w * (s.kernel_w - 1) + 1);
        padded += s.pad_h > 0 || s.pad_w > 0;
        dilated += s.dilation_h > 1 || s.dilation_w > 1;
        strided += s.stride_h > 1 || s.stride_w > 1;
        free(x);
        free(w);
        free(bias);
        free(y);
        free(want);
    }
    /* The generator must actually reach the interesting regimes. */
    ck_assert_int_ge(covered, 40);
    ck_assert_int_ge(padded, 100);
    ck_assert_int_ge(dilated, 100);
    ck_assert_int_ge(strided, 100);
}
END_TEST

/* ---- FC and GEMM ------------------------------------------------------- */

START_TEST(test_fc_random)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 77);
    for (int t = 0; t < 220; t++) {
        const int64_t batch = cdc_test_rng_int(&rng, 1, 16);
        const int64_t in = cdc_test_rng_int(&rng, 1, 400);
        const int64_t out = cdc_test_rng_int(&rng, 1, 300);
        const int relu = (int) cdc_test_rng_int(&rng, 0, 1);
        float *x = cdc_test_alloc(sizeof(float) * (size_t) (batch * in));
        float *w = cdc_test_alloc(sizeof(float) * (size_t) (out * in));
        float *bias = cdc_test_alloc(sizeof(float) * (size_t) out);
        float *y = cdc_test_alloc(sizeof(float) * (size_t) (batch * out));
        double *want = cdc_test_alloc(sizeof(double) * (size_t) (batch * out));
        cdc_test_fill_uniform(&rng, x, (size_t) (batch * in));
        cdc_test_fill_uniform(&rng, w, (size_t) (out * in));
        cdc_test_fill_uniform(&rng, bias, (size_t) out);
        const float *b = (t % 4 == 0) ? NULL : bias;

        cdc_ref_fc(batch, in, out, x, w, b, relu, want);
        cdc__blas_sgemm_rm(0, 1, batch, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
        for (int64_t n = 0; n < batch; n++)
            for (int64_t o = 0; o < out; o++) {
                float v = y[n * out + o] + (b ? b[o] : 0.0f);
                y[n * out + o] = (relu && v < 0.0f) ? 0.0f : v;
            }
        double err = cdc_test_rel_error(y, want, (size_t) (batch * out));
        ck_assert_msg(err <= TOLERANCE, "fc case %d: %lld x %lld -> %lld: rel error %g", t,
                      (long long) batch, (long long) in, (long long) out, err);
        free(x);
        free(w);
        free(bias);
        free(y);
        free(want);
    }
}
END_TEST

START_TEST(test_gemm_reference)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 5);
    for (int t = 0; t < 100; t++) {
        const int64_t m = cdc_test_rng_int(&rng, 1, 70), n = cdc_test_rng_int(&rng, 1, 70),
                      k = cdc_test_rng_int(&rng, 1, 200);
        const int64_t lda = k + cdc_test_rng_int(&rng, 0, 3),
                      ldb = n + cdc_test_rng_int(&rng, 0, 3),
                      ldc = n + cdc_test_rng_int(&rng, 0, 3);
        float *a = cdc_test_alloc(sizeof(float) * (size_t) (m * lda));
        float *b = cdc_test_alloc(sizeof(float) * (size_t) (k * ldb));
        float *c = cdc_test_alloc(sizeof(float) * (size_t) (m * ldc));
        float *packed = cdc_test_alloc(sizeof(float) * (size_t) (m * n));
        double *want = cdc_test_alloc(sizeof(double) * (size_t) (m * ldc));
        double *want_packed = cdc_test_alloc(sizeof(double) * (size_t) (m * n));
        cdc_test_fill_uniform(&rng, a, (size_t) (m * lda));
        cdc_test_fill_uniform(&rng, b, (size_t) (k * ldb));
        cdc_ref_gemm(m, n, k, a, lda, b, ldb, want, ldc);
        cdc__blas_sgemm_rm(0, 0, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                packed[i * n + j] = c[i * ldc + j];
                want_packed[i * n + j] = want[i * ldc + j];
            }
        double err = cdc_test_rel_error(packed, want_packed, (size_t) (m * n));
        ck_assert_msg(err <= TOLERANCE, "gemm %lldx%lldx%lld: rel error %g", (long long) m,
                      (long long) n, (long long) k, err);
        free(a);
        free(b);
        free(c);
        free(packed);
        free(want);
        free(want_packed);
    }
}
END_TEST

/* ---- golden PyTorch cases ---------------------------------------------- */

static cdc_ref_conv_t golden_conv(const cdc_golden_case_t *gc)
{
    cdc_ref_conv_t s = {gc->batch, gc->cin, gc->h, gc->w, gc->cout,
                        gc->kernel, gc->kernel, gc->stride, gc->stride,
                        gc->pad, gc->pad, gc->dilation, gc->dilation, gc->relu};
    return s;
}

START_TEST(test_golden_references)
{
    cdc_golden_case_t *cases = NULL;
    size_t count = 0, convs = 0, fcs = 0;
    char err[512] = "";
    const char *dir = cdc_golden_dir();
    ck_assert_msg(cdc_golden_manifest_load(dir, &cases, &count, err, sizeof err) == 0,
                  "%s", err);
    for (size_t t = 0; t < count; t++) {
        const cdc_golden_case_t *gc = &cases[t];
        cdc_golden_data_t data;
        ck_assert_msg(cdc_golden_data_load(dir, gc, &data, err, sizeof err) == 0, "%s: %s",
                      gc->name, err);
        double *want = cdc_test_alloc(sizeof(double) * data.out_count);
        float *ours = cdc_test_alloc(sizeof(float) * data.out_count);
        if (gc->kind == CDC_GOLDEN_CONV) {
            cdc_ref_conv_t s = golden_conv(gc);
            int64_t oh, ow;
            ck_assert_int_eq(cdc_ref_conv2d_output(&s, &oh, &ow), 0);
            ck_assert_msg(oh == gc->out_h && ow == gc->out_w,
                          "%s: manifest output %lldx%lld, formula %lldx%lld", gc->name,
                          (long long) gc->out_h, (long long) gc->out_w, (long long) oh,
                          (long long) ow);
            ck_assert_int_eq(cdc_ref_conv2d(&s, data.in, data.weights, data.bias, want), 0);
            conv_by_im2col(&s, oh * ow, data.in, data.weights, data.bias, ours);
            convs++;
        } else {
            cdc_ref_fc(gc->batch, gc->cin, gc->cout, data.in, data.weights, data.bias,
                       gc->relu, want);
            cdc__blas_sgemm_rm(0, 1, gc->batch, gc->cout, gc->cin, 1.0f, data.in, gc->cin,
                               data.weights, gc->cin, 0.0f, ours, gc->cout);
            for (size_t e = 0; e < data.out_count; e++) {
                float v = ours[e] + data.bias[e % (size_t) gc->cout];
                ours[e] = (gc->relu && v < 0.0f) ? 0.0f : v;
            }
            fcs++;
        }
        /* The reference agrees with PyTorch, and so does im2col + OpenBLAS. */
        double ref_err = cdc_test_rel_error(data.out, want, data.out_count);
        double gemm_err = cdc_test_rel_error_ff(ours, data.out, data.out_count);
        ck_assert_msg(ref_err <= TOLERANCE, "%s: reference vs PyTorch rel error %g",
                      gc->name, ref_err);
        ck_assert_msg(gemm_err <= TOLERANCE, "%s: im2col+GEMM vs PyTorch rel error %g",
                      gc->name, gemm_err);
        free(want);
        free(ours);
        cdc_golden_data_free(&data);
    }
    ck_assert_uint_ge(convs, 1);
    ck_assert_uint_ge(fcs, 1);

    /* The loader refuses a case whose files disagree with its stated shape. */
    cdc_golden_case_t wrong = cases[0];
    cdc_golden_data_t data;
    wrong.out_h += 1;
    wrong.batch += 1;
    ck_assert_int_eq(cdc_golden_data_load(dir, &wrong, &data, err, sizeof err), -1);
    ck_assert_ptr_null(data.in);
    free(cases);

    ck_assert_int_eq(cdc_golden_manifest_load("/nonexistent-cdcgemm", &cases, &count, err,
                                              sizeof err),
                     -1);
}
END_TEST

static Suite *im2col_suite(void)
{
    Suite *suite = suite_create("im2col");
    TCase *geometry = tcase_create("geometry");
    tcase_add_test(geometry, test_geometry_valid);
    tcase_add_test(geometry, test_geometry_invalid);
    suite_add_tcase(suite, geometry);

    TCase *unfold = tcase_create("unfold");
    tcase_add_test(unfold, test_im2col_elements);
    suite_add_tcase(suite, unfold);

    TCase *layers = tcase_create("layers_vs_reference");
    tcase_set_timeout(layers, 60);
    tcase_add_test(layers, test_conv_random);
    tcase_add_test(layers, test_fc_random);
    tcase_add_test(layers, test_gemm_reference);
    suite_add_tcase(suite, layers);

    TCase *golden = tcase_create("golden");
    tcase_set_timeout(golden, 60);
    tcase_add_test(golden, test_golden_references);
    suite_add_tcase(suite, golden);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(im2col_suite());
}
