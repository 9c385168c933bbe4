/* test_rotated.c - the rotated parity layout in calls (issue 13).
 *
 * The layout alone (which worker holds which block) is test_stripes.c's.
 * Here: the operand cut and encoded (each worker's data rows contiguous,
 * every stripe's parity its code's combination of its data blocks), and
 * calls through it: an FC layer and a conv channel split for r = 1..3 give
 * the reference result with every set of up to r workers lost (each lost
 * worker's n data blocks rebuilt from parity), and with more lost (computed
 * here); layers too small to cut, and a call with corruption to find, use
 * the dedicated layout. On real worker processes: a call that loses nothing
 * takes in the data rows alone (the parity blocks are never sent: bytes_in),
 * and a worker SIGKILLed mid-run costs no result. */
#define _DEFAULT_SOURCE /* madvise, mkstemp */
#include "cdcgemm.h"
#include "cdcgemm_testing.h"
#include "bits.h"
#include "context.h"
#include "layer.h"
#include "local_workers.h"
#include "reference.h"
#include "rotated_set.h"
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define REL_TOL 1e-5

static cdc_context_t *rotated_context(int data, int parity, cdc_parity_layout_t layout)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.in_process = 1; /* the math, without worker processes */
    config.local_workers = data + parity;
    config.parity = parity;
    config.parity_layout = layout;
    cdc_context_t *ctx = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_OK);
    return ctx;
}

static cdc_stats_t stats_of(cdc_context_t *ctx)
{
    cdc_stats_t stats;
    ck_assert_int_eq(cdc_context_stats(ctx, &stats), CDC_OK);
    return stats;
}

/* ---- the operand in the layout ------------------------------------------ */

/* The source rows as the set reads them: the library's copy (parts 0) or
   src lent in three uneven parts (a row, then a third, then the rest), so
   that blocks lie across parts. cdc__row_parts_close when done. */
static cdc_row_parts_t *source_of(const float *src, int64_t rows, int64_t k, int parts)
{
    if (!parts)
        return cdc__row_parts_copy_new(src, rows, k);
    int64_t third = rows / 3;
    cdc_weight_part_t list[3] = {{src, 1}, {src + k, third}, {src + (1 + third) * k,
                                                               rows - 1 - third}};
    cdc_row_parts_t *borrowed;
    ck_assert_int_eq(cdc__row_parts_borrow(list, 3, k, 0, &borrowed), CDC_OK);
    return borrowed;
}


/* Worker w's operand, built (*operand, kept by *hold): built twice, the
   same bytes; the row norms and the wire key's sample the set kept are
   the built operand's; the build is the caller's alone to free. */
static void check_operand(const cdc_rotated_set_t *set, int w, const float **operand,
                          cdc_hold_t **hold)
{
    int64_t rows = set->data_rows[w] + (int64_t) set->layout.r * set->block_rows, k = set->k;
    const float *again;
    cdc_hold_t *again_hold;
    ck_assert_int_eq(cdc__rotated_operand_open(set, w, operand, hold), CDC_OK);
    ck_assert_int_eq(cdc__rotated_operand_open(set, w, &again, &again_hold), CDC_OK);
    ck_assert(again != *operand);
    ck_assert(memcmp(again, *operand, (size_t) (rows * k) * sizeof(float)) == 0);
    ck_assert_int_eq(cdc__hold_refs(again_hold), 1);
    cdc__hold_release(again_hold);
    uint32_t sample[CDC_OPERAND_SAMPLE];
    cdc__operand_sample(*operand, rows, k, sample);
    ck_assert(memcmp(sample, set->source[w].sample, sizeof sample) == 0);
    for (int64_t p = 0; p < rows; p++) {
        double norm = 0.0;
        for (int64_t q = 0; q < k; q++)
            norm += (double) (*operand)[p * k + q] * (*operand)[p * k + q];
        ck_assert_msg(fabs(sqrt(norm) - set->operand_norms[w][p]) <= 1e-6 * (1.0 + sqrt(norm)),
                      "worker %d row %lld: norm %g, kept %g", w, (long long) p, sqrt(norm),
                      set->operand_norms[w][p]);
    }
}

/* Worker w's data rows are a contiguous range, in worker order, covering
   the source once; its operand starts with them. Every stripe's parity is
   its data blocks zero-padded to B and combined: for r = 1 their sum,
   computed here in double. */
static void check_set(int n, int r, int64_t rows, int64_t k, int parts)
{
    cdc_code_t *code = NULL;
    ck_assert_int_eq(cdc__code_new(NULL, n, r, &code), CDC_OK);
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, (uint64_t) (rows * 31 + n * 7 + r));
    float *src = cdc_test_alloc((size_t) (rows * k) * sizeof(float));
    cdc_test_fill_uniform(&rng, src, (size_t) (rows * k));
    cdc_rotated_set_t *set = NULL;
    cdc_row_parts_t *source = source_of(src, rows, k, parts);
    ck_assert_int_eq(cdc__rotated_set_new(code, source, 0, rows, k, &set), CDC_OK);
    ck_assert(!parts || set->block_rows == 1 || cdc__rotated_blocks_span(set));
    int W = n + r;
    int64_t next = 0;
    const float *operand[CDC_STRIPES_MAX_WORKERS];
    cdc_hold_t *held[CDC_STRIPES_MAX_WORKERS];
    for (int w = 0; w < W; w++) {
        ck_assert_int_eq(set->data_first[w], next);
        ck_assert(set->data_rows[w] >= rows / W && set->data_rows[w] <= rows / W + 1);
        check_operand(set, w, &operand[w], &held[w]);
        ck_assert(memcmp(operand[w], src + next * k,
                         (size_t) (set->data_rows[w] * k) * sizeof(float)) == 0);
        next += set->data_rows[w];
    }
    ck_assert_int_eq(next, rows);
    for (int s = 0; s < W && r == 1; s++) {
        int w = cdc__stripes_worker(&set->layout, s, n);
        const float *parity = operand[w] + (set->data_rows[w] +
                                            cdc__rotated_parity_index(set, w, s, 0) *
                                                set->block_rows) * k;
        for (int64_t p = 0; p < set->block_rows; p++)
            for (int64_t q = 0; q < k; q++) {
                double sum = 0.0;
                for (int b = 0; b < n; b++) {
                    size_t i = (size_t) (s * n + b);
                    if (p < set->block_len[i])
                        sum += src[(set->block_first[i] + p) * k + q];
                }
                ck_assert_msg(fabs(parity[p * k + q] - sum) <= 1e-5 * (1.0 + fabs(sum)),
                              "stripe %d parity row %lld col %lld: %g, sum %g", s,
                              (long long) p, (long long) q, parity[p * k + q], sum);
            }
    }
    for (int w = 0; w < W; w++)
        cdc__hold_release(held[w]);
    cdc__rotated_set_retire(&set);
    cdc__row_parts_close(source);
    free(src);
    cdc__code_destroy(&code);
}

