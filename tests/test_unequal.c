/* test_unequal.c - unequal data blocks with the same codes, end to end.
 *
 * With cdc_testing_force_block_weights the plan cuts the operand into blocks
 * in given proportions (4:2:1:1, 1:1:1:5); parity blocks are as large as the
 * largest. Every front end (cdc_sgemm row and column cuts in both layouts
 * and transposes, the FC layer, conv channel and spatial splits with batch 1
 * and 2) must still give the reference result for r = 0..3 with nothing,
 * one or two data shards erased (rebuilt from parity, or computed locally
 * when r is too small), and a corrupted shard must still be caught. What
 * came back (bytes_in: every result's size) shows that a data shard computed
 * only its own rows: its block's, or for a spatial band its rows plus the
 * halo rows its overlapping windows need, never the padding. */
#include "cdcgemm.h"
#include "cdcgemm_testing.h"
#include "layer.h"
#include "plan.h"
#include "reference.h"
#include "testutil.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DATA = 4 };

static const double weight_sets[][DATA] = {{4, 2, 1, 1}, {1, 1, 1, 5}};

static cdc_context_t *make_context(int parity, cdc_split_t split, const double *weights)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.in_process = 1; /* the math, without worker processes */
    config.local_workers = DATA + parity;
    config.parity = parity;
    config.split = split;
    cdc_context_t *ctx = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_OK);
    ck_assert_int_eq(cdc_testing_force_block_weights(ctx, weights, DATA), CDC_OK);
    return ctx;
}

/* The lengths the plan gives `rows` rows on ctx, and the largest. */
static int64_t plan_lengths(cdc_context_t *ctx, int64_t rows, int64_t *lengths)
{
    cdc_call_plan_t plan;
    memset(&plan, 0, sizeof plan);
    plan.n = DATA;
    cdc_block_cost_t cost = {0};
    ck_assert_int_eq(cdc__plan_size_blocks(ctx, &plan, &cost, rows), CDC_OK);
    int64_t largest = 0;
    for (int i = 0; i < DATA; i++) {
        lengths[i] = plan.block_len[i];
        largest = lengths[i] > largest ? lengths[i] : largest;
    }
    return largest;
}

/* Erasure masks for parity r: none, the largest block, the largest and the
   smallest (two only where r >= 2). */
static int erasure_masks(const double *weights, int r, uint64_t *masks)
{
    int largest = 0, smallest = 0;
    for (int i = 1; i < DATA; i++) {
        largest = weights[i] > weights[largest] ? i : largest;
        smallest = weights[i] < weights[smallest] ? i : smallest;
    }
    int count = 0;
    masks[count++] = 0;
    masks[count++] = UINT64_C(1) << largest;
    if (r >= 2)
        masks[count++] = (UINT64_C(1) << largest) | (UINT64_C(1) << smallest);
    return count;
}

/* After a call with `erased` lost on parity r: rebuilt from parity when r
   allows, else computed here; a clean call checks its parity and finds
   nothing wrong (the padding is consistent). */
static void check_accounting(const cdc_stats_t *before, const cdc_stats_t *after, int r,
                             uint64_t erased, const char *what)
{
    int lost = __builtin_popcountll(erased);
    ck_assert_msg(after->corrupt_detected == before->corrupt_detected, "%s: false alarm", what);
    if (lost == 0 || r >= lost) {
        ck_assert_msg(after->fallbacks == before->fallbacks, "%s: fell back", what);
        ck_assert_msg(after->results_decoded - before->results_decoded == (uint64_t) lost,
                      "%s: %llu decoded, %d lost", what,
                      (unsigned long long) (after->results_decoded - before->results_decoded),
                      lost);
    } else {
        ck_assert_msg(after->fallbacks == before->fallbacks + 1, "%s: no fallback", what);
    }
}

/* ---- the plan's lengths ----------------------------------------------------------- */

