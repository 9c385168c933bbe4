/* fc.c - fully-connected layers: y = x·Wᵀ + b, described to the coded-GEMM
   driver (driver.h) with a bias/ReLU epilogue. */
#include "layer.h"

#include "error.h"

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

/* The call, under the context's call lock (cdc_fc_forward validated it). */
static int fc_call(cdc_layer_t *layer, int64_t batch, const float *x, float *y)
{
    cdc_call_plan_t plan;
    int rc = cdc__layer_plan(layer, &plan);
    if (rc != CDC_OK)
        return rc;
    /* T = x · Wᵀ: A = x (batch x in), Bt = W (out x in). The output split
       (ROWS, the caller's rows = W's rows) cuts Bt, so T is "transposed".
       A batch split makes every worker stream the whole weight matrix per
       call (n times the memory traffic of an output split): auto takes it
       only when each shard gets enough samples to be compute bound. */
    if (plan.split == CDC_SPLIT_AUTO)
        plan.split = (batch + plan.n - 1) / plan.n >= CDC_FC_BATCH_SPLIT_MIN &&
                             cdc__plan_matmul_split(layer->rows, batch, layer->k, plan.n,
                                                    plan.r, 1, 0) == CDC_SPLIT_COLUMNS
                         ? CDC_SPLIT_COLUMNS
                         : CDC_SPLIT_ROWS;
    cdc_weights_t weights;
    cdc__layer_weights(layer, &weights);
    cdc_gemm_desc_t desc;
    memset(&desc, 0, sizeof desc);
    desc.a.view = (cdc_operand_t){x, batch, layer->k, layer->k, 0};
    desc.a.in_place = 1;
    desc.bt.view = (cdc_operand_t){layer->weights, layer->rows, layer->k, layer->k, 0};
    desc.bt.weights = &weights;
    desc.transposed = 1;
    desc.epilogue = cdc__layer_epilogue(layer, batch, 1, y);
    rc = cdc__driver_gemm(layer->context, &desc, &plan);
    if (rc == CDC_OK)
        layer->last_split = plan.split;
    return rc;
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

    cdc__context_call_begin(layer->context);
    rc = fc_call(layer, batch, x, y);
    cdc__context_call_end(layer->context);
    return rc;
}
