/* shard_set.c - row blocks of an operand and their parity (encode once).
 *
 * The split operand X (rows x k) is cut into n data blocks: block i is rows
 * [offset_i, offset_i + len_i) of X, either the equal cut (ceil(rows / n)
 * rows each, the tail shorter) or lengths the plan sized to each worker's
 * speed. Codes combine whole blocks of one shape, so in the code's algebra
 * every data block is zero-padded to B = max len_i rows and each parity block
 * P_j = sum_i g_ji X_i has B rows. The padding exists only there: a data
 * block aliases X (weights stay in one place; only the r parity blocks are
 * owned), its shard computes only its len_i real rows, and the coordinator
 * puts the zeros back into the result before decoding (engine.c). Zero
 * rows in a data block give zero rows in its result, so padding never
 * changes a real element.
 *
 * Encoding never copies a block to pad it: the rows are walked in segments
 * over which the set of blocks still running is fixed, blocks that have
 * ended contributing a small zeroed chunk (cdc__encode_ragged). Each block's
 * row norms are kept beside it (B per block, 0 for padding): the parity check
 * scales its rounding tolerance by them.
 *
 * Lifetime. A cached set (a layer's weights, a BLAS operand) is read after
 * its owner lets go: by libzmq's I/O thread while a zero-copy WEIGHTS send
 * is in flight, by the client when it re-ships a slot's weights. So the set
 * carries a hold (hold.h) and holds its source's: the owner retires the set
 * instead of freeing it, and the last reference frees the owned blocks and
 * releases the source. */
#include "shard_set.h"

#include "error.h"
#include "hash.h"
#include "norms.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Rows of the zero chunk that stands in for ended blocks while encoding:
   about 64 KiB of floats, at least one row. */
enum { ZERO_CHUNK_FLOATS = 16384 };

int64_t cdc__shard_set_valid_rows(const cdc_shard_set_t *set, int i)
{
    return set->len[i];
}

int64_t cdc__shard_set_first_row(const cdc_shard_set_t *set, int i)
{
    return set->offset[i];
}

/* The equal cut's length of block i. */
static int64_t equal_len(int64_t rows, int n, int i)
{
    int64_t b = (rows + n - 1) / n, first = (int64_t) i * b;
    return first >= rows ? 0 : rows - first < b ? rows - first : b;
}

int cdc__shard_set_has_layout(const cdc_shard_set_t *set, int n, int64_t first_row,
                              const int64_t *lengths)
{
    if (set->n != n || set->first_row != first_row || (first_row > 0 && !lengths))
        return 0;
    for (int i = 0; i < n; i++)
        if (set->len[i] != (lengths ? lengths[i] : equal_len(set->rows, n, i)))
            return 0;
    return 1;
}

uint64_t cdc__shard_set_key(const cdc_shard_set_t *set, uint64_t key)
{
    if (!set->layout_key)
        return key;
    uint64_t mixed = cdc__hash_mix(key, set->layout_key);
    return mixed ? mixed : 1;
}

int cdc__encode_ragged(const cdc_code_t *code, const float *const *data,
                       const int64_t *heights, int64_t rows, int64_t cols,
                       float *const *parity, const float *zeros, int64_t zero_rows)
{
    int n = cdc__code_n(code), r = cdc__code_r(code);
    for (int64_t p = 0; p < rows;) {
        /* The segment ends where the next block ends; past a block's end its
           rows are zeros, a chunk of them at a time. */
        int64_t end = rows;
        int ended = 0;
        for (int i = 0; i < n; i++) {
            if (heights[i] > p && heights[i] < end)
                end = heights[i];
            ended |= heights[i] <= p;
        }
        if (ended && end - p > zero_rows)
            end = p + zero_rows;
        const float *seg_data[CDC_CODE_MAX_N];
        float *seg_parity[CDC_CODE_MAX_R];
        for (int i = 0; i < n; i++)
            seg_data[i] = heights[i] > p ? data[i] + p * cols : zeros;
        for (int j = 0; j < r; j++)
            seg_parity[j] = parity[j] + p * cols;
        int rc = cdc__code_encode(code, end - p, cols, seg_data, cols, seg_parity, cols);
        if (rc != CDC_OK)
            return rc;
        p = end;
    }
    return CDC_OK;
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
    cdc__hold_release(src_hold);
}

