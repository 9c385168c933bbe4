/* bench_core.c - weight encoding, per-call input encoding, decoding and im2col
   measured beside the uncoded GEMM for AlexNet and VGG-16 layers (n = 4). */
#include "bench_core.h"

#include "bench_util.h"

#include "blas_backend.h"
#include "code.h"
#include "im2col.h"
#include "conv_bands.h"
#include "layer.h"
#include "models.h"
#include "plan.h"
#include "shard_set.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { DATA_SHARDS = 4 };

typedef struct {
    double gemm, weight_encode, input_encode, im2col, decode[CDC_CODE_MAX_R + 1];
    double decode_bytes[CDC_CODE_MAX_R + 1];
    const char *split;
} layer_costs_t;

/* Best-of-repeat time of decoding `lost` data shards of n + r result blocks. */
static void time_decode(const cdc_code_t *code, int64_t rows, int64_t cols, int repeat,
                        layer_costs_t *costs)
{
    int n = cdc__code_n(code), r = cdc__code_r(code);
    size_t block = (size_t) rows * (size_t) cols;
    float *storage = cdc_bench_xmalloc((size_t) (n + r) * block * sizeof(float));
    float *shards[CDC_MAX_SHARDS];
    for (int s = 0; s < n + r; s++)
        shards[s] = storage + (size_t) s * block;
    unsigned seed = 12345u;
    cdc_bench_fill(storage, (size_t) n * block, &seed);
    cdc__code_encode(code, rows, cols, (const float *const *) shards, cols, shards + n, cols);
    for (int lost = 1; lost <= r; lost++) {
        uint64_t all = (UINT64_C(1) << (n + r)) - 1;
        uint64_t present = all & ~((UINT64_C(1) << lost) - 1); /* data 0..lost-1 gone */
        double best = 1e30;
        for (int i = 0; i < repeat; i++) {
            double t0 = cdc_bench_now_ms();
            cdc__code_decode(code, rows, cols, shards, cols, present);
            double t = cdc_bench_now_ms() - t0;
            best = t < best ? t : best;
        }
        costs->decode[lost] = best;
        /* Reads n present blocks, writes the lost ones. */
        costs->decode_bytes[lost] = (double) (n + lost) * (double) block * sizeof(float);
    }
    free(storage);
}

static double best_of(int repeat, double (*run)(void *), void *arg)
{
    double best = 1e30;
    for (int i = 0; i < repeat; i++) {
        double t = run(arg);
        best = t < best ? t : best;
    }
    return best;
}

typedef struct {
    const cdc_conv_geometry_t *g;
    const float *x, *w;
    float *cols, *out;
    int64_t rows, k, ncols;
    const cdc_code_t *code;
} conv_args_t;

static double run_im2col(void *p)
{
    conv_args_t *a = p;
    double t0 = cdc_bench_now_ms();
    cdc__im2col(a->g, a->x, a->cols, a->ncols);
    return cdc_bench_now_ms() - t0;
}

static double run_gemm(void *p)
{
    conv_args_t *a = p;
    double t0 = cdc_bench_now_ms();
    cdc__blas_sgemm_rm(0, 0, a->rows, a->ncols, a->k, 1.0f, a->w, a->k, a->cols, a->ncols,
                       0.0f, a->out, a->ncols);
    return cdc_bench_now_ms() - t0;
}

static double run_weight_encode(void *p)
{
    conv_args_t *a = p;
    cdc_shard_set_t *set = NULL;
    /* The set aliases the weights; copying the full blocks too would be the
       cost a worker pays when it receives them, not the encoder's. */
    double t0 = cdc_bench_now_ms();
    cdc__shard_set_new(a->code, DATA_SHARDS, NULL, a->w, a->rows, a->k, NULL, &set);
    double t = cdc_bench_now_ms() - t0;
    cdc__shard_set_retire(&set);
    return t;
}

static double run_band_encode(void *p)
{
    conv_args_t *a = p;
    cdc_conv_bands_t bands;
    double t0 = cdc_bench_now_ms();
    cdc__conv_bands_encode(a->code, DATA_SHARDS, 0, NULL, a->g, 1, a->x, &bands);
    return cdc_bench_now_ms() - t0; /* bands: the thread's scratch buffer */
}

