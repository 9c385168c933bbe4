/* reference.c - naive double-precision conv2d, FC and GEMM for checking results. */
#include "reference.h"

#include <stddef.h>

static int64_t ref_axis(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                        int64_t dilation)
{
    int64_t span;
    if (in < 1 || kernel < 1 || stride < 1 || pad < 0 || dilation < 1)
        return -1;
    span = dilation * (kernel - 1) + 1;
    if (in + 2 * pad < span)
        return -1;
    return (in + 2 * pad - span) / stride + 1;
}

int cdc_ref_conv2d_output(const cdc_ref_conv_t *conv, int64_t *out_h, int64_t *out_w)
{
    int64_t oh = ref_axis(conv->h, conv->kernel_h, conv->stride_h, conv->pad_h,
                          conv->dilation_h);
    int64_t ow = ref_axis(conv->w, conv->kernel_w, conv->stride_w, conv->pad_w,
                          conv->dilation_w);
    if (oh < 1 || ow < 1 || conv->batch < 1 || conv->in_channels < 1 ||
        conv->out_channels < 1)
        return -1;
    *out_h = oh;
    *out_w = ow;
    return 0;
}

int cdc_ref_conv2d(const cdc_ref_conv_t *conv, const float *x, const float *weights,
                   const float *bias, double *y)
{
    int64_t out_h, out_w;
    const int64_t cin = conv->in_channels, kh = conv->kernel_h, kw = conv->kernel_w;
    if (cdc_ref_conv2d_output(conv, &out_h, &out_w) != 0)
        return -1;
    for (int64_t n = 0; n < conv->batch; n++) {
        const float *xn = x + (size_t) (n * cin * conv->h * conv->w);
        for (int64_t o = 0; o < conv->out_channels; o++) {
            const float *wo = weights + (size_t) (o * cin * kh * kw);
            double *yo = y + (size_t) ((n * conv->out_channels + o) * out_h * out_w);
            for (int64_t p = 0; p < out_h; p++) {
                for (int64_t q = 0; q < out_w; q++) {
                    double sum = bias ? (double) bias[o] : 0.0;
                    for (int64_t c = 0; c < cin; c++) {
                        for (int64_t i = 0; i < kh; i++) {
                            int64_t ih = p * conv->stride_h - conv->pad_h +
                                         i * conv->dilation_h;
                            if (ih < 0 || ih >= conv->h)
                                continue;
                            for (int64_t j = 0; j < kw; j++) {
                                int64_t iw = q * conv->stride_w - conv->pad_w +
                                             j * conv->dilation_w;
                                if (iw < 0 || iw >= conv->w)
                                    continue;
                                sum += (double) wo[(c * kh + i) * kw + j] *
                                       (double) xn[(c * conv->h + ih) * conv->w + iw];
                            }
                        }
                    }
                    if (conv->relu && sum < 0.0)
                        sum = 0.0;
                    yo[p * out_w + q] = sum;
                }
            }
        }
    }
    return 0;
}

void cdc_ref_fc(int64_t batch, int64_t in, int64_t out, const float *x,
                const float *weights, const float *bias, int relu, double *y)
{
    for (int64_t n = 0; n < batch; n++) {
        for (int64_t o = 0; o < out; o++) {
            double sum = bias ? (double) bias[o] : 0.0;
            for (int64_t k = 0; k < in; k++)
                sum += (double) x[n * in + k] * (double) weights[o * in + k];
            if (relu && sum < 0.0)
                sum = 0.0;
            y[n * out + o] = sum;
        }
    }
}

void cdc_ref_gemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                  const float *b, int64_t ldb, double *c, int64_t ldc)
{
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++)
            c[i * ldc + j] = 0.0;
        /* i-p-j order streams rows of B instead of striding down its columns. */
        for (int64_t p = 0; p < k; p++) {
            double aip = (double) a[i * lda + p];
            for (int64_t j = 0; j < n; j++)
                c[i * ldc + j] += aip * (double) b[p * ldb + j];
        }
    }
}
