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
    if (set->src)
        cdc__hold_release(&set->src->hold);
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

int64_t cdc__rotated_operand_rows(const cdc_rotated_set_t *set, int w)
{
    return set->data_rows[w] + (int64_t) set->layout.r * set->block_rows;
}

uint64_t cdc__rotated_operand_key(const cdc_rotated_set_t *set, uint64_t weights_key)
{
    return cdc__hash_mix(weights_key, set->key_mix) | 1; /* 0 means "inline" */
}

/* What encoding a stripe needs beside the source: r parity blocks of B x k
   and a chunk of zeros standing in for ended blocks. */
typedef struct {
    float *parity[CDC_CODE_MAX_R];
    float *storage, *zeros;
    float *gather; /* n blocks of B x k: data blocks that span parts */
    int64_t zero_rows;
} stripe_scratch_t;

static void scratch_free(stripe_scratch_t *scratch)
{
    free(scratch->storage);
    free(scratch->zeros);
    free(scratch->gather);
    memset(scratch, 0, sizeof *scratch);
}

static int scratch_new(const cdc_rotated_set_t *set, stripe_scratch_t *scratch)
{
    int64_t k = set->k, B = set->block_rows, r = set->layout.r;
    memset(scratch, 0, sizeof *scratch);
    scratch->zero_rows = ZERO_CHUNK_FLOATS / k > 0 ? ZERO_CHUNK_FLOATS / k : 1;
    scratch->zeros = calloc((size_t) (scratch->zero_rows * k), sizeof(float));
    scratch->storage = malloc((size_t) (r * B * k) * sizeof(float));
    int gather = cdc__rotated_blocks_span(set);
    if (gather)
        scratch->gather = malloc((size_t) (set->layout.n * B * k) * sizeof(float));
    if (!scratch->zeros || !scratch->storage || (gather && !scratch->gather)) {
        scratch_free(scratch);
        return cdc__fail(CDC_ENOMEM, "rotated layout: a stripe's %lld parity rows",
                         (long long) (r * B));
    }
    for (int j = 0; j < r; j++)
        scratch->parity[j] = scratch->storage + (size_t) (j * B * k);
    return CDC_OK;
}

int cdc__rotated_block_spans(const cdc_rotated_set_t *set, int s, int b)
{
    size_t i = (size_t) s * (size_t) set->layout.n + (size_t) b;
    return cdc__row_parts_spans(set->src, set->src_first + set->block_first[i],
                                set->block_len[i]);
}

int cdc__rotated_blocks_span(const cdc_rotated_set_t *set)
{
    for (int s = 0; set->src->count > 1 && s < set->layout.workers; s++)
        for (int b = 0; b < set->layout.n; b++)
            if (cdc__rotated_block_spans(set, s, b))
                return 1;
    return 0;
}

const float *cdc__rotated_block_rows(const cdc_rotated_set_t *set, int s, int b,
                                     float *scratch, int64_t *rows)
{
    size_t i = (size_t) s * (size_t) set->layout.n + (size_t) b;
    *rows = set->block_len[i];
    return cdc__row_parts_view(set->src, set->src_first + set->block_first[i],
                               set->block_len[i], scratch);
}

void cdc__rotated_block_done(const cdc_rotated_set_t *set, int s, int b)
{
    size_t i = (size_t) s * (size_t) set->layout.n + (size_t) b;
    cdc__row_parts_done(set->src, set->src_first + set->block_first[i], set->block_len[i]);
}

/* Stripe s's parity blocks into the scratch: the same bytes every time.
   Reads the source: any thread, while src's owner lives (the caller's
   check, cdc__rotated_operand_open's lock). */