static void bench_layer(const char *model, const cdc_model_layer_t *m, int r, int repeat)
{
    cdc_code_t *code = NULL;
    if (cdc__code_new(NULL, DATA_SHARDS, r, &code) != 0) {
        fprintf(stderr, "bench core: code n=%d r=%d: %s\n", DATA_SHARDS, r,
                cdc_last_error());
        exit(1);
    }
    layer_costs_t costs;
    memset(&costs, 0, sizeof costs);
    cdc_conv_geometry_t g = {m->in_channels, m->h, m->w, m->kernel, m->kernel,
                             m->stride,      m->stride, m->pad, m->pad, 1, 1, 0, 0};
    cdc__conv_geometry_finish(&g);
    int64_t k = cdc_model_layer_inner(m), spatial = g.out_h * g.out_w;
    float *w = cdc_bench_xmalloc((size_t) (m->out_channels * k) * sizeof(float));
    float *x = cdc_bench_xmalloc((size_t) (m->in_channels * m->h * m->w) * sizeof(float));
    float *cols = cdc_bench_xmalloc((size_t) (k * spatial) * sizeof(float));
    float *out = cdc_bench_xmalloc((size_t) (m->out_channels * spatial) * sizeof(float));
    unsigned seed = 12345u;
    cdc_bench_fill(w, (size_t) (m->out_channels * k), &seed);
    cdc_bench_fill(x, (size_t) (m->in_channels * m->h * m->w), &seed);
    conv_args_t args = {&g, x, w, cols, out, m->out_channels, k, spatial, code};

    int64_t block_rows, block_cols;
    if (m->kind == CDC_MODEL_CONV) {
        cdc_split_t split = cdc__plan_conv_split(&g, m->out_channels, 1, DATA_SHARDS, r);
        costs.split = split == CDC_SPLIT_COLUMNS ? "spatial" : "channel";
        costs.im2col = best_of(repeat, run_im2col, &args);
        if (split == CDC_SPLIT_COLUMNS) {
            costs.input_encode = best_of(repeat, run_band_encode, &args);
            block_rows = m->out_channels;
            block_cols = (g.out_h + DATA_SHARDS - 1) / DATA_SHARDS * g.out_w;
        } else {
            block_rows = (m->out_channels + DATA_SHARDS - 1) / DATA_SHARDS;
            block_cols = spatial;
        }
    } else {
        costs.split = "output";
        memcpy(cols, x, (size_t) k * sizeof(float)); /* B is the input vector */
        block_rows = (m->out_channels + DATA_SHARDS - 1) / DATA_SHARDS;
        block_cols = 1;
    }
    run_gemm(&args); /* warm up OpenBLAS threads and the pages */
    costs.gemm = best_of(repeat, run_gemm, &args);
    costs.weight_encode = best_of(repeat > 3 ? 3 : repeat, run_weight_encode, &args);
    time_decode(code, block_rows, block_cols, repeat, &costs);

    double per_call = costs.input_encode + costs.decode[r];
    printf("core model=%s layer=%s inner=%lld r=%d split=%s gemm_ms=%.3f "
           "weight_encode_ms=%.3f input_encode_ms=%.4f decode1_ms=%.4f decode1_gbps=%.1f",
           model, m->name, (long long) k, r, costs.split, costs.gemm, costs.weight_encode,
           costs.input_encode, costs.decode[1],
           costs.decode_bytes[1] / (costs.decode[1] * 1e6));
    if (r >= 2)
        printf(" decode2_ms=%.4f decode2_gbps=%.1f", costs.decode[2],
               costs.decode_bytes[2] / (costs.decode[2] * 1e6));
    printf(" im2col_ms=%.3f im2col_pct=%.1f percall_pct=%.2f\n", costs.im2col,
           100.0 * costs.im2col / costs.gemm, 100.0 * per_call / costs.gemm);
    fflush(stdout);
    free(w);
    free(x);
    free(cols);
    free(out);
    cdc__code_destroy(&code);
}

int cdc_bench_core(int argc, char **argv)
{
    const char *model = "all";
    int repeat = 10;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--model") == 0 && i + 1 < argc)
            model = argv[++i];
        else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: cdcgemm-bench core [--model alexnet|vgg16|all] "
                            "[--repeat N]\n");
            return 2;
        }
    }
    if (repeat < 1 || cdc__blas_ready() != 0) {
        fprintf(stderr, "bench core: --repeat must be >= 1 and OpenBLAS loadable\n");
        return 2;
    }
    static const char *const models[] = {"alexnet", "vgg16"};
    int matched = 0;
    for (size_t mi = 0; mi < 2; mi++) {
        if (strcmp(model, "all") != 0 && strcmp(model, models[mi]) != 0)
            continue;
        matched = 1;
        size_t count;
        const cdc_model_layer_t *layers = cdc_model_layers(models[mi], &count);
        for (size_t l = 0; l < count; l++)
            for (int r = 1; r <= 2; r++)
                bench_layer(models[mi], &layers[l], r, repeat);
    }
    if (!matched) {
        fprintf(stderr, "bench core: unknown model '%s'\n", model);
        return 2;
    }
    return 0;
}
