/* blas_errors.c - BLAS error exits (blas_errors.h). */
#define _GNU_SOURCE /* dladdr, RTLD_DEFAULT */
#include "blas_errors.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef void (*xerbla_fn)(const char *srname, const int *info, size_t srname_len);
typedef void (*cblas_xerbla_fn)(int info, const char *rout, const char *form, ...);

/* The system BLAS libraries' own cblas_xerbla prints and exit()s; only a
   handler the host defined itself is called (as the reference CBLAS test
   programs do). */
static int in_system_blas(void *symbol)
{
    Dl_info info;
    if (!dladdr(symbol, &info) || !info.dli_fname)
        return 0;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    static const char *const prefixes[] = {"libopenblas", "libblas", "libcblas", "libblis",
                                           "libmkl", "libatlas", "libsatlas", "libtatlas"};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (strncmp(base, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

__attribute__((noinline, cold)) void cdc__blas_xerbla(const char *name, int info)
{
    xerbla_fn handler;
    *(void **) &handler = dlsym(RTLD_DEFAULT, "xerbla_");
    if (handler) {
        handler(name, &info, 6);
        return;
    }
    fprintf(stderr, " ** On entry to %.6s parameter number %2d had an illegal value\n", name,
            info);
}

__attribute__((noinline, cold)) void cdc__blas_cblas_xerbla(const char *routine, int info,
                                                            const char *what, int value)
{
    cblas_xerbla_fn handler;
    *(void **) &handler = dlsym(RTLD_DEFAULT, "cblas_xerbla");
    if (handler && !in_system_blas(*(void **) &handler)) {
        handler(info, routine, "Illegal %s setting, %d\n", what, value);
        return;
    }
    fprintf(stderr, "cdcgemm: parameter %d to routine %s was incorrect (%s = %d)\n", info,
            routine, what, value);
}
