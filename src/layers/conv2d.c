/* conv2d.c - conv layers as coded im2col GEMMs, split by channel or spatially:
   the common plan (cdc__layer_plan, then cdc__plan_size_blocks for the data
   blocks: filters or output rows, equal or not) and finish
   (cdc__driver_finish), with conv's own tasks (im2col on the worker) in
   between. Parity blocks are as large as the largest data block; a data
   shard computes only its own (plus, spatially, a halo: see
   conv_spatial_split), its result padded back by the coded call. */
#include "layer.h"

#include "error.h"
#include "local_cost.h"
#include "log.h"
#include "norms.h"
#include "scratch.h"
#include "plan.h"
#include "profile.h"
#include "rotated_layout.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
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

/* What the parity check's scales of a conv call are made from, computed only
   when the check or the accuracy guard runs: filter row norms (per block for a
   channel split, of all filters for a spatial one) and the im2col column
   norms of each shard's input (the whole input, or each band, padded like
   the results). */
typedef struct {
    cdc_layer_t *layer;
    const cdc_shard_set_t *filters; /* channel split; NULL: spatial split */
} conv_scales_job_t;

static int conv_scales_fill(cdc_dedicated_call_t *call)
{
    const conv_scales_job_t *job = call->scales_job;
    cdc_weights_t weights;
    cdc__layer_weights(job->layer, &weights);
    const double *filter_norms = job->filters ? NULL : cdc__weights_norms(&weights);
    if (!job->filters && !filter_norms)
        return cdc__fail(CDC_ENOMEM, "filter norms");
    /* A channel split has one input for every shard. */
    int shards = call->n + call->r, inputs = job->filters ? 1 : shards;
    size_t cols = (size_t) call->cols;
    call->scale_storage = calloc((size_t) inputs * cols, sizeof(double));
    if (!call->scale_storage)
        return cdc__fail(CDC_ENOMEM, "%d x %zu patch norms", inputs, cols);
    int64_t groups = call->col_groups, to_w = call->cols / groups;
    for (int i = 0; i < inputs; i++) {
        const cdc_shard_task_t *task = &call->tasks[i];
        if (task->cols == 0)
            continue; /* an empty band: its result is zero */
        const cdc_conv_geometry_t *g = task->geometry;
        int64_t images = task->batch / groups, image = g->channels * g->h * g->w;
        for (int64_t b = 0; b < groups; b++)
            cdc__patch_norms(g, images, task->input + b * images * image,
                             call->scale_storage + (size_t) i * cols + b * to_w);
    }
    for (int s = 0; s < shards; s++) {
        call->scales[s].row = job->filters ? job->filters->row_norms[s] : filter_norms;
        call->scales[s].col = call->scale_storage + (size_t) (inputs > 1 ? s : 0) * cols;
    }
    call->inner = job->layer->k;
    return CDC_OK;
}

/* A conv call of the plan's shards, rows x cols results each: every task
   a (filters) · im2col(input) over geometry g, filled in but for a, a_hold
   (a_key names the whole filters: a is always held) and input; the parity
   check's scales come from job. */
