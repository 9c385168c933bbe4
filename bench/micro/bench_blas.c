/* bench_blas.c - the BLAS entry points of the built library beside OpenBLAS itself.
 *
 *   cdcgemm-bench blas overhead [--reps N]   small GEMMs (8..64) kept local:
 *       cdcgemm's cblas_sgemm vs OpenBLAS's, median ns per call
 *   cdcgemm-bench blas threshold [--reps N]  GEMMs 32..1024: local OpenBLAS vs
 *       the coded path (weights repeated, so cached), median ms per call
 *   cdcgemm-bench blas hash                  content-hash and pack throughput
 *   --lib PATH                               libcdcgemm.so to measure
 *
 * The library is dlopen'ed RTLD_LOCAL and its cblas_sgemm called through
 * dlsym, so the program's own cblas_sgemm stays OpenBLAS's. One parsable
 * line per measurement. */
#define _GNU_SOURCE /* dladdr */
#include "bench_blas.h"

#include "bench_util.h"

#include "operand_cache.h"

#include <cblas.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CDC_LIBRARY_PATH
#define CDC_LIBRARY_PATH "libcdcgemm.so"
#endif

typedef void (*sgemm_fn)(int layout, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta,
                         float *c, int ldc);

static double now_ns(void)
{
    return cdc_test_now_s() * 1e9;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *) x, b = *(const double *) y;
    return a < b ? -1 : a > b;
}

static double median(double *v, int count)
{
    qsort(v, (size_t) count, sizeof *v, cmp_double);
    return count % 2 ? v[count / 2] : 0.5 * (v[count / 2 - 1] + v[count / 2]);
}

/* The library's cblas_sgemm; the CDCGEMM_MIN_FLOPS it will read is set first. */
static sgemm_fn load_library(const char *path, const char *min_flops)
{
    setenv("CDCGEMM_MIN_FLOPS", min_flops, 1);
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        fprintf(stderr, "bench blas: %s\n", dlerror());
        return NULL;
    }
    sgemm_fn fn;
    *(void **) &fn = dlsym(handle, "cblas_sgemm");
    if (!fn)
        fprintf(stderr, "bench blas: %s has no cblas_sgemm\n", path);
    /* The direct calls must really be OpenBLAS's, not a copy of ours. */
    Dl_info info;
    sgemm_fn direct = (sgemm_fn) cblas_sgemm;
    void *direct_address;
    memcpy(&direct_address, &direct, sizeof direct_address);
    if (!dladdr(direct_address, &info) || !info.dli_fname ||
        !strstr(info.dli_fname, "openblas")) {
        fprintf(stderr, "bench blas: the program's cblas_sgemm is not OpenBLAS's (%s)\n",
                info.dli_fname ? info.dli_fname : "?");
        return NULL;
    }
    return fn;
}

/* Median ns per call of fn on size^3 over samples of `batch` calls, the two
   functions alternating sample by sample so drift hits both alike. */