START_TEST(test_set_layout)
{
    for (int parts = 0; parts <= 1; parts++) { /* copied, borrowed in parts */
        check_set(4, 1, 103, 7, parts);
        check_set(4, 1, 20, 3, parts); /* one row a block */
        check_set(3, 2, 61, 5, parts);
        check_set(3, 3, 200, 2, parts);
    }
    cdc_rotated_set_t *set = NULL;
    cdc_code_t *code = NULL;
    ck_assert_int_eq(cdc__code_new(NULL, 4, 1, &code), CDC_OK);
    float src[19 * 2] = {0};
    cdc_row_parts_t *source = source_of(src, 19, 2, 0);
    ck_assert_int_eq(cdc__rotated_set_new(code, source, 0, 19, 2, &set), CDC_EINVAL);
    ck_assert_ptr_null(set);
    cdc__row_parts_close(source);
    cdc__code_destroy(&code);
}
END_TEST

/* Sized stripes (issue 26): worker w's data rows as given, in worker order;
   a stripe's blocks differ in length, its parity as long as the longest
   block. Every pattern of up to r lost workers decodes every stripe: the
   products of the surviving blocks and the parity rebuild the lost data
   blocks' products within the code's bounds. */
static void check_sized_set(int n, int r, const int64_t *worker_rows)
{
    enum { K = 24, COLS = 5 };
    int W = n + r;
    int64_t rows = 0;
    for (int w = 0; w < W; w++)
        rows += worker_rows[w];
    cdc_code_t *code = NULL;
    ck_assert_int_eq(cdc__code_new(NULL, n, r, &code), CDC_OK);
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, (uint64_t) (rows * 17 + W));
    float *src = cdc_test_alloc((size_t) (rows * K) * sizeof(float));
    float bt[COLS * K];
    cdc_test_fill_uniform(&rng, src, (size_t) (rows * K));
    cdc_test_fill_uniform(&rng, bt, COLS * K);
    cdc_rotated_set_t *set = NULL, *equal = NULL;
    cdc_row_parts_t *source = source_of(src, rows, K, 1);
    ck_assert_int_eq(cdc__rotated_set_new_sized(code, source, 0, rows, K, worker_rows, &set),
                     CDC_OK);
    ck_assert_int_eq(cdc__rotated_set_new(code, source, 0, rows, K, &equal), CDC_OK);
    ck_assert(set->key_mix != equal->key_mix); /* another cut, other weights */
    ck_assert(!cdc__rotated_set_matches(set, code, rows, K, NULL));
    ck_assert(cdc__rotated_set_matches(set, code, rows, K, worker_rows));
    ck_assert(!cdc__rotated_set_matches(equal, code, rows, K, worker_rows));
    ck_assert(cdc__rotated_set_matches(equal, code, rows, K, NULL));
    int64_t next = 0, B = set->block_rows;
    ck_assert_int_eq(B, cdc__rotated_parity_rows(worker_rows, W, n));
    for (int w = 0; w < W; w++) {
        ck_assert_int_eq(set->data_first[w], next);
        ck_assert_int_eq(set->data_rows[w], worker_rows[w]);
        next += worker_rows[w];
    }
    /* Every worker's product: its data rows, then its parity blocks. */
    float *product[CDC_STRIPES_MAX_WORKERS];
    for (int w = 0; w < W; w++) {
        int64_t operand_rows = set->data_rows[w] + (int64_t) r * B;
        const float *operand;
        cdc_hold_t *held;
        check_operand(set, w, &operand, &held);
        product[w] = cdc_test_alloc((size_t) (operand_rows * COLS) * sizeof(float));
        for (int64_t p = 0; p < operand_rows; p++)
            for (int q = 0; q < COLS; q++) {
                double sum = 0.0;
                for (int i = 0; i < K; i++)
                    sum += (double) operand[p * K + i] * bt[q * K + i];
                product[w][p * COLS + q] = (float) sum;
            }
        cdc__hold_release(held);
    }
    float *blocks_storage = cdc_test_alloc((size_t) ((n + r) * B * COLS) * sizeof(float));
    int patterns = 0;
    for (uint64_t lost = 0; lost < (UINT64_C(1) << W); lost++) {
        if (cdc__popcount64(lost) > r)
            continue;
        patterns++;
        for (int st = 0; st < W; st++) {
            float *blocks[CDC_CODE_MAX_N + CDC_CODE_MAX_R];
            uint64_t present = 0;
            memset(blocks_storage, 0, (size_t) ((n + r) * B * COLS) * sizeof(float));
            for (int b = 0; b < n + r; b++) {
                int w = cdc__stripes_worker(&set->layout, st, b);
                blocks[b] = blocks_storage + (size_t) (b * B * COLS);
                if (lost & (UINT64_C(1) << w))
                    continue;
                present |= UINT64_C(1) << b;
                if (b < n) {
                    size_t i = (size_t) (st * n + b);
                    int64_t at = set->block_first[i] - set->data_first[w];
                    memcpy(blocks[b], product[w] + at * COLS,
                           (size_t) (set->block_len[i] * COLS) * sizeof(float));
                } else {
                    int64_t at = set->data_rows[w] +
                                 cdc__rotated_parity_index(set, w, st, b - n) * B;
                    memcpy(blocks[b], product[w] + at * COLS, (size_t) (B * COLS) * sizeof(float));
                }
            }
            ck_assert_int_eq(cdc__code_decode(code, B, COLS, blocks, COLS, present), CDC_OK);
            for (int b = 0; b < n; b++) {
                size_t i = (size_t) (st * n + b);
                double diff = 0.0, norm = 0.0;
                for (int64_t p = 0; p < set->block_len[i]; p++)
                    for (int q = 0; q < COLS; q++) {
                        double want = 0.0;
                        for (int j = 0; j < K; j++)
                            want += (double) src[(set->block_first[i] + p) * K + j] * bt[q * K + j];
                        double got = blocks[b][p * COLS + q];
                        diff += (got - want) * (got - want);
                        norm += want * want;
                    }
                ck_assert_msg(sqrt(diff / norm) < 1e-5, "n %d r %d lost %llx stripe %d block %d: "
                              "relative error %.2e", n, r, (unsigned long long) lost, st, b,
                              sqrt(diff / norm));
            }
        }
    }
    ck_assert_int_gt(patterns, W);
    free(blocks_storage);
    for (int w = 0; w < W; w++)
        free(product[w]);
    cdc__rotated_set_retire(&set);
    cdc__rotated_set_retire(&equal);
    cdc__row_parts_close(source);
    free(src);
    cdc__code_destroy(&code);
}

