/* bench_util.c - clock, data, error norm and percentiles for the benchmarks. */
#include "bench_util.h"

#include "cdcgemm_testing.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

double cdc_bench_now_ms(void)
{
    return cdc_test_now_s() * 1e3;
}

void cdc_bench_fill(float *x, size_t count, unsigned *seed)
{
    for (size_t i = 0; i < count; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        x[i] = (float) ((*seed >> 8) * (1.0 / 16777216.0) - 0.5);
    }
}

void *cdc_bench_xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "cdcgemm-bench: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

double cdc_bench_rel_error(const float *got, const float *want, size_t count)
{
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < count; i++) {
        double d = (double) got[i] - (double) want[i];
        diff += d * d;
        norm += (double) want[i] * (double) want[i];
    }
    if (norm == 0.0)
        return diff == 0.0 ? 0.0 : INFINITY;
    return sqrt(diff / norm);
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

double cdc_bench_percentile(const double *values, size_t count, double p)
{
    if (count == 0)
        return 0.0;
    double *sorted = cdc_bench_xmalloc(count * sizeof *sorted);
    memcpy(sorted, values, count * sizeof *sorted);
    qsort(sorted, count, sizeof *sorted, compare_doubles);
    size_t rank = (size_t) ceil(p / 100.0 * (double) count);
    double v = sorted[rank > 0 ? rank - 1 : 0];
    free(sorted);
    return v;
}

static int count_entries(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int count = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        count += e->d_name[0] != '.';
    closedir(d);
    return count;
}

int cdc_bench_self_fds(void)
{
    return count_entries("/proc/self/fd");
}

int cdc_bench_self_threads(void)
{
    return count_entries("/proc/self/task");
}

char *cdc_bench_profile_json(cdc_context_t *context)
{
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    if (!out)
        return NULL;
    int rc = cdc_testing_profile_json(context, out);
    if (fclose(out) != 0 || rc != CDC_OK) {
        free(text);
        return NULL;
    }
    return text;
}

void cdc_bench_worker_path(char *out, size_t size)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    snprintf(out, size, "%s/cdcgemm-worker", slash ? self : ".");
}

void cdc_bench_json_string(FILE *out, const char *text)
{
    fputc('"', out);
    for (const char *p = text; *p; p++) {
        if (*p == '"' || *p == '\\')
            fputc('\\', out);
        if ((unsigned char) *p >= 0x20)
            fputc(*p, out);
    }
    fputc('"', out);
}