static int bench_overhead(sgemm_fn ours, int reps)
{
    static const int sizes[] = {8, 16, 24, 32, 48, 64};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int n = sizes[s];
        float *a = cdc_bench_xmalloc(sizeof(float) * (size_t) (n * n));
        float *b = cdc_bench_xmalloc(sizeof(float) * (size_t) (n * n));
        float *c = cdc_bench_xmalloc(sizeof(float) * (size_t) (n * n));
        cdc_bench_fill(a, (size_t) (n * n), &(unsigned){1u});
        cdc_bench_fill(b, (size_t) (n * n), &(unsigned){2u});
        /* Warm both paths up, then size samples to about 200 us. */
        for (int i = 0; i < 2000; i++) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b,
                        n, 0.0f, c, n);
            ours(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f,
                 c, n);
        }
        double t0 = now_ns();
        for (int i = 0; i < 100; i++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b,
                        n, 0.0f, c, n);
        double per_call = (now_ns() - t0) / 100;
        int batch = per_call > 0 ? (int) (200e3 / per_call) + 1 : 1000;
        double *direct = cdc_bench_xmalloc(sizeof(double) * (size_t) reps);
        double *via = cdc_bench_xmalloc(sizeof(double) * (size_t) reps);
        for (int r = 0; r < reps; r++) {
            t0 = now_ns();
            for (int i = 0; i < batch; i++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n,
                            b, n, 0.0f, c, n);
            direct[r] = (now_ns() - t0) / batch;
            t0 = now_ns();
            for (int i = 0; i < batch; i++)
                ours(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n,
                     0.0f, c, n);
            via[r] = (now_ns() - t0) / batch;
        }
        double md = median(direct, reps), mv = median(via, reps);
        printf("blas overhead: m=n=k=%d direct_ns=%.1f cdcgemm_ns=%.1f overhead_pct=%.2f "
               "reps=%d batch=%d\n",
               n, md, mv, 100.0 * (mv - md) / md, reps, batch);
        fflush(stdout);
        free(direct);
        free(via);
        free(a);
        free(b);
        free(c);
    }
    /* The loop of the acceptance: every size in turn, as a network's small
       layers would call them. */
    enum { SIZES = sizeof sizes / sizeof *sizes, MAX = 64 };
    float *a = cdc_bench_xmalloc(sizeof(float) * MAX * MAX);
    float *b = cdc_bench_xmalloc(sizeof(float) * MAX * MAX);
    float *c = cdc_bench_xmalloc(sizeof(float) * MAX * MAX);
    cdc_bench_fill(a, MAX * MAX, &(unsigned){1u});
    cdc_bench_fill(b, MAX * MAX, &(unsigned){2u});
    double *direct = cdc_bench_xmalloc(sizeof(double) * (size_t) reps);
    double *via = cdc_bench_xmalloc(sizeof(double) * (size_t) reps);
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        for (int rep = 0; rep < 10; rep++)
            for (int s = 0; s < SIZES; s++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, sizes[s], sizes[s],
                            sizes[s], 1.0f, a, sizes[s], b, sizes[s], 0.0f, c, sizes[s]);
        direct[r] = (now_ns() - t0) / (10 * SIZES);
        t0 = now_ns();
        for (int rep = 0; rep < 10; rep++)
            for (int s = 0; s < SIZES; s++)
                ours(CblasRowMajor, CblasNoTrans, CblasNoTrans, sizes[s], sizes[s], sizes[s],
                     1.0f, a, sizes[s], b, sizes[s], 0.0f, c, sizes[s]);
        via[r] = (now_ns() - t0) / (10 * SIZES);
    }
    double md = median(direct, reps), mv = median(via, reps);
    printf("blas overhead: m=n=k=8..64 direct_ns=%.1f cdcgemm_ns=%.1f overhead_pct=%.2f "
           "reps=%d batch=%d\n",
           md, mv, 100.0 * (mv - md) / md, reps, 10 * SIZES);
    free(direct);
    free(via);
    free(a);
    free(b);
    free(c);
    return 0;
}