static int conv_call_init(cdc_dedicated_call_t *call, const cdc_layer_t *layer,
                          const cdc_call_plan_t *plan, int64_t rows, int64_t cols,
                          const cdc_conv_geometry_t *g, int64_t batch,
                          const conv_scales_job_t *job)
{
    int rc = cdc__dedicated_call_init(call, plan->code, plan->n, rows, cols);
    if (rc != CDC_OK)
        return rc;
    cdc__dedicated_call_follow(call, plan);
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

/* Re-sized filter blocks (plan->stage_token) go to the workers in the
   background (plan_staging.c) while this call uses the old ones. */
static void stage_filters(cdc_layer_t *layer, const cdc_call_plan_t *plan)
{
    const cdc_shard_set_t *staged;
    cdc_weights_t weights;
    if (!plan->stage_token || cdc__plan_here(plan))
        return;
    cdc__layer_weights(layer, &weights);
    if (cdc__weights_shards(&weights, 1, plan->code, plan->n, plan->stage_here_rows,
                            plan->stage_len, &staged) != CDC_OK) {
        CDC_LOG_WARNF("staging re-sized filter blocks: %s", cdc_last_error());
        return;
    }
    cdc__plan_stage_weights(layer->context, plan, staged,
                            cdc__shard_set_key(staged, layer->weights_key));
}

/* count filters' results (rows of block, cols = batch x spatial wide: the
   images side by side) into y (batch x channels x spatial) at filter first. */
static void filters_into_output(const cdc_layer_t *layer, int64_t first, int64_t count,
                                const float *block, int64_t batch, int64_t spatial, float *y)
{
    int64_t cols = batch * spatial;
    for (int64_t p = 0; p < count; p++)
        for (int64_t b = 0; b < batch; b++)
            memcpy(y + (b * layer->rows + first + p) * spatial, block + p * cols + b * spatial,
                   (size_t) spatial * sizeof(float));
}

/* Channel split in the rotated parity layout (rotated_layout.h): each worker
   its filters' rows, then its parity blocks, over the whole input. */
static int conv_channel_rotated(cdc_layer_t *layer, const cdc_call_plan_t *plan,
                                const cdc_conv_geometry_t *g, int64_t batch,
                                const float *x, float *y)
{
    cdc_weights_t weights;
    const void *encoding;
    cdc__layer_weights(layer, &weights);
    int rc = cdc__weights_layout(&weights, &cdc__rotated_encoding, plan->code, &encoding);
    if (rc != CDC_OK)
        return rc;
    const cdc_rotated_set_t *set = encoding;
    int64_t spatial = g->out_h * g->out_w, cols = batch * spatial;
    float *out = malloc((size_t) layer->rows * (size_t) cols * sizeof(float));
    if (!out)
        return cdc__fail(CDC_ENOMEM, "conv result of %lld x %lld", (long long) layer->rows,
                         (long long) cols);
    cdc_rotated_call_t call = {.set = set, .a_key = layer->weights_key, .out = out,
                               .split = plan->split, .wanted_r = plan->wanted_r};
    call.proto.kind = CDC_TASK_CONV;
    call.proto.k = layer->k;
    call.proto.geometry = g;
    call.proto.batch = batch;
    call.proto.input = x;
    call.proto.cols = cols;
    rc = cdc__rotated_call_run(layer->context, &call);
    if (rc == CDC_OK)
        filters_into_output(layer, 0, layer->rows, out, batch, spatial, y);
    free(out);
    return rc;
}

/* Channel split: shard s holds a block of filters and gets the whole input;
   a data shard computes only its block's filters. */
static int conv_channel_split(cdc_layer_t *layer, const cdc_call_plan_t *plan,
                              const cdc_conv_geometry_t *g, int64_t batch,
                              const float *x, float *y)
{
    if (cdc__rotated_wanted(layer->context, plan, layer->rows))
        return conv_channel_rotated(layer, plan, g, batch, x, y);
    int n = plan->n;
    const cdc_shard_set_t *filters;
    const int64_t *lengths = plan->sized ? plan->block_len : NULL;
    cdc_weights_t weights;
    cdc__layer_weights(layer, &weights);
    int rc = cdc__weights_shards(&weights, 0, plan->code, n, plan->here_rows, lengths, &filters);
    if (rc != CDC_OK)
        return rc;
    stage_filters(layer, plan);
    int64_t spatial = g->out_h * g->out_w, cols = batch * spatial;
    cdc_dedicated_call_t call;
    conv_scales_job_t job = {layer, filters};
    rc = conv_call_init(&call, layer, plan, filters->block_rows, cols, g, batch, &job);
    if (rc != CDC_OK)
        return rc;
    /* The coordinator's share: the first here_rows filters, computed here
       beside the shards (dedicated_layout.h), into rows of their own. */
    float *share = NULL;
    if (plan->here_rows > 0) {
        share = malloc((size_t) plan->here_rows * (size_t) cols * sizeof(float));
        if (!share) {
            cdc__dedicated_call_release(&call);
            return cdc__fail(CDC_ENOMEM, "the coordinator's share: %lld x %lld",
                             (long long) plan->here_rows, (long long) cols);
        }
        call.share = call.tasks[0];
        call.share.shard = call.share.cover = -1;
        call.share.a = layer->weights;
        call.share.a_rows = plan->here_rows;
        call.share.a_key = 0;
        call.share.input = x;
        call.share.cols = cols;
        call.share.result = share;
    }
    uint64_t key = cdc__shard_set_key(filters, layer->weights_key);
    for (int s = 0; s < n + plan->r; s++) {
        call.tasks[s].a = filters->blocks[s];
        call.tasks[s].a_rows =
            s < n ? cdc__shard_set_valid_rows(filters, s) : filters->block_rows;
        call.tasks[s].a_key = key;
        call.tasks[s].a_hold = cdc__shard_set_hold(filters);
        call.tasks[s].input = x;
    }
    rc = cdc__dedicated_call_run(layer->context, &call);
    if (rc == CDC_OK && share)
        filters_into_output(layer, 0, plan->here_rows, share, batch, spatial, y);
    free(share);
    for (int s = 0; rc == CDC_OK && s < n; s++)
        filters_into_output(layer, cdc__shard_set_first_row(filters, s),
                            cdc__shard_set_valid_rows(filters, s), call.results[s], batch,
                            spatial, y);
    cdc__dedicated_call_release(&call);
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

/* Output rows and geometry of every band (see cdc__conv_bands_encode):
   *total the floats of all bands. */
static int bands_layout(int n, int r, const int64_t *lengths, const cdc_conv_geometry_t *g,
                        int64_t batch, cdc_conv_bands_t *bands, size_t *total)
{
    /* Output rows past a band's end whose windows still reach its rows. */
    int64_t halo = (cdc__plan_band_height(g, 1) - 1) / g->stride_h;
    int64_t equal = (g->out_h + n - 1) / n, first = 0;
    memset(bands, 0, sizeof *bands);
    for (int i = 0; i < n; i++) {
        int64_t left = g->out_h - first;
        int64_t len = lengths ? lengths[i] : left < equal ? left : equal;
        bands->first_row[i] = first;
        bands->real_rows[i] = len;
        bands->block_rows = len > bands->block_rows ? len : bands->block_rows;
        first += len;
    }
    *total = 0;
    for (int s = 0; s < n + r; s++) {
        int64_t len = s < n ? bands->real_rows[s] : bands->block_rows;
        int64_t rows = len + (s < n && len > 0 ? halo : 0);
        bands->out_rows[s] = rows < bands->block_rows ? rows : bands->block_rows;
        bands->geometry[s] = *g;
        if (bands->out_rows[s] == 0)
            continue; /* an empty band: nothing to compute */
        bands->geometry[s].h = cdc__plan_band_height(g, bands->out_rows[s]);
        bands->geometry[s].pad_h = 0;
        int rc = cdc__conv_geometry_finish(&bands->geometry[s]);
        if (rc != CDC_OK)
            return rc;
        *total += (size_t) batch * (size_t) (g->channels * bands->geometry[s].h * g->w);
    }
    return CDC_OK;
}

/* The bands' parity, one (image, channel) plane of every band at a time, so
   it is summed while the cut planes are still in cache. A data band is zero
   below its real rows: its halo rows are zeros too, and past its end the
   code's padding is read from zeros (zero_rows rows). */
static int bands_parity(const cdc_code_t *code, int n, const cdc_conv_geometry_t *g,
                        int64_t planes, cdc_conv_bands_t *bands, const float *zeros)
{
    int r = cdc__code_r(code);
    int64_t heights[CDC_CODE_MAX_N], parity_h = bands->geometry[n].h;
    for (int i = 0; i < n; i++)
        heights[i] =
            bands->real_rows[i] > 0 ? cdc__plan_band_height(g, bands->real_rows[i]) : 0;
    for (int64_t bc = 0; bc < planes; bc++) {
        const float *data[CDC_CODE_MAX_N];
        float *parity[CDC_CODE_MAX_R];
        for (int i = 0; i < n; i++)
            data[i] = heights[i] > 0 ? bands->input[i] + bc * bands->geometry[i].h * g->w
                                     : zeros;
        for (int j = 0; j < r; j++)
            parity[j] = (float *) bands->input[n + j] + bc * parity_h * g->w;
        int rc = cdc__encode_ragged(code, data, heights, parity_h, g->w, parity, zeros,
                                    parity_h);
        if (rc != CDC_OK)
            return rc;
    }
    return CDC_OK;
}

int cdc__conv_bands_encode(const cdc_code_t *code, int n, const int64_t *lengths,
                           const cdc_conv_geometry_t *g, int64_t batch, const float *x,
                           cdc_conv_bands_t *bands)
{
    int r = code ? cdc__code_r(code) : 0, shards = n + r;
    size_t total;
    int rc = bands_layout(n, r, lengths, g, batch, bands, &total);
    if (rc != CDC_OK)
        return rc;
    float *storage = cdc__scratch(CDC_SCRATCH_BANDS, total);
    if (!storage)
        return cdc__fail(CDC_ENOMEM, "%d input bands of %zu floats", shards, total);
    int64_t planes = batch * g->channels;
    for (int s = 0; s < shards; s++) {
        bands->input[s] = storage;
        if (bands->out_rows[s] > 0)
            storage += (size_t) planes * (size_t) (bands->geometry[s].h * g->w);
    }
    for (int i = 0; i < n; i++) {
        if (bands->out_rows[i] == 0)
            continue;
        int64_t band_h = bands->geometry[i].h;
        int64_t real_h = cdc__plan_band_height(g, bands->real_rows[i]);
        float *band = (float *) bands->input[i];
        for (int64_t bc = 0; bc < planes; bc++) {
            float *plane = band + bc * band_h * g->w;
            cut_band(g, 1, x + bc * g->h * g->w, bands->first_row[i] * g->stride_h, real_h,
                     plane);
            memset(plane + real_h * g->w, 0,
                   (size_t) ((band_h - real_h) * g->w) * sizeof(float));
        }
    }
    if (r == 0)
        return CDC_OK;
    float *zeros = calloc((size_t) (bands->geometry[n].h * g->w), sizeof(float));
    if (!zeros)
        return cdc__fail(CDC_ENOMEM, "a zero band plane");
    rc = bands_parity(code, n, g, planes, bands, zeros);
    free(zeros);
    return rc;
}

/* Spatial split: shard s computes a block of output rows from a band of input
   rows (with its halo). im2col is linear, so the parity band, the coded sum
   of the input bands zero-padded to the longest, gives the coded sum of their
   outputs zero-padded likewise, but for one thing: where windows overlap
   (stride < window height), the first output rows past a short band's end
   still read its last input rows, so its padded output is not zero there.
   A data shard computes those halo rows too (at most (window - 1) / stride
   of them); every row past them is zero and neither sent nor computed. */
static int conv_spatial_split(cdc_layer_t *layer, const cdc_call_plan_t *plan,
                              const cdc_conv_geometry_t *g, int64_t batch,
                              const float *x, float *y)
{
    int n = plan->n, shards = plan->n + plan->r;
    cdc_conv_bands_t bands;
    int rc = cdc__conv_bands_encode(plan->code, n, plan->sized ? plan->block_len : NULL, g,
                                    batch, x, &bands);
    if (rc != CDC_OK)
        return rc;
    int64_t b_rows = bands.block_rows, cols = batch * b_rows * g->out_w;
    cdc_dedicated_call_t call;
    conv_scales_job_t job = {layer, NULL};
    rc = conv_call_init(&call, layer, plan, layer->rows, cols, &bands.geometry[n], batch, &job);
    if (rc != CDC_OK)
        return rc;
    call.col_groups = batch; /* a band's output rows, image by image */
    for (int s = 0; s < shards; s++) {
        call.tasks[s].a = layer->weights;
        call.tasks[s].a_hold = layer->weights_hold;
        call.tasks[s].input = bands.input[s];
        call.tasks[s].geometry = &bands.geometry[s];
        call.tasks[s].cols = batch * bands.out_rows[s] * g->out_w;
    }
    rc = cdc__dedicated_call_run(layer->context, &call);
    if (rc == CDC_OK) {
        int64_t plane = g->out_h * g->out_w;
        size_t row_bytes = (size_t) g->out_w * sizeof(float);
        for (int s = 0; s < n; s++)
            for (int64_t o = 0; o < layer->rows; o++)
                for (int64_t b = 0; b < batch; b++)
                    for (int64_t t = 0; t < bands.real_rows[s]; t++)
                        memcpy(y + (b * layer->rows + o) * plane +
                                   (bands.first_row[s] + t) * g->out_w,
                               call.results[s] + o * cols + (b * b_rows + t) * g->out_w,
                               row_bytes);
    }
    cdc__dedicated_call_release(&call);
    return rc;
}

/* What an output row (spatial) or a filter (channel) costs (plan.h): a
   band of rows output rows reads (rows - 1) * stride_h + window input rows,
   so each row adds stride_h input rows to a fixed halo, and a data band
   also computes its halo's output rows (conv_spatial_split): a fixed cost
   that makes short bands dear; the filters are cached on workers. */
static cdc_block_cost_t conv_block_cost(const cdc_layer_t *layer, cdc_split_t split,
                                        const cdc_conv_geometry_t *g, int64_t batch)
{
    double k = (double) layer->k, f = sizeof(float);
    double image_row = (double) batch * g->channels * g->w * f;
    double output_row = 2.0 * k * layer->rows * batch * g->out_w;
    int64_t halo = (cdc__plan_band_height(g, 1) - 1) / g->stride_h;
    if (split == CDC_SPLIT_COLUMNS)
        return (cdc_block_cost_t){
            .flops_per_row = output_row,
            .flops_fixed = output_row * (double) halo,
            .bytes_fixed_out = image_row * (cdc__plan_band_height(g, 1) - g->stride_h),
            .bytes_per_row_out = image_row * g->stride_h,
            .bytes_per_row_in = (double) layer->rows * batch * g->out_w * f,
            .held_fixed = (double) layer->rows * k * f};
    return (cdc_block_cost_t){.flops_per_row = 2.0 * k * batch * g->out_h * g->out_w,
                              .bytes_fixed_out = image_row * g->h,
                              .bytes_per_row_out = 0.0,
                              .bytes_per_row_in = (double) batch * g->out_h * g->out_w * f,
                              .held_per_row = k * f};
}

/* The coordinator computing `filters` of the layer's filters itself: the
   im2col matrix written and read once more at the host's bandwidth, then
   the GEMM (local_cost.h). */
static double conv_here_ms(const cdc_layer_t *layer, const cdc_conv_geometry_t *g,
                           int64_t batch, int64_t filters)
{
    int64_t cols = batch * g->out_h * g->out_w;
    double im2col_bytes = 2.0 * (double) layer->k * (double) cols * sizeof(float);
    return im2col_bytes / (cdc__local_speed().gbytes_per_s * 1e6) +
           cdc__local_gemm_ms(filters, cols, layer->k, layer->context->local_gflops);
}

/* What a row of the cut operand costs (plan.h), with the coordinator's line
   under the profiled plan when cut by channel, so that it may take a share
   of the filters (a spatial band's share is not built: it would need its
   halo). */
static cdc_block_cost_t conv_cost(const cdc_layer_t *layer, cdc_split_t split,
                                  const cdc_conv_geometry_t *g, int64_t batch)
{
    cdc_block_cost_t cost = conv_block_cost(layer, split, g, batch);
    if (split == CDC_SPLIT_ROWS && layer->context->config.plan == CDC_PLAN_PROFILED &&
        layer->rows > 1) {
        double one = conv_here_ms(layer, g, batch, 1);
        cost.here_per_row_ms =
            (conv_here_ms(layer, g, batch, layer->rows) - one) / (double) (layer->rows - 1);
        cost.here_fixed_ms = one - cost.here_per_row_ms;
    }
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
    double out = cost->bytes_fixed_out + cost->bytes_per_row_out * (double) rows;
    double in = cost->bytes_per_row_in * (double) rows, slowest = 0.0;
    for (int w = 0; w < count; w++)
        if (profiles[w].live)
            slowest = fmax(slowest, cdc__profile_predict_ms(&profiles[w], flops, out, in));
    return slowest;
}

/* Under the rotated layout the channel split runs rotated (every worker
   1/W of the filters over the whole input) while a spatial split stays
   dedicated (1/n of the output rows, a band of the input each): auto takes
   the one predicted faster on the slowest worker (profile.h; a link not
   measured yet is free, so the channel split until it is). AUTO when the
   layer does not run rotated by channel. */
static cdc_split_t conv_rotated_split(cdc_layer_t *layer, const cdc_call_plan_t *plan,
                                      const cdc_conv_geometry_t *g, int64_t batch)
{
    if (!cdc__rotated_wanted(layer->context, plan, layer->rows))
        return CDC_SPLIT_AUTO;
    int workers = plan->n + plan->r;
    cdc_block_cost_t channel = conv_block_cost(layer, CDC_SPLIT_ROWS, g, batch);
    cdc_block_cost_t spatial = conv_block_cost(layer, CDC_SPLIT_COLUMNS, g, batch);
    double channel_ms = slowest_block_ms(layer->context, &channel,
                                         (layer->rows + workers - 1) / workers);
    double spatial_ms = slowest_block_ms(layer->context, &spatial,
                                         (g->out_h + plan->n - 1) / plan->n);
    return spatial_ms < channel_ms ? CDC_SPLIT_COLUMNS : CDC_SPLIT_ROWS;
}

/* Here or on the workers (cdc__plan_prefer_here). */
static void conv_prefer_here(cdc_layer_t *layer, cdc_call_plan_t *plan,
                             const cdc_conv_geometry_t *g, int64_t batch)
{
    int64_t cols = batch * g->out_h * g->out_w;
    double local_ms = conv_here_ms(layer, g, batch, layer->rows);
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
    if (plan.split == CDC_SPLIT_AUTO)
        plan.split = conv_rotated_split(layer, &plan, g, batch);
    if (plan.split == CDC_SPLIT_AUTO) {
        cdc_split_t by_bytes = cdc__plan_conv_split(g, layer->rows, batch, n, plan.r);
        const cdc_block_cost_t costs[2] = {conv_cost(layer, CDC_SPLIT_ROWS, g, batch),
                                           conv_cost(layer, CDC_SPLIT_COLUMNS, g, batch)};
        const int64_t rows[2] = {layer->rows, g->out_h};
        plan.split = cdc__plan_split_by_latency(layer->context, &plan, costs, rows,
                                                layer->last_split, by_bytes);
    }
    /* A spatial split needs a real output row per data shard. */
    if (plan.split == CDC_SPLIT_COLUMNS && (g->out_h + n - 1) / n * (n - 1) >= g->out_h)
        plan.split = CDC_SPLIT_ROWS;
    cdc_block_cost_t cost = conv_cost(layer, plan.split, g, batch);
    rc = cdc__plan_size_blocks(layer->context, &plan, &cost,
                               plan.split == CDC_SPLIT_COLUMNS ? g->out_h : layer->rows);
    if (rc != CDC_OK)
        return rc;
    if (layer->context->config.plan == CDC_PLAN_PROFILED)
        conv_prefer_here(layer, &plan, g, batch);

    rc = plan.split == CDC_SPLIT_COLUMNS ? conv_spatial_split(layer, &plan, g, batch, x, y)
                                         : conv_channel_split(layer, &plan, g, batch, x, y);
    if (rc != CDC_OK)
        return rc;
    layer->last_split = plan.split;
    cdc_epilogue_t epilogue = cdc__layer_epilogue(layer, batch, plane, y);
    cdc__driver_finish(layer->context, &epilogue, y, batch * layer->rows, plane);
    return CDC_OK;
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
