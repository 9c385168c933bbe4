/* test_plan.c - the auto split rule (docs/architecture.md, "The auto rule"):
   the bytes each split moves, the band height of a spatial shard, the
   matmul and conv rules, and the rule as layers resolve it. */
#include "cdcgemm.h"
#include "geometry.h"
#include "models.h"
#include "plan.h"
#include "testutil.h"

#include <stdlib.h>

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* Every data shard gets at least one real row: the documented guard
   ceil(N/n) * (n - 1) < N. */
static int every_shard_real(int64_t rows, int n)
{
    return ceil_div(rows, n) * (n - 1) < rows;
}

static cdc_conv_geometry_t conv_geometry(int64_t channels, int64_t h, int64_t w,
                                         int64_t kernel, int64_t stride, int64_t pad,
                                         int64_t dilation)
{
    cdc_conv_geometry_t g = {.channels = channels, .h = h, .w = w,
                             .kernel_h = kernel, .kernel_w = kernel,
                             .stride_h = stride, .stride_w = stride,
                             .pad_h = pad, .pad_w = pad,
                             .dilation_h = dilation, .dilation_w = dilation};
    ck_assert_int_eq(cdc__conv_geometry_finish(&g), CDC_OK);
    return g;
}

/* ---- bytes: inputs out to every shard plus results back ------------------- */

START_TEST(test_matmul_bytes_counted)
{
    /* m = 100, ncols = 50, k = 30 over n = 4 data + r = 1 parity shards.
       Rows: a block of 25 rows of A and all of Bt out, 25 x 50 back.
       Columns: all of A and a block of 13 rows of Bt out, 100 x 13 back. */
    double rows = cdc__plan_matmul_bytes(CDC_SPLIT_ROWS, 100, 50, 30, 4, 1, 0, 0);
    double cols = cdc__plan_matmul_bytes(CDC_SPLIT_COLUMNS, 100, 50, 30, 4, 1, 0, 0);
    ck_assert_double_eq(rows, 5.0 * (25 * 30 + 50 * 30 + 25 * 50) * 4);
    ck_assert_double_eq(cols, 5.0 * (100 * 30 + 13 * 30 + 100 * 13) * 4);
}
END_TEST

START_TEST(test_cached_operands_not_counted)
{
    /* A cached operand travels once, not per call. */
    double full = cdc__plan_matmul_bytes(CDC_SPLIT_ROWS, 100, 50, 30, 4, 1, 0, 0);
    double a_cached = cdc__plan_matmul_bytes(CDC_SPLIT_ROWS, 100, 50, 30, 4, 1, 1, 0);
    double bt_cached = cdc__plan_matmul_bytes(CDC_SPLIT_ROWS, 100, 50, 30, 4, 1, 0, 1);
    double both = cdc__plan_matmul_bytes(CDC_SPLIT_ROWS, 100, 50, 30, 4, 1, 1, 1);
    ck_assert_double_eq(full - a_cached, 5.0 * 25 * 30 * 4);
    ck_assert_double_eq(full - bt_cached, 5.0 * 50 * 30 * 4);
    ck_assert_double_eq(both, 5.0 * 25 * 50 * 4); /* only the results */

    full = cdc__plan_matmul_bytes(CDC_SPLIT_COLUMNS, 100, 50, 30, 4, 1, 0, 0);
    a_cached = cdc__plan_matmul_bytes(CDC_SPLIT_COLUMNS, 100, 50, 30, 4, 1, 1, 0);
    bt_cached = cdc__plan_matmul_bytes(CDC_SPLIT_COLUMNS, 100, 50, 30, 4, 1, 0, 1);
    ck_assert_double_eq(full - a_cached, 5.0 * 100 * 30 * 4);
    ck_assert_double_eq(full - bt_cached, 5.0 * 13 * 30 * 4);
}
END_TEST

