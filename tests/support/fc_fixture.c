/* fc_fixture.c - an FC layer under test and its uncoded answer (fc_fixture.h). */
#include "fc_fixture.h"

#include "testutil.h"

#include <stdlib.h>
#include <string.h>

/* The answer from an uncoded in-process context, so the layer code under
   test and the reference share nothing but OpenBLAS. */
static void reference_answer(cdc_test_fc_t *f, const float *w, const float *bias,
                             const cdc_layer_options_t *options)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.in_process = 1;
    config.parity = 0;
    config.local_workers = 1;
    /* The level is the process's: keep the test's CDC_TEST_LOG. */
    config.log_level = getenv("CDC_TEST_LOG") ? CDC_LOG_INFO : CDC_LOG_ERROR;
    cdc_context_t *reference = NULL;
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &reference), CDC_OK);
    ck_assert_int_eq(cdc_fc_new(reference, f->out, f->in, w, bias, options, &layer), CDC_OK);
    ck_assert_int_eq(cdc_fc_forward(layer, f->batch, f->x, f->want), CDC_OK);
    cdc_layer_destroy(&layer);
    cdc_context_destroy(&reference);
}

/* The weights, bias and input of a layer from seed, and its answer; the
   weights and bias returned (the caller's). */
static void make_case(cdc_test_fc_t *f, int out, int in, int batch, uint64_t seed, int with_bias,
                      const cdc_layer_options_t *options, float **w_p, float **bias_p)
{
    memset(f, 0, sizeof *f);
    f->out = out;
    f->in = in;
    f->batch = batch;
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, seed);
    float *w = cdc_test_alloc(sizeof(float) * (size_t)out * (size_t)in);
    float *bias = with_bias ? cdc_test_alloc(sizeof(float) * (size_t)out) : NULL;
    f->x = cdc_test_alloc(sizeof(float) * (size_t)batch * (size_t)in);
    f->want = cdc_test_alloc(sizeof(float) * (size_t)batch * (size_t)out);
    f->got = cdc_test_alloc(sizeof(float) * (size_t)batch * (size_t)out);
    cdc_test_fill_uniform(&rng, w, (size_t)out * (size_t)in);
    if (bias)
        cdc_test_fill_uniform(&rng, bias, (size_t)out);
    cdc_test_fill_uniform(&rng, f->x, (size_t)batch * (size_t)in);
    reference_answer(f, w, bias, options);
    *w_p = w;
    *bias_p = bias;
}

void cdc_test_fc_make(cdc_test_fc_t *f, cdc_context_t *context, int out, int in, int batch,
                      uint64_t seed, int with_bias)
{
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = CDC_SPLIT_ROWS;
    float *w, *bias;
    make_case(f, out, in, batch, seed, with_bias, &options, &w, &bias);
    int rc = cdc_fc_new(context, out, in, w, bias, &options, &f->layer);
    ck_assert_msg(rc == CDC_OK, "cdc_fc_new: %s (%s)", cdc_err_name(rc), cdc_last_error());
    free(w);
    free(bias);
}

void cdc_test_fc_make_borrowed(cdc_test_fc_t *f, cdc_context_t *context, int out, int in,
                               int batch, uint64_t seed, int parts)
{
    ck_assert(parts >= 1 && parts <= CDC_MAX_WEIGHT_PARTS && out >= parts);
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = CDC_SPLIT_ROWS;
    float *bias;
    make_case(f, out, in, batch, seed, 1, &options, &f->lent, &bias);
    cdc_weight_part_t list[CDC_MAX_WEIGHT_PARTS];
    int64_t row = 0;
    for (int p = 0; p < parts; p++) {
        /* 1 row, then parts of growing length; the last takes the rest. */
        int64_t rows = p == 0 ? 1 : p + 1 == parts ? out - row
                                                   : (out - 1) * (int64_t) p / (parts * parts);
        rows = rows < 1 ? 1 : rows;
        list[p] = (cdc_weight_part_t){f->lent + row * in, rows};
        row += rows;
    }
    ck_assert_int_eq(row, out);
    int rc = cdc_fc_new_borrowed(context, in, list, parts, 0, bias, &options, &f->layer);
    ck_assert_msg(rc == CDC_OK, "cdc_fc_new_borrowed: %s (%s)", cdc_err_name(rc),
                  cdc_last_error());
    free(bias);
}

double cdc_test_fc_error(cdc_test_fc_t *f)
{
    size_t count = (size_t)f->batch * (size_t)f->out;
    memset(f->got, 0, sizeof(float) * count);
    if (cdc_fc_forward(f->layer, f->batch, f->x, f->got) != CDC_OK)
        return 1.0;
    return cdc_test_rel_error_ff(f->got, f->want, count);
}

void cdc_test_fc_check(cdc_test_fc_t *f, double rel_tol)
{
    size_t count = (size_t)f->batch * (size_t)f->out;
    memset(f->got, 0, sizeof(float) * count);
    int rc = cdc_fc_forward(f->layer, f->batch, f->x, f->got);
    ck_assert_msg(rc == CDC_OK, "forward: %s (%s)", cdc_err_name(rc), cdc_last_error());
    double err = cdc_test_rel_error_ff(f->got, f->want, count);
    ck_assert_msg(err <= rel_tol, "relative error %g", err);
}

void cdc_test_fc_free(cdc_test_fc_t *f)
{
    cdc_layer_destroy(&f->layer);
    free(f->lent); /* after the layer that read it */
    free(f->x);
    free(f->want);
    free(f->got);
}
