/* encoded_weights.c - a weight matrix kept encoded between calls
 * (encoded_weights.h). */
#include "encoded_weights.h"

#include "error.h"
#include "norms.h"

#include <stdlib.h>
#include <string.h>

void cdc__encoded_weights_init(cdc_encoded_weights_t *weights, cdc_row_parts_t *src)
{
    memset(weights, 0, sizeof *weights);
    weights->src = src;
    weights->rows = src->rows;
    weights->k = src->k;
}

int cdc__encoded_weights_shards(cdc_encoded_weights_t *weights, int stage,
                                const cdc_code_t *code, int n, int64_t first_row,
                                const int64_t *lengths, const cdc_shard_set_t **set,
                                int *encoded)
{
    *encoded = 0;
    if (!weights->src)
        return cdc__fail(CDC_ESTATE, "encoded weights without rows");
    /* The data blocks alias the rows past the call: contiguous ones. */
    const float *packed = cdc__row_parts_packed(weights->src);
    if (!packed)
        return CDC_ENOMEM;
    return cdc__shard_sets_get(&weights->sets, stage, code, n, first_row, lengths, packed,
                               weights->rows, weights->k, &weights->src->hold, set,
                               encoded);
}

/* Drop both encodings (another layout asked for). */
static void layout_retire(cdc_encoded_weights_t *weights)
{
    if (weights->layout) {
        weights->layout->retire(weights->encoding);
        weights->layout->retire(weights->staged_encoding);
    }
    weights->layout = NULL;
    weights->encoding = weights->staged_encoding = NULL;
}

int cdc__encoded_weights_layout(cdc_encoded_weights_t *weights,
                                const cdc_layout_encoding_t *layout, const cdc_code_t *code,
                                const int64_t *sizes, int stage, const void **encoding,
                                int *encoded)
{
    *encoded = 0;
    if (!weights->src)
        return cdc__fail(CDC_ESTATE, "encoded weights without rows");
    if (weights->layout != layout)
        layout_retire(weights);
    weights->layout = layout;
    int64_t rows = weights->rows, k = weights->k;
    if (layout->matches(weights->encoding, code, rows, k, sizes)) {
        *encoding = weights->encoding;
        return CDC_OK;
    }
    if (layout->matches(weights->staged_encoding, code, rows, k, sizes)) {
        if (!stage) { /* the calls move to it */
            layout->retire(weights->encoding);
            weights->encoding = weights->staged_encoding;
            weights->staged_encoding = NULL;
            *encoding = weights->encoding;
        } else {
            *encoding = weights->staged_encoding;
        }
        return CDC_OK;
    }
    void *fresh;
    int rc = layout->encode(code, weights->src, rows, k, sizes, &fresh);
    if (rc != CDC_OK)
        return rc;
    void **slot = stage ? &weights->staged_encoding : &weights->encoding;
    layout->retire(*slot);
    *slot = fresh;
    *encoded = 1;
    *encoding = fresh;
    return CDC_OK;
}

/* cdc__row_parts_each's step: a run's norms into their rows of the table. */
static void run_norms(void *ctx, const float *run, int64_t at, int64_t rows)
{
    const cdc_encoded_weights_t *weights = ctx;
    cdc__row_norms(run, rows, weights->k, weights->norms + at);
}

const double *cdc__encoded_weights_norms(cdc_encoded_weights_t *weights)
{
    if (!weights->norms && weights->src) {
        weights->norms = malloc((size_t) weights->rows * sizeof(double));
        if (weights->norms)
            cdc__row_parts_each(weights->src, 0, weights->rows, run_norms, weights);
    }
    return weights->norms;
}

static size_t set_bytes(const cdc_shard_set_t *set)
{
    if (!set)
        return 0;
    /* Owned blocks (parity: data blocks alias src) and the row norms of
       every block. */
    return (size_t) set->r * (size_t) set->block_rows * (size_t) set->k * sizeof(float) +
           (size_t) (set->n + set->r) * (size_t) set->block_rows * sizeof(double);
}

size_t cdc__encoded_weights_bytes(const cdc_encoded_weights_t *weights)
{
    return set_bytes(weights->sets.in_use) + set_bytes(weights->sets.staged) +
           (weights->layout ? weights->layout->bytes(weights->encoding) +
                                  weights->layout->bytes(weights->staged_encoding)
                            : 0) +
           (weights->norms ? (size_t) weights->rows * sizeof(double) : 0);
}

void cdc__encoded_weights_retire(cdc_encoded_weights_t *weights)
{
    cdc__shard_sets_retire(&weights->sets);
    layout_retire(weights);
    free(weights->norms);
    weights->norms = NULL;
}

static void weights_encoded(cdc_weights_t *weights, int encoded)
{
    if (encoded && weights->encoded)
        weights->encoded(weights);
}

int cdc__weights_shards(cdc_weights_t *weights, int stage, const cdc_code_t *code, int n,
                        int64_t first_row, const int64_t *lengths,
                        const cdc_shard_set_t **set)
{
    int encoded;
    int rc = cdc__encoded_weights_shards(weights->store, stage, code, n, first_row, lengths,
                                         set, &encoded);
    weights_encoded(weights, rc == CDC_OK && encoded);
    return rc;
}

int cdc__weights_layout(cdc_weights_t *weights, const cdc_layout_encoding_t *layout,
                        const cdc_code_t *code, const int64_t *sizes, int stage,
                        const void **encoding)
{
    int encoded;
    int rc = cdc__encoded_weights_layout(weights->store, layout, code, sizes, stage, encoding,
                                         &encoded);
    weights_encoded(weights, rc == CDC_OK && encoded);
    return rc;
}

const double *cdc__weights_norms(cdc_weights_t *weights)
{
    return cdc__encoded_weights_norms(weights->store);
}

const float *cdc__weights_packed(const cdc_weights_t *weights)
{
    return cdc__row_parts_packed(weights->store->src);
}

cdc_row_parts_t *cdc__weights_rows(const cdc_weights_t *weights)
{
    return weights->store->src;
}