START_TEST(test_forced_lengths)
{
    cdc_context_t *ctx = make_context(1, CDC_SPLIT_AUTO, weight_sets[0]);
    int64_t len[DATA];
    ck_assert_int_eq(plan_lengths(ctx, 16, len), 8);
    ck_assert(len[0] == 8 && len[1] == 4 && len[2] == 2 && len[3] == 2);
    plan_lengths(ctx, 10, len); /* quotas 5, 2.5, 1.25, 1.25 */
    ck_assert(len[0] == 5 && len[1] == 3 && len[2] == 1 && len[3] == 1);
    plan_lengths(ctx, 5, len); /* every block keeps a row */
    ck_assert(len[0] == 2 && len[1] == 1 && len[2] == 1 && len[3] == 1);
    plan_lengths(ctx, 2, len); /* fewer rows than blocks: some empty */
    ck_assert_int_eq(len[0] + len[1] + len[2] + len[3], 2);
    /* Unforced: spread evenly, within one row. */
    ck_assert_int_eq(cdc_testing_force_block_weights(ctx, NULL, 0), CDC_OK);
    plan_lengths(ctx, 10, len);
    ck_assert(len[0] == 3 && len[1] == 3 && len[2] == 2 && len[3] == 2);
    /* Weights for another n do not apply. */
    const double three[] = {1, 1, 5};
    ck_assert_int_eq(cdc_testing_force_block_weights(ctx, three, 3), CDC_OK);
    plan_lengths(ctx, 8, len);
    ck_assert(len[0] == 2 && len[1] == 2 && len[2] == 2 && len[3] == 2);
    const double bad[] = {1, 0, 1, 1};
    ck_assert_int_eq(cdc_testing_force_block_weights(ctx, bad, 4), CDC_EINVAL);
    ck_assert_int_eq(cdc_testing_force_block_weights(NULL, bad, 4), CDC_EINVAL);
    cdc_context_destroy(&ctx);
}
END_TEST

/* ---- GEMM: row and column cuts in every form -------------------------------------- */

static void gemm_case(cdc_context_t *ctx, int form, int64_t m, int64_t n, int64_t k,
                      uint64_t erase, uint64_t corrupt, uint64_t seed, const char *what)
{
    cdc_layout_t layout = form / 4 ? CDC_COL_MAJOR : CDC_ROW_MAJOR;
    cdc_transpose_t ta = (form / 2) % 2 ? CDC_TRANS : CDC_NO_TRANS;
    cdc_transpose_t tb = form % 2 ? CDC_TRANS : CDC_NO_TRANS;
    int row = layout == CDC_ROW_MAJOR;
    int64_t lda = (row != (ta == CDC_TRANS)) ? k : m, ldb = (row != (tb == CDC_TRANS)) ? n : k;
    int64_t ldc = row ? n : m;
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, seed);
    float *a = cdc_test_alloc((size_t) (m * k) * sizeof(float));
    float *b = cdc_test_alloc((size_t) (k * n) * sizeof(float));
    float *c = cdc_test_alloc((size_t) (m * n) * sizeof(float));
    float *ref = cdc_test_alloc((size_t) (m * n) * sizeof(float));
    cdc_test_fill_uniform(&rng, a, (size_t) (m * k));
    cdc_test_fill_uniform(&rng, b, (size_t) (k * n));
    cblas_sgemm(row ? CblasRowMajor : CblasColMajor,
                ta == CDC_TRANS ? CblasTrans : CblasNoTrans,
                tb == CDC_TRANS ? CblasTrans : CblasNoTrans, (int) m, (int) n, (int) k, 1.0f,
                a, (int) lda, b, (int) ldb, 0.0f, ref, (int) ldc);
    ck_assert_int_eq(cdc_context_erase_next(ctx, erase), CDC_OK);
    ck_assert_int_eq(cdc_context_corrupt_next(ctx, corrupt), CDC_OK);
    ck_assert_msg(cdc_sgemm(ctx, layout, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc) ==
                      CDC_OK,
                  "%s: %s", what, cdc_last_error());
    double err = cdc_test_rel_error_ff(c, ref, (size_t) (m * n));
    ck_assert_msg(err <= 1e-5, "%s form %d: rel error %g", what, form, err);
    free(a);
    free(b);
    free(c);
    free(ref);
}