START_TEST(test_sized_set_decodes_every_loss)
{
    const int64_t fast_first[] = {300, 120, 60, 60, 40};      /* n 4, r 1 */
    const int64_t mix[] = {9, 4, 120, 4, 57, 33};               /* n 4, r 2 */
    const int64_t three[] = {3, 50, 7, 3, 40, 3};               /* n 3, r 3 */
    check_sized_set(4, 1, fast_first);
    check_sized_set(4, 2, mix);
    check_sized_set(3, 3, three);
    /* Sizes that do not fit: a worker below n rows, or a wrong sum. */
    cdc_code_t *code = NULL;
    ck_assert_int_eq(cdc__code_new(NULL, 4, 1, &code), CDC_OK);
    float src[580 * 2] = {0};
    const int64_t short_one[] = {300, 120, 60, 97, 3}, wrong_sum[] = {300, 120, 60, 60, 41};
    cdc_rotated_set_t *set = NULL;
    cdc_row_parts_t *source = source_of(src, 580, 2, 0);
    ck_assert_int_eq(cdc__rotated_set_new_sized(code, source, 0, 580, 2, short_one, &set),
                     CDC_EINVAL);
    ck_assert_int_eq(cdc__rotated_set_new_sized(code, source, 0, 580, 2, wrong_sum, &set),
                     CDC_EINVAL);
    ck_assert_ptr_null(set);
    cdc__row_parts_close(source);
    cdc__code_destroy(&code);
}
END_TEST

/* ---- FC and conv through the layout --------------------------------------- */

typedef struct {
    int out, in, batch;
    float *x, *w, *bias, *y;
    double *want;
} fc_case_t;

static void fc_case_make(fc_case_t *c, int out, int in, int batch, uint64_t seed)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, seed);
    *c = (fc_case_t){out, in, batch, NULL, NULL, NULL, NULL, NULL};
    c->x = cdc_test_alloc((size_t) (batch * in) * sizeof(float));
    c->w = cdc_test_alloc((size_t) (out * in) * sizeof(float));
    c->bias = cdc_test_alloc((size_t) out * sizeof(float));
    c->y = cdc_test_alloc((size_t) (batch * out) * sizeof(float));
    c->want = cdc_test_alloc((size_t) (batch * out) * sizeof(double));
    cdc_test_fill_uniform(&rng, c->x, (size_t) (batch * in));
    cdc_test_fill_uniform(&rng, c->w, (size_t) (out * in));
    cdc_test_fill_uniform(&rng, c->bias, (size_t) out);
    cdc_ref_fc(batch, in, out, c->x, c->w, c->bias, 0, c->want);
}

static void fc_case_free(fc_case_t *c)
{
    free(c->x);
    free(c->w);
    free(c->bias);
    free(c->y);
    free(c->want);
}

/* One forward call with `erased` workers lost; the result is the
   reference's and the report says how it was had. */
static void fc_call(cdc_layer_t *layer, cdc_context_t *ctx, fc_case_t *c, uint64_t erased,
                    int n, int r)
{
    cdc_stats_t before = stats_of(ctx);
    ck_assert_int_eq(cdc_context_erase_next(ctx, erased), CDC_OK);
    memset(c->y, 0, (size_t) (c->batch * c->out) * sizeof(float));
    ck_assert_int_eq(cdc_fc_forward(layer, c->batch, c->x, c->y), CDC_OK);
    double err = cdc_test_rel_error(c->y, c->want, (size_t) (c->batch * c->out));
    ck_assert_msg(err < REL_TOL, "n %d r %d erased %llx: error %g", n, r,
                  (unsigned long long) erased, err);
    cdc_stats_t after = stats_of(ctx);
    cdc_call_report_t report;
    ck_assert_int_eq(cdc_context_last_call(ctx, &report), CDC_OK);
    ck_assert_uint_eq(after.rotated_calls, before.rotated_calls + 1);
    int lost = cdc__popcount64(erased);
    ck_assert_int_eq(report.erased, lost);
    ck_assert_int_eq(report.arrived, n + r - lost);
    if (lost <= r) { /* every lost worker's n data blocks rebuilt */
        ck_assert_int_eq(report.decoded, lost * n);
        ck_assert_int_eq(report.fallback, 0);
    } else { /* some stripe lost more than its parity: computed here */
        ck_assert_int_gt(report.fallback, 0);
    }
}

