/* conv2d.c - conv layers as coded im2col GEMMs, split by channel or spatially:
   the common plan (cdc__layer_plan) and finish (cdc__driver_finish), with
   conv's own tasks (im2col on the worker) in between. */
#include "layer.h"

#include "error.h"
#include "norms.h"
#include "scratch.h"
#include "plan.h"

#include <limits.h>
#include <stdlib.h>
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
    return cdc_conv_geometry_finish(g);
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

/* What the parity check's scales of a conv call are made from, computed only
   when the check or the accuracy guard runs: filter row norms (per block for a
   channel split, of all filters for a spatial one) and the im2col column
   norms of each shard's input (the whole input, or each band). */
typedef struct {
    cdc_layer_t *layer;
    const cdc_shard_set_t *filters; /* channel split; NULL: spatial split */
    const cdc_conv_geometry_t *g;   /* of one input (image or band)      */
    int64_t batch;
    const float *inputs;            /* `count` inputs, input_size apart   */
    size_t input_size;
    int count;
} conv_scales_job_t;

static int conv_scales_fill(cdc_coded_call_t *call)
{
    const conv_scales_job_t *job = call->scales_job;
    const double *filter_norms = job->filters ? NULL : cdc__layer_weight_norms(job->layer);
    size_t cols = (size_t) call->cols;
    if (!job->filters && !filter_norms)
        return cdc__fail(CDC_ENOMEM, "filter norms");
    call->scale_storage = malloc((size_t) job->count * cols * sizeof(double));
    if (!call->scale_storage)
        return cdc__fail(CDC_ENOMEM, "%d x %zu patch norms", job->count, cols);
    for (int i = 0; i < job->count; i++)
        cdc__patch_norms(job->g, job->batch, job->inputs + (size_t) i * job->input_size,
                         call->scale_storage + (size_t) i * cols);
    for (int s = 0; s < call->n + call->r; s++) {
        call->scales[s].row = job->filters ? job->filters->row_norms[s] : filter_norms;
        /* A channel split has one input for every shard. */
        call->scales[s].col = call->scale_storage + (size_t) (job->count > 1 ? s : 0) * cols;
    }
    call->inner = job->layer->k;
    return CDC_OK;
}

/* A conv call of the plan's shards, rows x cols results each: every task
   a (filters) · im2col(input) over geometry g, filled in but for a, a_hold
   (a_key names the filters: a is always held) and input; the parity
   check's scales come from job. */
static int conv_call_init(cdc_coded_call_t *call, const cdc_layer_t *layer,
                          const cdc_call_plan_t *plan, int64_t rows, int64_t cols,
                          const cdc_conv_geometry_t *g, int64_t batch,
                          const conv_scales_job_t *job)
{
    int rc = cdc__coded_call_init(call, plan->code, plan->n, rows, cols);
    if (rc != CDC_OK)
        return rc;
    call->split = plan->split;
    call->wanted_r = plan->wanted_r;
    if (plan->code) {
        call->scales_fill = conv_scales_fill;
        call->scales_job = job;
    }
    for (int s = 0; s < plan->n + plan->r; s++) {
        cdc_shard_task_t *task = &call->tasks[s];
        task->kind = CDC_TASK_CONV;
        task->a_rows = rows;
        task->k = layer->k;
        task->a_key = layer->weights_key;
        task->geometry = g;
        task->batch = batch;
    }
    return CDC_OK;
}

/* Channel split: shard s holds a block of filters and gets the whole input. */
static int conv_channel_split(cdc_layer_t *layer, const cdc_call_plan_t *plan,
                              const cdc_conv_geometry_t *g, int64_t batch,
                              const float *x, float *y)
{
    int n = plan->n;
    const cdc_shard_set_t *filters;
    int rc = cdc__layer_weight_shards(layer, plan->code, n, &filters);
    if (rc != CDC_OK)
        return rc;
    int64_t spatial = g->out_h * g->out_w, cols = batch * spatial;
    cdc_coded_call_t call;
    conv_scales_job_t job = {layer, filters, g, batch, x, 0, 1};
    rc = conv_call_init(&call, layer, plan, filters->block_rows, cols, g, batch, &job);
    if (rc != CDC_OK)
        return rc;
    for (int s = 0; s < n + plan->r; s++) {
        call.tasks[s].a = filters->blocks[s];
        call.tasks[s].a_hold = cdc__shard_set_hold(filters);
        call.tasks[s].input = x;
    }
    rc = cdc__coded_call_run(layer->context, &call);
    if (rc == CDC_OK) {
        for (int s = 0; s < n; s++) {
            int64_t first = (int64_t) s * filters->block_rows;
            int64_t valid = cdc__shard_set_valid_rows(filters, s);
            for (int64_t p = 0; p < valid; p++)
                for (int64_t b = 0; b < batch; b++)
                    memcpy(y + (b * layer->rows + first + p) * spatial,
                           call.results[s] + p * cols + b * spatial,
                           (size_t) spatial * sizeof(float));
        }
    }
    cdc__coded_call_release(&call);
    return rc;
}

/* Copy the input rows a band needs (in zero-padded row coordinates) from each
   of `planes` h x w planes into band_h x w planes, zeros where the rows fall in
   the padding. */
static void cut_band(const cdc_conv_geometry_t *g, int64_t planes, const float *x,
                     int64_t first_padded_row, int64_t band_h, float *band)
{
    size_t row_bytes = (size_t) g->w * sizeof(float);
    for (int64_t bc = 0; bc < planes; bc++) {
        const float *plane = x + bc * g->h * g->w;
        float *dst = band + bc * band_h * g->w;
        for (int64_t t = 0; t < band_h; t++) {
            int64_t row = first_padded_row + t - g->pad_h;
            if (row >= 0 && row < g->h)
                memcpy(dst + t * g->w, plane + row * g->w, row_bytes);
            else
                memset(dst + t * g->w, 0, row_bytes);
        }
    }
}

