/* reference.h - naive double-precision references for conv2d, FC and GEMM. */
#ifndef CDC_REFERENCE_H_INCLUDED
#define CDC_REFERENCE_H_INCLUDED

#include <stdint.h>

/* One conv2d layer over a batch of NCHW images (PyTorch semantics). */
typedef struct {
    int64_t batch, in_channels, h, w, out_channels;
    int64_t kernel_h, kernel_w;
    int64_t stride_h, stride_w;
    int64_t pad_h, pad_w;
    int64_t dilation_h, dilation_w;
    int relu; /* nonzero: max(0, .) after bias */
} cdc_ref_conv_t;

/* Output height and width computed directly from the PyTorch formula;
   0 when valid, -1 when a parameter is out of range or the output empty. */
int cdc_ref_conv2d_output(const cdc_ref_conv_t *conv, int64_t *out_h, int64_t *out_w);

/* Direct convolution: x is batch x in_channels x h x w, weights OIHW, bias
   (out_channels) may be NULL; y (batch x out_channels x out_h x out_w) is
   accumulated in double. Returns 0, or -1 for an invalid shape (y untouched). */
int cdc_ref_conv2d(const cdc_ref_conv_t *conv, const float *x, const float *weights,
                   const float *bias, double *y);

/* y (batch x out) = x (batch x in) * W^T (W is out x in) + bias (may be NULL),
   then ReLU when relu is nonzero; in double. */
void cdc_ref_fc(int64_t batch, int64_t in, int64_t out, const float *x,
                const float *weights, const float *bias, int relu, double *y);

/* C (m x n, ldc) = A (m x k, lda) * B (k x n, ldb), all row-major, in double. */
void cdc_ref_gemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                  const float *b, int64_t ldb, double *c, int64_t ldc);

#endif
