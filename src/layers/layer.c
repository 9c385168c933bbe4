/* layer.c - layer creation, the weights as the driver takes them,
 * destruction.
 *
 * A layer keeps its weights' encodings in the coordinator's store
 * (encoded_weights.h): a call whose plan differs retires what no longer
 * matches and encodes anew; a retired encoding lives on while a send or a
 * slot manifest holds it. */
#include "layer.h"

#include "error.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

void cdc_layer_options_init(cdc_layer_options_t *options)
{
    if (!options)
        return;
    options->split = CDC_SPLIT_AUTO;
    options->parity = CDC_PARITY_DEFAULT;
    options->relu = 0;
}

int cdc__check_product(int64_t a, int64_t b, int64_t limit, const char *what)
{
    if (a < 0 || b < 0 || (a > 0 && b > limit / a))
        return cdc__fail(CDC_EDIM, "%s: %lld x %lld exceeds %lld", what, (long long) a,
                         (long long) b, (long long) limit);
    return CDC_OK;
}

static int check_shape(int64_t rows, int64_t k)
{
    if (rows < 1 || k < 1 || rows > INT_MAX || k > INT_MAX)
        return cdc__fail(CDC_EDIM, "layer weights %lld x %lld: each must be in 1..%d",
                         (long long) rows, (long long) k, INT_MAX);
    return cdc__check_product(rows, k, (int64_t) (SIZE_MAX / 4 / 4), "layer weights");
}

/* The options, resolved against the context, into *opts, and the shape of
   the rows x k weights checked: what every layer checks before it takes its
   weights. */
static int layer_options(cdc_context_t *context, const cdc_layer_options_t *options,
                         int64_t rows, int64_t k, cdc_layer_options_t *opts)
{
    cdc_layer_options_init(opts);
    if (options)
        *opts = *options;
    if (opts->split != CDC_SPLIT_AUTO && opts->split != CDC_SPLIT_ROWS &&
        opts->split != CDC_SPLIT_COLUMNS)
        return cdc__fail(CDC_EINVAL, "layer options: split = %d is not a cdc_split_t",
                         (int) opts->split);
    if (opts->parity < CDC_PARITY_DEFAULT || opts->parity > CDC_MAX_PARITY)
        return cdc__fail(CDC_EINVAL, "layer options: parity = %d, expected -1..%d",
                         opts->parity, CDC_MAX_PARITY);
    int n, rc = cdc__context_data_shards(context, cdc__context_parity(context, opts->parity),
                                         &n);
    if (rc != CDC_OK)
        return rc == CDC_ECONFIG ? cdc__fail(CDC_EINVAL, "layer options: %s",
                                             cdc_last_error())
                                 : rc;
    return check_shape(rows, k);
}

int cdc__layer_new_rows(cdc_context_t *context, cdc_layer_kind_t kind, cdc_row_parts_t *parts,
                        const float *bias, const cdc_layer_options_t *opts,
                        cdc_layer_t **layer_p)
{
    int64_t rows = parts->rows, k = parts->k;
    cdc_layer_t *layer = calloc(1, sizeof *layer);
    float *bias_copy = bias ? malloc((size_t) rows * sizeof(float)) : NULL;
    if (!layer || (bias && !bias_copy)) {
        free(layer);
        free(bias_copy);
        cdc__row_parts_close(parts);
        return cdc__fail(CDC_ENOMEM, "layer of %lld rows", (long long) rows);
    }
    layer->bias = bias_copy;
    if (bias)
        memcpy(layer->bias, bias, (size_t) rows * sizeof(float));
    layer->context = context;
    layer->kind = kind;
    layer->options = *opts;
    layer->rows = rows;
    layer->k = k;
    layer->parts = parts;
    layer->weights = parts->borrowed ? NULL : (float *) parts->part[0];
    /* The content names the weights on workers (and is checked there). */
    layer->weights_key = cdc__row_parts_hash(parts, (uint64_t) rows);
    layer->last_split = CDC_SPLIT_AUTO;
    cdc__encoded_weights_init(&layer->encoded, parts);
    *layer_p = layer;
    return CDC_OK;
}

