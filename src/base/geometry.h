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
    int64_t out_h, out_w; /* filled by cdc_conv_geometry_finish */
} cdc_conv_geometry_t;

/* Compute out_h/out_w; CDC_EDIM when a parameter is invalid or the output empty. */
int cdc_conv_geometry_finish(cdc_conv_geometry_t *g);

#endif