static int encode_stripe(const cdc_rotated_set_t *set, int s, stripe_scratch_t *scratch)
{
    int n = set->layout.n;
    const float *data[CDC_CODE_MAX_N] = {0};
    int64_t heights[CDC_CODE_MAX_N] = {0};
    size_t block = (size_t) (set->block_rows * set->k);
    for (int b = 0; b < n; b++)
        data[b] = cdc__rotated_block_rows(set, s, b, scratch->gather
                                                        ? scratch->gather + (size_t) b * block
                                                        : NULL,
                                          &heights[b]);
    int rc = cdc__encode_ragged(set->code, data, heights, set->block_rows, set->k,
                                scratch->parity, scratch->zeros, scratch->zero_rows);
    for (int b = 0; b < n; b++)
        cdc__rotated_block_done(set, s, b);
    return rc;
}

/* Parity block j of stripe s: worker *w holds it, at row *row of its
   operand. */
static void parity_home(const cdc_rotated_set_t *set, int s, int j, int *w, int64_t *row)
{
    *w = cdc__stripes_worker(&set->layout, s, set->layout.n + j);
    *row = set->data_rows[*w] +
           (int64_t) cdc__rotated_parity_index(set, *w, s, j) * set->block_rows;
}

/* The sample elements of worker w's operand that lie in rows [row, row +
   count) of it, taken from those rows (at). */
static void sample_rows(cdc_rotated_set_t *set, int w, int64_t row, int64_t count,
                        const float *at)
{
    int64_t k = set->k, first = row * k, end = (row + count) * k;
    for (int i = 0; i < CDC_OPERAND_SAMPLE; i++) {
        int64_t e = cdc__operand_sample_at(cdc__rotated_operand_rows(set, w), k, i);
        if (e >= first && e < end)
            memcpy(&set->source[w].sample[i], at + (e - first), sizeof(uint32_t));
    }
}

/* Worker w's data rows measured a run at a time (cdc__row_parts_each):
   their norms into norms, their sample elements. */
typedef struct {
    cdc_rotated_set_t *set;
    int w;
    double *norms;
} measured_rows_t;

static void measure_run(void *ctx, const float *run, int64_t at, int64_t rows)
{
    measured_rows_t *job = ctx;
    int64_t row = at - job->set->src_first - job->set->data_first[job->w];
    cdc__row_norms(run, rows, job->set->k, job->norms + row);
    sample_rows(job->set, job->w, row, rows, run);
}

/* Every operand's row norms and wire-key sample, each stripe's parity
   encoded once and dropped: the check scales its tolerance by the norms,
   and the keys need no build. */
static int measure_operands(cdc_rotated_set_t *set)
{
    int W = set->layout.workers, r = set->layout.r;
    size_t count = (size_t) (set->rows + (int64_t) W * r * set->block_rows);
    set->norms = malloc(count * sizeof(double));
    if (!set->norms)
        return cdc__fail(CDC_ENOMEM, "rotated layout: %zu row norms", count);
    double *at = set->norms, *norms_of[CDC_STRIPES_MAX_WORKERS];
    for (int w = 0; w < W; w++) {
        measured_rows_t job = {set, w, at};
        cdc__row_parts_each(set->src, set->src_first + set->data_first[w], set->data_rows[w],
                            measure_run, &job);
        set->operand_norms[w] = norms_of[w] = at;
        at += cdc__rotated_operand_rows(set, w);
    }
    stripe_scratch_t scratch;
    int rc = scratch_new(set, &scratch);
    for (int s = 0; s < W && rc == CDC_OK; s++) {
        if ((rc = encode_stripe(set, s, &scratch)) != CDC_OK)
            break;
        for (int j = 0; j < r; j++) {
            int w;
            int64_t row;
            parity_home(set, s, j, &w, &row);
            cdc__row_norms(scratch.parity[j], set->block_rows, set->k, norms_of[w] + row);
            sample_rows(set, w, row, set->block_rows, scratch.parity[j]);
        }
    }
    scratch_free(&scratch);
    return rc;
}

static int operand_open(const cdc_operand_source_t *source, const float **data,
                        cdc_hold_t **hold)
{
    return cdc__rotated_operand_open(source->owner, source->index, data, hold);
}

