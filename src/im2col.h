/* im2col.h - convolution as GEMM: unfold input patches into columns. */
#ifndef CDC_IM2COL_H_INCLUDED
#define CDC_IM2COL_H_INCLUDED

#include <stdint.h>

/* Geometry of one 2-D convolution over a channels x h x w image. */
typedef struct {
    int64_t channels, h, w;
    int64_t kernel_h, kernel_w;
    int64_t stride_h, stride_w;
    int64_t pad_h, pad_w;
    int64_t dilation_h, dilation_w;
    int64_t out_h, out_w; /* filled by cdc_conv_geometry_finish */
} cdc_conv_geometry_t;

/* Compute out_h/out_w; CDC_EDIM when a parameter is invalid or the output empty. */
int cdc_conv_geometry_finish(cdc_conv_geometry_t *g);

/* Unfold one image x (channels x h x w, contiguous) into cols, a
   (channels*kernel_h*kernel_w) x (out_h*out_w) row-major matrix with leading
   dimension ld >= out_h*out_w. Row index = (c*kernel_h + i)*kernel_w + j, matching
   OIHW weights reshaped to out x (channels*kh*kw). Zero padding. */
void cdc_im2col(const cdc_conv_geometry_t *g, const float *x, float *cols, int64_t ld);

#endif
