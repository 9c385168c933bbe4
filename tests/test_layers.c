/* test_layers.c - FC and conv layers through the coded path: AlexNet and VGG-16
   shapes with shards erased vs the uncoded result, every split, counters, and
   bad input that must leave the output untouched. */
#include "cdcgemm.h"
#include "cdcgemm_testing.h"
#include "engine.h"
#include "layer.h"
#include "models.h"
#include "reference.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cdc_context_t *make_context(int workers, int parity)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.in_process = 1; /* the math, without worker processes */
    config.local_workers = workers;
    config.parity = parity;
    cdc_context_t *ctx = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_OK);
    return ctx;
}

typedef struct {
    const cdc_model_layer_t *shape;
    float *w, *bias, *x;
    size_t in_count, out_count;
    int64_t out_h, out_w;
} layer_case_t;

static void case_init(layer_case_t *lc, const cdc_model_layer_t *shape, uint64_t seed)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, seed);
    memset(lc, 0, sizeof *lc);
    lc->shape = shape;
    size_t wcount = (size_t) (shape->out_channels * cdc_model_layer_inner(shape));
    lc->w = cdc_test_alloc(wcount * sizeof(float));
    lc->bias = cdc_test_alloc((size_t) shape->out_channels * sizeof(float));
    cdc_test_fill_uniform(&rng, lc->w, wcount);
    cdc_test_fill_uniform(&rng, lc->bias, (size_t) shape->out_channels);
    lc->out_h = lc->out_w = 1;
    if (shape->kind == CDC_MODEL_CONV) {
        lc->in_count = (size_t) (shape->in_channels * shape->h * shape->w);
        lc->out_h = (shape->h + 2 * shape->pad - shape->kernel) / shape->stride + 1;
        lc->out_w = (shape->w + 2 * shape->pad - shape->kernel) / shape->stride + 1;
    } else {
        lc->in_count = (size_t) shape->in_channels;
    }
    lc->out_count = (size_t) (shape->out_channels * lc->out_h * lc->out_w);
    lc->x = cdc_test_alloc(lc->in_count * sizeof(float));
    cdc_test_fill_uniform(&rng, lc->x, lc->in_count);
}

static void case_free(layer_case_t *lc)
{
    free(lc->w);
    free(lc->bias);
    free(lc->x);
}

static cdc_layer_t *case_layer_relu(cdc_context_t *ctx, const layer_case_t *lc, int parity,
                                    cdc_split_t split, int relu)
{
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.parity = parity;
    options.split = split;
    options.relu = relu;
    cdc_layer_t *layer = NULL;
    const cdc_model_layer_t *s = lc->shape;
    int rc;
    if (s->kind == CDC_MODEL_CONV) {
        cdc_conv2d_desc_t desc = {s->in_channels, s->out_channels, s->kernel, s->kernel,
                                  s->stride,      s->stride,       s->pad,    s->pad,
                                  1,              1};
        rc = cdc_conv2d_new(ctx, &desc, lc->w, lc->bias, &options, &layer);
    } else {
        rc = cdc_fc_new(ctx, s->out_channels, s->in_channels, lc->w, lc->bias, &options,
                        &layer);
    }
    ck_assert_msg(rc == CDC_OK, "%s: %s", s->name, cdc_last_error());
    return layer;
}

static cdc_layer_t *case_layer(cdc_context_t *ctx, const layer_case_t *lc, int parity,
                               cdc_split_t split)
{
    return case_layer_relu(ctx, lc, parity, split, 1);
}

static void case_forward(const layer_case_t *lc, cdc_layer_t *layer, float *y)
{
    const cdc_model_layer_t *s = lc->shape;
    int rc = s->kind == CDC_MODEL_CONV ? cdc_conv2d_forward(layer, 1, s->h, s->w, lc->x, y)
                                       : cdc_fc_forward(layer, 1, lc->x, y);
    ck_assert_msg(rc == CDC_OK, "%s forward: %s", s->name, cdc_last_error());
}

/* Every layer of a model: uncoded once, then coded with one erased shard per
   layer (cycling through data and parity shards), for the auto split and the
   forced other split. */