/* Worker w's operand into out (cdc__rotated_operand_rows x k floats). */
static int operand_build(const cdc_rotated_set_t *set, int w, float *out)
{
    int64_t k = set->k;
    cdc__row_parts_copy(set->src, set->src_first + set->data_first[w], set->data_rows[w], out);
    stripe_scratch_t scratch;
    int rc = scratch_new(set, &scratch);
    for (int s = 0; s < set->layout.workers && rc == CDC_OK; s++)
        for (int j = 0; j < set->layout.r && rc == CDC_OK; j++) {
            int home;
            int64_t row;
            parity_home(set, s, j, &home, &row);
            if (home != w)
                continue;
            if ((rc = encode_stripe(set, s, &scratch)) == CDC_OK)
                memcpy(out + row * k, scratch.parity[j],
                       (size_t) (set->block_rows * k) * sizeof(float));
        }
    scratch_free(&scratch);
    return rc;
}

int cdc__rotated_operand_open(const cdc_rotated_set_t *set, int w, const float **data,
                              cdc_hold_t **hold)
{
    float *out;
    *data = NULL;
    *hold = cdc__hold_alloc((size_t) (cdc__rotated_operand_rows(set, w) * set->k) *
                                sizeof(float),
                            (void **) &out);
    if (!*hold)
        return cdc__fail(CDC_ENOMEM, "rotated layout: worker %d's operand, %lld rows", w,
                         (long long) cdc__rotated_operand_rows(set, w));
    /* Any thread (a background shipment): borrowed rows only while their
       owner lives (row_parts.h). */
    int rc = cdc__row_parts_enter(set->src);
    if (rc == CDC_OK) {
        rc = operand_build(set, w, out);
        cdc__row_parts_leave(set->src);
    }
    if (rc != CDC_OK) {
        cdc__hold_release(*hold);
        *hold = NULL;
        return rc;
    }
    *data = out;
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

int cdc__rotated_set_new(const cdc_code_t *code, cdc_row_parts_t *src, int64_t first,
                         int64_t rows, int64_t k, cdc_rotated_set_t **set_p)
{
    return cdc__rotated_set_new_sized(code, src, first, rows, k, NULL, set_p);
}

int cdc__rotated_set_new_sized(const cdc_code_t *code, cdc_row_parts_t *src, int64_t first,
                               int64_t rows, int64_t k, const int64_t *worker_rows,
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
    set->src = src;
    set->src_first = first;
    cdc__hold_retain(&src->hold);
    set->block_first = malloc((size_t) W * (size_t) n * sizeof(int64_t));
    set->block_len = malloc((size_t) W * (size_t) n * sizeof(int64_t));
    if (rc == CDC_OK && (!set->block_first || !set->block_len))
        rc = cdc__fail(CDC_ENOMEM, "rotated layout: %d blocks", W * n);
    if (rc == CDC_OK) {
        cut_rows(set, worker_rows);
        set->sized = worker_rows != NULL;
        for (int w = 0; w < W; w++)
            set->source[w] = (cdc_operand_source_t){operand_open, set, w, {0}};
        rc = measure_operands(set);
    }
    if (rc != CDC_OK) {
        cdc__hold_retire(&set->hold);
        return rc;
    }
    set->key_mix = layout_key(W, r, worker_rows);
    *set_p = set;
    return CDC_OK;
}

int cdc__rotated_set_matches(const cdc_rotated_set_t *set, const cdc_code_t *code,
                             int64_t rows, int64_t k, const int64_t *worker_rows)
{
    if (!set || set->code != code || set->rows != rows || set->k != k ||
        set->sized != (worker_rows != NULL))
        return 0;
    for (int w = 0; worker_rows && w < set->layout.workers; w++)
        if (set->data_rows[w] != worker_rows[w])
            return 0;
    return 1;
}

/* As cut_rows cuts a worker's rows into n blocks (first + rows·i/n): the
   longest is ceil(rows / n). */
int64_t cdc__rotated_parity_rows(const int64_t *worker_rows, int workers, int n)
{
    int64_t longest = 0;
    for (int w = 0; w < workers; w++) {
        int64_t block = (worker_rows[w] + n - 1) / n;
        longest = block > longest ? block : longest;
    }
    return longest;
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
