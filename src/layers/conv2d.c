/* conv2d.c - conv layers as coded im2col GEMMs: the layer's geometry, its
   costs per split and its AUTO rule (the common plan, cdc__layer_plan, then
   cdc__plan_size_blocks for the data blocks: filters or output rows, equal
   or not), and the call described to the driver (driver.h: the filters as
   weights, the input as patches, bias and ReLU), which runs it by channel
   or spatially (driver_spatial.c). */
#include "layer.h"

#include "error.h"
#include "local_cost.h"
#include "plan.h"
#include "profile.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int desc_geometry(const cdc_conv2d_desc_t *desc, int64_t h, int64_t w,
                         cdc_conv_geometry_t *g)
{
    memset(g, 0, sizeof *g);
    g->channels = desc->in_channels;
    g->h = h;
    g->w = w;
    g->kernel_h = desc->kernel_h;
    g->kernel_w = desc->kernel_w;
    g->stride_h = desc->stride_h;
    g->stride_w = desc->stride_w;
    g->pad_h = desc->pad_h;
    g->pad_w = desc->pad_w;
    g->dilation_h = desc->dilation_h;
    g->dilation_w = desc->dilation_w;
    return cdc__conv_geometry_finish(g);
}

int cdc_conv2d_output_size(const cdc_conv2d_desc_t *desc, int64_t h, int64_t w,
                           int64_t *out_h, int64_t *out_w)
{
    if (!desc || !out_h || !out_w)
        return cdc__fail(CDC_EINVAL, "cdc_conv2d_output_size: NULL argument");
    cdc_conv_geometry_t g;
    int rc = desc_geometry(desc, h, w, &g);
    if (rc != CDC_OK)
        return rc;
    *out_h = g.out_h;
    *out_w = g.out_w;
    return CDC_OK;
}

int cdc_conv2d_new(cdc_context_t *context, const cdc_conv2d_desc_t *desc,
                   const float *weights, const float *bias,
                   const cdc_layer_options_t *options, cdc_layer_t **layer_p)
{
    if (!desc)
        return cdc__fail(CDC_EINVAL, "cdc_conv2d_new: desc is NULL");
    /* Validate the kernel parameters on the smallest input they accept. */
    cdc_conv_geometry_t g;
    int64_t min_h = desc->dilation_h * (desc->kernel_h - 1) + 1;
    int64_t min_w = desc->dilation_w * (desc->kernel_w - 1) + 1;
    int rc = desc_geometry(desc, min_h > 0 ? min_h : 1, min_w > 0 ? min_w : 1, &g);
    if (rc != CDC_OK)
        return rc;
    if (desc->out_channels < 1 || desc->out_channels > INT_MAX)
        return cdc__fail(CDC_EDIM, "cdc_conv2d_new: out_channels = %lld",
                         (long long) desc->out_channels);
    rc = cdc__check_product(desc->in_channels, desc->kernel_h * desc->kernel_w, INT_MAX,
                            "cdc_conv2d_new: in_channels x kernel");
    if (rc != CDC_OK)
        return rc;
    rc = cdc__layer_new(context, CDC_LAYER_CONV, desc->out_channels,
                        desc->in_channels * desc->kernel_h * desc->kernel_w, weights,
                        bias, options, layer_p);
    if (rc == CDC_OK)
        (*layer_p)->conv = *desc;
    return rc;
}

/* What an output row (spatial) or a filter (channel) costs (plan.h): a
   band of rows output rows reads (rows - 1) * stride_h + window input rows,
   so each row adds stride_h input rows to a fixed halo, and a data band
   also computes its halo's output rows (driver_spatial.c): a fixed cost
   that makes short bands dear; the filters are cached on workers. */
static cdc_block_cost_t conv_block_cost(const cdc_layer_t *layer, cdc_split_t split,
                                        const cdc_conv_geometry_t *g, int64_t batch)
{
    double k = (double) layer->k, f = sizeof(float);
    double image_row = (double) batch * g->channels * g->w * f;
    double output_row = 2.0 * k * layer->rows * batch * g->out_w;
    int64_t halo = (cdc__plan_band_height(g, 1) - 1) / g->stride_h;
    double pixels_row = (double) batch * g->out_w; /* im2col columns of an output row */
    if (split == CDC_SPLIT_COLUMNS)
        return (cdc_block_cost_t){
            .flops_per_row = output_row,
            .flops_fixed = output_row * (double) halo,
            .streamed_per_row = pixels_row * k * f,
            .streamed_fixed = (double) layer->rows * k * f,
            .bytes_fixed_out = image_row * (cdc__plan_band_height(g, 1) - g->stride_h),
            .bytes_per_row_out = image_row * g->stride_h,
            .bytes_per_row_in = (double) layer->rows * batch * g->out_w * f,
            .held_fixed = (double) layer->rows * k * f};
    return (cdc_block_cost_t){.flops_per_row = 2.0 * k * batch * g->out_h * g->out_w,
                              .streamed_per_row = k * f,
                              .streamed_fixed = pixels_row * g->out_h * k * f,
                              .bytes_fixed_out = image_row * g->h,
                              .bytes_per_row_out = 0.0,
                              .bytes_per_row_in = (double) batch * g->out_h * g->out_w * f,
                              .held_per_row = k * f,
                              .held_key = layer->weights_key};
}

