/* im2col.h - convolution as GEMM: unfold input patches into columns. */
#ifndef CDC_IM2COL_H_INCLUDED
#define CDC_IM2COL_H_INCLUDED

#include "geometry.h"

#include <stdint.h>

/* Unfold one image x (channels x h x w, contiguous) into cols, a
   (channels*kernel_h*kernel_w) x (out_h*out_w) row-major matrix with leading
   dimension ld >= out_h*out_w. Row index = (c*kernel_h + i)*kernel_w + j, matching
   OIHW weights reshaped to out x (channels*kh*kw). Zero padding. */
void cdc__im2col(const cdc_conv_geometry_t *g, const float *x, float *cols, int64_t ld);

#endif