START_TEST(test_gemm_row_and_column_cuts)
{
    const int form = _i;
    const int64_t m = 37, n = 29, k = 23;
    static const cdc_split_t splits[] = {CDC_SPLIT_ROWS, CDC_SPLIT_COLUMNS};
    for (size_t w = 0; w < 2; w++)
        for (int s = 0; s < 2; s++)
            for (int r = 0; r <= 3; r++) {
                cdc_context_t *ctx = make_context(r, splits[s], weight_sets[w]);
                /* The caller's rows (ROWS) or columns are cut. */
                int64_t cut = splits[s] == CDC_SPLIT_ROWS ? m : n, other = m + n - cut;
                int64_t len[DATA], largest = plan_lengths(ctx, cut, len);
                uint64_t masks[3];
                int count = erasure_masks(weight_sets[w], r, masks);
                for (int e = 0; e < count; e++) {
                    char what[96];
                    snprintf(what, sizeof what, "weights %zu split %d r %d erased %#llx", w,
                             (int) splits[s], r, (unsigned long long) masks[e]);
                    cdc_stats_t before, after;
                    cdc_context_stats(ctx, &before);
                    gemm_case(ctx, form, m, n, k, masks[e], 0, 10 * (uint64_t) form + e, what);
                    cdc_context_stats(ctx, &after);
                    cdc_call_report_t report;
                    cdc_context_last_call(ctx, &report);
                    ck_assert_int_eq(report.n, DATA);
                    ck_assert_int_eq(report.split, splits[s]);
                    check_accounting(&before, &after, r, masks[e], what);
                    if (masks[e] == 0) {
                        /* Data results of their real size, parity of the largest. */
                        uint64_t want =
                            (uint64_t) ((cut + r * largest) * other) * sizeof(float);
                        ck_assert_msg(after.bytes_in - before.bytes_in == want,
                                      "%s: %llu bytes back, want %llu", what,
                                      (unsigned long long) (after.bytes_in - before.bytes_in),
                                      (unsigned long long) want);
                    }
                }
                cdc_context_destroy(&ctx);
            }
}
END_TEST

/* Fewer rows than blocks: empty blocks are never sent; erasing one loses
   nothing, and decoding around them works. */
START_TEST(test_gemm_empty_blocks)
{
    for (int r = 1; r <= 2; r++) {
        cdc_context_t *ctx = make_context(r, CDC_SPLIT_ROWS, weight_sets[1]);
        int64_t len[DATA];
        plan_lengths(ctx, 2, len);
        /* 1:1:1:5 over 2 rows: blocks 1, 0, 0, 1. Erase an empty block, a
           real one, or two real ones. */
        ck_assert(len[0] == 1 && len[1] == 0 && len[2] == 0 && len[3] == 1);
        uint64_t masks[] = {0, UINT64_C(1) << 1, 1, r >= 2 ? 9 : 8};
        for (size_t e = 0; e < sizeof masks / sizeof *masks; e++) {
            cdc_stats_t before, after;
            cdc_context_stats(ctx, &before);
            gemm_case(ctx, 0, 2, 9, 7, masks[e], 0, 70 + e, "empty blocks");
            cdc_context_stats(ctx, &after);
            ck_assert_uint_eq(after.fallbacks, before.fallbacks);
            uint64_t sent = DATA + (uint64_t) r;
            for (int i = 0; i < DATA; i++)
                sent -= len[i] == 0 || (masks[e] & (UINT64_C(1) << i));
            ck_assert_uint_eq(after.shards_sent - before.shards_sent, sent);
        }
        cdc_context_destroy(&ctx);
    }
}
END_TEST

/* ---- layers ----------------------------------------------------------------------- */