static void run_model(const char *model, int parity, uint64_t erase_pairs)
{
    size_t count;
    const cdc_model_layer_t *layers = cdc_model_layers(model, &count);
    ck_assert_ptr_nonnull(layers);
    cdc_context_t *ctx = make_context(5, parity);
    int shards = 5;
    for (size_t l = 0; l < count; l++) {
        layer_case_t lc;
        case_init(&lc, &layers[l], 1000 + l);
        float *ref = cdc_test_alloc(lc.out_count * sizeof(float));
        float *y = cdc_test_alloc(lc.out_count * sizeof(float));
        cdc_layer_t *plain = case_layer(ctx, &lc, 0, CDC_SPLIT_ROWS);
        case_forward(&lc, plain, ref);
        cdc_layer_destroy(&plain);
        static const cdc_split_t splits[] = {CDC_SPLIT_AUTO, CDC_SPLIT_ROWS,
                                             CDC_SPLIT_COLUMNS};
        for (int s = 0; s < 3; s++) {
            cdc_layer_t *coded = case_layer(ctx, &lc, parity, splits[s]);
            uint64_t mask = UINT64_C(1) << ((l + (size_t) s) % (size_t) shards);
            if (erase_pairs)
                mask |= UINT64_C(1) << ((l + (size_t) s + 2) % (size_t) shards);
            cdc_stats_t before, after;
            cdc_context_stats(ctx, &before);
            for (size_t i = 0; i < lc.out_count; i++)
                y[i] = NAN;
            ck_assert_int_eq(cdc_context_erase_next(ctx, mask), CDC_OK);
            case_forward(&lc, coded, y);
            cdc_context_stats(ctx, &after);
            /* The call reports the split the layer used (FC through the
               driver, conv through its own tasks). */
            cdc_call_report_t report;
            ck_assert_int_eq(cdc_context_last_call(ctx, &report), CDC_OK);
            ck_assert_int_eq(report.split, cdc_layer_split(coded));
            double err = cdc_test_rel_error_ff(y, ref, lc.out_count);
            printf("%s %s r=%d split=%d(%s) erased=0x%llx rel_error=%.3g decoded=%llu\n",
                   model, layers[l].name, parity, (int) splits[s],
                   cdc_layer_split(coded) == CDC_SPLIT_COLUMNS ? "columns" : "rows",
                   (unsigned long long) mask, err,
                   (unsigned long long) (after.results_decoded - before.results_decoded));
            ck_assert_msg(err <= 1e-5, "%s %s split %d: rel error %g", model,
                          layers[l].name, (int) splits[s], err);
            ck_assert_uint_eq(after.fallbacks, before.fallbacks);
            ck_assert_uint_eq(after.shards_erased - before.shards_erased,
                              (uint64_t) __builtin_popcountll(mask));
            cdc_layer_destroy(&coded);
        }
        free(ref);
        free(y);
        case_free(&lc);
    }
    cdc_context_destroy(&ctx);
}

START_TEST(test_alexnet_one_erasure)
{
    run_model("alexnet", 1, 0);
}
END_TEST

START_TEST(test_alexnet_two_erasures)
{
    run_model("alexnet", 2, 1);
}
END_TEST

START_TEST(test_vgg16_one_erasure)
{
    run_model("vgg16", 1, 0);
}
END_TEST

/* Small random layers against the double-precision reference, batch > 1,
   every single-shard erasure, stride/pad/dilation, both splits. */