/* Local vs coded per call for a weights-repeated GEMM (cached after call 2). */
static int bench_threshold(sgemm_fn ours, int reps)
{
    static const int shapes[][3] = {{32, 32, 32},    {64, 64, 64},    {128, 128, 128},
                                    {256, 256, 256}, {384, 384, 384}, {512, 512, 512},
                                    {768, 768, 768}, {1024, 1024, 1024},
                                    {96, 3025, 363}, {256, 729, 2400}, {4096, 1, 9216},
                                    {1000, 4, 4096}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        float *a = cdc_bench_xmalloc(sizeof(float) * (size_t) m * (size_t) k);
        float *b = cdc_bench_xmalloc(sizeof(float) * (size_t) k * (size_t) n);
        float *c = cdc_bench_xmalloc(sizeof(float) * (size_t) m * (size_t) n);
        cdc_bench_fill(a, (size_t) m * (size_t) k, &(unsigned){3u});
        cdc_bench_fill(b, (size_t) k * (size_t) n, &(unsigned){4u});
        double flops = 2.0 * m * n * k;
        int count = reps < 5 ? 5 : reps;
        double *local = cdc_bench_xmalloc(sizeof(double) * (size_t) count);
        double *coded = cdc_bench_xmalloc(sizeof(double) * (size_t) count);
        for (int w = 0; w < 3; w++) { /* warm up; the weights get cached */
            b[w] += 1.0f;
            ours(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f,
                 c, n);
        }
        for (int r = 0; r < count; r++) {
            b[r % (k * n)] += 0.5f; /* a new input each call, as inference does */
            double t0 = now_ns();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n,
                        0.0f, c, n);
            local[r] = (now_ns() - t0) / 1e6;
            t0 = now_ns();
            ours(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f,
                 c, n);
            coded[r] = (now_ns() - t0) / 1e6;
        }
        double ml = median(local, count), mc = median(coded, count);
        printf("blas threshold: m=%d n=%d k=%d flops=%.3g local_ms=%.4f coded_ms=%.4f "
               "coded_over_local=%.2f extra_ms=%.4f\n",
               m, n, k, flops, ml, mc, mc / ml, mc - ml);
        fflush(stdout);
        free(local);
        free(coded);
        free(a);
        free(b);
        free(c);
    }
    return 0;
}

/* GB/s of the full content hash (and of packing, a plain copy) over sizes
   from cache-resident to memory bound. */
static int bench_hash(int reps)
{
    static const size_t sizes_kib[] = {64, 1024, 16384, 262144};
    for (size_t s = 0; s < sizeof sizes_kib / sizeof *sizes_kib; s++) {
        size_t count = sizes_kib[s] * 1024 / sizeof(float);
        int64_t k = 1024, rows = (int64_t) (count / 1024);
        float *x = cdc_bench_xmalloc(count * sizeof(float));
        float *dst = cdc_bench_xmalloc(count * sizeof(float));
        cdc_bench_fill(x, count, &(unsigned){5u});
        memset(dst, 0, count * sizeof(float));
        cdc_operand_t op = {x, rows, k, k, 0};
        int count_reps = reps < 5 ? 5 : reps;
        double *th = cdc_bench_xmalloc(sizeof(double) * (size_t) count_reps);
        double *tp = cdc_bench_xmalloc(sizeof(double) * (size_t) count_reps);
        volatile uint64_t sink = 0;
        for (int r = 0; r < count_reps; r++) {
            double t0 = now_ns();
            sink ^= cdc__operand_hash(&op);
            th[r] = now_ns() - t0;
            t0 = now_ns();
            cdc__operand_pack(&op, dst);
            tp[r] = now_ns() - t0;
        }
        (void) sink;
        double bytes = (double) count * sizeof(float);
        printf("blas hash: bytes=%.0f hash_gbps=%.2f pack_gbps=%.2f reps=%d\n", bytes,
               bytes / median(th, count_reps), bytes / median(tp, count_reps), count_reps);
        fflush(stdout);
        free(th);
        free(tp);
        free(x);
        free(dst);
    }
    return 0;
}

int cdc_bench_blas(int argc, char **argv)
{
    const char *mode = "overhead", *lib = CDC_LIBRARY_PATH;
    int reps = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--lib") == 0 && i + 1 < argc)
            lib = argv[++i];
        else if (strcmp(argv[i], "overhead") == 0 || strcmp(argv[i], "threshold") == 0 ||
                 strcmp(argv[i], "hash") == 0)
            mode = argv[i];
        else {
            fprintf(stderr, "usage: cdcgemm-bench blas [overhead|threshold|hash] [--reps N] "
                            "[--lib PATH]\n");
            return 2;
        }
    }
    if (strcmp(mode, "hash") == 0)
        return bench_hash(reps > 0 ? reps : 21);
    int overhead = strcmp(mode, "overhead") == 0;
    /* overhead: every call stays local; threshold: every call is coded. */
    sgemm_fn ours = load_library(lib, overhead ? "1e30" : "0");
    if (!ours)
        return 1;
    return overhead ? bench_overhead(ours, reps > 0 ? reps : 301)
                    : bench_threshold(ours, reps > 0 ? reps : 21);
}