START_TEST(test_fc_output_and_batch_splits)
{
    enum { OUT = 37, IN = 29, BATCH = 9 };
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 5);
    float w[OUT * IN], bias[OUT], x[BATCH * IN], y[BATCH * OUT];
    double ref[BATCH * OUT];
    cdc_test_fill_uniform(&rng, w, OUT * IN);
    cdc_test_fill_uniform(&rng, bias, OUT);
    cdc_test_fill_uniform(&rng, x, BATCH * IN);
    cdc_ref_fc(BATCH, IN, OUT, x, w, bias, 0, ref);
    static const cdc_split_t splits[] = {CDC_SPLIT_ROWS, CDC_SPLIT_COLUMNS};
    for (size_t ws = 0; ws < 2; ws++)
        for (int s = 0; s < 2; s++)
            for (int r = 0; r <= 3; r++) {
                cdc_context_t *ctx = make_context(r, CDC_SPLIT_AUTO, weight_sets[ws]);
                cdc_layer_options_t options;
                cdc_layer_options_init(&options);
                options.split = splits[s];
                cdc_layer_t *layer = NULL;
                ck_assert_int_eq(cdc_fc_new(ctx, OUT, IN, w, bias, &options, &layer), CDC_OK);
                uint64_t masks[3];
                int count = erasure_masks(weight_sets[ws], r, masks);
                for (int e = 0; e < count; e++) {
                    char what[96];
                    snprintf(what, sizeof what, "fc weights %zu split %d r %d erased %#llx", ws,
                             (int) splits[s], r, (unsigned long long) masks[e]);
                    cdc_stats_t before, after;
                    cdc_context_stats(ctx, &before);
                    ck_assert_int_eq(cdc_context_erase_next(ctx, masks[e]), CDC_OK);
                    ck_assert_msg(cdc_fc_forward(layer, BATCH, x, y) == CDC_OK, "%s: %s", what,
                                  cdc_last_error());
                    cdc_context_stats(ctx, &after);
                    ck_assert_int_eq(cdc_layer_split(layer), splits[s]);
                    double err = cdc_test_rel_error(y, ref, BATCH * OUT);
                    ck_assert_msg(err <= 1e-5, "%s: rel error %g", what, err);
                    check_accounting(&before, &after, r, masks[e], what);
                }
                cdc_layer_destroy(&layer);
                cdc_context_destroy(&ctx);
            }
}
END_TEST

typedef struct {
    int64_t in_channels, out_channels, h, w, kernel, stride, pad, dilation;
} conv_shape_t;

/* Overlapping windows (3x3 stride 1), strided ones (5x5 stride 2) and
   dilated ones (3x3 dilation 2): the halo rows differ. */
static const conv_shape_t conv_shapes[] = {
    {3, 10, 15, 13, 3, 1, 1, 1},
    {2, 9, 29, 11, 5, 2, 2, 1},
    {2, 7, 17, 9, 3, 1, 2, 2},
};

/* Rows the data shards compute over a cut of `rows` rows: their own, and
   spatially the halo rows their windows still reach past their end (up to
   the largest block, *largest). */
static int64_t computed_rows(cdc_context_t *ctx, const conv_shape_t *cs, int64_t rows,
                             int spatial, int64_t *largest)
{
    int64_t len[DATA], computed = 0;
    *largest = plan_lengths(ctx, rows, len);
    int64_t window = cs->dilation * (cs->kernel - 1) + 1, halo = (window - 1) / cs->stride;
    for (int i = 0; i < DATA; i++) {
        int64_t own = spatial && len[i] > 0 ? len[i] + halo : len[i];
        computed += own < *largest ? own : *largest;
    }
    return computed;
}

