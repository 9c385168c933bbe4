/* im2col.c - a bounds-check-free im2col unfold. */
#include "im2col.h"

#include "error.h"

#include <stddef.h>
#include <string.h>

/* Short runs (narrow late layers: 13-28 wide) cost more in libc call overhead
   than in bytes, so they are copied and zeroed inline. */
static inline void copy_run(float *restrict dst, const float *restrict src, size_t count)
{
    if (count >= 64) {
        memcpy(dst, src, sizeof(float) * count);
        return;
    }
    for (size_t k = 0; k < count; k++)
        dst[k] = src[k];
}

static inline void zero_run(float *dst, size_t count)
{
    if (count >= 64) {
        memset(dst, 0, sizeof(float) * count);
        return;
    }
    for (size_t k = 0; k < count; k++)
        dst[k] = 0.0f;
}

/* Output positions o in [0, out) whose input index o*stride + offset lies in
   [0, in): the half-open range [*lo, *hi), possibly empty (lo == hi). */
static void valid_range(int64_t in, int64_t out, int64_t stride, int64_t offset,
                        int64_t *lo, int64_t *hi)
{
    int64_t first = 0, end;
    if (offset < 0)
        /* ceil(-offset / stride), written so a huge stride cannot overflow */
        first = -offset / stride + (-offset % stride != 0);
    end = (in - 1 - offset) < 0 ? 0 : (in - 1 - offset) / stride + 1;
    if (first > out)
        first = out;
    if (end > out)
        end = out;
    if (end < first)
        end = first;
    *lo = first;
    *hi = end;
}

void cdc__im2col(const cdc_conv_geometry_t *g, const float *x, float *cols, int64_t ld)
{
    const int64_t out_h = g->out_h, out_w = g->out_w;
    const int64_t sh = g->stride_h, sw = g->stride_w;
    const size_t plane = (size_t) (g->h * g->w);
    float *row = cols;

    for (int64_t c = 0; c < g->channels; c++) {
        const float *xc = x + (size_t) c * plane;
        for (int64_t i = 0; i < g->kernel_h; i++) {
            const int64_t off_h = i * g->dilation_h - g->pad_h;
            int64_t oh_lo, oh_hi;
            valid_range(g->h, out_h, sh, off_h, &oh_lo, &oh_hi);
            for (int64_t j = 0; j < g->kernel_w; j++, row += ld) {
                const int64_t off_w = j * g->dilation_w - g->pad_w;
                int64_t ow_lo, ow_hi, oh;
                valid_range(g->w, out_w, sw, off_w, &ow_lo, &ow_hi);
                const size_t inner = (size_t) (ow_hi - ow_lo);
                float *dst = row;

                /* Output rows whose input row falls in the top padding. */
                memset(dst, 0, sizeof(float) * (size_t) (oh_lo * out_w));
                dst += oh_lo * out_w;

                if (inner == 0) {
                    /* The column offset misses the input entirely: all zeros. */
                    memset(dst, 0, sizeof(float) * (size_t) ((oh_hi - oh_lo) * out_w));
                    dst += (oh_hi - oh_lo) * out_w;
                } else if (sw == 1 && sh == 1 && inner == (size_t) out_w && out_w == g->w &&
                           oh_hi > oh_lo) {
                    /* Whole rows valid and contiguous on both sides: one copy. */
                    const float *src = xc + (oh_lo + off_h) * g->w + (ow_lo + off_w);
                    memcpy(dst, src, sizeof(float) * (size_t) ((oh_hi - oh_lo) * out_w));
                    dst += (oh_hi - oh_lo) * out_w;
                } else {
                    for (oh = oh_lo; oh < oh_hi; oh++, dst += out_w) {
                        const float *src =
                            xc + (oh * sh + off_h) * g->w + (ow_lo * sw + off_w);
                        float *d = dst + ow_lo;
                        zero_run(dst, (size_t) ow_lo);
                        if (sw == 1) {
                            copy_run(d, src, inner);
                        } else {
                            for (size_t k = 0; k < inner; k++)
                                d[k] = src[k * (size_t) sw];
                        }
                        zero_run(dst + ow_hi, (size_t) (out_w - ow_hi));
                    }
                }

                /* Output rows whose input row falls in the bottom padding. */
                memset(dst, 0, sizeof(float) * (size_t) ((out_h - oh_hi) * out_w));
            }
        }
    }
}