START_TEST(test_random_conv_every_erasure)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 77 + (uint64_t) _i);
    cdc_ref_conv_t shape;
    memset(&shape, 0, sizeof shape);
    shape.batch = cdc_test_rng_int(&rng, 1, 3);
    shape.in_channels = cdc_test_rng_int(&rng, 1, 6);
    shape.out_channels = cdc_test_rng_int(&rng, 1, 13);
    shape.h = cdc_test_rng_int(&rng, 8, 20);
    shape.w = cdc_test_rng_int(&rng, 4, 20);
    shape.kernel_h = cdc_test_rng_int(&rng, 1, 3);
    shape.kernel_w = cdc_test_rng_int(&rng, 1, 4);
    shape.stride_h = cdc_test_rng_int(&rng, 1, 2);
    shape.stride_w = cdc_test_rng_int(&rng, 1, 3);
    shape.pad_h = cdc_test_rng_int(&rng, 0, 2);
    shape.pad_w = cdc_test_rng_int(&rng, 0, 2);
    shape.dilation_h = cdc_test_rng_int(&rng, 1, 2);
    shape.dilation_w = cdc_test_rng_int(&rng, 1, 2);
    shape.relu = (int) (_i % 2);
    int64_t oh, ow;
    cdc_ref_conv2d_output(&shape, &oh, &ow);
    size_t in_count = (size_t) (shape.batch * shape.in_channels * shape.h * shape.w);
    size_t w_count = (size_t) (shape.out_channels * shape.in_channels * shape.kernel_h *
                               shape.kernel_w);
    size_t out_count = (size_t) (shape.batch * shape.out_channels * oh * ow);
    float *x = cdc_test_alloc(in_count * 4), *w = cdc_test_alloc(w_count * 4);
    float *bias = cdc_test_alloc((size_t) shape.out_channels * 4);
    float *y = cdc_test_alloc(out_count * 4);
    double *want = cdc_test_alloc(out_count * sizeof(double));
    cdc_test_fill_uniform(&rng, x, in_count);
    cdc_test_fill_uniform(&rng, w, w_count);
    cdc_test_fill_uniform(&rng, bias, (size_t) shape.out_channels);
    cdc_ref_conv2d(&shape, x, w, bias, want);

    cdc_conv2d_desc_t desc = {shape.in_channels, shape.out_channels, shape.kernel_h,
                              shape.kernel_w,    shape.stride_h,     shape.stride_w,
                              shape.pad_h,       shape.pad_w,        shape.dilation_h,
                              shape.dilation_w};
    for (int parity = 1; parity <= 2; parity++) {
        int workers = parity == 1 ? 4 : 6;
        cdc_context_t *ctx = make_context(workers, parity);
        for (int split = CDC_SPLIT_ROWS; split <= CDC_SPLIT_COLUMNS; split++) {
            cdc_layer_options_t options;
            cdc_layer_options_init(&options);
            options.split = (cdc_split_t) split;
            options.relu = shape.relu;
            cdc_layer_t *layer = NULL;
            ck_assert_int_eq(cdc_conv2d_new(ctx, &desc, w, bias, &options, &layer), CDC_OK);
            for (int lost = -1; lost < workers; lost++) {
                cdc_context_erase_next(ctx, lost < 0 ? 0 : UINT64_C(1) << lost);
                ck_assert_int_eq(cdc_conv2d_forward(layer, shape.batch, shape.h, shape.w,
                                                    x, y),
                                 CDC_OK);
                double err = cdc_test_rel_error(y, want, out_count);
                ck_assert_msg(err <= 1e-5, "case %d r %d split %d lost %d: %g", _i, parity,
                              split, lost, err);
            }
            cdc_layer_destroy(&layer);
        }
        cdc_context_destroy(&ctx);
    }
    free(x);
    free(w);
    free(bias);
    free(y);
    free(want);
}
END_TEST

START_TEST(test_fc_batch_every_erasure)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 5 + (uint64_t) _i);
    int64_t batch = cdc_test_rng_int(&rng, 1, 12), in = cdc_test_rng_int(&rng, 1, 300);
    int64_t out = cdc_test_rng_int(&rng, 1, 70);
    float *x = cdc_test_alloc((size_t) (batch * in) * 4), *w = cdc_test_alloc((size_t) (out * in) * 4);
    float *bias = cdc_test_alloc((size_t) out * 4), *y = cdc_test_alloc((size_t) (batch * out) * 4);
    double *want = cdc_test_alloc((size_t) (batch * out) * sizeof(double));
    cdc_test_fill_uniform(&rng, x, (size_t) (batch * in));
    cdc_test_fill_uniform(&rng, w, (size_t) (out * in));
    cdc_test_fill_uniform(&rng, bias, (size_t) out);
    cdc_ref_fc(batch, in, out, x, w, bias, 1, want);
    cdc_context_t *ctx = make_context(7, 2);
    for (int split = CDC_SPLIT_ROWS; split <= CDC_SPLIT_COLUMNS; split++) {
        cdc_layer_options_t options;
        cdc_layer_options_init(&options);
        options.split = (cdc_split_t) split;
        options.relu = 1;
        cdc_layer_t *layer = NULL;
        ck_assert_int_eq(cdc_fc_new(ctx, out, in, w, bias, &options, &layer), CDC_OK);
        for (int a = -1; a < 7; a++)
            for (int b = a; b < 7; b++) {
                uint64_t mask = (a < 0 ? 0 : UINT64_C(1) << a) | (b < 0 ? 0 : UINT64_C(1) << b);
                cdc_context_erase_next(ctx, mask);
                ck_assert_int_eq(cdc_fc_forward(layer, batch, x, y), CDC_OK);
                double err = cdc_test_rel_error(y, want, (size_t) (batch * out));
                ck_assert_msg(err <= 1e-5, "fc %lldx%lld batch %lld split %d mask %llx: %g",
                              (long long) out, (long long) in, (long long) batch, split,
                              (unsigned long long) mask, err);
            }
        cdc_layer_destroy(&layer);
    }
    cdc_stats_t stats;
    cdc_context_stats(ctx, &stats);
    ck_assert_uint_eq(stats.weight_encodes, 1); /* rows split only; cached after */
    ck_assert_uint_eq(stats.fallbacks, 0);
    cdc_context_destroy(&ctx);
    free(x);
    free(w);
    free(bias);
    free(y);
    free(want);
}
END_TEST

