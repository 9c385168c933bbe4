/* bench_im2col.c - im2col time, bandwidth and its ratio to the layer's GEMM. */
#include "bench_im2col.h"

#include "blas_backend.h"
#include "cdcgemm.h"
#include "harness.h"
#include "im2col.h"
#include "models.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bench_layer(const char *model, const cdc_model_layer_t *layer, int repeat)
{
    cdc_conv_geometry_t g = {.channels = layer->in_channels, .h = layer->h,
                             .w = layer->w, .kernel_h = layer->kernel,
                             .kernel_w = layer->kernel, .stride_h = layer->stride,
                             .stride_w = layer->stride, .pad_h = layer->pad,
                             .pad_w = layer->pad, .dilation_h = 1, .dilation_w = 1};
    int status = cdc__conv_geometry_finish(&g);
    if (status != CDC_OK) {
        fprintf(stderr, "im2col: %s/%s: %s\n", model, layer->name, cdc_last_error());
        return status;
    }
    const int64_t k = cdc_model_layer_inner(layer), n = g.out_h * g.out_w;
    const int64_t m = layer->out_channels;
    const size_t nx = (size_t) (g.channels * g.h * g.w);
    float *x = malloc(sizeof(float) * nx);
    float *cols = malloc(sizeof(float) * (size_t) (k * n));
    float *a = malloc(sizeof(float) * (size_t) (m * k));
    float *c = malloc(sizeof(float) * (size_t) (m * n));
    if (!x || !cols || !a || !c) {
        fprintf(stderr, "im2col: out of memory for %s/%s\n", model, layer->name);
        free(x), free(cols), free(a), free(c);
        return CDC_ENOMEM;
    }
    for (size_t i = 0; i < nx; i++)
        x[i] = (float) ((i * 2654435761u) % 1000u) * 1e-3f - 0.5f;
    for (size_t i = 0; i < (size_t) (m * k); i++)
        a[i] = (float) ((i * 40503u) % 997u) * 1e-3f - 0.5f;

    double best_im2col = 1e30, best_gemm = 1e30;
    cdc__im2col(&g, x, cols, n); /* warm the pages */
    for (int r = 0; r < repeat; r++) {
        double t0 = cdc_test_now_s();
        cdc__im2col(&g, x, cols, n);
        double t = cdc_test_now_s() - t0;
        if (t < best_im2col)
            best_im2col = t;
    }
    cdc__blas_sgemm_rm(0, 0, m, n, k, 1.0f, a, k, cols, n, 0.0f, c, n);
    for (int r = 0; r < (repeat + 1) / 2; r++) {
        double t0 = cdc_test_now_s();
        cdc__blas_sgemm_rm(0, 0, m, n, k, 1.0f, a, k, cols, n, 0.0f, c, n);
        double t = cdc_test_now_s() - t0;
        if (t < best_gemm)
            best_gemm = t;
    }
    const double bytes = 4.0 * (double) k * (double) n;
    printf("im2col model=%s layer=%s rows=%lld cols=%lld out_ch=%lld im2col_ms=%.3f "
           "write_gbps=%.2f gemm_ms=%.3f gemm_gflops=%.1f ratio=%.4f\n",
           model, layer->name, (long long) k, (long long) n, (long long) m,
           1e3 * best_im2col, bytes / best_im2col * 1e-9, 1e3 * best_gemm,
           2.0 * (double) m * (double) n * (double) k / best_gemm * 1e-9,
           best_im2col / best_gemm);
    fflush(stdout);
    free(x), free(cols), free(a), free(c);
    return CDC_OK;
}

int cdc_bench_im2col(int argc, char **argv)
{
    const char *model = "all";
    int repeat = 7;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "im2col") == 0 && i == 1) {
            continue; /* tolerate the subcommand name being passed through */
        } else if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
            model = argv[++i];
        } else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
            char *end;
            long value = strtol(argv[++i], &end, 10);
            if (*end != '\0' || value < 1 || value > 1000) {
                fprintf(stderr, "im2col: --repeat wants 1..1000, got '%s'\n", argv[i]);
                return 2;
            }
            repeat = (int) value;
        } else {
            fprintf(stderr, "usage: cdcgemm-bench im2col [--model alexnet|vgg16|all] "
                            "[--repeat N]\n");
            return 2;
        }
    }
    if (cdc__blas_ready() != CDC_OK) {
        fprintf(stderr, "im2col: %s\n", cdc_last_error());
        return 1;
    }
    static const char *const models[] = {"alexnet", "vgg16"};
    int matched = 0;
    for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
        size_t count;
        const cdc_model_layer_t *layers;
        if (strcmp(model, "all") != 0 && strcmp(model, models[mi]) != 0)
            continue;
        matched = 1;
        layers = cdc_model_layers(models[mi], &count);
        for (size_t l = 0; l < count; l++) {
            if (layers[l].kind != CDC_MODEL_CONV)
                continue;
            if (bench_layer(models[mi], &layers[l], repeat) != CDC_OK)
                return 1;
        }
    }
    if (!matched) {
        fprintf(stderr, "im2col: unknown model '%s' (alexnet, vgg16, all)\n", model);
        return 2;
    }
    return 0;
}
