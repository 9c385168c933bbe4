/* norms.h - operand norms that scale the parity check's rounding tolerance. */
#ifndef CDC_NORMS_H_INCLUDED
#define CDC_NORMS_H_INCLUDED

#include "geometry.h"

#include <stdint.h>

/* out[i] = 2-norm of row i of m (rows x k, contiguous), accumulated in double. */
void cdc__row_norms(const float *m, int64_t rows, int64_t k, double *out);

/* 2-norm of every im2col column of a batch of images without building the
   im2col matrix: out[b*out_h*out_w + oy*out_w + ox] is the norm of the input
   patch output (oy, ox) of image b reads (zero padding counts as zero). */
void cdc__patch_norms(const cdc_conv_geometry_t *g, int64_t batch, const float *x,
                      double *out);

#endif