START_TEST(test_bytes_count_padding_and_parity)
{
    /* Every one of the n + r shards is counted, padding included: 97 rows
       over 4 shards cost as much as 100. */
    for (int r = 0; r <= 3; r++) {
        double padded = cdc__plan_matmul_bytes(CDC_SPLIT_ROWS, 97, 50, 30, 4, r, 0, 0);
        double even = cdc__plan_matmul_bytes(CDC_SPLIT_ROWS, 100, 50, 30, 4, r, 0, 0);
        double plain = cdc__plan_matmul_bytes(CDC_SPLIT_ROWS, 100, 50, 30, 4, 0, 0, 0);
        ck_assert_double_eq(padded, even);
        ck_assert_double_eq(even * 4, plain * (4 + r));
    }
}
END_TEST

START_TEST(test_band_height)
{
    /* A band of out_rows output rows reads (out_rows - 1) * stride + the
       dilated kernel height of the padded input. */
    cdc_conv_geometry_t g = conv_geometry(3, 32, 32, 3, 1, 1, 1);
    for (int64_t rows = 1; rows <= 32; rows++)
        ck_assert_int_eq(cdc__plan_band_height(&g, rows), rows + 2);
    g = conv_geometry(3, 32, 32, 3, 2, 1, 1);
    ck_assert_int_eq(cdc__plan_band_height(&g, 1), 3);
    ck_assert_int_eq(cdc__plan_band_height(&g, 4), 9);
    g = conv_geometry(3, 32, 32, 3, 1, 2, 2);
    ck_assert_int_eq(cdc__plan_band_height(&g, 1), 5);
    ck_assert_int_eq(cdc__plan_band_height(&g, 4), 8);
    g = conv_geometry(3, 32, 32, 1, 1, 0, 1);
    ck_assert_int_eq(cdc__plan_band_height(&g, 7), 7);
}
END_TEST

START_TEST(test_band_height_whole_output)
{
    /* One band of all output rows reads the whole padded input whenever the
       stride steps exactly onto its last row. */
    for (int64_t h = 1; h <= 20; h++)
        for (int64_t kernel = 1; kernel <= 5; kernel += 2)
            for (int64_t stride = 1; stride <= 3; stride++)
                for (int64_t pad = 0; pad <= 2; pad++)
                    for (int64_t dilation = 1; dilation <= 2; dilation++) {
                        int64_t span = dilation * (kernel - 1) + 1;
                        if (h + 2 * pad < span || (h + 2 * pad - span) % stride != 0)
                            continue;
                        cdc_conv_geometry_t g =
                            conv_geometry(2, h, h, kernel, stride, pad, dilation);
                        ck_assert_int_eq(cdc__plan_band_height(&g, g.out_h), h + 2 * pad);
                    }
}
END_TEST

START_TEST(test_conv_bytes_counted)
{
    /* 8 x 16 x 16 input, 3x3 kernel, pad 1: out 16 x 16; 32 output channels,
       batch 2, n = 4 + r = 1. Spatial: a band of 4 output rows reads 6 input
       rows and sends back 4 x 16 per output channel. Channel: the whole
       input out, 8 of the 32 channels back. */
    cdc_conv_geometry_t g = conv_geometry(8, 16, 16, 3, 1, 1, 1);
    double spatial = cdc__plan_conv_bytes(CDC_SPLIT_COLUMNS, &g, 32, 2, 4, 1);
    double channel = cdc__plan_conv_bytes(CDC_SPLIT_ROWS, &g, 32, 2, 4, 1);
    ck_assert_double_eq(spatial, 5.0 * (2 * 8 * 6 * 16 + 32 * 2 * 4 * 16) * 4);
    ck_assert_double_eq(channel, 5.0 * (2 * 8 * 16 * 16 + 8 * 2 * 16 * 16) * 4);
}
END_TEST

/* ---- matmul: columns only when every data shard gets a real row ----------- */

