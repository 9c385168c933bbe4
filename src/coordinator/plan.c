/* plan.c - the auto split rule: count the bytes each split moves per call. */
#include "plan.h"

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

double cdc__plan_matmul_bytes(cdc_split_t split, int64_t m, int64_t ncols, int64_t k,
                              int n, int r, int a_cached, int bt_cached)
{
    double shards = n + r;
    double out, in;
    if (split == CDC_SPLIT_COLUMNS) {
        int64_t block = ceil_div(ncols, n);
        out = (a_cached ? 0.0 : (double) m * k) + (bt_cached ? 0.0 : (double) block * k);
        in = (double) m * block;
    } else {
        int64_t block = ceil_div(m, n);
        out = (a_cached ? 0.0 : (double) block * k) + (bt_cached ? 0.0 : (double) ncols * k);
        in = (double) block * ncols;
    }
    return shards * (out + in) * sizeof(float);
}

cdc_split_t cdc__plan_matmul_split(int64_t m, int64_t ncols, int64_t k, int n, int r,
                                   int a_cached, int bt_cached)
{
    /* A column split whose last data shards would be all padding wastes workers. */
    if (ceil_div(ncols, n) * (n - 1) >= ncols)
        return CDC_SPLIT_ROWS;
    double rows = cdc__plan_matmul_bytes(CDC_SPLIT_ROWS, m, ncols, k, n, r, a_cached,
                                         bt_cached);
    double cols = cdc__plan_matmul_bytes(CDC_SPLIT_COLUMNS, m, ncols, k, n, r, a_cached,
                                         bt_cached);
    return cols < rows ? CDC_SPLIT_COLUMNS : CDC_SPLIT_ROWS;
}

int64_t cdc__plan_band_height(const cdc_conv_geometry_t *g, int64_t out_rows)
{
    return (out_rows - 1) * g->stride_h + g->dilation_h * (g->kernel_h - 1) + 1;
}

double cdc__plan_conv_bytes(cdc_split_t split, const cdc_conv_geometry_t *g,
                            int64_t out_channels, int64_t batch, int n, int r)
{
    double shards = n + r;
    double out, in;
    if (split == CDC_SPLIT_COLUMNS) {
        int64_t band_rows = ceil_div(g->out_h, n);
        out = (double) batch * g->channels * cdc__plan_band_height(g, band_rows) * g->w;
        in = (double) out_channels * batch * band_rows * g->out_w;
    } else {
        out = (double) batch * g->channels * g->h * g->w;
        in = (double) ceil_div(out_channels, n) * batch * g->out_h * g->out_w;
    }
    return shards * (out + in) * sizeof(float);
}

cdc_split_t cdc__plan_conv_split(const cdc_conv_geometry_t *g, int64_t out_channels,
                                 int64_t batch, int n, int r)
{
    if (ceil_div(g->out_h, n) * (n - 1) >= g->out_h)
        return CDC_SPLIT_ROWS;
    double rows = cdc__plan_conv_bytes(CDC_SPLIT_ROWS, g, out_channels, batch, n, r);
    double cols = cdc__plan_conv_bytes(CDC_SPLIT_COLUMNS, g, out_channels, batch, n, r);
    return cols < rows ? CDC_SPLIT_COLUMNS : CDC_SPLIT_ROWS;
}