START_TEST(test_fc_every_erasure)
{
    const int n = 4;
    for (int r = 1; r <= 3; r++) {
        int W = n + r;
        cdc_context_t *ctx = rotated_context(n, r, CDC_LAYOUT_ROTATED);
        fc_case_t c;
        fc_case_make(&c, 97, 33, 3, (uint64_t) (100 + r));
        cdc_layer_t *layer = NULL;
        ck_assert_int_eq(cdc_fc_new(ctx, c.out, c.in, c.w, c.bias, NULL, &layer), CDC_OK);
        for (uint64_t mask = 0; mask < (UINT64_C(1) << W); mask++)
            if (cdc__popcount64(mask) <= r)
                fc_call(layer, ctx, &c, mask, n, r);
        /* One worker more than r: the stripes that lost too much are
           computed here, the rest decoded. */
        fc_call(layer, ctx, &c, (UINT64_C(1) << (r + 1)) - 1, n, r);
        ck_assert_uint_eq(stats_of(ctx).weight_encodes, 1); /* once, for every call */
        cdc_layer_destroy(&layer);
        fc_case_free(&c);
        cdc_context_destroy(&ctx);
    }
}
END_TEST

/* A layer over borrowed weights in three parts (q, k and v stacked as the
   language model does): every erasure pattern gives the reference, the
   rotated layout reads the parts in place (no contiguous copy: a weight
   encode, no more), and a lost block that spans two parts is rebuilt. */
START_TEST(test_fc_borrowed_parts_every_erasure)
{
    const int n = 4, r = 2, W = n + r;
    cdc_context_t *ctx = rotated_context(n, r, CDC_LAYOUT_ROTATED);
    fc_case_t c;
    fc_case_make(&c, 131, 20, 2, 211);
    const cdc_weight_part_t parts[3] = {{c.w, 64}, {c.w + 64 * c.in, 33},
                                        {c.w + 97 * c.in, 34}};
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_fc_new_borrowed(ctx, c.in, parts, 3, 0, c.bias, NULL, &layer),
                     CDC_OK);
    for (uint64_t mask = 0; mask < (UINT64_C(1) << W); mask++)
        if (cdc__popcount64(mask) <= r)
            fc_call(layer, ctx, &c, mask, n, r);
    fc_call(layer, ctx, &c, (UINT64_C(1) << (r + 1)) - 1, n, r); /* computed here */
    ck_assert_uint_eq(stats_of(ctx).weight_encodes, 1);
    ck_assert_ptr_null(layer->parts->packed); /* never copied whole */
    /* The same weights copied: the same key on the workers. */
    cdc_layer_t *copied = NULL;
    ck_assert_int_eq(cdc_fc_new(ctx, c.out, c.in, c.w, c.bias, NULL, &copied), CDC_OK);
    ck_assert_uint_eq(copied->weights_key, layer->weights_key);
    /* Bad parts: named. */
    cdc_layer_t *bad = NULL;
    const cdc_weight_part_t empty[1] = {{c.w, 0}}, none[1] = {{NULL, 3}};
    ck_assert_int_eq(cdc_fc_new_borrowed(ctx, c.in, empty, 1, 0, NULL, NULL, &bad), CDC_EINVAL);
    ck_assert_int_eq(cdc_fc_new_borrowed(ctx, c.in, none, 1, 0, NULL, NULL, &bad), CDC_EINVAL);
    ck_assert_int_eq(cdc_fc_new_borrowed(ctx, c.in, parts, 0, 0, NULL, NULL, &bad), CDC_EINVAL);
    ck_assert_int_eq(cdc_fc_new_borrowed(ctx, c.in, parts, CDC_MAX_WEIGHT_PARTS + 1, 0, NULL,
                                         NULL, &bad),
                     CDC_EINVAL);
    ck_assert_int_eq(cdc_fc_new_borrowed(ctx, c.in, parts, 3, 4u, NULL, NULL, &bad), CDC_EINVAL);
    ck_assert(strstr(cdc_last_error(), "flags") != NULL);
    /* Pages given back only where that is safe: heap memory is refused. */
    ck_assert_int_eq(cdc_fc_new_borrowed(ctx, c.in, parts, 3, CDC_BORROW_FILE_MAPPED, NULL,
                                         NULL, &bad),
                     CDC_EINVAL);
    ck_assert(strstr(cdc_last_error(), "read-only file mapping") != NULL);
    ck_assert_ptr_null(bad);
    cdc_layer_destroy(&copied);
    cdc_layer_destroy(&layer);
    fc_case_free(&c);
    cdc_context_destroy(&ctx);
}
END_TEST

START_TEST(test_conv_channel_with_losses)
{
    const int n = 3, r = 2;
    cdc_context_t *ctx = rotated_context(n, r, CDC_LAYOUT_ROTATED);
    cdc_conv2d_desc_t desc = {4, 29, 3, 3, 1, 1, 1, 1, 1, 1};
    const int64_t batch = 2, h = 9, w = 8;
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 77);
    size_t x_count = (size_t) (batch * desc.in_channels * h * w);
    size_t w_count = (size_t) (desc.out_channels * desc.in_channels * 9);
    size_t y_count = (size_t) (batch * desc.out_channels * h * w);
    float *x = cdc_test_alloc(x_count * sizeof(float));
    float *weights = cdc_test_alloc(w_count * sizeof(float));
    float *y = cdc_test_alloc(y_count * sizeof(float));
    double *want = cdc_test_alloc(y_count * sizeof(double));
    cdc_test_fill_uniform(&rng, x, x_count);
    cdc_test_fill_uniform(&rng, weights, w_count);
    cdc_ref_conv_t ref = {batch, desc.in_channels, h, w, desc.out_channels, 3, 3, 1, 1,
                          1,     1,                1, 1, 0};
    ck_assert_int_eq(cdc_ref_conv2d(&ref, x, weights, NULL, want), 0);
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = CDC_SPLIT_ROWS;
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_conv2d_new(ctx, &desc, weights, NULL, &options, &layer), CDC_OK);
    const uint64_t masks[] = {0, 1u << 4, (1u << 1) | (1u << 3), (1u << 0) | (1u << 4)};
    for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
        ck_assert_int_eq(cdc_context_erase_next(ctx, masks[i]), CDC_OK);
        ck_assert_int_eq(cdc_conv2d_forward(layer, batch, h, w, x, y), CDC_OK);
        double err = cdc_test_rel_error(y, want, y_count);
        ck_assert_msg(err < REL_TOL, "erased %llx: error %g", (unsigned long long) masks[i],
                      err);
        cdc_call_report_t report;
        ck_assert_int_eq(cdc_context_last_call(ctx, &report), CDC_OK);
        ck_assert_int_eq(report.decoded, cdc__popcount64(masks[i]) * n);
    }
    ck_assert_uint_eq(stats_of(ctx).rotated_calls, 4);
    cdc_layer_destroy(&layer);
    free(x);
    free(weights);
    free(y);
    free(want);
    cdc_context_destroy(&ctx);
}
END_TEST