START_TEST(test_matmul_columns_when_fewer_bytes)
{
    /* A cached, Bt per call: cutting Bt moves a block of it instead of all. */
    ck_assert_int_eq(cdc__plan_matmul_split(4, 8, 1000, 4, 1, 1, 0), CDC_SPLIT_COLUMNS);
    /* Bt cached, A per call: cutting A is cheaper. */
    ck_assert_int_eq(cdc__plan_matmul_split(8, 4, 1000, 4, 1, 0, 1), CDC_SPLIT_ROWS);
    /* Tall A, short Bt, nothing cached: rows. */
    ck_assert_int_eq(cdc__plan_matmul_split(4096, 16, 64, 4, 1, 0, 0), CDC_SPLIT_ROWS);
    /* Short A, tall Bt: columns. */
    ck_assert_int_eq(cdc__plan_matmul_split(16, 4096, 64, 4, 1, 0, 0), CDC_SPLIT_COLUMNS);
}
END_TEST

START_TEST(test_matmul_columns_need_real_rows)
{
    /* The same shape with 5 instead of 8 columns would move fewer bytes
       split by columns, but 5 rows of Bt over 4 data shards leave the last
       one all padding (ceil(5/4) * 3 = 6 >= 5): rows. */
    ck_assert_double_lt(cdc__plan_matmul_bytes(CDC_SPLIT_COLUMNS, 4, 5, 1000, 4, 1, 1, 0),
                        cdc__plan_matmul_bytes(CDC_SPLIT_ROWS, 4, 5, 1000, 4, 1, 1, 0));
    ck_assert_int_eq(cdc__plan_matmul_split(4, 5, 1000, 4, 1, 1, 0), CDC_SPLIT_ROWS);
    /* Fewer columns than data shards. */
    ck_assert_int_eq(cdc__plan_matmul_split(1, 3, 100000, 4, 1, 1, 0), CDC_SPLIT_ROWS);
}
END_TEST

START_TEST(test_matmul_ties_go_to_rows)
{
    /* Square, nothing cached, n divides both: both splits move the same. */
    ck_assert_double_eq(cdc__plan_matmul_bytes(CDC_SPLIT_ROWS, 64, 64, 32, 4, 1, 0, 0),
                        cdc__plan_matmul_bytes(CDC_SPLIT_COLUMNS, 64, 64, 32, 4, 1, 0, 0));
    ck_assert_int_eq(cdc__plan_matmul_split(64, 64, 32, 4, 1, 0, 0), CDC_SPLIT_ROWS);
}
END_TEST

/* The rule as documented, over a grid of small shapes: rows when some data
   shard would get no real row of Bt, else the split that moves fewer bytes
   (rows on a tie). */
START_TEST(test_matmul_rule_grid)
{
    static const int64_t sizes[] = {1, 2, 3, 5, 7, 8, 13, 31, 64, 100};
    const int count = (int) (sizeof sizes / sizeof sizes[0]);
    for (int n = 1; n <= 8; n++)
        for (int r = 0; r <= 3 && r <= n; r++)
            for (int cached = 0; cached < 3; cached++)
                for (int i = 0; i < count; i++)
                    for (int j = 0; j < count; j++)
                        for (int64_t k = 1; k <= 1000; k *= 10) {
                            int64_t m = sizes[i], ncols = sizes[j];
                            int a_cached = cached == 1, bt_cached = cached == 2;
                            cdc_split_t got = cdc__plan_matmul_split(m, ncols, k, n, r,
                                                                     a_cached, bt_cached);
                            double rows = cdc__plan_matmul_bytes(
                                CDC_SPLIT_ROWS, m, ncols, k, n, r, a_cached, bt_cached);
                            double cols = cdc__plan_matmul_bytes(
                                CDC_SPLIT_COLUMNS, m, ncols, k, n, r, a_cached, bt_cached);
                            cdc_split_t want = every_shard_real(ncols, n) && cols < rows
                                                   ? CDC_SPLIT_COLUMNS
                                                   : CDC_SPLIT_ROWS;
                            ck_assert_msg(got == want,
                                          "m %lld ncols %lld k %lld n %d r %d cached %d",
                                          (long long) m, (long long) ncols, (long long) k, n,
                                          r, cached);
                        }
}
END_TEST