int cdc__layer_new(cdc_context_t *context, cdc_layer_kind_t kind, int64_t rows,
                   int64_t k, const float *weights, const float *bias,
                   const cdc_layer_options_t *options, cdc_layer_t **layer_p)
{
    if (!context || !weights || !layer_p)
        return cdc__fail(CDC_EINVAL, "layer: context, weights and layer_p must not be NULL");
    cdc_layer_options_t opts;
    int rc = layer_options(context, options, rows, k, &opts);
    if (rc != CDC_OK)
        return rc;
    /* Held: encodings alias the copy and zero-copy sends read it after the
       call; both may outlive the layer. */
    cdc_row_parts_t *parts = cdc__row_parts_copy_new(weights, rows, k);
    if (!parts)
        return CDC_ENOMEM;
    return cdc__layer_new_rows(context, kind, parts, bias, &opts, layer_p);
}

int cdc_fc_new_borrowed(cdc_context_t *context, int64_t in_features,
                        const cdc_weight_part_t *parts, int part_count, unsigned flags,
                        const float *bias, const cdc_layer_options_t *options,
                        cdc_layer_t **layer_p)
{
    if (!context || !parts || !layer_p)
        return cdc__fail(CDC_EINVAL, "cdc_fc_new_borrowed: context, parts and layer_p must "
                         "not be NULL");
    if (part_count < 1 || part_count > CDC_MAX_WEIGHT_PARTS)
        return cdc__fail(CDC_EINVAL, "cdc_fc_new_borrowed: part_count = %d, expected 1..%d",
                         part_count, CDC_MAX_WEIGHT_PARTS);
    if (flags & ~CDC_BORROW_FILE_MAPPED)
        return cdc__fail(CDC_EINVAL, "cdc_fc_new_borrowed: unknown flags 0x%x",
                         flags & ~CDC_BORROW_FILE_MAPPED);
    int64_t rows = 0;
    for (int i = 0; i < part_count; i++) {
        if (!parts[i].rows || parts[i].count < 1 || parts[i].count > INT_MAX)
            return cdc__fail(CDC_EINVAL, "cdc_fc_new_borrowed: part %d: %s", i,
                             parts[i].rows ? "count must be in 1..INT_MAX" : "rows is NULL");
        rows += parts[i].count;
    }
    cdc_layer_options_t opts;
    int rc = layer_options(context, options, rows, in_features, &opts);
    if (rc != CDC_OK)
        return rc;
    cdc_row_parts_t *borrowed;
    rc = cdc__row_parts_borrow(parts, part_count, in_features,
                               (flags & CDC_BORROW_FILE_MAPPED) != 0, &borrowed);
    if (rc != CDC_OK)
        return rc;
    return cdc__layer_new_rows(context, CDC_LAYER_FC, borrowed, bias, &opts, layer_p);
}

int cdc__layer_plan(cdc_layer_t *layer, cdc_call_plan_t *plan)
{
    return cdc__plan_resolve(layer->context, layer->options.parity, layer->options.split,
                             plan);
}

/* Something of the weights was encoded: counted. */
static void layer_weights_encoded(cdc_weights_t *weights)
{
    cdc_layer_t *layer = weights->owner;
    pthread_mutex_lock(&layer->context->lock);
    layer->context->stats.weight_encodes++;
    pthread_mutex_unlock(&layer->context->lock);
}

void cdc__layer_weights(cdc_layer_t *layer, cdc_weights_t *weights)
{
    /* The content key names the row blocks and the whole matrix alike. */
    *weights = (cdc_weights_t){.hold = &layer->parts->hold,
                               .set_key = layer->weights_key,
                               .whole_key = layer->weights_key,
                               .store = &layer->encoded,
                               .encoded = layer_weights_encoded,
                               .owner = layer};
}

cdc_epilogue_t cdc__layer_epilogue(const cdc_layer_t *layer, int64_t batch, int64_t plane,
                                   float *y)
{
    return (cdc_epilogue_t){.kind = CDC_EPILOGUE_BIAS_RELU, .out = y, .bias = layer->bias,
                            .relu = layer->options.relu, .outer = batch,
                            .channels = layer->rows, .inner = plane};
}

cdc_split_t cdc_layer_split(const cdc_layer_t *layer)
{
    return layer ? layer->last_split : CDC_SPLIT_AUTO;
}

void cdc_layer_destroy(cdc_layer_t **layer_p)
{
    if (!layer_p || !*layer_p)
        return;
    cdc_layer_t *layer = *layer_p;
    /* The weights and their row blocks go when their last holder lets go
       (a zero-copy send still in flight, the client's slot manifest); not
       while another thread's call on the context reads the layer's sets. */
    cdc__context_call_begin(layer->context);
    cdc__encoded_weights_retire(&layer->encoded);
    cdc__context_call_end(layer->context);
    cdc__row_parts_close(layer->parts);
    free(layer->bias);
    free(layer);
    *layer_p = NULL;
}