/* Too few rows for W·n blocks, a pending corruption (the rotated layout
   computes no parity to check against) and the dedicated setting: the
   dedicated layout, still right. */
START_TEST(test_dedicated_where_rotated_cannot)
{
    cdc_context_t *ctx = rotated_context(4, 1, CDC_LAYOUT_ROTATED);
    fc_case_t small, big;
    fc_case_make(&small, 19, 8, 2, 5); /* 19 < 5 x 4 blocks */
    fc_case_make(&big, 40, 8, 2, 6);
    cdc_layer_t *small_layer = NULL, *big_layer = NULL;
    ck_assert_int_eq(cdc_fc_new(ctx, small.out, small.in, small.w, small.bias, NULL,
                                &small_layer), CDC_OK);
    ck_assert_int_eq(cdc_fc_new(ctx, big.out, big.in, big.w, big.bias, NULL, &big_layer),
                     CDC_OK);
    ck_assert_int_eq(cdc_fc_forward(small_layer, small.batch, small.x, small.y), CDC_OK);
    ck_assert_double_lt(cdc_test_rel_error(small.y, small.want, 2 * 19), REL_TOL);
    cdc_stats_t stats = stats_of(ctx);
    ck_assert_uint_eq(stats.coded_calls, 1);
    ck_assert_uint_eq(stats.rotated_calls, 0);
    ck_assert_int_eq(cdc_context_corrupt_next(ctx, 1), CDC_OK);
    ck_assert_int_eq(cdc_fc_forward(big_layer, big.batch, big.x, big.y), CDC_OK);
    ck_assert_double_lt(cdc_test_rel_error(big.y, big.want, 2 * 40), REL_TOL);
    stats = stats_of(ctx);
    ck_assert_uint_eq(stats.rotated_calls, 0);
    ck_assert_uint_eq(stats.corrupt_detected, 1);
    ck_assert_int_eq(cdc_fc_forward(big_layer, big.batch, big.x, big.y), CDC_OK);
    ck_assert_uint_eq(stats_of(ctx).rotated_calls, 1);
    cdc_layer_destroy(&small_layer);
    cdc_layer_destroy(&big_layer);
    cdc_context_destroy(&ctx);
    ctx = rotated_context(4, 1, CDC_LAYOUT_DEDICATED);
    ck_assert_int_eq(cdc_fc_new(ctx, big.out, big.in, big.w, big.bias, NULL, &big_layer),
                     CDC_OK);
    ck_assert_int_eq(cdc_fc_forward(big_layer, big.batch, big.x, big.y), CDC_OK);
    ck_assert_uint_eq(stats_of(ctx).rotated_calls, 0);
    cdc_layer_destroy(&big_layer);
    cdc_context_destroy(&ctx);
    fc_case_free(&small);
    fc_case_free(&big);
}
END_TEST

/* ---- on worker processes --------------------------------------------------- */

/* Five local worker processes with faults, r = 1, in layout; respawn 0:
   a killed worker stays dead. */
static cdc_context_t *workers_context(cdc_parity_layout_t layout, const char *faults,
                                      int respawn)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.local_workers = 5;
    config.parity = 1;
    config.parity_layout = layout;
    config.plan = CDC_PLAN_EQUAL; /* equal stripes, every call on the workers:
                                     test_profiled_plan.c tests sized ones */
    config.respawn = respawn;
    config.timeout_ms = 5000;
    config.log_level = getenv("CDC_TEST_LOG") ? CDC_LOG_INFO : CDC_LOG_ERROR;
    snprintf(config.faults, sizeof config.faults, "%s", faults);
    cdc_context_t *ctx = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_OK);
    return ctx;
}

/* Emulated devices slow enough that every worker's data rows take ~330 ms
   and a parity block ~80 ms: the call's CANCEL reaches each worker while
   its parity block is in service behind its data (80 ms of room for the
   workers' leads to straggle on a loaded machine), so none is sent. */
static cdc_context_t *worker_context(void)
{
    return workers_context(CDC_LAYOUT_ROTATED, "slow@*:gflops=0.001", 0);
}

/* One forward call on the workers, right, with how many blocks it decoded
   and how long it took (s). */
static int workers_call(cdc_context_t *ctx, cdc_layer_t *layer, fc_case_t *c, double *took)
{
    double started = cdc_test_now_s();
    memset(c->y, 0, (size_t) (c->batch * c->out) * sizeof(float));
    ck_assert_int_eq(cdc_fc_forward(layer, c->batch, c->x, c->y), CDC_OK);
    *took = cdc_test_now_s() - started;
    ck_assert_double_lt(cdc_test_rel_error(c->y, c->want, (size_t) (c->batch * c->out)),
                        REL_TOL);
    cdc_call_report_t report;
    ck_assert_int_eq(cdc_context_last_call(ctx, &report), CDC_OK);
    return report.decoded;
}