int cdc__conv_bands_encode(const cdc_code_t *code, int n, const cdc_conv_geometry_t *g,
                           int64_t batch, const float *x, cdc_conv_geometry_t *band_g,
                           float **bands_p, size_t *band_size_p)
{
    int r = code ? cdc_code_r(code) : 0, shards = n + r;
    int64_t band_rows = (g->out_h + n - 1) / n;
    *band_g = *g;
    band_g->h = cdc__plan_band_height(g, band_rows);
    band_g->pad_h = 0;
    int rc = cdc_conv_geometry_finish(band_g);
    if (rc != CDC_OK)
        return rc;
    size_t band_size = (size_t) batch * (size_t) (g->channels * band_g->h * g->w);
    float *bands = cdc__scratch(CDC_SCRATCH_BANDS, (size_t) shards * band_size);
    if (!bands)
        return cdc__fail(CDC_ENOMEM, "%d input bands of %zu floats", shards, band_size);
    /* Cut and encode one (image, channel) plane of every band at a time, so
       the parity is summed while the cut planes are still in cache. */
    int64_t plane = band_g->h * g->w;
    for (int64_t bc = 0; bc < batch * g->channels && rc == CDC_OK; bc++) {
        float *plane_ptr[CDC_MAX_SHARDS];
        for (int s = 0; s < shards; s++)
            plane_ptr[s] = bands + (size_t) s * band_size + (size_t) (bc * plane);
        for (int s = 0; s < n; s++)
            cut_band(g, 1, x + bc * g->h * g->w, (int64_t) s * band_rows * g->stride_h,
                     band_g->h, plane_ptr[s]);
        if (r > 0)
            rc = cdc_code_encode(code, band_g->h, g->w, (const float *const *) plane_ptr,
                                 g->w, plane_ptr + n, g->w);
    }
    if (rc != CDC_OK)
        return rc;
    *bands_p = bands;
    *band_size_p = band_size;
    return CDC_OK;
}

/* Spatial split: shard s computes a band of output rows from a band of input
   rows (with its halo). All bands have one shape and im2col is linear, so the
   parity band is the coded sum of the input bands. */
static int conv_spatial_split(cdc_layer_t *layer, const cdc_call_plan_t *plan,
                              const cdc_conv_geometry_t *g, int64_t batch,
                              const float *x, float *y)
{
    int n = plan->n, shards = plan->n + plan->r;
    int64_t band_rows = (g->out_h + n - 1) / n;
    cdc_conv_geometry_t band_g;
    float *bands = NULL;
    size_t band_size = 0;
    int rc = cdc__conv_bands_encode(plan->code, n, g, batch, x, &band_g, &bands, &band_size);
    if (rc != CDC_OK)
        return rc;
    int64_t spatial = band_rows * g->out_w, cols = batch * spatial;
    cdc_coded_call_t call;
    conv_scales_job_t job = {layer, NULL, &band_g, batch, bands, band_size, shards};
    rc = conv_call_init(&call, layer, plan, layer->rows, cols, &band_g, batch, &job);
    if (rc != CDC_OK)
        return rc;
    for (int s = 0; s < shards; s++) {
        call.tasks[s].a = layer->weights;
        call.tasks[s].a_hold = layer->weights_hold;
        call.tasks[s].input = bands + (size_t) s * band_size;
    }
    rc = cdc__coded_call_run(layer->context, &call);
    if (rc == CDC_OK) {
        int64_t plane = g->out_h * g->out_w;
        size_t row_bytes = (size_t) g->out_w * sizeof(float);
        for (int s = 0; s < n; s++) {
            int64_t first = (int64_t) s * band_rows;
            int64_t valid = g->out_h - first < band_rows ? g->out_h - first : band_rows;
            for (int64_t o = 0; o < layer->rows; o++)
                for (int64_t b = 0; b < batch; b++)
                    for (int64_t t = 0; t < valid; t++)
                        memcpy(y + (b * layer->rows + o) * plane + (first + t) * g->out_w,
                               call.results[s] + o * cols + (b * band_rows + t) * g->out_w,
                               row_bytes);
        }
    }
    cdc__coded_call_release(&call);
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

    /* The common plan; conv's own rule for AUTO (bytes of im2col bands). */
    cdc_call_plan_t plan;
    rc = cdc__layer_plan(layer, &plan);
    if (rc != CDC_OK)
        return rc;
    int n = plan.n;
    if (plan.split == CDC_SPLIT_AUTO)
        plan.split = cdc__plan_conv_split(&g, layer->rows, batch, n, plan.r);
    /* A spatial split needs a real output row per data shard. */
    if (plan.split == CDC_SPLIT_COLUMNS && (g.out_h + n - 1) / n * (n - 1) >= g.out_h)
        plan.split = CDC_SPLIT_ROWS;

    rc = plan.split == CDC_SPLIT_COLUMNS ? conv_spatial_split(layer, &plan, &g, batch, x, y)
                                         : conv_channel_split(layer, &plan, &g, batch, x, y);
    if (rc != CDC_OK)
        return rc;
    layer->last_split = plan.split;
    cdc_epilogue_t epilogue = cdc__layer_epilogue(layer, batch, plane, y);
    cdc__driver_finish(layer->context, &epilogue, y, batch * layer->rows, plane);
    return CDC_OK;
}
