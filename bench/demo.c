/* demo.c - runs AlexNet's layers coded (n = 4, r = 1), erases a shard of every
   call, and shows that the decoded output equals the uncoded one. */
#include "demo.h"

#include "cdcgemm.h"
#include "models.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void fill(float *x, size_t count, unsigned *seed)
{
    for (size_t i = 0; i < count; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        x[i] = (float) ((*seed >> 8) * (1.0 / 16777216.0) - 0.5);
    }
}

static double rel_diff(const float *got, const float *want, size_t count)
{
    double diff = 0, norm = 0;
    for (size_t i = 0; i < count; i++) {
        double d = (double) got[i] - want[i];
        diff += d * d;
        norm += (double) want[i] * want[i];
    }
    return norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "demo: %s: %s\n", what, cdc_last_error()[0] ? cdc_last_error()
                                                                 : cdc_strerror(rc));
    return 1;
}

static const char *split_name(const cdc_model_layer_t *m, cdc_split_t split)
{
    if (m->kind == CDC_MODEL_CONV)
        return split == CDC_SPLIT_COLUMNS ? "spatial" : "channel";
    return split == CDC_SPLIT_COLUMNS ? "batch" : "output";
}

int cdc_bench_demo(int argc, char **argv)
{
    (void) argc;
    (void) argv;
    cdc_config_t config;
    cdc_config_init(&config);
    int rc = cdc_config_from_env(&config);
    if (rc != CDC_OK)
        return fail("configuration", rc);
    config.local_workers = 5;
    config.parity = 1;
    cdc_context_t *ctx = NULL;
    if ((rc = cdc_context_new(&config, &ctx)) != CDC_OK)
        return fail("context", rc);

    size_t count;
    const cdc_model_layer_t *layers = cdc_model_layers("alexnet", &count);
    unsigned seed = 2021;
    int shards = 5, worst_ok = 1;
    printf("cdcgemm demo: AlexNet on 5 shards (n = 4 data + r = 1 parity), one shard "
           "erased per layer\n\n");
    printf("%-6s %-15s %-7s %-9s %-12s %-10s %-10s\n", "layer", "split", "erased",
           "decoded", "rel.error", "coded ms", "uncoded ms");
    for (size_t l = 0; l < count; l++) {
        const cdc_model_layer_t *m = &layers[l];
        cdc_layer_options_t coded, plain;
        cdc_layer_options_init(&coded);
        cdc_layer_options_init(&plain);
        plain.parity = 0;
        coded.relu = plain.relu = 1;
        size_t wcount = (size_t) m->out_channels * (size_t) cdc_model_layer_inner(m);
        float *w = malloc(wcount * sizeof *w), *bias = malloc(m->out_channels * sizeof *bias);
        cdc_layer_t *coded_layer = NULL, *plain_layer = NULL;
        size_t in_count, out_count;
        int64_t oh = 1, ow = 1;
        cdc_conv2d_desc_t desc = {m->in_channels, m->out_channels, m->kernel, m->kernel,
                                  m->stride, m->stride, m->pad, m->pad, 1, 1};
        fill(w, wcount, &seed);
        fill(bias, (size_t) m->out_channels, &seed);
        if (m->kind == CDC_MODEL_CONV) {
            cdc_conv2d_output_size(&desc, m->h, m->w, &oh, &ow);
            in_count = (size_t) (m->in_channels * m->h * m->w);
            out_count = (size_t) (m->out_channels * oh * ow);
            rc = cdc_conv2d_new(ctx, &desc, w, bias, &coded, &coded_layer);
            if (rc == CDC_OK)
                rc = cdc_conv2d_new(ctx, &desc, w, bias, &plain, &plain_layer);
        } else {
            in_count = (size_t) m->in_channels;
            out_count = (size_t) m->out_channels;
            rc = cdc_fc_new(ctx, m->out_channels, m->in_channels, w, bias, &coded,
                            &coded_layer);
            if (rc == CDC_OK)
                rc = cdc_fc_new(ctx, m->out_channels, m->in_channels, w, bias, &plain,
                                &plain_layer);
        }
        if (rc != CDC_OK)
            return fail(m->name, rc);
        float *x = malloc(in_count * sizeof *x);
        float *y = malloc(out_count * sizeof *y), *ref = malloc(out_count * sizeof *ref);
        fill(x, in_count, &seed);

        cdc_stats_t before, after;
        int erased = (int) (l % (size_t) shards);
        double t0 = now_ms();
        rc = m->kind == CDC_MODEL_CONV ? cdc_conv2d_forward(plain_layer, 1, m->h, m->w, x, ref)
                                       : cdc_fc_forward(plain_layer, 1, x, ref);
        double t1 = now_ms();
        cdc_context_stats(ctx, &before);
        cdc_context_erase_next(ctx, 1u << erased);
        double t2 = now_ms();
        if (rc == CDC_OK)
            rc = m->kind == CDC_MODEL_CONV
                     ? cdc_conv2d_forward(coded_layer, 1, m->h, m->w, x, y)
                     : cdc_fc_forward(coded_layer, 1, x, y);
        double t3 = now_ms();
        if (rc != CDC_OK)
            return fail(m->name, rc);
        cdc_context_stats(ctx, &after);
        double err = rel_diff(y, ref, out_count);
        worst_ok &= err <= 1e-5;
        printf("%-6s %-15s %-7s %-9llu %-12.2e %-10.2f %-10.2f\n", m->name,
               split_name(m, cdc_layer_split(coded_layer)),
               erased < shards - 1 ? (erased == 0 ? "data 0" : erased == 1 ? "data 1"
                                                  : erased == 2 ? "data 2" : "data 3")
                                   : "parity",
               (unsigned long long) (after.results_decoded - before.results_decoded), err,
               t3 - t2, t1 - t0);
        cdc_layer_destroy(&coded_layer);
        cdc_layer_destroy(&plain_layer);
        free(w);
        free(bias);
        free(x);
        free(y);
        free(ref);
    }
    cdc_stats_t stats;
    cdc_context_stats(ctx, &stats);
    printf("\n%llu calls, %llu shard results erased, %llu rebuilt from parity, %llu "
           "local fallbacks\n",
           (unsigned long long) stats.calls, (unsigned long long) stats.shards_erased,
           (unsigned long long) stats.results_decoded, (unsigned long long) stats.fallbacks);
    printf("%s\n", worst_ok ? "every coded output matches the uncoded one (rel. error <= 1e-5)"
                            : "MISMATCH: a coded output differs from the uncoded one");
    cdc_context_destroy(&ctx);
    return worst_ok ? 0 : 1;
}
