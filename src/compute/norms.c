/* norms.c - row norms of matrices and patch norms of conv inputs. */
#include "norms.h"

#include <math.h>
#include <stdlib.h>

void cdc__row_norms(const float *m, int64_t rows, int64_t k, double *out)
{
    for (int64_t i = 0; i < rows; i++) {
        const float *row = m + i * k;
        double sum = 0.0;
        for (int64_t j = 0; j < k; j++)
            sum += (double) row[j] * row[j];
        out[i] = sqrt(sum);
    }
}

void cdc__patch_norms(const cdc_conv_geometry_t *g, int64_t batch, const float *x,
                      double *out)
{
    /* Squares summed over channels first: a patch's squared norm is then a
       sum of kernel_h * kernel_w entries of this one plane. */
    int64_t plane = g->h * g->w, spatial = g->out_h * g->out_w;
    double *energy = malloc((size_t) plane * sizeof *energy);
    if (!energy) {
        /* No memory for the plane: an infinite scale disables the check
           rather than risk a false alarm. */
        for (int64_t i = 0; i < batch * spatial; i++)
            out[i] = INFINITY;
        return;
    }
    for (int64_t b = 0; b < batch; b++) {
        const float *image = x + b * g->channels * plane;
        for (int64_t i = 0; i < plane; i++)
            energy[i] = 0.0;
        for (int64_t c = 0; c < g->channels; c++)
            for (int64_t i = 0; i < plane; i++)
                energy[i] += (double) image[c * plane + i] * image[c * plane + i];
        for (int64_t oy = 0; oy < g->out_h; oy++)
            for (int64_t ox = 0; ox < g->out_w; ox++) {
                double sum = 0.0;
                for (int64_t i = 0; i < g->kernel_h; i++) {
                    int64_t y = oy * g->stride_h - g->pad_h + i * g->dilation_h;
                    if (y < 0 || y >= g->h)
                        continue;
                    for (int64_t j = 0; j < g->kernel_w; j++) {
                        int64_t xx = ox * g->stride_w - g->pad_w + j * g->dilation_w;
                        if (xx >= 0 && xx < g->w)
                            sum += energy[y * g->w + xx];
                    }
                }
                out[b * spatial + oy * g->out_w + ox] = sqrt(sum);
            }
    }
    free(energy);
}