static void conv_check(const conv_shape_t *cs, int64_t batch, cdc_split_t split,
                       const double *weights, int r, uint64_t corrupt)
{
    cdc_ref_conv_t rc = {batch,        cs->in_channels, cs->h,       cs->w,
                         cs->out_channels, cs->kernel,  cs->kernel,  cs->stride,
                         cs->stride,   cs->pad,         cs->pad,     cs->dilation,
                         cs->dilation, 0};
    int64_t out_h, out_w;
    ck_assert_int_eq(cdc_ref_conv2d_output(&rc, &out_h, &out_w), 0);
    size_t wcount = (size_t) (cs->out_channels * cs->in_channels * cs->kernel * cs->kernel);
    size_t xcount = (size_t) (batch * cs->in_channels * cs->h * cs->w);
    size_t ycount = (size_t) (batch * cs->out_channels * out_h * out_w);
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, (uint64_t) (cs->kernel * 100 + batch));
    float *w = cdc_test_alloc(wcount * sizeof(float));
    float *x = cdc_test_alloc(xcount * sizeof(float));
    float *bias = cdc_test_alloc((size_t) cs->out_channels * sizeof(float));
    float *y = cdc_test_alloc(ycount * sizeof(float));
    double *ref = cdc_test_alloc(ycount * sizeof(double));
    cdc_test_fill_uniform(&rng, w, wcount);
    cdc_test_fill_uniform(&rng, x, xcount);
    cdc_test_fill_uniform(&rng, bias, (size_t) cs->out_channels);
    ck_assert_int_eq(cdc_ref_conv2d(&rc, x, w, bias, ref), 0);

    cdc_context_t *ctx = make_context(r, CDC_SPLIT_AUTO, weights);
    cdc_conv2d_desc_t desc = {cs->in_channels, cs->out_channels, cs->kernel, cs->kernel,
                              cs->stride,      cs->stride,       cs->pad,    cs->pad,
                              cs->dilation,    cs->dilation};
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = split;
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_conv2d_new(ctx, &desc, w, bias, &options, &layer), CDC_OK);
    int spatial = split == CDC_SPLIT_COLUMNS;
    int64_t largest, computed = computed_rows(ctx, cs, spatial ? out_h : cs->out_channels,
                                              spatial, &largest);
    uint64_t masks[3];
    int count = corrupt ? 1 : erasure_masks(weights, r, masks);
    if (corrupt)
        masks[0] = 0;
    for (int e = 0; e < count; e++) {
        char what[128];
        snprintf(what, sizeof what,
                 "conv k%lld split %d batch %lld r %d erased %#llx corrupt %#llx",
                 (long long) cs->kernel, (int) split, (long long) batch, r,
                 (unsigned long long) masks[e], (unsigned long long) corrupt);
        cdc_stats_t before, after;
        cdc_context_stats(ctx, &before);
        ck_assert_int_eq(cdc_context_erase_next(ctx, masks[e]), CDC_OK);
        ck_assert_int_eq(cdc_context_corrupt_next(ctx, corrupt), CDC_OK);
        ck_assert_msg(cdc_conv2d_forward(layer, batch, cs->h, cs->w, x, y) == CDC_OK, "%s: %s",
                      what, cdc_last_error());
        cdc_context_stats(ctx, &after);
        ck_assert_int_eq(cdc_layer_split(layer), split);
        double err = cdc_test_rel_error(y, ref, ycount);
        ck_assert_msg(err <= 1e-5, "%s: rel error %g", what, err);
        if (corrupt) {
            ck_assert_msg(after.corrupt_detected == before.corrupt_detected + 1,
                          "%s: not detected", what);
            continue;
        }
        check_accounting(&before, &after, r, masks[e], what);
        if (masks[e] == 0) {
            int64_t per_row =
                spatial ? cs->out_channels * batch * out_w : batch * out_h * out_w;
            uint64_t want = (uint64_t) ((computed + r * largest) * per_row) * sizeof(float);
            ck_assert_msg(after.bytes_in - before.bytes_in == want,
                          "%s: %llu bytes back, want %llu", what,
                          (unsigned long long) (after.bytes_in - before.bytes_in),
                          (unsigned long long) want);
        }
    }
    cdc_layer_destroy(&layer);
    cdc_context_destroy(&ctx);
    free(w);
    free(x);
    free(bias);
    free(y);
    free(ref);
}

START_TEST(test_conv_channel_and_spatial_splits)
{
    const conv_shape_t *cs = &conv_shapes[_i];
    static const cdc_split_t splits[] = {CDC_SPLIT_ROWS, CDC_SPLIT_COLUMNS};
    for (int64_t batch = 1; batch <= 2; batch++)
        for (int s = 0; s < 2; s++)
            for (size_t ws = 0; ws < 2; ws++)
                for (int r = 0; r <= 3; r++)
                    conv_check(cs, batch, splits[s], weight_sets[ws], r, 0);
}
END_TEST

/* ---- corruption -------------------------------------------------------------------- */

/* A data shard of either size, or a parity, computing a wrong element is
   caught: rebuilt with r = 2 (located), recomputed with r = 1. */