START_TEST(test_workers_parity_on_demand)
{
    cdc_context_t *ctx = worker_context();
    fc_case_t c;
    fc_case_make(&c, 400, 256, 8, 9); /* a worker's 80 rows: 2 x 80 x 256 x 8 flops */
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_fc_new(ctx, c.out, c.in, c.w, c.bias, NULL, &layer), CDC_OK);
    double took;
    /* The weights go; the first 4 calls and the next are the check's sample
       (check_policy.c): each waits for every stripe's parity block too (B =
       400 / 20 rows). The fifth is charged at least a quarter of its time,
       which the next 12 such calls earn back. */
    for (int i = 0; i < 5; i++)
        workers_call(ctx, layer, &c, &took);
    cdc_stats_t before = stats_of(ctx);
    uint64_t data_bytes = (uint64_t) c.out * (uint64_t) c.batch * sizeof(float);
    uint64_t parity_bytes = 5 * 20 * (uint64_t) c.batch * sizeof(float);
    ck_assert_uint_eq(before.verified_calls, 5);
    ck_assert_uint_eq(before.bytes_in, 5 * (data_bytes + parity_bytes));
    ck_assert_uint_eq(before.corrupt_detected, 0);
    const int calls = 5;
    for (int i = 0; i < calls; i++)
        workers_call(ctx, layer, &c, &took);
    cdc_stats_t after = stats_of(ctx);
    ck_assert_uint_eq(after.rotated_calls - before.rotated_calls, calls);
    /* Nothing decoded: every worker's data rows came (the call's rows);
       bytes_in equal to them leaves no room for a parity block. */
    ck_assert_uint_eq(after.bytes_in - before.bytes_in, calls * data_bytes);
    ck_assert_uint_eq(after.verified_calls, 5);
    ck_assert_uint_eq(after.results_decoded - before.results_decoded, 0);
    ck_assert_uint_eq(after.late_blocks, 0);
    /* The coordinator kept no operand once they were sent: the layout's
       set is the row norms and tables, a sixteenth of the weights here
       (8 bytes a row of 256 floats). */
    size_t kept = cdc__encoded_weights_bytes(&layer->encoded);
    ck_assert_msg(kept > 0 && kept * 16 <= (size_t) (c.out * c.in) * sizeof(float),
                  "%zu bytes kept beside %lld x %lld weights", kept, (long long) c.out,
                  (long long) c.in);
    /* A worker SIGKILLed: its stripes decoded from the others' parity. */
    pid_t victim = cdc__local_workers_pid(ctx->local, 2);
    ck_assert_int_gt(victim, 0);
    ck_assert_int_eq(kill(victim, SIGKILL), 0);
    for (int i = 0; i < calls; i++)
        workers_call(ctx, layer, &c, &took);
    cdc_stats_t killed = stats_of(ctx);
    ck_assert_uint_gt(killed.results_decoded, after.results_decoded);
    ck_assert_uint_eq(killed.rotated_calls - after.rotated_calls, calls);
    cdc_layer_destroy(&layer);
    fc_case_free(&c);
    cdc_context_destroy(&ctx);
}
END_TEST

/* What the plan says of a rotated call (issue 26, "the model predicts what
   runs"): the rotated layout, each worker's data rows (the set's cut, on
   itself), and, once every worker is measured, the model's latency for
   them: emulated devices of 0.05 GFLOP/s computing 400 rows x 1024 each
   (16.4 ms), parity only after a loss (worst_ms: 100 more rows each). The
   prediction is at least 0.8x that compute, and at most 1.25x the larger
   of it and the call just measured (a loaded host, the sanitizer build
   with other suites beside it, stretches the round trips and link times
   the model adds, and the calls that measured them). */
START_TEST(test_workers_plan_predicted)
{
    cdc_context_t *ctx = workers_context(CDC_LAYOUT_ROTATED, "slow@*:gflops=0.05", 1);
    fc_case_t c;
    fc_case_make(&c, 2000, 1024, 1, 12);
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_fc_new(ctx, c.out, c.in, c.w, c.bias, NULL, &layer), CDC_OK);
    cdc_testing_plan_t plan;
    double took, started = cdc_test_now_s();
    do {
        workers_call(ctx, layer, &c, &took);
        ck_assert_int_eq(cdc_testing_last_plan(ctx, &plan), CDC_OK);
    } while (plan.expected_ms < 0 && cdc_test_now_s() - started < 30.0);
    ck_assert_int_eq(plan.rotated, 1);
    for (int w = 0; w < 5; w++) {
        ck_assert_int_eq(plan.block_len[w], 400);
        ck_assert_int_eq(plan.home[w], w);
    }
    const double compute_ms = 2.0 * 400 * 1024 / 0.05e6;
    const double ran_ms = fmax(compute_ms, 1e3 * took);
    ck_assert_msg(plan.expected_ms > 0.8 * compute_ms && plan.expected_ms < 1.25 * ran_ms,
                  "predicted %.2f ms for %.2f ms of compute, a call of %.2f ms",
                  plan.expected_ms, compute_ms, 1e3 * took);
    ck_assert_msg(plan.worst_ms > 1.2 * compute_ms, "worst %.2f ms: without the parity blocks",
                  plan.worst_ms);
    cdc_layer_destroy(&layer);
    fc_case_free(&c);
    cdc_context_destroy(&ctx);
}
END_TEST

typedef struct {
    pid_t pid;
    int signal;
    long after_ms;
} delayed_signal_t;

static void *signal_later(void *arg)
{
    const delayed_signal_t *d = arg;
    cdc_test_sleep_ms(d->after_ms);
    kill(d->pid, d->signal);
    return NULL;
}

/* A worker SIGKILLed while the call computes (its data rows 330 ms long):
   the call ends with the others' parity, its 4 blocks decoded, not waiting
   for the timeout. A worker SIGSTOPped (alive to the socket, silent): the
   call does not wait for it either, and it serves again after SIGCONT. */
