/* blas_dlopen_host.c - loads a BLAS-using module with dlopen(RTLD_LOCAL), as an
 * interpreter loads extension modules, and checks its GEMMs.
 *
 * Not linked against any BLAS: the module brings OpenBLAS in a local scope,
 * where dlsym(RTLD_NEXT) from a preloaded library finds nothing. Run with
 * libcdcgemm LD_PRELOADed; its local and coded paths must both reach OpenBLAS
 * (a call back into its own cblas_sgemm would recurse until the stack ends).
 * Usage: blas_dlopen_host MODULE.so; prints "blas_dlopen_host: ... result=PASS". */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*gemm_fn)(int m, int n, int k, const float *a, const float *b, float *c);

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: blas_dlopen_host MODULE.so\n");
        return 2;
    }
    void *module = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!module) {
        fprintf(stderr, "blas_dlopen_host: %s\n", dlerror());
        return 2;
    }
    gemm_fn gemm;
    *(void **) &gemm = dlsym(module, "blas_plugin_gemm");
    if (!gemm) {
        fprintf(stderr, "blas_dlopen_host: no blas_plugin_gemm: %s\n", dlerror());
        return 2;
    }
    const int sizes[][3] = {{4, 5, 3}, {64, 48, 32}, {128, 96, 80}};
    double worst = 0.0;
    for (int s = 0; s < 3; s++) {
        int m = sizes[s][0], n = sizes[s][1], k = sizes[s][2];
        float *a = malloc(sizeof(float) * (size_t) (m * k));
        float *b = malloc(sizeof(float) * (size_t) (k * n));
        float *c = malloc(sizeof(float) * (size_t) (m * n));
        if (!a || !b || !c)
            return 2;
        for (int i = 0; i < m * k; i++)
            a[i] = (float) ((i * 37) % 17) / 17.0f - 0.5f;
        for (int i = 0; i < k * n; i++)
            b[i] = (float) ((i * 11) % 13) / 13.0f - 0.5f;
        for (int rep = 0; rep < 3; rep++) { /* weights a reused */
            gemm(m, n, k, a, b, c);
            double diff = 0.0, norm = 0.0;
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    double ref = 0.0;
                    for (int p = 0; p < k; p++)
                        ref += (double) a[i * k + p] * b[p * n + j];
                    diff += (c[i * n + j] - ref) * (c[i * n + j] - ref);
                    norm += ref * ref;
                }
            double rel = sqrt(diff / norm);
            worst = rel > worst || rel != rel ? rel : worst;
            b[rep] += 0.25f; /* the input changes between calls */
        }
        free(a);
        free(b);
        free(c);
    }
    dlclose(module);
    int ok = worst <= 1e-5;
    printf("blas_dlopen_host: max_rel_error=%.3g result=%s\n", worst, ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}