START_TEST(test_weights_encoded_once)
{
    cdc_context_t *ctx = make_context(5, 1);
    float w[6 * 10], x[10], y[6];
    for (int i = 0; i < 60; i++)
        w[i] = (float) (i % 7) - 3.0f;
    for (int i = 0; i < 10; i++)
        x[i] = (float) i;
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_fc_new(ctx, 6, 10, w, NULL, NULL, &layer), CDC_OK);
    for (int call = 0; call < 10; call++)
        ck_assert_int_eq(cdc_fc_forward(layer, 1, x, y), CDC_OK);
    cdc_stats_t stats;
    cdc_context_stats(ctx, &stats);
    ck_assert_uint_eq(stats.weight_encodes, 1);
    ck_assert_uint_eq(stats.calls, 10);
    ck_assert_int_eq(cdc_layer_split(layer), CDC_SPLIT_ROWS);
    for (int o = 0; o < 6; o++) {
        double want = 0;
        for (int i = 0; i < 10; i++)
            want += (double) w[o * 10 + i] * x[i];
        ck_assert_double_eq_tol(y[o], want, 1e-4);
    }
    cdc_layer_destroy(&layer);
    cdc_context_destroy(&ctx);
}
END_TEST

/* The weights' row blocks outlive the layer: a holder of the shard set (a
   zero-copy WEIGHTS send in flight, the client's slot manifest) still reads
   every block after a re-encode for another (code, n) retired the set and
   after cdc_layer_destroy, the data blocks that alias the layer's weights
   included (ASan sees any use after free); its release frees the set and
   then the weights (LSan sees anything left). */
START_TEST(test_weight_shards_outlive_layer)
{
    enum { OUT = 10, IN = 6 };
    cdc_context_t *ctx = make_context(5, 1); /* n = 4, r = 1 */
    float w[OUT * IN], x[IN], y[OUT];
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 31);
    cdc_test_fill_uniform(&rng, w, OUT * IN);
    cdc_test_fill_uniform(&rng, x, IN);
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = CDC_SPLIT_ROWS;
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_fc_new(ctx, OUT, IN, w, NULL, &options, &layer), CDC_OK);
    ck_assert_int_eq(cdc_fc_forward(layer, 1, x, y), CDC_OK);
    const cdc_shard_set_t *set = layer->encoded.sets.in_use;
    ck_assert_ptr_nonnull(set);
    ck_assert_int_eq(set->n, 4);
    ck_assert_int_eq(set->r, 1);
    ck_assert_ptr_eq(set->blocks[0], layer->weights); /* aliases the weights */
    ck_assert_int_eq(cdc__hold_refs(&layer->parts->hold), 2); /* layer, set */
    size_t block = (size_t) set->block_rows * IN;
    float parity[3 * IN];
    ck_assert_uint_le(block, sizeof parity / sizeof *parity);
    memcpy(parity, set->blocks[4], block * sizeof(float));
    cdc_hold_t *held = cdc__hold_retain(cdc__shard_set_hold(set));

    /* A new plan: the old set is retired, not freed. */
    const cdc_shard_set_t *other = NULL;
    cdc_weights_t weights;
    cdc__layer_weights(layer, &weights);
    ck_assert_int_eq(cdc__weights_shards(&weights, 0, NULL, 2, 0, NULL, &other), CDC_OK);
    ck_assert_ptr_ne(other, set);
    ck_assert(cdc__hold_retired(held));
    ck_assert_int_eq(cdc__hold_refs(&layer->parts->hold), 3); /* layer, both sets */

    cdc_layer_destroy(&layer);
    for (int s = 0; s < set->n; s++) {
        int64_t valid = cdc__shard_set_valid_rows(set, s);
        ck_assert_int_eq(memcmp(set->blocks[s], w + cdc__shard_set_first_row(set, s) * IN,
                                (size_t) valid * IN * sizeof(float)),
                         0);
    }
    ck_assert_int_eq(memcmp(set->blocks[4], parity, block * sizeof(float)), 0);
    ck_assert_int_eq(cdc__hold_refs(held), 1);
    cdc__hold_release(held); /* the set, then the weights */
    cdc_context_destroy(&ctx);
}
END_TEST