START_TEST(test_corrupt_shard_caught)
{
    for (int r = 1; r <= 2; r++)
        for (int shard = 0; shard < DATA + r; shard++) {
            uint64_t mask = UINT64_C(1) << shard;
            cdc_context_t *ctx = make_context(r, CDC_SPLIT_ROWS, weight_sets[1]);
            cdc_stats_t before, after;
            cdc_context_stats(ctx, &before);
            gemm_case(ctx, 0, 64, 40, 50, 0, mask, 90 + (uint64_t) shard, "corrupt gemm");
            cdc_context_stats(ctx, &after);
            cdc_call_report_t report;
            cdc_context_last_call(ctx, &report);
            ck_assert_uint_eq(after.corrupt_detected, before.corrupt_detected + 1);
            if (shard < DATA && r == 2)
                ck_assert_int_eq(report.decoded, 1);
            if (shard < DATA && r == 1)
                ck_assert_int_gt(report.fallback, 0);
            cdc_context_destroy(&ctx);
            conv_check(&conv_shapes[0], 2, CDC_SPLIT_COLUMNS, weight_sets[shard % 2], r, mask);
            conv_check(&conv_shapes[1], 1, CDC_SPLIT_ROWS, weight_sets[shard % 2], r, mask);
        }
}
END_TEST

/* ---- cached weights follow the lengths --------------------------------------------- */

/* A layer's weight blocks are encoded once per layout: the same lengths
   reuse them, new lengths encode anew (the old set retired), and the blocks
   are named on workers by a key of their layout. */
START_TEST(test_layer_reencodes_when_lengths_change)
{
    enum { OUT = 16, IN = 5 };
    float w[OUT * IN], x[IN], y[OUT];
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 8);
    cdc_test_fill_uniform(&rng, w, OUT * IN);
    cdc_test_fill_uniform(&rng, x, IN);
    cdc_context_t *ctx = make_context(1, CDC_SPLIT_AUTO, weight_sets[0]);
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = CDC_SPLIT_ROWS;
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_fc_new(ctx, OUT, IN, w, NULL, &options, &layer), CDC_OK);
    cdc_stats_t stats;
    ck_assert_int_eq(cdc_fc_forward(layer, 1, x, y), CDC_OK);
    ck_assert_int_eq(cdc_fc_forward(layer, 1, x, y), CDC_OK);
    cdc_context_stats(ctx, &stats);
    ck_assert_uint_eq(stats.weight_encodes, 1);
    const int64_t first[] = {8, 4, 2, 2}, second[] = {2, 2, 2, 10};
    ck_assert(cdc__shard_set_has_layout(layer->encoded.sets.in_use, DATA, 0, first));
    uint64_t first_key = cdc__shard_set_key(layer->encoded.sets.in_use, layer->weights_key);
    cdc_hold_t *old = cdc__hold_retain(cdc__shard_set_hold(layer->encoded.sets.in_use));

    ck_assert_int_eq(cdc_testing_force_block_weights(ctx, weight_sets[1], DATA), CDC_OK);
    ck_assert_int_eq(cdc_fc_forward(layer, 1, x, y), CDC_OK);
    cdc_context_stats(ctx, &stats);
    ck_assert_uint_eq(stats.weight_encodes, 2);
    ck_assert(cdc__hold_retired(old)); /* retired, alive while held */
    ck_assert(cdc__shard_set_has_layout(layer->encoded.sets.in_use, DATA, 0, second));
    uint64_t second_key = cdc__shard_set_key(layer->encoded.sets.in_use, layer->weights_key);
    ck_assert_uint_ne(first_key, second_key);
    ck_assert_uint_ne(first_key, layer->weights_key);
    cdc__hold_release(old);
    cdc_layer_destroy(&layer);
    cdc_context_destroy(&ctx);
}
END_TEST

/* ---- real workers ------------------------------------------------------------------ */

/* Through embedded worker processes: the compact tasks and the layout-named
   weight blocks cross the wire; a lost worker's block is rebuilt. */
