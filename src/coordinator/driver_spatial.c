/* driver_spatial.c - a conv layer's spatial split.
 *
 * Shard s computes a block of output rows from a band of input rows (with
 * its halo). im2col is linear, so the parity band, the coded sum of the
 * input bands zero-padded to the longest, gives the coded sum of their
 * outputs zero-padded likewise, but for one thing: where windows overlap
 * (stride < window height), the first output rows past a short band's end
 * still read its last input rows, so its padded output is not zero there.
 * A data shard computes those halo rows too (at most (window - 1) / stride
 * of them); every row past them is zero and neither sent nor computed.
 * The bands travel per call; the filters are cached on the workers. The
 * coordinator's share (plan.h here_rows) is the first output rows, computed
 * here from a band of its own, outside the code. */
#include "driver_spatial.h"

#include "conv_bands.h"
#include "dedicated_layout.h"
#include "error.h"
#include "norms.h"

#include <stdlib.h>
#include <string.h>

/* The parity check's scales, filled only when the check or the accuracy
   guard runs: the filters' row norms and the im2col column norms of each
   shard's band, padded like the results. */
static int spatial_scales_fill(cdc_dedicated_call_t *call)
{
    cdc_weights_t *filters = (cdc_weights_t *) call->scales_job;
    const double *filter_norms = cdc__weights_norms(filters);
    if (!filter_norms)
        return cdc__fail(CDC_ENOMEM, "filter norms");
    int shards = call->n + call->r;
    size_t cols = (size_t) call->cols;
    call->scale_storage = calloc((size_t) shards * cols, sizeof(double));
    if (!call->scale_storage)
        return cdc__fail(CDC_ENOMEM, "%d x %zu patch norms", shards, cols);
    int64_t groups = call->col_groups, to_w = call->cols / groups;
    for (int s = 0; s < shards; s++) {
        const cdc_shard_task_t *task = &call->tasks[s];
        call->scales[s].row = filter_norms;
        call->scales[s].col = call->scale_storage + (size_t) s * cols;
        if (task->cols == 0)
            continue; /* an empty band: its result is zero */
        const cdc_conv_geometry_t *g = task->geometry;
        int64_t images = task->batch / groups, image = g->channels * g->h * g->w;
        for (int64_t b = 0; b < groups; b++)
            cdc__patch_norms(g, images, task->input + b * images * image,
                             call->scale_storage + (size_t) s * cols + b * to_w);
    }
    call->inner = filters->store->k;
    return CDC_OK;
}

/* Every data band's real output rows into y (batch x channels x plane). */
static void bands_into_output(const cdc_dedicated_call_t *call, const cdc_conv_bands_t *bands,
                              const cdc_conv_geometry_t *g, int64_t batch, int64_t channels,
                              float *y)
{
    int64_t plane = g->out_h * g->out_w, b_rows = bands->block_rows;
    size_t row_bytes = (size_t) g->out_w * sizeof(float);
    for (int s = 0; s < call->n; s++)
        for (int64_t o = 0; o < channels; o++)
            for (int64_t b = 0; b < batch; b++)
                for (int64_t t = 0; t < bands->real_rows[s]; t++)
                    memcpy(y + (b * channels + o) * plane + (bands->first_row[s] + t) * g->out_w,
                           call->results[s] + o * call->cols + (b * b_rows + t) * g->out_w,
                           row_bytes);
}

/* The coordinator's share (bands->here_rows > 0): a conv task over its
   band, computed here while the shards run, into *out (channels x batch x
   here_rows x out_w, allocated). */
static int spatial_share(const cdc_conv_bands_t *bands, const cdc_weights_t *filters,
                         int64_t channels, int64_t k, int64_t batch, cdc_shard_task_t *share,
                         float **out)
{
    int64_t cols = batch * bands->here_rows * bands->here_geometry.out_w;
    *out = malloc((size_t) channels * (size_t) cols * sizeof(float));
    if (!*out)
        return cdc__fail(CDC_ENOMEM, "the coordinator's share: %lld x %lld",
                         (long long) channels, (long long) cols);
    share->shard = share->cover = -1;
    share->kind = CDC_TASK_CONV;
    share->a = cdc__weights_packed(filters);
    share->a_rows = channels;
    share->k = k;
    share->input = bands->here_input;
    share->geometry = &bands->here_geometry;
    share->batch = batch;
    share->cols = cols;
    share->result = *out;
    return CDC_OK;
}

/* The share's rows (channels x batch x here_rows x out_w) into the first
   output rows of every plane of y. */
static void share_into_output(const float *share, const cdc_conv_bands_t *bands,
                              const cdc_conv_geometry_t *g, int64_t batch, int64_t channels,
                              float *y)
{
    int64_t plane = g->out_h * g->out_w, rows = bands->here_rows;
    int64_t cols = batch * rows * g->out_w;
    for (int64_t o = 0; o < channels; o++)
        for (int64_t b = 0; b < batch; b++)
            memcpy(y + (b * channels + o) * plane, share + o * cols + b * rows * g->out_w,
                   (size_t) (rows * g->out_w) * sizeof(float));
}

int cdc__driver_spatial(cdc_context_t *context, const cdc_gemm_desc_t *desc,
                        const cdc_call_plan_t *plan)
{
    const cdc_patches_t *patches = desc->patches;
    const cdc_conv_geometry_t *g = patches->geometry;
    cdc_weights_t *filters = desc->a.weights;
    int64_t batch = patches->batch, channels = desc->a.view.rows;
    int n = plan->n, shards = plan->n + plan->r;
    cdc_conv_bands_t bands;
    int rc = cdc__conv_bands_encode(plan->code, n, plan->here_rows,
                                    plan->sized ? plan->block_len : NULL, g, batch,
                                    patches->input, &bands);
    if (rc != CDC_OK)
        return rc;
    int64_t cols = batch * bands.block_rows * g->out_w;
    cdc_dedicated_call_t call;
    rc = cdc__dedicated_call_init(&call, plan->code, n, channels, cols);
    if (rc != CDC_OK)
        return rc;
    cdc__dedicated_call_follow(&call, plan);
    call.col_groups = batch; /* a band's output rows, image by image */
    if (plan->code) {
        call.scales_fill = spatial_scales_fill;
        call.scales_job = filters;
    }
    for (int s = 0; s < shards; s++) {
        cdc_shard_task_t *task = &call.tasks[s];
        task->kind = CDC_TASK_CONV;
        task->a = cdc__weights_packed(filters);
        task->a_rows = channels;
        task->k = desc->a.view.k;
        task->a_key = filters->whole_key;
        task->a_whole = 1;
        task->a_hold = filters->hold;
        task->input = bands.input[s];
        task->geometry = &bands.geometry[s];
        task->batch = batch;
        task->cols = batch * bands.out_rows[s] * g->out_w;
    }
    float *share = NULL;
    if (bands.here_rows > 0)
        rc = spatial_share(&bands, filters, channels, desc->a.view.k, batch, &call.share,
                           &share);
    if (rc == CDC_OK)
        rc = cdc__dedicated_call_run(context, &call);
    if (rc == CDC_OK) {
        bands_into_output(&call, &bands, g, batch, channels, desc->epilogue.out);
        if (share)
            share_into_output(share, &bands, g, batch, channels, desc->epilogue.out);
    }
    free(share);
    cdc__dedicated_call_release(&call);
    return rc;
}
