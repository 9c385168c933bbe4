/* test_golden.c - the public FC and conv2d layers against PyTorch's outputs, for
   every split, parity 0..2 and every single-shard erasure. Black box: the layer
   computation goes through include/cdcgemm.h (and the erasure hook of
   cdcgemm_testing.h) only. */
#include "cdcgemm.h"
#include "cdcgemm_testing.h"
#include "golden.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOLERANCE 1e-5
#define LOCAL_WORKERS 5

static cdc_layer_t *golden_layer(cdc_context_t *ctx, const cdc_golden_case_t *gc,
                                 const cdc_golden_data_t *data, cdc_split_t split,
                                 int parity)
{
    cdc_layer_options_t options;
    cdc_layer_t *layer = NULL;
    int status;
    cdc_layer_options_init(&options);
    options.split = split;
    options.parity = parity;
    options.relu = gc->relu;
    if (gc->kind == CDC_GOLDEN_CONV) {
        cdc_conv2d_desc_t desc = {.in_channels = gc->cin, .out_channels = gc->cout,
                                  .kernel_h = gc->kernel, .kernel_w = gc->kernel,
                                  .stride_h = gc->stride, .stride_w = gc->stride,
                                  .pad_h = gc->pad, .pad_w = gc->pad,
                                  .dilation_h = gc->dilation, .dilation_w = gc->dilation};
        int64_t out_h = 0, out_w = 0;
        status = cdc_conv2d_output_size(&desc, gc->h, gc->w, &out_h, &out_w);
        ck_assert_msg(status == CDC_OK, "%s: cdc_conv2d_output_size: %s (%s)", gc->name,
                      cdc_err_name(status), cdc_last_error());
        ck_assert_msg(out_h == gc->out_h && out_w == gc->out_w,
                      "%s: output %lldx%lld, PyTorch %lldx%lld", gc->name,
                      (long long) out_h, (long long) out_w, (long long) gc->out_h,
                      (long long) gc->out_w);
        status = cdc_conv2d_new(ctx, &desc, data->weights, data->bias, &options, &layer);
    } else {
        status = cdc_fc_new(ctx, gc->cout, gc->cin, data->weights, data->bias, &options,
                            &layer);
    }
    ck_assert_msg(status == CDC_OK, "%s: layer creation: %s (%s)", gc->name,
                  cdc_err_name(status), cdc_last_error());
    ck_assert_ptr_nonnull(layer);
    return layer;
}

/* One forward call, compared with PyTorch. */
static void golden_forward(cdc_layer_t *layer, const cdc_golden_case_t *gc,
                           const cdc_golden_data_t *data, const char *what)
{
    float *y = cdc_test_alloc(sizeof(float) * data->out_count);
    int status;
    /* NaN in y catches an output element the layer never writes. */
    for (size_t e = 0; e < data->out_count; e++)
        y[e] = (float) NAN;
    if (gc->kind == CDC_GOLDEN_CONV)
        status = cdc_conv2d_forward(layer, gc->batch, gc->h, gc->w, data->in, y);
    else
        status = cdc_fc_forward(layer, gc->batch, data->in, y);
    ck_assert_msg(status == CDC_OK, "%s (%s): forward: %s (%s)", gc->name, what,
                  cdc_err_name(status), cdc_last_error());
    double err = cdc_test_rel_error_ff(y, data->out, data->out_count);
    ck_assert_msg(err <= TOLERANCE, "%s (%s): rel error vs PyTorch %g", gc->name, what, err);
    free(y);
}

/* Loop index: parity = i / 2, split = rows (even) or columns (odd). */
START_TEST(test_golden_layers)
{
    const int parity = _i / 2;
    const cdc_split_t split = (_i % 2) ? CDC_SPLIT_COLUMNS : CDC_SPLIT_ROWS;
    const char *split_name = (_i % 2) ? "columns" : "rows";
    const char *dir = cdc_golden_dir();
    cdc_golden_case_t *cases = NULL;
    size_t count = 0;
    char err[512] = "";
    ck_assert_msg(cdc_golden_manifest_load(dir, &cases, &count, err, sizeof err) == 0,
                  "%s", err);

    cdc_config_t config;
    cdc_context_t *ctx = NULL;
    cdc_config_init(&config);
    config.in_process = 1; /* the math, without worker processes */
    config.local_workers = LOCAL_WORKERS;
    config.parity = parity;
    config.min_flops = 0.0; /* small golden layers must still take the coded path */
    int status = cdc_context_new(&config, &ctx);
    ck_assert_msg(status == CDC_OK, "cdc_context_new: %s (%s)", cdc_err_name(status),
                  cdc_last_error());

    for (size_t t = 0; t < count; t++) {
        const cdc_golden_case_t *gc = &cases[t];
        cdc_golden_data_t data;
        char what[96];
        ck_assert_msg(cdc_golden_data_load(dir, gc, &data, err, sizeof err) == 0, "%s",
                      err);
        cdc_layer_t *layer = golden_layer(ctx, gc, &data, split, parity);

        snprintf(what, sizeof what, "split %s, parity %d", split_name, parity);
        golden_forward(layer, gc, &data, what);

        /* Every single-shard erasure must be rebuilt from parity, not fall back. */
        for (int shard = 0; parity > 0 && shard < LOCAL_WORKERS; shard++) {
            cdc_stats_t before, after;
            ck_assert_int_eq(cdc_context_stats(ctx, &before), CDC_OK);
            ck_assert_int_eq(cdc_context_erase_next(ctx, UINT64_C(1) << shard), CDC_OK);
            snprintf(what, sizeof what, "split %s, parity %d, shard %d erased", split_name,
                     parity, shard);
            golden_forward(layer, gc, &data, what);
            ck_assert_int_eq(cdc_context_stats(ctx, &after), CDC_OK);
            ck_assert_msg(after.shards_erased > before.shards_erased,
                          "%s (%s): erasure not seen by the coded path", gc->name, what);
            ck_assert_msg(after.fallbacks == before.fallbacks,
                          "%s (%s): one erasure with parity %d fell back", gc->name, what,
                          parity);
        }
        cdc_layer_destroy(&layer);
        ck_assert_ptr_null(layer);
        cdc_golden_data_free(&data);
    }
    cdc_context_destroy(&ctx);
    ck_assert_ptr_null(ctx);
    free(cases);
}
END_TEST

static Suite *golden_suite(void)
{
    Suite *suite = suite_create("golden");
    TCase *layers = tcase_create("pytorch_layers");
    tcase_set_timeout(layers, 120);
    tcase_add_loop_test(layers, test_golden_layers, 0, 6);
    suite_add_tcase(suite, layers);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(golden_suite());
}