/* The coordinator computing `filters` of the layer's filters over
   `out_rows` of its output rows itself: the im2col matrix written and read
   once more at the host's bandwidth, then the GEMM (local_cost.h). */
static double conv_here_ms(const cdc_layer_t *layer, const cdc_conv_geometry_t *g,
                           int64_t batch, int64_t filters, int64_t out_rows)
{
    int64_t cols = batch * out_rows * g->out_w;
    double im2col_bytes = 2.0 * (double) layer->k * (double) cols * sizeof(float);
    return im2col_bytes / (cdc__local_speed().gbytes_per_s * 1e6) +
           cdc__local_gemm_ms(filters, cols, layer->k, layer->context->local_gflops,
                              layer->context->local_gbps);
}

/* What a row of the cut operand costs (plan.h), with the coordinator's line
   under a measured plan, so that it may take a share: of the filters when
   cut by channel, of the output rows (from a band of the input it cuts
   itself, driver_spatial.c) when cut spatially. */
static cdc_block_cost_t conv_cost(const cdc_layer_t *layer, cdc_split_t split,
                                  const cdc_conv_geometry_t *g, int64_t batch)
{
    cdc_block_cost_t cost = conv_block_cost(layer, split, g, batch);
    int spatial = split == CDC_SPLIT_COLUMNS;
    int64_t rows = spatial ? g->out_h : layer->rows;
    if (layer->context->config.plan == CDC_PLAN_EQUAL || rows < 2)
        return cost;
    double one = spatial ? conv_here_ms(layer, g, batch, layer->rows, 1)
                         : conv_here_ms(layer, g, batch, 1, g->out_h);
    cdc__plan_here_line(&cost, one, conv_here_ms(layer, g, batch, layer->rows, g->out_h), rows);
    return cost;
}

/* The slowest live worker's predicted time (profile.h) for a block of rows
   under cost; 0 with no worker profiled (in process). */
static double slowest_block_ms(cdc_context_t *context, const cdc_block_cost_t *cost,
                               int64_t rows)
{
    cdc_worker_profile_t profiles[CDC_MAX_WORKERS];
    int count = cdc__context_profile(context, profiles, CDC_MAX_WORKERS);
    cdc__profile_assume_rates(profiles, count);
    double flops = cost->flops_per_row * (double) rows + cost->flops_fixed;
    double halo_rows = cost->flops_per_row > 0.0 ? cost->flops_fixed / cost->flops_per_row : 0.0;
    double streamed = cost->streamed_fixed + cost->streamed_per_row * ((double) rows + halo_rows);
    double out = cost->bytes_fixed_out + cost->bytes_per_row_out * (double) rows;
    double in = cost->bytes_per_row_in * (double) rows, slowest = 0.0;
    for (int w = 0; w < count; w++)
        if (profiles[w].live)
            slowest = fmax(slowest,
                           cdc__profile_predict_ms(&profiles[w], flops, streamed, out, in));
    return slowest;
}

/* When a channel split spreads the filters over more workers than a
   spatial split's bands (a layout that computes no parity fault-free:
   every worker 1/W of the filters over the whole input, against 1/bands of
   the output rows and a band of the input each), auto takes the one
   predicted faster on the slowest worker (profile.h; a link not measured
   yet is free, so the channel split until it is). AUTO otherwise. */
static cdc_split_t conv_spread_split(cdc_layer_t *layer, const cdc_call_plan_t *plan,
                                     const cdc_conv_geometry_t *g, int64_t batch, int bands)
{
    int spread = cdc__driver_row_cut_spread(layer->context, plan, layer->rows);
    if (spread <= bands)
        return CDC_SPLIT_AUTO;
    cdc_block_cost_t channel = conv_block_cost(layer, CDC_SPLIT_ROWS, g, batch);
    cdc_block_cost_t spatial = conv_block_cost(layer, CDC_SPLIT_COLUMNS, g, batch);
    double channel_ms = slowest_block_ms(layer->context, &channel,
                                         (layer->rows + spread - 1) / spread);
    double spatial_ms = slowest_block_ms(layer->context, &spatial, (g->out_h + bands - 1) / bands);
    return spatial_ms < channel_ms ? CDC_SPLIT_COLUMNS : CDC_SPLIT_ROWS;
}

/* Here or on the workers (cdc__plan_prefer_here). */
static void conv_prefer_here(cdc_layer_t *layer, cdc_call_plan_t *plan,
                             const cdc_conv_geometry_t *g, int64_t batch)
{
    int64_t cols = batch * g->out_h * g->out_w;
    double local_ms = conv_here_ms(layer, g, batch, layer->rows, g->out_h);
    char what[64];
    snprintf(what, sizeof what, "conv %lldx%lldx%lld", (long long) layer->rows,
             (long long) cols, (long long) layer->k);
    cdc__plan_prefer_here(layer->context, plan, local_ms, what);
}

