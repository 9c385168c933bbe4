/* fc.c - fully-connected layers: y = x·Wᵀ + b as a coded GEMM. */
#include "layer.h"

#include "error.h"
#include "matmul_coded.h"
#include "plan.h"

#include <limits.h>
#include <string.h>

/* Samples per shard below which auto keeps an FC layer on the output split. */
enum { CDC_FC_BATCH_SPLIT_MIN = 64 };

int cdc_fc_new(cdc_context_t *context, int64_t out_features, int64_t in_features,
               const float *weights, const float *bias,
               const cdc_layer_options_t *options, cdc_layer_t **layer_p)
{
    return cdc__layer_new(context, CDC_LAYER_FC, out_features, in_features, weights,
                          bias, options, layer_p);
}

/* Bias and ReLU after decoding: shards carry pre-activation values, because
   ReLU on a shard would break the linear recovery. */
static void fc_epilogue(const cdc_layer_t *layer, int64_t batch, float *y)
{
    for (int64_t b = 0; b < batch; b++) {
        float *row = y + b * layer->rows;
        if (layer->bias)
            for (int64_t o = 0; o < layer->rows; o++)
                row[o] += layer->bias[o];
        if (layer->options.relu)
            for (int64_t o = 0; o < layer->rows; o++)
                row[o] = row[o] > 0.0f ? row[o] : 0.0f;
    }
}

int cdc_fc_forward(cdc_layer_t *layer, int64_t batch, const float *x, float *y)
{
    if (!layer || !x || !y)
        return cdc__fail(CDC_EINVAL, "cdc_fc_forward: layer, x and y must not be NULL");
    if (layer->kind != CDC_LAYER_FC)
        return cdc__fail(CDC_EINVAL, "cdc_fc_forward: layer is not a fully-connected layer");
    if (batch < 1 || batch > INT_MAX)
        return cdc__fail(CDC_EDIM, "cdc_fc_forward: batch = %lld, expected 1..%d",
                         (long long) batch, INT_MAX);
    int rc = cdc__check_product(batch, layer->k > layer->rows ? layer->k : layer->rows,
                                INT_MAX, "cdc_fc_forward: batch x features");
    if (rc != CDC_OK)
        return rc;

    int n, r;
    const cdc_code_t *code;
    rc = cdc__layer_plan_code(layer, &n, &r, &code);
    if (rc != CDC_OK)
        return rc;
    cdc_context_t *context = layer->context;
    cdc_split_t split = layer->options.split != CDC_SPLIT_AUTO
                            ? layer->options.split
                            : context->config.split;
    /* T = x · Wᵀ: A = x (batch x in), Bt = W (out x in). Output split = W's rows. */
    /* A batch split makes every worker stream the whole weight matrix per
       call (n times the memory traffic of an output split): auto takes it
       only when each shard gets enough samples to be compute bound. */
    if (split == CDC_SPLIT_AUTO)
        split = (batch + n - 1) / n >= CDC_FC_BATCH_SPLIT_MIN &&
                        cdc__plan_matmul_split(layer->rows, batch, layer->k, n, r, 1, 0) ==
                            CDC_SPLIT_COLUMNS
                    ? CDC_SPLIT_COLUMNS
                    : CDC_SPLIT_ROWS;

    if (split == CDC_SPLIT_ROWS) {
        const cdc_shard_set_t *weights;
        rc = cdc__layer_weight_shards(layer, code, n, &weights);
        if (rc == CDC_OK)
            rc = cdc__matmul_coded(context, code, CDC_SHARD_BT, weights,
                                   layer->weights_key, 0, x, batch, NULL, layer->rows,
                                   layer->k, y, layer->rows);
    } else {
        /* Batch split: the samples are cut and encoded per call; every shard
           multiplies by the whole (cached) weight matrix. */
        cdc_shard_set_t *samples = NULL;
        rc = cdc__shard_set_new(code, n, x, batch, layer->k, &samples);
        if (rc == CDC_OK)
            rc = cdc__matmul_coded_normed(
                context, code, CDC_SHARD_A, samples, 0, layer->weights_key, x, batch,
                layer->weights, layer->rows, layer->k,
                code && context->config.verify ? cdc__layer_weight_norms(layer) : NULL, y,
                layer->rows);
        cdc__shard_set_destroy(&samples);
    }
    if (rc != CDC_OK)
        return rc;
    layer->last_split = split;
    fc_epilogue(layer, batch, y);
    cdc__context_count_call(context);
    return CDC_OK;
}