START_TEST(test_workers_killed_and_stopped_in_flight)
{
    cdc_context_t *ctx = worker_context();
    fc_case_t c;
    fc_case_make(&c, 400, 256, 8, 10);
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_fc_new(ctx, c.out, c.in, c.w, c.bias, NULL, &layer), CDC_OK);
    double took;
    ck_assert_int_eq(workers_call(ctx, layer, &c, &took), 0);
    pid_t stopped = cdc__local_workers_pid(ctx->local, 3);
    ck_assert_int_gt(stopped, 0);
    ck_assert_int_eq(kill(stopped, SIGSTOP), 0);
    ck_assert_int_eq(workers_call(ctx, layer, &c, &took), 4);
    ck_assert_msg(took < 1.5, "a call beside a stopped worker took %.3f s", took);
    ck_assert_int_eq(kill(stopped, SIGCONT), 0);
    cdc_test_sleep_ms(300);
    delayed_signal_t d = {cdc__local_workers_pid(ctx->local, 1), SIGKILL, 100};
    ck_assert_int_gt(d.pid, 0);
    pthread_t thread;
    ck_assert_int_eq(pthread_create(&thread, NULL, signal_later, &d), 0);
    int decoded = workers_call(ctx, layer, &c, &took);
    pthread_join(thread, NULL);
    ck_assert_int_eq(decoded, 4);
    ck_assert_msg(took < 1.5, "a call with a worker killed in flight took %.3f s", took);
    cdc_layer_destroy(&layer);
    fc_case_free(&c);
    cdc_context_destroy(&ctx);
}
END_TEST

/* Resident KiB of the mapping that holds addr (/proc/self/smaps). */
static long mapping_rss_kib(const void *addr)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    int inside = 0;
    long rss = -1;
    while (rss < 0 && fgets(line, sizeof line, f)) {
        unsigned long from, to;
        if (sscanf(line, "%lx-%lx ", &from, &to) == 2) /* a mapping's first line */
            inside = (uintptr_t) addr >= from && (uintptr_t) addr < to;
        else if (inside && sscanf(line, "Rss: %ld kB", &rss) == 1)
            break;
    }
    fclose(f);
    ck_assert_int_ge(rss, 0);
    return rss;
}

/* The weights of c written to a file and mapped read-only, as a model's
   checkpoint is: the map, size bytes. */
static float *weights_file_map(const fc_case_t *c, size_t *size)
{
    char path[] = "/tmp/cdc-borrowed-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    unlink(path);
    *size = (size_t) c->out * (size_t) c->in * sizeof(float);
    ck_assert_int_eq(write(fd, c->w, *size), (ssize_t) *size);
    float *map = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    ck_assert(map != MAP_FAILED);
    return map;
}

/* A model's weights borrowed from a read-only file mapping (issue 27): the
   layer reads them where they lie and gives their pages back, so the
   mapping stays all but unmapped while the calls go on; without the flag
   every page it read stays. A worker SIGKILLed and respawned gets its rows
   again from the map; every result is exact. */
START_TEST(test_workers_borrowed_file_pages)
{
    cdc_context_t *ctx = workers_context(CDC_LAYOUT_ROTATED, "", 1);
    fc_case_t c;
    fc_case_make(&c, 2000, 1024, 4, 12); /* 8 MB of weights */
    size_t size;
    float *map = weights_file_map(&c, &size);
    const cdc_weight_part_t parts[2] = {{map, 1300}, {map + 1300 * 1024, 700}};
    double took;
    for (unsigned flags = 0; flags <= CDC_BORROW_FILE_MAPPED; flags++) {
        ck_assert_int_eq(madvise(map, size, MADV_DONTNEED), 0);
        cdc_layer_t *layer = NULL;
        ck_assert_int_eq(cdc_fc_new_borrowed(ctx, c.in, parts, 2, flags, c.bias, NULL, &layer),
                         CDC_OK);
        for (int i = 0; i < 3; i++)
            workers_call(ctx, layer, &c, &took);
        long rss = mapping_rss_kib(map);

        if (!flags) /* the check sees the pages: every one was read */
            ck_assert_msg(rss > (long) (size / 1024) * 9 / 10, "%ld KiB resident", rss);
        else
            ck_assert_msg(rss < (long) (size / 1024) / 10, "%ld KiB resident of %zu", rss,
                          size / 1024);
        if (flags) { /* a respawned worker's rows come from the map again */
            cdc_stats_t before = stats_of(ctx);
            ck_assert_int_eq(kill(cdc__local_workers_pid(ctx->local, 2), SIGKILL), 0);
            double started = cdc_test_now_s();
            cdc_stats_t now = before;
            while ((now.worker_respawns == before.worker_respawns ||
                    now.redundancy_repairs == before.redundancy_repairs) &&
                   cdc_test_now_s() - started < 20.0) {
                workers_call(ctx, layer, &c, &took);
                cdc_test_sleep_ms(50);
                now = stats_of(ctx);
            }
            ck_assert_uint_gt(now.worker_respawns, before.worker_respawns);
            ck_assert_uint_gt(now.redundancy_repairs, before.redundancy_repairs);
            ck_assert_uint_gt(now.weights_sent, before.weights_sent);
            /* and serves them: a call that decodes nothing, every worker in */
            int decoded = 1;
            while (decoded && cdc_test_now_s() - started < 20.0)
                decoded = workers_call(ctx, layer, &c, &took);
            ck_assert_int_eq(decoded, 0);
            rss = mapping_rss_kib(map);
            ck_assert_msg(rss < (long) (size / 1024) / 10, "after a respawn: %ld KiB", rss);
        }
        ck_assert_ptr_null(layer->parts->packed); /* never copied whole */
        cdc_layer_destroy(&layer);
    }
    munmap(map, size);
    fc_case_free(&c);
    cdc_context_destroy(&ctx);
}
END_TEST

/* Once a borrowed layer is destroyed, its rows are read no more: a worker's
   operand still held (as a slot manifest or a send would hold it) is not
   built from memory the caller may have unmapped. */