/* ---- conv: spatial unless too few output rows ------------------------------ */

START_TEST(test_conv_models_spatial)
{
    /* Every conv layer of AlexNet and VGG-16, batch 1 and 8, n = 2..8:
       spatial, since each shard receives about 1/n of the input instead of
       all of it; channel only where the output has too few rows for n bands
       (AlexNet's 27-row conv2 over 8 shards: bands of 4 leave the last one
       nothing). */
    static const char *const models[] = {"alexnet", "vgg16"};
    int spatial = 0;
    for (int m = 0; m < 2; m++) {
        size_t count;
        const cdc_model_layer_t *layers = cdc_model_layers(models[m], &count);
        ck_assert_ptr_nonnull(layers);
        for (size_t l = 0; l < count; l++) {
            const cdc_model_layer_t *s = &layers[l];
            if (s->kind != CDC_MODEL_CONV)
                continue;
            cdc_conv_geometry_t g = conv_geometry(s->in_channels, s->h, s->w, s->kernel,
                                                  s->stride, s->pad, 1);
            for (int n = 2; n <= 8; n++)
                for (int64_t batch = 1; batch <= 8; batch *= 8) {
                    cdc_split_t want =
                        every_shard_real(g.out_h, n) ? CDC_SPLIT_COLUMNS : CDC_SPLIT_ROWS;
                    ck_assert_msg(cdc__plan_conv_split(&g, s->out_channels, batch, n, 1) ==
                                      want,
                                  "%s %s, n = %d, batch %lld: %s split expected", models[m],
                                  s->name, n, (long long) batch,
                                  want == CDC_SPLIT_COLUMNS ? "spatial" : "channel");
                    spatial += want == CDC_SPLIT_COLUMNS;
                }
        }
    }
    ck_assert_int_gt(spatial, 0);
}
END_TEST

START_TEST(test_conv_too_few_rows_channel)
{
    /* 3 output rows over 4 data shards: channel, however cheap a band. */
    cdc_conv_geometry_t g = conv_geometry(256, 3, 3, 1, 1, 0, 1);
    ck_assert_int_eq(g.out_h, 3);
    ck_assert_int_eq(cdc__plan_conv_split(&g, 8, 1, 4, 1), CDC_SPLIT_ROWS);
    /* 5 rows are more than 4 shards, yet bands of 2 leave the last shard
       nothing (2 * 3 >= 5): channel. 7 rows: bands of 2, 2, 2, 1: spatial. */
    g = conv_geometry(256, 5, 5, 1, 1, 0, 1);
    ck_assert_double_lt(cdc__plan_conv_bytes(CDC_SPLIT_COLUMNS, &g, 8, 1, 4, 1),
                        cdc__plan_conv_bytes(CDC_SPLIT_ROWS, &g, 8, 1, 4, 1));
    ck_assert_int_eq(cdc__plan_conv_split(&g, 8, 1, 4, 1), CDC_SPLIT_ROWS);
    g = conv_geometry(256, 7, 7, 1, 1, 0, 1);
    ck_assert_int_eq(cdc__plan_conv_split(&g, 8, 1, 4, 1), CDC_SPLIT_COLUMNS);
}
END_TEST

START_TEST(test_conv_channel_when_fewer_bytes)
{
    /* Few input channels, a wide halo (11x11 kernel) and many output
       channels over few shards: a band reads most of the input anyway and
       sends back all channels, so the channel split moves fewer bytes. */
    cdc_conv_geometry_t g = conv_geometry(1, 16, 16, 11, 1, 5, 1);
    ck_assert_double_lt(cdc__plan_conv_bytes(CDC_SPLIT_ROWS, &g, 512, 1, 2, 1),
                        cdc__plan_conv_bytes(CDC_SPLIT_COLUMNS, &g, 512, 1, 2, 1));
    ck_assert_int_eq(cdc__plan_conv_split(&g, 512, 1, 2, 1), CDC_SPLIT_ROWS);
}
END_TEST