START_TEST(test_embedded_workers)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.local_workers = DATA + 1;
    config.parity = 1;
    cdc_context_t *ctx = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_OK);
    ck_assert_int_eq(cdc_testing_force_block_weights(ctx, weight_sets[1], DATA), CDC_OK);
    enum { OUT = 37, IN = 29 };
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 12);
    float w[OUT * IN], x[IN], y[OUT];
    double ref[OUT];
    cdc_test_fill_uniform(&rng, w, OUT * IN);
    cdc_test_fill_uniform(&rng, x, IN);
    cdc_ref_fc(1, IN, OUT, x, w, NULL, 0, ref);
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = CDC_SPLIT_ROWS;
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_fc_new(ctx, OUT, IN, w, NULL, &options, &layer), CDC_OK);
    for (uint64_t mask = 0; mask < 3; mask++) {
        ck_assert_int_eq(cdc_context_erase_next(ctx, mask ? UINT64_C(1) << (mask + 1) : 0),
                         CDC_OK);
        ck_assert_int_eq(cdc_fc_forward(layer, 1, x, y), CDC_OK);
        ck_assert_msg(cdc_test_rel_error(y, ref, OUT) <= 1e-5, "mask %llu",
                      (unsigned long long) mask);
    }
    /* New lengths: new blocks under new keys, still right. */
    ck_assert_int_eq(cdc_testing_force_block_weights(ctx, weight_sets[0], DATA), CDC_OK);
    ck_assert_int_eq(cdc_fc_forward(layer, 1, x, y), CDC_OK);
    ck_assert(cdc_test_rel_error(y, ref, OUT) <= 1e-5);
    cdc_layer_destroy(&layer);
    conv_shape_t cs = conv_shapes[0];
    int64_t batch = 2, out_h = cs.h, out_w = cs.w; /* 3x3, stride 1, pad 1 */
    size_t wcount = (size_t) (cs.out_channels * cs.in_channels * 9);
    size_t xcount = (size_t) (batch * cs.in_channels * cs.h * cs.w);
    size_t ycount = (size_t) (batch * cs.out_channels * out_h * out_w);
    float *cw = cdc_test_alloc(wcount * sizeof(float));
    float *cx = cdc_test_alloc(xcount * sizeof(float));
    float *cy = cdc_test_alloc(ycount * sizeof(float));
    double *cref = cdc_test_alloc(ycount * sizeof(double));
    cdc_test_fill_uniform(&rng, cw, wcount);
    cdc_test_fill_uniform(&rng, cx, xcount);
    cdc_ref_conv_t rc = {batch, cs.in_channels, cs.h, cs.w, cs.out_channels, 3, 3, 1, 1,
                         1,     1,              1,    1,    0};
    ck_assert_int_eq(cdc_ref_conv2d(&rc, cx, cw, NULL, cref), 0);
    cdc_conv2d_desc_t desc = {cs.in_channels, cs.out_channels, 3, 3, 1, 1, 1, 1, 1, 1};
    options.split = CDC_SPLIT_COLUMNS;
    ck_assert_int_eq(cdc_conv2d_new(ctx, &desc, cw, NULL, &options, &layer), CDC_OK);
    for (uint64_t mask = 0; mask < 2; mask++) {
        ck_assert_int_eq(cdc_context_erase_next(ctx, mask), CDC_OK);
        ck_assert_int_eq(cdc_conv2d_forward(layer, batch, cs.h, cs.w, cx, cy), CDC_OK);
        ck_assert(cdc_test_rel_error(cy, cref, ycount) <= 1e-5);
    }
    cdc_layer_destroy(&layer);
    free(cw);
    free(cx);
    free(cy);
    free(cref);
    cdc_context_destroy(&ctx);
}
END_TEST

static Suite *unequal_suite(void)
{
    Suite *suite = suite_create("unequal");
    TCase *plan = tcase_create("plan");
    tcase_add_test(plan, test_forced_lengths);
    suite_add_tcase(suite, plan);
    TCase *gemm = tcase_create("gemm");
    tcase_set_timeout(gemm, 120);
    tcase_add_loop_test(gemm, test_gemm_row_and_column_cuts, 0, 8);
    tcase_add_test(gemm, test_gemm_empty_blocks);
    suite_add_tcase(suite, gemm);
    TCase *layers = tcase_create("layers");
    tcase_set_timeout(layers, 300);
    tcase_add_test(layers, test_fc_output_and_batch_splits);
    tcase_add_loop_test(layers, test_conv_channel_and_spatial_splits, 0,
                        (int) (sizeof conv_shapes / sizeof *conv_shapes));
    tcase_add_test(layers, test_corrupt_shard_caught);
    tcase_add_test(layers, test_layer_reencodes_when_lengths_change);
    suite_add_tcase(suite, layers);
    TCase *workers = tcase_create("workers");
    tcase_set_timeout(workers, 60);
    tcase_add_test(workers, test_embedded_workers);
    suite_add_tcase(suite, workers);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(unequal_suite());
}
