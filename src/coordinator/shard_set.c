/* shard_set.c - row blocks of an operand and their parity (encode once).
 *
 * The split operand X (rows x k) is cut into n blocks of b = ceil(rows / n)
 * rows. Codes combine whole blocks, so every block must have the same shape:
 * a block that runs past the end (the tail, or blocks wholly past it when n
 * does not divide rows well) is a zero-padded copy, and a full block is not
 * copied at all but aliases X (weights stay in one place; only the tail and
 * the r parity blocks P_j = sum_i g_ji X_i are owned). Zero rows in a data
 * block give zero rows in its result, so padding never changes a real
 * element; cdc__shard_set_valid_rows says which rows to keep. Each block's
 * row norms are kept beside it: the parity check scales its rounding
 * tolerance by them.
 *
 * Lifetime. A cached set (a layer's weights, a BLAS operand) is read after
 * its owner lets go: by libzmq's I/O thread while a zero-copy WEIGHTS send
 * is in flight, by the client when it re-ships a slot's weights. So the set
 * carries a hold (hold.h) and holds its source's: the owner retires the set
 * instead of freeing it, and the last reference frees the owned blocks and
 * releases the source. */
#include "shard_set.h"

#include "error.h"
#include "norms.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

int64_t cdc__shard_set_valid_rows(const cdc_shard_set_t *set, int i)
{
    int64_t first = (int64_t) i * set->block_rows;
    if (first >= set->rows)
        return 0;
    int64_t left = set->rows - first;
    return left < set->block_rows ? left : set->block_rows;
}

/* The last reference: the owned blocks go, and the set's reference to its
   source (which may free the source in turn). Any thread. */
static void shard_set_free(cdc_hold_t *hold)
{
    cdc_shard_set_t *set = (cdc_shard_set_t *) ((char *) hold - offsetof(cdc_shard_set_t, hold));
    cdc_hold_t *src_hold = set->src_hold;
    free(set->owned);
    free(set->norms);
    free(set);
    cdc_hold_release(src_hold);
}

int cdc__shard_set_new(const cdc_code_t *code, int n, const float *src, int64_t rows,
                       int64_t k, cdc_hold_t *src_hold, cdc_shard_set_t **set_p)
{
    int r = code ? cdc_code_r(code) : 0;
    if (n < 1 || n > CDC_CODE_MAX_N || rows < 1 || k < 1 || !src || !set_p ||
        (code && cdc_code_n(code) != n))
        return cdc__fail(CDC_EINVAL, "shard set: n = %d, rows = %lld, k = %lld", n,
                         (long long) rows, (long long) k);
    cdc_shard_set_t *set = calloc(1, sizeof *set);
    if (!set)
        return cdc__fail(CDC_ENOMEM, "shard set");
    set->n = n;
    set->r = r;
    set->rows = rows;
    set->k = k;
    set->block_rows = (rows + n - 1) / n;
    cdc_hold_init(&set->hold, shard_set_free);
    set->src_hold = cdc_hold_retain(src_hold);

    size_t block_size = (size_t) set->block_rows * (size_t) k;
    int padded = 0;
    for (int i = 0; i < n; i++)
        padded += cdc__shard_set_valid_rows(set, i) < set->block_rows;
    if (padded + r > 0) {
        set->owned = calloc((size_t) (padded + r) * block_size, sizeof(float));
        if (!set->owned) {
            cdc__shard_set_retire(&set);
            return cdc__fail(CDC_ENOMEM, "shard set: %d blocks of %zu floats",
                             padded + r, block_size);
        }
    }
    float *next_owned = set->owned;
    for (int i = 0; i < n; i++) {
        int64_t valid = cdc__shard_set_valid_rows(set, i);
        const float *start = src + (size_t) i * block_size;
        if (valid == set->block_rows) {
            set->blocks[i] = start;
            continue;
        }
        if (valid > 0)
            memcpy(next_owned, start, (size_t) valid * (size_t) k * sizeof(float));
        set->blocks[i] = next_owned;
        next_owned += block_size;
    }
    float *parity[CDC_CODE_MAX_R];
    for (int j = 0; j < r; j++) {
        parity[j] = next_owned + (size_t) j * block_size;
        set->blocks[n + j] = parity[j];
    }
    if (r > 0) {
        int rc = cdc_code_encode(code, set->block_rows, k, set->blocks, k, parity, k);
        if (rc != CDC_OK) {
            cdc__shard_set_retire(&set);
            return rc;
        }
    }
    set->norms = malloc((size_t) (n + r) * (size_t) set->block_rows * sizeof(double));
    if (!set->norms) {
        cdc__shard_set_retire(&set);
        return cdc__fail(CDC_ENOMEM, "shard set norms");
    }
    for (int s = 0; s < n + r; s++) {
        double *norms = set->norms + (size_t) s * (size_t) set->block_rows;
        cdc__row_norms(set->blocks[s], set->block_rows, k, norms);
        set->row_norms[s] = norms;
    }
    *set_p = set;
    return CDC_OK;
}

void cdc__shard_set_retire(cdc_shard_set_t **set_p)
{
    if (!set_p || !*set_p)
        return;
    cdc_hold_retire(&(*set_p)->hold);
    *set_p = NULL;
}

cdc_hold_t *cdc__shard_set_hold(const cdc_shard_set_t *set)
{
    /* The count changes under a const view: holders share the set, they do
       not modify what it holds. */
    return (cdc_hold_t *) &set->hold;
}