START_TEST(test_bad_layer_input)
{
    cdc_context_t *ctx = make_context(5, 1);
    float w[4 * 3 * 5 * 5] = {0}, x[2 * 3 * 8 * 8] = {0}, y[2 * 4 * 8 * 8];
    float saved[sizeof y / sizeof *y];
    for (size_t i = 0; i < sizeof y / sizeof *y; i++)
        y[i] = saved[i] = 42.0f;
    cdc_layer_t *layer = (cdc_layer_t *) 0x1;
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);

    ck_assert_int_eq(cdc_fc_new(NULL, 4, 3, w, NULL, NULL, &layer), CDC_EINVAL);
    ck_assert_int_eq(cdc_fc_new(ctx, 4, 3, NULL, NULL, NULL, &layer), CDC_EINVAL);
    ck_assert_int_eq(cdc_fc_new(ctx, 4, 3, w, NULL, NULL, NULL), CDC_EINVAL);
    ck_assert_int_eq(cdc_fc_new(ctx, -4, 3, w, NULL, NULL, &layer), CDC_EDIM);
    ck_assert_int_eq(cdc_fc_new(ctx, 4, 0, w, NULL, NULL, &layer), CDC_EDIM);
    ck_assert_int_eq(cdc_fc_new(ctx, (int64_t) 1 << 40, 3, w, NULL, NULL, &layer), CDC_EDIM);
    ck_assert_int_eq(cdc_fc_new(ctx, 1 << 30, 1 << 30, w, NULL, NULL, &layer), CDC_EDIM);
    options.parity = 3; /* 5 workers: r = 3 > n = 2 */
    ck_assert_int_eq(cdc_fc_new(ctx, 4, 3, w, NULL, &options, &layer), CDC_EINVAL);
    ck_assert_msg(strstr(cdc_last_error(), "r = 3") != NULL, "%s", cdc_last_error());
    options.parity = 9;
    ck_assert_int_eq(cdc_fc_new(ctx, 4, 3, w, NULL, &options, &layer), CDC_EINVAL);
    cdc_layer_options_init(&options);
    options.split = (cdc_split_t) 5;
    ck_assert_int_eq(cdc_fc_new(ctx, 4, 3, w, NULL, &options, &layer), CDC_EINVAL);
    ck_assert_ptr_eq(layer, (cdc_layer_t *) 0x1);

    cdc_conv2d_desc_t desc = {3, 4, 3, 3, 1, 1, 1, 1, 1, 1};
    cdc_conv2d_desc_t bad = desc;
    bad.stride_h = 0;
    ck_assert_int_eq(cdc_conv2d_new(ctx, &bad, w, NULL, NULL, &layer), CDC_EDIM);
    bad = desc;
    bad.pad_w = -1;
    ck_assert_int_eq(cdc_conv2d_new(ctx, &bad, w, NULL, NULL, &layer), CDC_EDIM);
    bad = desc;
    bad.out_channels = 0;
    ck_assert_int_eq(cdc_conv2d_new(ctx, &bad, w, NULL, NULL, &layer), CDC_EDIM);
    ck_assert_int_eq(cdc_conv2d_new(ctx, NULL, w, NULL, NULL, &layer), CDC_EINVAL);

    layer = NULL;
    ck_assert_int_eq(cdc_conv2d_new(ctx, &desc, w, NULL, NULL, &layer), CDC_OK);
    ck_assert_int_eq(cdc_conv2d_forward(layer, 0, 8, 8, x, y), CDC_EDIM);
    ck_assert_int_eq(cdc_conv2d_forward(layer, -1, 8, 8, x, y), CDC_EDIM);
    ck_assert_int_eq(cdc_conv2d_forward(layer, 2, 0, 8, x, y), CDC_EDIM);
    ck_assert_int_eq(cdc_conv2d_forward(layer, 2, 8, -8, x, y), CDC_EDIM);
    /* 1x1 input with padding 1 and a 3x3 kernel is a valid 1x1 output. */
    ck_assert_int_eq(cdc_conv2d_forward(layer, 2, 1, 1, x, y), CDC_OK);
    ck_assert_int_eq(cdc_conv2d_forward(layer, 2, 8, 8, NULL, y), CDC_EINVAL);
    ck_assert_int_eq(cdc_conv2d_forward(layer, 2, 8, 8, x, NULL), CDC_EINVAL);
    ck_assert_int_eq(cdc_fc_forward(layer, 1, x, y), CDC_EINVAL); /* not an FC layer */
    ck_assert_int_eq(cdc_conv2d_forward(NULL, 2, 8, 8, x, y), CDC_EINVAL);
    cdc_layer_destroy(&layer);
    ck_assert_ptr_null(layer);
    cdc_layer_destroy(&layer);
    cdc_layer_destroy(NULL);
    for (size_t i = 2 * 4 * 1 * 1; i < sizeof y / sizeof *y; i++)
        ck_assert(y[i] == saved[i]);

    desc.kernel_h = desc.kernel_w = 5;
    desc.pad_h = desc.pad_w = 0;
    ck_assert_int_eq(cdc_conv2d_new(ctx, &desc, w, NULL, NULL, &layer), CDC_OK);
    for (size_t i = 0; i < sizeof y / sizeof *y; i++)
        y[i] = saved[i];
    /* 4x4 input, 5x5 kernel, no padding: empty output. */
    ck_assert_int_eq(cdc_conv2d_forward(layer, 1, 4, 4, x, y), CDC_EDIM);
    ck_assert(memcmp(y, saved, sizeof y) == 0);
    cdc_layer_destroy(&layer);

    ck_assert_int_eq(cdc_fc_new(ctx, 4, 3, w, NULL, NULL, &layer), CDC_OK);
    ck_assert_int_eq(cdc_fc_forward(layer, 0, x, y), CDC_EDIM);
    ck_assert_int_eq(cdc_fc_forward(layer, (int64_t) 1 << 40, x, y), CDC_EDIM);
    ck_assert_int_eq(cdc_fc_forward(layer, 1, NULL, y), CDC_EINVAL);
    ck_assert(memcmp(y, saved, sizeof y) == 0);
    cdc_layer_destroy(&layer);
    cdc_context_destroy(&ctx);
}
END_TEST