START_TEST(test_conv_rule_grid)
{
    for (int64_t h = 1; h <= 12; h++)
        for (int64_t kernel = 1; kernel <= 5 && kernel <= h; kernel += 2)
            for (int64_t stride = 1; stride <= 2; stride++)
                for (int n = 1; n <= 6; n++)
                    for (int64_t out_channels = 1; out_channels <= 64; out_channels *= 8) {
                        cdc_conv_geometry_t g = conv_geometry(4, h, h + 3, kernel, stride,
                                                              kernel / 2, 1);
                        double rows = cdc__plan_conv_bytes(CDC_SPLIT_ROWS, &g, out_channels,
                                                           2, n, 1);
                        double cols = cdc__plan_conv_bytes(CDC_SPLIT_COLUMNS, &g,
                                                           out_channels, 2, n, 1);
                        cdc_split_t want = every_shard_real(g.out_h, n) && cols < rows
                                               ? CDC_SPLIT_COLUMNS
                                               : CDC_SPLIT_ROWS;
                        ck_assert_int_eq(cdc__plan_conv_split(&g, out_channels, 2, n, 1),
                                         want);
                    }
}
END_TEST

/* ---- the rule as layers resolve it ------------------------------------------ */

/* In-process context over 5 workers with r = 1: n = 4 data shards. */
static cdc_context_t *make_context(void)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.in_process = 1;
    config.local_workers = 5;
    config.parity = 1;
    cdc_context_t *ctx = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_OK);
    return ctx;
}

static float *random_floats(cdc_test_rng_t *rng, size_t count)
{
    float *x = cdc_test_alloc(count * sizeof(float));
    cdc_test_fill_uniform(rng, x, count);
    return x;
}

/* The split an FC layer (out x in) takes for a batch, auto. */
static cdc_split_t fc_split(cdc_context_t *ctx, int64_t out, int64_t in, int64_t batch)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, (uint64_t) batch);
    float *w = random_floats(&rng, (size_t) (out * in));
    float *x = random_floats(&rng, (size_t) (batch * in));
    float *y = cdc_test_alloc((size_t) (batch * out) * sizeof(float));
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_fc_new(ctx, out, in, w, NULL, NULL, &layer), CDC_OK);
    ck_assert_msg(cdc_fc_forward(layer, batch, x, y) == CDC_OK, "%s", cdc_last_error());
    cdc_split_t split = cdc_layer_split(layer);
    cdc_layer_destroy(&layer);
    free(w);
    free(x);
    free(y);
    return split;
}

START_TEST(test_fc_output_split_below_64_per_shard)
{
    /* With the weights cached, a batch split moves fewer bytes for any
       batch that fills every shard; auto still keeps the output split until
       each of the n = 4 shards gets 64 samples. */
    cdc_context_t *ctx = make_context();
    for (int64_t batch = 8; batch <= 252; batch += 61) {
        ck_assert_int_eq(cdc__plan_matmul_split(16, batch, 32, 4, 1, 1, 0),
                         CDC_SPLIT_COLUMNS);
        ck_assert_int_eq(fc_split(ctx, 16, 32, batch), CDC_SPLIT_ROWS);
    }
    ck_assert_int_eq(fc_split(ctx, 16, 32, 1), CDC_SPLIT_ROWS);
    ck_assert_int_eq(fc_split(ctx, 16, 32, 252), CDC_SPLIT_ROWS); /* 63 per shard */
    cdc_context_destroy(&ctx);
}
END_TEST

START_TEST(test_fc_batch_split_from_64_per_shard)
{
    cdc_context_t *ctx = make_context();
    ck_assert_int_eq(fc_split(ctx, 16, 32, 253), CDC_SPLIT_COLUMNS); /* 64, 64, 64, 61 */
    ck_assert_int_eq(fc_split(ctx, 16, 32, 256), CDC_SPLIT_COLUMNS);
    ck_assert_int_eq(fc_split(ctx, 16, 32, 400), CDC_SPLIT_COLUMNS);
    cdc_context_destroy(&ctx);
}
END_TEST