/* Lengths, offsets, B and the layout key; CDC_EINVAL for lengths that are
   negative or do not sum to the rows from first_row on. */
static int set_layout(cdc_shard_set_t *set, const int64_t *lengths)
{
    int n = set->n;
    int64_t offset = set->first_row;
    int equal = offset == 0;
    uint64_t key = cdc__hash_mix((uint64_t) n, (uint64_t) set->r);
    if (set->first_row > 0)
        key = cdc__hash_mix(key, (uint64_t) set->first_row);
    for (int i = 0; i < n; i++) {
        int64_t len = lengths ? lengths[i] : equal_len(set->rows, n, i);
        if (len < 0 || len > set->rows - offset)
            return cdc__fail(CDC_EINVAL, "shard set: block %d of %lld rows at row %lld of %lld",
                             i, (long long) len, (long long) offset, (long long) set->rows);
        set->offset[i] = offset;
        set->len[i] = len;
        offset += len;
        set->block_rows = len > set->block_rows ? len : set->block_rows;
        equal &= len == equal_len(set->rows, n, i);
        key = cdc__hash_mix(key, (uint64_t) len);
    }
    if (offset != set->rows)
        return cdc__fail(CDC_EINVAL, "shard set: block lengths sum to %lld, not %lld rows",
                         (long long) offset, (long long) set->rows);
    set->layout_key = equal ? 0 : (key ? key : 1);
    return CDC_OK;
}

static int set_encode(cdc_shard_set_t *set, const cdc_code_t *code)
{
    int n = set->n, r = set->r;
    int64_t b = set->block_rows, k = set->k;
    float *parity[CDC_CODE_MAX_R];
    for (int j = 0; j < r; j++) {
        parity[j] = set->owned + (size_t) j * (size_t) b * (size_t) k;
        set->blocks[n + j] = parity[j];
    }
    int64_t zero_rows = ZERO_CHUNK_FLOATS / k > 0 ? ZERO_CHUNK_FLOATS / k : 1;
    zero_rows = zero_rows < b ? zero_rows : b;
    float *zeros = calloc((size_t) zero_rows * (size_t) k, sizeof(float));
    if (!zeros)
        return cdc__fail(CDC_ENOMEM, "shard set: %lld zero rows", (long long) zero_rows);
    int rc = cdc__encode_ragged(code, set->blocks, set->len, b, k, parity, zeros, zero_rows);
    free(zeros);
    return rc;
}

int cdc__shard_set_new(const cdc_code_t *code, int n, const int64_t *lengths,
                       const float *src, int64_t rows, int64_t k, cdc_hold_t *src_hold,
                       cdc_shard_set_t **set_p)
{
    return cdc__shard_set_new_from(code, n, 0, lengths, src, rows, k, src_hold, set_p);
}

