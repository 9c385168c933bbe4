/* rotated_set.c - an operand in the rotated parity layout (rotated_set.h). */
#include "rotated_set.h"

#include "error.h"
#include "hash.h"
#include "norms.h"
#include "shard_set.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Rows of the zero chunk that stands in for ended blocks while encoding
   (as shard_set.c): about 64 KiB of floats, at least one row. */
enum { ZERO_CHUNK_FLOATS = 16384 };

int cdc__rotated_fits(int64_t rows, int workers, int r)
{
    return r >= 1 && 2 * r <= workers && workers <= CDC_STRIPES_MAX_WORKERS &&
           rows >= (int64_t) workers * (workers - r);
}

int cdc__rotated_parity_index(const cdc_rotated_set_t *set, int worker, int stripe, int j)
{
    const cdc_stripes_t *layout = &set->layout;
    if (cdc__stripes_worker(layout, stripe, layout->n + j) != worker)
        return -1;
    int index = 0;
    for (int s = 0; s < stripe; s++)
        index += cdc__stripes_block(layout, s, worker) >= layout->n;
    return index;
}

static void rotated_set_free(cdc_hold_t *hold)
{
    cdc_rotated_set_t *set =
        (cdc_rotated_set_t *) ((char *) hold - offsetof(cdc_rotated_set_t, hold));
    free(set->storage);
    free(set->norms);
    free(set->block_first);
    free(set->block_len);
    free(set);
}

/* Worker w's rows (worker_rows[w], or rows / W give or take one), then its
   data blocks within them (by stripe, as it computes them), and B. */
static void cut_rows(cdc_rotated_set_t *set, const int64_t *worker_rows)
{
    const cdc_stripes_t *layout = &set->layout;
    int W = layout->workers, n = layout->n;
    cdc_stripe_block_t order[CDC_STRIPES_MAX_WORKERS];
    set->block_rows = 0;
    int64_t next = 0;
    for (int w = 0; w < W; w++) {
        int64_t first = worker_rows ? next : set->rows * w / W;
        int64_t rows = worker_rows ? worker_rows[w] : set->rows * (w + 1) / W - first;
        next = first + rows;
        set->data_first[w] = first;
        set->data_rows[w] = rows;
        cdc__stripes_order(layout, w, order);
        for (int i = 0; i < n; i++) {
            int64_t at = first + rows * i / n, len = first + rows * (i + 1) / n - at;
            size_t b = (size_t) order[i].stripe * (size_t) n + (size_t) order[i].block;
            set->block_first[b] = at;
            set->block_len[b] = len;
            set->block_rows = len > set->block_rows ? len : set->block_rows;
        }
    }
}

/* Every stripe's parity, straight into its workers' operands. */
static int encode_stripes(cdc_rotated_set_t *set, const cdc_code_t *code, const float *src)
{
    const cdc_stripes_t *layout = &set->layout;
    int n = layout->n, r = layout->r;
    int64_t k = set->k, zero_rows = ZERO_CHUNK_FLOATS / k > 0 ? ZERO_CHUNK_FLOATS / k : 1;
    float *zeros = calloc((size_t) zero_rows * (size_t) k, sizeof(float));
    if (!zeros)
        return cdc__fail(CDC_ENOMEM, "rotated layout: zero chunk");
    int rc = CDC_OK;
    for (int s = 0; s < layout->workers && rc == CDC_OK; s++) {
        const float *data[CDC_CODE_MAX_N];
        int64_t heights[CDC_CODE_MAX_N];
        float *parity[CDC_CODE_MAX_R];
        for (int b = 0; b < n; b++) {
            size_t i = (size_t) s * (size_t) n + (size_t) b;
            data[b] = src + set->block_first[i] * k;
            heights[b] = set->block_len[i];
        }
        for (int j = 0; j < r; j++) {
            int w = cdc__stripes_worker(layout, s, n + j);
            int64_t row = set->data_rows[w] +
                          (int64_t) cdc__rotated_parity_index(set, w, s, j) * set->block_rows;
            parity[j] = (float *) set->operand[w] + row * k;
        }
        rc = cdc__encode_ragged(code, data, heights, set->block_rows, k, parity, zeros,
                                zero_rows);
    }
    free(zeros);
    return rc;
}

/* The operands' storage: each worker's data rows copied, its parity after. */
static int lay_out_operands(cdc_rotated_set_t *set, const float *src)
{
    const cdc_stripes_t *layout = &set->layout;
    int64_t parity_rows = (int64_t) layout->r * set->block_rows;
    size_t floats = (size_t) (set->rows + layout->workers * parity_rows) * (size_t) set->k;
    set->storage = malloc(floats * sizeof(float));
    if (!set->storage)
        return cdc__fail(CDC_ENOMEM, "rotated layout: %zu floats", floats);
    float *at = set->storage;
    for (int w = 0; w < layout->workers; w++) {
        set->operand[w] = at;
        memcpy(at, src + set->data_first[w] * set->k,
               (size_t) (set->data_rows[w] * set->k) * sizeof(float));
        at += (set->data_rows[w] + parity_rows) * set->k;
    }
    return CDC_OK;
}