/* The split a conv layer takes (3x3, pad 1, 4 -> 8 channels, batch 1). */
static cdc_split_t conv_split(cdc_context_t *ctx, int64_t h, cdc_split_t forced)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, (uint64_t) h);
    cdc_conv2d_desc_t desc = {4, 8, 3, 3, 1, 1, 1, 1, 1, 1};
    float *w = random_floats(&rng, 8 * 4 * 3 * 3);
    float *x = random_floats(&rng, (size_t) (4 * h * h));
    float *y = cdc_test_alloc((size_t) (8 * h * h) * sizeof(float));
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = forced;
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_conv2d_new(ctx, &desc, w, NULL, &options, &layer), CDC_OK);
    ck_assert_msg(cdc_conv2d_forward(layer, 1, h, h, x, y) == CDC_OK, "%s", cdc_last_error());
    cdc_split_t split = cdc_layer_split(layer);
    cdc_layer_destroy(&layer);
    free(w);
    free(x);
    free(y);
    return split;
}

START_TEST(test_conv_layer_split)
{
    cdc_context_t *ctx = make_context();
    ck_assert_int_eq(conv_split(ctx, 32, CDC_SPLIT_AUTO), CDC_SPLIT_COLUMNS);
    ck_assert_int_eq(conv_split(ctx, 3, CDC_SPLIT_AUTO), CDC_SPLIT_ROWS);
    /* A forced spatial split with too few output rows for a band per data
       shard runs as a channel split, and the layer says so; with the
       parity on demand (the rotated layout, the default) each of the five
       workers takes a band, so five rows are enough. */
    ck_assert_int_eq(conv_split(ctx, 3, CDC_SPLIT_COLUMNS), CDC_SPLIT_ROWS);
    ck_assert_int_eq(conv_split(ctx, 5, CDC_SPLIT_COLUMNS), CDC_SPLIT_COLUMNS);
    ck_assert_int_eq(conv_split(ctx, 32, CDC_SPLIT_COLUMNS), CDC_SPLIT_COLUMNS);
    ck_assert_int_eq(conv_split(ctx, 32, CDC_SPLIT_ROWS), CDC_SPLIT_ROWS);
    cdc_context_destroy(&ctx);
}
END_TEST

static Suite *plan_suite(void)
{
    Suite *suite = suite_create("plan");
    TCase *bytes = tcase_create("bytes");
    tcase_add_test(bytes, test_matmul_bytes_counted);
    tcase_add_test(bytes, test_cached_operands_not_counted);
    tcase_add_test(bytes, test_bytes_count_padding_and_parity);
    tcase_add_test(bytes, test_band_height);
    tcase_add_test(bytes, test_band_height_whole_output);
    tcase_add_test(bytes, test_conv_bytes_counted);
    suite_add_tcase(suite, bytes);
    TCase *matmul = tcase_create("matmul_rule");
    tcase_add_test(matmul, test_matmul_columns_when_fewer_bytes);
    tcase_add_test(matmul, test_matmul_columns_need_real_rows);
    tcase_add_test(matmul, test_matmul_ties_go_to_rows);
    tcase_add_test(matmul, test_matmul_rule_grid);
    suite_add_tcase(suite, matmul);
    TCase *conv = tcase_create("conv_rule");
    tcase_add_test(conv, test_conv_models_spatial);
    tcase_add_test(conv, test_conv_too_few_rows_channel);
    tcase_add_test(conv, test_conv_channel_when_fewer_bytes);
    tcase_add_test(conv, test_conv_rule_grid);
    suite_add_tcase(suite, conv);
    TCase *layers = tcase_create("layers");
    tcase_add_test(layers, test_fc_output_split_below_64_per_shard);
    tcase_add_test(layers, test_fc_batch_split_from_64_per_shard);
    tcase_add_test(layers, test_conv_layer_split);
    suite_add_tcase(suite, layers);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(plan_suite());
}