/* A silently wrong shard result (1% of its largest value, in one element) is
   caught by the parity check: rebuilt from parity with r = 2, recomputed with
   r = 1; with the check off the output is wrong, which shows the test bites.
   The fc's batch split of one sample leaves data shards 1..n-1 empty: never
   computed, nothing of theirs can be wrong, and the injection finds no result
   of theirs to change. */
START_TEST(test_corrupt_shard_caught)
{
    static const cdc_model_layer_t shapes[] = {
        {"fc", CDC_MODEL_FC, 2304, 1, 1, 512, 1, 1, 0},
        {"conv", CDC_MODEL_CONV, 32, 27, 27, 64, 5, 1, 2},
    };
    static const cdc_split_t splits[] = {CDC_SPLIT_ROWS, CDC_SPLIT_COLUMNS};
    const cdc_model_layer_t *shape = &shapes[_i / 2];
    cdc_split_t split = splits[_i % 2];
    layer_case_t lc;
    case_init(&lc, shape, 900 + (uint64_t) _i);
    float *ref = cdc_test_alloc(lc.out_count * sizeof(float));
    float *y = cdc_test_alloc(lc.out_count * sizeof(float));
    for (int parity = 1; parity <= 2; parity++) {
        cdc_context_t *ctx = make_context(4 + 2 * parity, parity);
        int n = 4 + parity;
        cdc_layer_t *plain = case_layer(ctx, &lc, 0, CDC_SPLIT_ROWS);
        case_forward(&lc, plain, ref);
        cdc_layer_destroy(&plain);
        cdc_layer_t *coded = case_layer(ctx, &lc, parity, split);
        for (int shard = 0; shard < n + parity; shard++) {
            cdc_stats_t before, after;
            cdc_call_report_t report;
            cdc_context_stats(ctx, &before);
            cdc_context_corrupt_next(ctx, UINT64_C(1) << shard);
            case_forward(&lc, coded, y);
            cdc_context_stats(ctx, &after);
            cdc_context_last_call(ctx, &report);
            double err = cdc_test_rel_error_ff(y, ref, lc.out_count);
            ck_assert_msg(err <= 1e-5, "%s split %d r %d shard %d: error %g", shape->name,
                          (int) split, parity, shard, err);
            if (shape->kind == CDC_MODEL_FC && split == CDC_SPLIT_COLUMNS && shard > 0 &&
                shard < n) {
                ck_assert_uint_eq(after.corrupt_detected, before.corrupt_detected);
                ck_assert_int_eq(report.corrupt, 0);
                continue;
            }
            ck_assert_msg(after.corrupt_detected == before.corrupt_detected + 1,
                          "%s split %d r %d shard %d not detected", shape->name, (int) split,
                          parity, shard);
            ck_assert_int_eq(report.corrupt, 1);
            if (parity == 2 && shard < n)
                ck_assert_int_eq(report.decoded, 1); /* located and rebuilt */
            if (parity == 1 && shard < n)
                ck_assert_int_gt(report.fallback, 0); /* cannot locate: recomputed */
        }
        cdc_layer_destroy(&coded);
        cdc_context_destroy(&ctx);
    }
    /* Without the check the corruption reaches the output (no ReLU, which
       could hide a perturbed negative value). */
    cdc_config_t config;
    cdc_config_init(&config);
    config.in_process = 1;
    config.verify = 0;
    cdc_context_t *ctx = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_OK);
    cdc_layer_t *coded = case_layer_relu(ctx, &lc, 1, split, 0);
    case_forward(&lc, coded, ref);
    cdc_context_corrupt_next(ctx, UINT64_C(1) << 0); /* shard 0 holds real output */
    case_forward(&lc, coded, y);
    ck_assert(cdc_test_rel_error_ff(y, ref, lc.out_count) > 1e-6);
    cdc_layer_destroy(&coded);
    cdc_context_destroy(&ctx);
    free(ref);
    free(y);
    case_free(&lc);
}
END_TEST