START_TEST(test_borrowed_rows_not_read_after_destroy)
{
    cdc_context_t *ctx = rotated_context(4, 1, CDC_LAYOUT_ROTATED);
    fc_case_t c;
    fc_case_make(&c, 120, 16, 1, 13);
    const cdc_weight_part_t parts[1] = {{c.w, 120}};
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_fc_new_borrowed(ctx, c.in, parts, 1, 0, NULL, NULL, &layer), CDC_OK);
    ck_assert_int_eq(cdc_fc_forward(layer, 1, c.x, c.y), CDC_OK);
    const cdc_rotated_set_t *set = layer->encoded.encoding;
    ck_assert_ptr_nonnull(set);
    cdc_hold_t *held = cdc__hold_retain(cdc__rotated_set_hold(set));
    const float *data;
    cdc_hold_t *built;
    ck_assert_int_eq(cdc__rotated_operand_open(set, 0, &data, &built), CDC_OK);
    cdc__hold_release(built);
    cdc_layer_destroy(&layer);
    ck_assert_int_eq(cdc__rotated_operand_open(set, 0, &data, &built), CDC_ESTATE);
    ck_assert_ptr_null(built);
    ck_assert(strstr(cdc_last_error(), "destroyed") != NULL);
    cdc__hold_release(held);
    fc_case_free(&c);
    cdc_context_destroy(&ctx);
}
END_TEST

/* One device corrupts every result it sends (issue 23, item 3): the first
   call is in the check's sample, so it is caught there; from then on every
   call is checked, and the stripes its bad block lands in are computed
   here. Not one result wrong, in either layout. */
static void corrupt_device_caught(cdc_parity_layout_t layout)
{
    cdc_context_t *ctx = workers_context(layout, "corrupt@w1:p=1", 1);
    fc_case_t c;
    fc_case_make(&c, 400, 256, 8, 11);
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_fc_new(ctx, c.out, c.in, c.w, c.bias, NULL, &layer), CDC_OK);
    const int calls = 30;
    double took;
    for (int i = 0; i < calls; i++)
        workers_call(ctx, layer, &c, &took); /* each exact */
    cdc_stats_t stats = stats_of(ctx);
    ck_assert_uint_eq(stats.first_corrupt_call, 1);
    ck_assert_uint_eq(stats.verified_calls, calls);
    ck_assert_uint_eq(stats.corrupt_detected, calls);
    ck_assert_uint_eq(stats.rotated_calls, layout == CDC_LAYOUT_ROTATED ? calls : 0);
    cdc_layer_destroy(&layer);
    fc_case_free(&c);
    cdc_context_destroy(&ctx);
}

/* Once a device is known to corrupt, no block goes back unchecked: a
   stripe that cannot be checked (here, one that lost slot 2's block and so
   has only its n blocks) is computed here rather than decoded. Before that,
   the same loss is decoded from parity. Rotated (5 stripes, slot 2 in every
   one: a data block in 4, the parity of the fifth) or dedicated (one
   stripe, slot 2 a data block). */
static void known_corruption_unchecked(cdc_parity_layout_t layout, int decoded, int computed)
{
    cdc_context_t *ctx = workers_context(layout, "", 1);
    fc_case_t c;
    fc_case_make(&c, 400, 256, 8, 12);
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_fc_new(ctx, c.out, c.in, c.w, c.bias, NULL, &layer), CDC_OK);
    double took;
    cdc_call_report_t report;
    ck_assert_int_eq(cdc_context_erase_next(ctx, UINT64_C(1) << 2), CDC_OK);
    ck_assert_int_eq(workers_call(ctx, layer, &c, &took), decoded);
    ck_assert_uint_eq(stats_of(ctx).corrupt_detected, 0);
    ck_assert_int_eq(cdc_context_corrupt_next(ctx, UINT64_C(1) << 0), CDC_OK);
    workers_call(ctx, layer, &c, &took);
    cdc_stats_t seen = stats_of(ctx);
    ck_assert_uint_eq(seen.corrupt_detected, 1);
    ck_assert_uint_eq(seen.first_corrupt_call, 2);
    ck_assert_int_eq(cdc_context_erase_next(ctx, UINT64_C(1) << 2), CDC_OK);
    ck_assert_int_eq(workers_call(ctx, layer, &c, &took), 0);
    ck_assert_int_eq(cdc_context_last_call(ctx, &report), CDC_OK);
    ck_assert_int_eq(report.fallback, computed);
    cdc_stats_t after = stats_of(ctx);
    ck_assert_uint_eq(after.verified_calls, seen.verified_calls + 1);
    ck_assert_uint_eq(after.fallbacks, seen.fallbacks + 1);
    cdc_layer_destroy(&layer);
    fc_case_free(&c);
    cdc_context_destroy(&ctx);
}

START_TEST(test_known_corruption_leaves_nothing_unchecked)
{
    known_corruption_unchecked(CDC_LAYOUT_ROTATED, 4, 5 * 4);
    known_corruption_unchecked(CDC_LAYOUT_DEDICATED, 1, 4);
}
END_TEST

START_TEST(test_corrupt_device_caught_rotated)
{
    corrupt_device_caught(CDC_LAYOUT_ROTATED);
}
END_TEST

START_TEST(test_corrupt_device_caught_dedicated)
{
    corrupt_device_caught(CDC_LAYOUT_DEDICATED);
}
END_TEST

static Suite *rotated_suite(void)
{
    Suite *s = suite_create("rotated");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_set_layout);
    tcase_add_test(tc, test_sized_set_decodes_every_loss);
    tcase_add_test(tc, test_fc_every_erasure);
    tcase_add_test(tc, test_fc_borrowed_parts_every_erasure);
    tcase_add_test(tc, test_conv_channel_with_losses);
    tcase_add_test(tc, test_dedicated_where_rotated_cannot);
    tcase_add_test(tc, test_workers_parity_on_demand);
    tcase_add_test(tc, test_workers_plan_predicted);
    tcase_add_test(tc, test_workers_killed_and_stopped_in_flight);
    tcase_add_test(tc, test_workers_borrowed_file_pages);
    tcase_add_test(tc, test_borrowed_rows_not_read_after_destroy);
    tcase_add_test(tc, test_known_corruption_leaves_nothing_unchecked);
    tcase_add_test(tc, test_corrupt_device_caught_rotated);
    tcase_add_test(tc, test_corrupt_device_caught_dedicated);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return cdc_test_run_suite(rotated_suite());
}