/* Every operand row's norm, once per weights: the check of a sampled call
   (the call engine's check) scales its tolerance by them. */
static int norm_operands(cdc_rotated_set_t *set)
{
    int64_t parity_rows = (int64_t) set->layout.r * set->block_rows;
    size_t count = (size_t) (set->rows + set->layout.workers * parity_rows);
    set->norms = malloc(count * sizeof(double));
    if (!set->norms)
        return cdc__fail(CDC_ENOMEM, "rotated layout: %zu row norms", count);
    double *at = set->norms;
    for (int w = 0; w < set->layout.workers; w++) {
        int64_t operand_rows = set->data_rows[w] + parity_rows;
        cdc__row_norms(set->operand[w], operand_rows, set->k, at);
        set->operand_norms[w] = at;
        at += operand_rows;
    }
    return CDC_OK;
}

/* Whether worker_rows (W of them) cut rows with a row for each of every
   worker's n data blocks; NULL (the equal cut) when rows fit at all. */
static int sizes_fit(const int64_t *worker_rows, int64_t rows, int W, int n, int r)
{
    if (!cdc__rotated_fits(rows, W, r))
        return 0;
    int64_t sum = 0;
    for (int w = 0; worker_rows && w < W; w++) {
        if (worker_rows[w] < n)
            return 0;
        sum += worker_rows[w];
    }
    return !worker_rows || sum == rows;
}

/* The weights' key names the layout and, when sized, the cut: workers
   must not take one cut's rows for another's. */
static uint64_t layout_key(int W, int r, const int64_t *worker_rows)
{
    uint64_t key = cdc__hash_mix(cdc__hash_mix(UINT64_C(0x726f7461746564), (uint64_t) W),
                                 (uint64_t) r);
    for (int w = 0; worker_rows && w < W; w++)
        key = cdc__hash_mix(key, (uint64_t) worker_rows[w]);
    return key;
}

int cdc__rotated_set_new(const cdc_code_t *code, const float *src, int64_t rows, int64_t k,
                         cdc_rotated_set_t **set_p)
{
    return cdc__rotated_set_new_sized(code, src, rows, k, NULL, set_p);
}

int cdc__rotated_set_new_sized(const cdc_code_t *code, const float *src, int64_t rows,
                               int64_t k, const int64_t *worker_rows,
                               cdc_rotated_set_t **set_p)
{
    *set_p = NULL;
    int n = cdc__code_n(code), r = cdc__code_r(code), W = n + r;
    if (!sizes_fit(worker_rows, rows, W, n, r) || k < 1)
        return cdc__fail(CDC_EINVAL, "rotated layout: %lld x %lld rows do not fill %d "
                         "workers' %d data blocks each%s", (long long) rows, (long long) k, W, n,
                         worker_rows ? " as sized (each worker >= n rows, summing to the rows)"
                                     : "");
    cdc_rotated_set_t *set = calloc(1, sizeof *set);
    if (!set)
        return cdc__fail(CDC_ENOMEM, "rotated layout");
    cdc__hold_init(&set->hold, rotated_set_free);
    int rc = cdc__stripes_init(&set->layout, W, r);
    set->code = code;
    set->rows = rows;
    set->k = k;
    set->block_first = malloc((size_t) W * (size_t) n * sizeof(int64_t));
    set->block_len = malloc((size_t) W * (size_t) n * sizeof(int64_t));
    if (rc == CDC_OK && (!set->block_first || !set->block_len))
        rc = cdc__fail(CDC_ENOMEM, "rotated layout: %d blocks", W * n);
    if (rc == CDC_OK) {
        cut_rows(set, worker_rows);
        set->sized = worker_rows != NULL;
        rc = lay_out_operands(set, src);
    }
    if (rc == CDC_OK)
        rc = encode_stripes(set, code, src);
    if (rc == CDC_OK)
        rc = norm_operands(set);
    if (rc != CDC_OK) {
        cdc__hold_retire(&set->hold);
        return rc;
    }
    set->key_mix = layout_key(W, r, worker_rows);
    *set_p = set;
    return CDC_OK;
}

int cdc__rotated_set_matches(const cdc_rotated_set_t *set, const cdc_code_t *code,
                             int64_t rows, int64_t k)
{
    return set && set->code == code && set->rows == rows && set->k == k && !set->sized;
}

cdc_hold_t *cdc__rotated_set_hold(const cdc_rotated_set_t *set)
{
    return (cdc_hold_t *) &set->hold; /* a count, not the set's contents */
}

void cdc__rotated_set_retire(cdc_rotated_set_t **set_p)
{
    if (!set_p || !*set_p)
        return;
    cdc__hold_retire(&(*set_p)->hold);
    *set_p = NULL;
}