/* The check's sample (check_policy.c): the first 4 coded calls, then as
   many as 2% of the calls' time pays for, each check charged its wait past
   decodable, at least a quarter of its call (the first 4 not charged). */
START_TEST(test_verify_sample_budget)
{
    cdc_context_t *ctx = make_context(5, 1);
    for (int i = 0; i < 4; i++) { /* 2 s calls (weights shipped), 1.5 s waits */
        ck_assert_int_eq(cdc__verify_this_call(ctx), CDC_CHECK_FIRST);
        cdc__verify_account(ctx, CDC_CHECK_FIRST, 2000.0, 1500.0); /* not charged */
    }
    /* The sample's first call, 10 ms with a check as cheap as it gets:
       charged a quarter of it, 2.5 ms, which 12 such calls earn back (0.2
       ms each; the credit is capped at one call's earnings). */
    ck_assert_int_eq(cdc__verify_this_call(ctx), CDC_CHECK_SAMPLED);
    cdc__verify_account(ctx, CDC_CHECK_SAMPLED, 10.0, 0.0);
    int unchecked = 0;
    while (cdc__verify_this_call(ctx) == CDC_CHECK_NONE && unchecked < 1000) {
        cdc__verify_account(ctx, CDC_CHECK_NONE, 10.0, 0.0);
        unchecked++;
    }
    ck_assert_int_eq(unchecked, 12); /* 0.2 - 2.5 + 12 x 0.2 = 0.1 */
    /* A sampled call that waited 15.1 ms for its parity (a band on
       demand): 75 calls pay for it (its credit capped at one call's
       0.2 ms: 0.2 - 15.1 + 75 x 0.2 = 0.1). */
    cdc__verify_account(ctx, CDC_CHECK_SAMPLED, 10.0, 15.1);
    for (unchecked = 0; cdc__verify_this_call(ctx) == CDC_CHECK_NONE && unchecked < 1000;
         unchecked++)
        cdc__verify_account(ctx, CDC_CHECK_NONE, 10.0, 0.0);
    ck_assert_int_eq(unchecked, 75);
    cdc__verify_account(ctx, CDC_CHECK_SAMPLED, 10.0, 0.0); /* charged 2.5 */
    /* No savings: 1,000 calls the sample did not draw (a stretch of
       strict ones) buy one check, not a burst. */
    for (int i = 0; i < 1000; i++)
        cdc__verify_account(ctx, CDC_CHECK_NONE, 10.0, 0.0);
    ck_assert_int_eq(cdc__verify_this_call(ctx), CDC_CHECK_SAMPLED);
    cdc__verify_account(ctx, CDC_CHECK_SAMPLED, 10.0, 0.0);
    ck_assert_int_eq(cdc__verify_this_call(ctx), CDC_CHECK_NONE);
    cdc_context_destroy(&ctx);
}
END_TEST

