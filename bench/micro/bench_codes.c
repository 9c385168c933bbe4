/* bench_codes.c - encode/decode GB/s on layer-sized shard blocks, and worst conditions. */
#include "bench_codes.h"

#include "cdcgemm.h"
#include "code.h"
#include "harness.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shard shapes of layer outputs split 4 ways: FC (out/4 x batch) and conv
   (channels/4 x spatial) results of AlexNet and VGG-16. */
static const struct {
    const char *what;
    int64_t rows, cols;
} cdc_bench_codes_shapes[] = {
    {"fc4096/4xb64", 1024, 64},  {"fc4096xb64", 4096, 64},  {"conv1-alexnet", 24, 3025},
    {"conv1-vgg", 16, 50176},    {"conv5-vgg", 128, 196},   {"conv3-alexnet", 96, 169},
};

static int cdc_bench_codes_throughput(int n, int r, int runs)
{
    const size_t count_shapes = sizeof cdc_bench_codes_shapes / sizeof cdc_bench_codes_shapes[0];
    cdc_code_t *code = NULL;
    if (cdc__code_new(NULL, n, r, &code) != CDC_OK) {
        fprintf(stderr, "codes: %s\n", cdc_last_error());
        return 1;
    }
    for (size_t sh = 0; sh < count_shapes; sh++) {
        const int64_t rows = cdc_bench_codes_shapes[sh].rows, cols = cdc_bench_codes_shapes[sh].cols;
        const size_t elems = (size_t) (rows * cols);
        float *buf = malloc(sizeof(float) * elems * (size_t) (n + r));
        if (!buf) {
            cdc__code_destroy(&code);
            return 1;
        }
        float *shards[CDC_CODE_MAX_SHARDS];
        for (int s = 0; s < n + r; s++)
            shards[s] = buf + (size_t) s * elems;
        for (size_t e = 0; e < elems * (size_t) n; e++)
            buf[e] = (float) ((e * 2654435761u) % 1000) * 1e-3f - 0.5f;

        /* Encode reads n blocks and writes r; decode of the worst pattern
           (r data shards lost) reads n blocks and writes r. */
        const double bytes = (double) (n + r) * (double) elems * sizeof(float);
        double best_enc = 1e30, best_dec = 1e30, best_copy = 1e30;
        const uint64_t present = ((UINT64_C(1) << (n + r)) - 1) & ~((UINT64_C(1) << r) - 1);
        for (int run = 0; run < runs; run++) {
            double t0 = cdc_test_now_s();
            int st = cdc__code_encode(code, rows, cols, (const float *const *) shards, cols,
                                      shards + n, cols);
            double t1 = cdc_test_now_s();
            st |= cdc__code_decode(code, rows, cols, shards, cols, present);
            double t2 = cdc_test_now_s();
            /* Memory reference: copy the same number of bytes (n read, r written
               is not a copy; n + r blocks moved once each is). */
            for (int s = 0; s < r; s++)
                memcpy(shards[n + s], shards[s], elems * sizeof(float));
            double t3 = cdc_test_now_s();
            if (st != CDC_OK) {
                fprintf(stderr, "codes: %s\n", cdc_last_error());
                free(buf);
                cdc__code_destroy(&code);
                return 1;
            }
            best_enc = t1 - t0 < best_enc ? t1 - t0 : best_enc;
            best_dec = t2 - t1 < best_dec ? t2 - t1 : best_dec;
            best_copy = t3 - t2 < best_copy ? t3 - t2 : best_copy;
        }
        const double copy_bytes = 2.0 * r * (double) elems * sizeof(float);
        printf("codes op=encode scheme=%s n=%d r=%d shape=%s rows=%lld cols=%lld bytes=%.0f "
               "seconds=%.3e gbps=%.2f\n",
               cdc__code_name(code), n, r, cdc_bench_codes_shapes[sh].what, (long long) rows,
               (long long) cols, bytes, best_enc, bytes / best_enc * 1e-9);
        printf("codes op=decode scheme=%s n=%d r=%d lost=%d shape=%s rows=%lld cols=%lld "
               "bytes=%.0f seconds=%.3e gbps=%.2f\n",
               cdc__code_name(code), n, r, r, cdc_bench_codes_shapes[sh].what, (long long) rows,
               (long long) cols, bytes, best_dec, bytes / best_dec * 1e-9);
        printf("codes op=memcpy n=%d r=%d shape=%s bytes=%.0f seconds=%.3e gbps=%.2f\n", n, r,
               cdc_bench_codes_shapes[sh].what, copy_bytes, best_copy,
               copy_bytes / best_copy * 1e-9);
        free(buf);
    }
    cdc__code_destroy(&code);
    return 0;
}

static int cdc_bench_codes_conditions(void)
{
    static const int ns[] = {2, 3, 4, 8, 12, 16};
    size_t count = 0;
    const cdc_code_ops_t *const *all = cdc__code_all_ops(&count);
    for (size_t o = 0; o < count; o++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (int r = 1; r <= all[o]->max_parity && r <= ns[ni]; r++) {
                cdc_code_t *code = NULL;
                if (cdc__code_new(all[o], ns[ni], r, &code) != CDC_OK) {
                    fprintf(stderr, "codes: %s\n", cdc_last_error());
                    return 1;
                }
                printf("codes op=condition scheme=%s n=%d r=%d worst_cond=%.2f\n", all[o]->name,
                       ns[ni], r, cdc__code_worst_condition(code));
                cdc__code_destroy(&code);
            }
    return 0;
}

int cdc_bench_codes(int argc, char **argv)
{
    int runs = 9;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        long v = strtol(argv[i], &end, 10);
        if (strcmp(argv[i], "codes") == 0)
            continue;
        if (!end || *end != '\0' || v < 1 || v > 1000) {
            fprintf(stderr, "usage: cdcgemm-bench codes [runs (1..1000, default 9)]\n");
            return 1;
        }
        runs = (int) v;
    }
    if (cdc_bench_codes_throughput(4, 1, runs) || cdc_bench_codes_throughput(4, 2, runs))
        return 1;
    return cdc_bench_codes_conditions();
}