int cdc__shard_set_new_from(const cdc_code_t *code, int n, int64_t first_row,
                            const int64_t *lengths, const float *src, int64_t rows, int64_t k,
                            cdc_hold_t *src_hold, cdc_shard_set_t **set_p)
{
    int r = code ? cdc__code_r(code) : 0;
    if (n < 1 || n > CDC_CODE_MAX_N || rows < 1 || k < 1 || !src || !set_p ||
        (code && cdc__code_n(code) != n) || first_row < 0 || first_row >= rows ||
        (first_row > 0 && !lengths))
        return cdc__fail(CDC_EINVAL, "shard set: n = %d, rows %lld..%lld%s, k = %lld", n,
                         (long long) first_row, (long long) rows,
                         first_row > 0 && !lengths ? " without lengths" : "", (long long) k);
    cdc_shard_set_t *set = calloc(1, sizeof *set);
    if (!set)
        return cdc__fail(CDC_ENOMEM, "shard set");
    set->n = n;
    set->r = r;
    set->rows = rows;
    set->first_row = first_row;
    set->k = k;
    int rc = set_layout(set, lengths);
    if (rc != CDC_OK) {
        free(set);
        return rc;
    }
    cdc__hold_init(&set->hold, shard_set_free);
    set->src_hold = cdc__hold_retain(src_hold);
    for (int i = 0; i < n; i++)
        set->blocks[i] = src + (size_t) set->offset[i] * (size_t) k;

    size_t b = (size_t) set->block_rows;
    if (r > 0) {
        set->owned = malloc((size_t) r * b * (size_t) k * sizeof(float));
        rc = set->owned ? set_encode(set, code)
                        : cdc__fail(CDC_ENOMEM, "shard set: %d parity blocks of %zu x %lld",
                                    r, b, (long long) k);
        if (rc != CDC_OK) {
            cdc__shard_set_retire(&set);
            return rc;
        }
    }
    set->norms = calloc((size_t) (n + r) * b, sizeof(double));
    if (!set->norms) {
        cdc__shard_set_retire(&set);
        return cdc__fail(CDC_ENOMEM, "shard set norms");
    }
    for (int s = 0; s < n + r; s++) {
        double *norms = set->norms + (size_t) s * b;
        cdc__row_norms(set->blocks[s], s < n ? set->len[s] : set->block_rows, k, norms);
        set->row_norms[s] = norms;
    }
    *set_p = set;
    return CDC_OK;
}

void cdc__shard_set_retire(cdc_shard_set_t **set_p)
{
    if (!set_p || !*set_p)
        return;
    cdc__hold_retire(&(*set_p)->hold);
    *set_p = NULL;
}

cdc_hold_t *cdc__shard_set_hold(const cdc_shard_set_t *set)
{
    /* The count changes under a const view: holders share the set, they do
       not modify what it holds. */
    return (cdc_hold_t *) &set->hold;
}

/* Whether set is the cut of (code, n, lengths). */
static int set_matches(const cdc_shard_set_t *set, const cdc_code_t *set_code,
                       const cdc_code_t *code, int n, int64_t first_row,
                       const int64_t *lengths)
{
    return set && set_code == code && set->r == (code ? cdc__code_r(code) : 0) &&
           cdc__shard_set_has_layout(set, n, first_row, lengths);
}

int cdc__shard_sets_get(cdc_shard_sets_t *sets, int stage, const cdc_code_t *code, int n,
                        int64_t first_row, const int64_t *lengths, const float *src,
                        int64_t rows, int64_t k, cdc_hold_t *src_hold,
                        const cdc_shard_set_t **set, int *encoded)
{
    if (encoded)
        *encoded = 0;
    if (set_matches(sets->in_use, sets->in_use_code, code, n, first_row, lengths)) {
        *set = sets->in_use;
        return CDC_OK;
    }
    if (set_matches(sets->staged, sets->staged_code, code, n, first_row, lengths)) {
        if (!stage) {
            /* Retired, not freed: a send or a slot manifest may still hold it. */
            cdc__shard_set_retire(&sets->in_use);
            sets->in_use = sets->staged;
            sets->in_use_code = sets->staged_code;
            sets->staged = NULL;
            sets->staged_code = NULL;
        }
        *set = stage ? sets->staged : sets->in_use;
        return CDC_OK;
    }
    cdc_shard_set_t **slot = stage ? &sets->staged : &sets->in_use;
    cdc__shard_set_retire(slot);
    int rc = cdc__shard_set_new_from(code, n, first_row, lengths, src, rows, k, src_hold, slot);
    if (rc != CDC_OK)
        return rc;
    *(stage ? &sets->staged_code : &sets->in_use_code) = code;
    if (encoded)
        *encoded = 1;
    *set = *slot;
    return CDC_OK;
}

void cdc__shard_sets_retire(cdc_shard_sets_t *sets)
{
    cdc__shard_set_retire(&sets->in_use);
    cdc__shard_set_retire(&sets->staged);
    sets->in_use_code = sets->staged_code = NULL;
}
