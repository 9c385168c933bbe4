/* testutil.c - deterministic random data, error norms, files, suite runner. */
#include "testutil.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void cdc_test_rng_seed(cdc_test_rng_t *rng, uint64_t seed)
{
    rng->state = seed ? seed : 0x9E3779B97F4A7C15ull;
}

uint64_t cdc_test_rng_next(cdc_test_rng_t *rng)
{
    uint64_t x = rng->state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng->state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

double cdc_test_rng_uniform(cdc_test_rng_t *rng, double lo, double hi)
{
    double unit = (double) (cdc_test_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
    return lo + (hi - lo) * unit;
}

int64_t cdc_test_rng_int(cdc_test_rng_t *rng, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t) (hi - lo) + 1;
    return lo + (int64_t) (cdc_test_rng_next(rng) % span);
}

double cdc_test_rng_normal(cdc_test_rng_t *rng)
{
    double u1 = cdc_test_rng_uniform(rng, 0.0, 1.0);
    double u2 = cdc_test_rng_uniform(rng, 0.0, 1.0);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}

void cdc_test_fill_uniform(cdc_test_rng_t *rng, float *x, size_t count)
{
    for (size_t i = 0; i < count; i++)
        x[i] = (float) cdc_test_rng_uniform(rng, -1.0, 1.0);
}

double cdc_test_rel_error(const float *got, const double *want, size_t count)
{
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < count; i++) {
        double d = (double) got[i] - want[i];
        diff += d * d;
        norm += want[i] * want[i];
    }
    if (norm == 0.0)
        return diff == 0.0 ? 0.0 : INFINITY;
    return sqrt(diff / norm);
}

double cdc_test_rel_error_ff(const float *got, const float *want, size_t count)
{
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < count; i++) {
        double d = (double) got[i] - (double) want[i];
        diff += d * d;
        norm += (double) want[i] * want[i];
    }
    if (norm == 0.0)
        return diff == 0.0 ? 0.0 : INFINITY;
    return sqrt(diff / norm);
}

void *cdc_test_alloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    ck_assert_msg(p != NULL, "out of memory allocating %zu bytes", bytes);
    return p;
}

double cdc_test_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

void cdc_test_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void cdc_test_temp_file(char *template_path)
{
    int fd = mkstemp(template_path);
    ck_assert_msg(fd >= 0, "mkstemp %s: %s", template_path, strerror(errno));
    close(fd);
}

void cdc_test_read_text(const char *path, char *text, size_t size)
{
    text[0] = '\0';
    FILE *file = fopen(path, "r");
    ck_assert_msg(file != NULL, "%s: %s", path, strerror(errno));
    size_t got = fread(text, 1, size - 1, file);
    fclose(file);
    text[got] = '\0';
}

void cdc_test_env_refused(const char *var, const char *bad, const char *good,
                          cdc_config_t *config)
{
    setenv(var, bad, 1);
    int rc = cdc_config_from_env(config);
    char error[1024];
    snprintf(error, sizeof error, "%s", cdc_last_error());
    int named = strstr(error, var) != NULL;
    setenv(var, good, 1);
    int taken = cdc_config_from_env(config);
    unsetenv(var);
    ck_assert_msg(rc == CDC_ECONFIG && named, "%s=%s: %s (%s)", var, bad, cdc_err_name(rc),
                  error);
    ck_assert_msg(taken == CDC_OK, "%s=%s: %s (%s)", var, good, cdc_err_name(taken),
                  cdc_last_error());
}

int cdc_test_run_suite(Suite *suite)
{
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