/* The call over geometry g, under the context's call lock
   (cdc_conv2d_forward validated it). */
static int conv_call(cdc_layer_t *layer, int64_t batch, const cdc_conv_geometry_t *g,
                     const float *x, float *y)
{
    int64_t plane = g->out_h * g->out_w;
    /* The common plan; conv's own rule for AUTO (bytes of im2col bands). */
    cdc_call_plan_t plan;
    int rc = cdc__layer_plan(layer, &plan);
    if (rc != CDC_OK)
        return rc;
    int n = plan.n;
    /* Spatial bands are per-call operands: with their parity on demand,
       every worker of the plan takes a band (n + r of them). */
    int bands = cdc__plan_on_demand_n(layer->context, &plan);
    int on_demand = bands > 0 && cdc__plan_bands_fill(g, bands);
    bands = on_demand ? bands : n;
    if (plan.split == CDC_SPLIT_AUTO) {
        /* The rules (the equal plan's answer, and a measured plan's until
           its model can predict both splits as they would run). */
        cdc_split_t rule = conv_spread_split(layer, &plan, g, batch, bands);
        if (rule == CDC_SPLIT_AUTO)
            rule = cdc__plan_conv_split(g, layer->rows, batch, bands, on_demand ? 0 : plan.r);
        const cdc_block_cost_t costs[2] = {conv_cost(layer, CDC_SPLIT_ROWS, g, batch),
                                           conv_cost(layer, CDC_SPLIT_COLUMNS, g, batch)};
        const int64_t rows[2] = {layer->rows, g->out_h};
        plan.split = cdc__plan_split_by_latency(layer->context, &plan, costs, rows,
                                                layer->last_split, rule,
                                                on_demand ? bands : 0);
    }
    if (plan.split == CDC_SPLIT_COLUMNS && on_demand &&
        (rc = cdc__plan_on_demand(layer->context, &plan, bands)) != CDC_OK)
        return rc;
    n = plan.n;
    /* A spatial split needs a real output row per data shard. */
    if (plan.split == CDC_SPLIT_COLUMNS && !cdc__plan_bands_fill(g, n))
        plan.split = CDC_SPLIT_ROWS;
    cdc_block_cost_t cost = conv_cost(layer, plan.split, g, batch);
    rc = cdc__plan_size_blocks(layer->context, &plan, &cost,
                               plan.split == CDC_SPLIT_COLUMNS ? g->out_h : layer->rows);
    if (rc != CDC_OK)
        return rc;
    if (layer->context->config.plan != CDC_PLAN_EQUAL)
        conv_prefer_here(layer, &plan, g, batch);

    /* T = filters · patch rows: channels x (batch x plane). */
    cdc_weights_t weights;
    cdc__layer_weights(layer, &weights);
    cdc_patches_t patches = {.geometry = g, .batch = batch, .input = x};
    cdc_gemm_desc_t desc;
    memset(&desc, 0, sizeof desc);
    desc.a.view = (cdc_operand_t){layer->weights, layer->rows, layer->k, layer->k, 0};
    desc.a.weights = &weights;
    desc.bt.view = (cdc_operand_t){NULL, batch * plane, layer->k, layer->k, 0};
    desc.bt.in_place = 1;
    desc.patches = &patches;
    desc.epilogue = cdc__layer_epilogue(layer, batch, plane, y);
    desc.epilogue.channels_major = 1;
    rc = cdc__driver_gemm(layer->context, &desc, &plan);
    if (rc == CDC_OK)
        layer->last_split = plan.split;
    return rc;
}

int cdc_conv2d_forward(cdc_layer_t *layer, int64_t batch, int64_t h, int64_t w,
                       const float *x, float *y)
{
    if (!layer || !x || !y)
        return cdc__fail(CDC_EINVAL, "cdc_conv2d_forward: layer, x and y must not be NULL");
    if (layer->kind != CDC_LAYER_CONV)
        return cdc__fail(CDC_EINVAL, "cdc_conv2d_forward: layer is not a conv layer");
    if (batch < 1 || batch > INT_MAX)
        return cdc__fail(CDC_EDIM, "cdc_conv2d_forward: batch = %lld, expected 1..%d",
                         (long long) batch, INT_MAX);
    cdc_conv_geometry_t g;
    int rc = desc_geometry(&layer->conv, h, w, &g);
    if (rc != CDC_OK)
        return rc;
    int64_t plane = g.out_h * g.out_w;
    rc = cdc__check_product(batch, plane, INT_MAX, "cdc_conv2d_forward: batch x out_h x out_w");
    if (rc == CDC_OK)
        rc = cdc__check_product(layer->k, batch * plane, INT64_MAX / 8,
                                "cdc_conv2d_forward: im2col matrix");
    if (rc != CDC_OK)
        return rc;

    cdc__context_call_begin(layer->context);
    rc = conv_call(layer, batch, &g, x, y);
    cdc__context_call_end(layer->context);
    return rc;
}
