/* geometry.h - the geometry of one 2-D convolution (also carried on the wire). */
#ifndef CDC_GEOMETRY_H_INCLUDED
#define CDC_GEOMETRY_H_INCLUDED

#include <stdint.h>

/* Geometry of one 2-D convolution over a channels x h x w image. */
typedef struct {
    int64_t channels, h, w;
    int64_t kernel_h, kernel_w;
    int64_t stride_h, stride_w;
    int64_t pad_h, pad_w;
    int64_t dilation_h, dilation_w;
    int64_t out_h, out_w; /* filled by cdc__conv_geometry_finish */
} cdc_conv_geometry_t;

/* Compute out_h/out_w; CDC_EDIM when a parameter is invalid or the output empty. */
int cdc__conv_geometry_finish(cdc_conv_geometry_t *g);

/* CDC_OK when each padding is smaller than the dilated kernel span,
   dilation * (kernel - 1) + 1, along its axis; else CDC_EDIM naming the
   padding and the span. Padding beyond that only adds output rows or
   columns whose every input is padding (all zero before the bias): a worker
   refuses such tasks, since a tiny request could otherwise ask for a huge
   all-zero result (issue 9). The parameters must be valid (finish). */
int cdc__conv_geometry_check_padding(const cdc_conv_geometry_t *g);

#endif