/* Clean calls never raise a false alarm. */
START_TEST(test_verify_no_false_alarm)
{
    cdc_context_t *ctx = make_context(6, 2);
    size_t count;
    const cdc_model_layer_t *layers = cdc_model_layers("alexnet", &count);
    for (size_t l = 0; l < count; l++) {
        layer_case_t lc;
        case_init(&lc, &layers[l], 3000 + l);
        float *y = cdc_test_alloc(lc.out_count * sizeof(float));
        for (int split = CDC_SPLIT_ROWS; split <= CDC_SPLIT_COLUMNS; split++) {
            cdc_layer_t *coded = case_layer(ctx, &lc, 2, (cdc_split_t) split);
            for (int call = 0; call < 3; call++)
                case_forward(&lc, coded, y);
            cdc_layer_destroy(&coded);
        }
        free(y);
        case_free(&lc);
    }
    cdc_stats_t stats;
    cdc_context_stats(ctx, &stats);
    ck_assert_uint_eq(stats.corrupt_detected, 0);
    ck_assert_uint_eq(stats.fallbacks, 0);
    cdc_context_destroy(&ctx);
}
END_TEST

/* 2-modular redundancy: a lost copy is covered by its twin; both copies of a
   shard lost means a local fallback; results always exact. */
START_TEST(test_replicate_covers_lost_copies)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.in_process = 1;
    config.local_workers = 8;
    config.parity = 0;
    config.replicate = 1;
    cdc_context_t *ctx = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_OK);
    layer_case_t lc;
    case_init(&lc, &(cdc_model_layer_t){"fc", CDC_MODEL_FC, 300, 1, 1, 70, 1, 1, 0}, 77);
    float *ref = cdc_test_alloc(lc.out_count * sizeof(float));
    float *y = cdc_test_alloc(lc.out_count * sizeof(float));
    cdc_layer_t *plain = case_layer(ctx, &lc, 0, CDC_SPLIT_ROWS);
    case_forward(&lc, plain, ref); /* nothing erased: the first copies */
    cdc_call_report_t report;
    cdc_context_last_call(ctx, &report);
    ck_assert_int_eq(report.n, 4);
    for (int lost = 0; lost < 8; lost++) {
        cdc_stats_t before, after;
        cdc_context_stats(ctx, &before);
        cdc_context_erase_next(ctx, UINT64_C(1) << lost);
        case_forward(&lc, plain, y);
        cdc_context_stats(ctx, &after);
        ck_assert(memcmp(y, ref, lc.out_count * sizeof(float)) == 0);
        ck_assert_uint_eq(after.fallbacks, before.fallbacks); /* the twin covered it */
    }
    cdc_stats_t before, after;
    cdc_context_stats(ctx, &before);
    cdc_context_erase_next(ctx, (UINT64_C(1) << 2) | (UINT64_C(1) << 6)); /* both copies */
    case_forward(&lc, plain, y);
    cdc_context_stats(ctx, &after);
    ck_assert(memcmp(y, ref, lc.out_count * sizeof(float)) == 0);
    ck_assert_uint_eq(after.fallbacks, before.fallbacks + 1);
    cdc_layer_destroy(&plain);
    cdc_context_destroy(&ctx);
    config.parity = 1; /* replication replaces the code: not both */
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_ECONFIG);
    free(ref);
    free(y);
    case_free(&lc);
}
END_TEST

static Suite *layers_suite(void)
{
    Suite *suite = suite_create("layers");
    TCase *models = tcase_create("models");
    tcase_set_timeout(models, 600);
    tcase_add_test(models, test_alexnet_one_erasure);
    tcase_add_test(models, test_alexnet_two_erasures);
    tcase_add_test(models, test_vgg16_one_erasure);
    suite_add_tcase(suite, models);
    TCase *random = tcase_create("random_shapes");
    tcase_set_timeout(random, 300);
    tcase_add_loop_test(random, test_random_conv_every_erasure, 0, 40);
    tcase_add_loop_test(random, test_fc_batch_every_erasure, 0, 20);
    suite_add_tcase(suite, random);
    TCase *caching = tcase_create("caching");
    tcase_add_test(caching, test_weights_encoded_once);
    tcase_add_test(caching, test_replicate_covers_lost_copies);
    tcase_add_test(caching, test_weight_shards_outlive_layer);
    suite_add_tcase(suite, caching);
    TCase *verify = tcase_create("verify");
    tcase_set_timeout(verify, 300);
    tcase_add_loop_test(verify, test_corrupt_shard_caught, 0, 4);
    tcase_add_test(verify, test_verify_no_false_alarm);
    tcase_add_test(verify, test_verify_sample_budget);
    suite_add_tcase(suite, verify);
    TCase *bad = tcase_create("bad_input");
    tcase_add_test(bad, test_bad_layer_input);
    suite_add_tcase(suite, bad);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(layers_suite());
}
