/* test_hygiene.c - long-run hygiene: 1,000 context create/destroy cycles with
   embedded workers (real processes) leave resident memory, descriptors and
   threads flat, and no child behind. */
#include "cdcgemm.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define HYGIENE_WORKERS 2
#define HYGIENE_WARMUP 20
#define HYGIENE_RSS_SLACK_KIB 2048 /* +2 MiB over the warmed-up figure */
#define DIM 48

/* Cycles: CDC_HYGIENE_CYCLES, else 1,000 (ctest sets 100 under the
   sanitizers, where one cycle costs several times more). */
static int cycles = 1000;

/* Under ASan (CDC_TEST_SANITIZED) freed memory stays resident in its
   quarantine: the RSS bound means nothing there and is only reported. */
static int check_rss = 1;

typedef struct {
    long rss_kib;
    int fds, threads;
} footprint_t;

/* Entries of a /proc directory (the fd list counts the one opendir holds:
   the same in every measurement). */
static int entries(const char *path)
{
    DIR *d = opendir(path);
    ck_assert_msg(d != NULL, "opendir %s: %s", path, strerror(errno));
    int count = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        count += e->d_name[0] != '.';
    closedir(d);
    return count;
}

static footprint_t footprint(void)
{
    footprint_t f = {cdc_test_rss_kib(getpid()), entries("/proc/self/fd"),
                     entries("/proc/self/task")};
    return f;
}

/* One coded call (n = 1, r = 1 over the 2 workers), checked against a plain
   triple loop. */
static void small_call(cdc_context_t *context, const float *a, const float *b, float *c)
{
    ck_assert_int_eq(cdc_sgemm(context, CDC_ROW_MAJOR, CDC_NO_TRANS, CDC_NO_TRANS, DIM, DIM,
                               DIM, 1.0f, a, DIM, b, DIM, 0.0f, c, DIM),
                     CDC_OK);
    cdc_call_report_t report;
    ck_assert_int_eq(cdc_context_last_call(context, &report), CDC_OK);
    ck_assert_int_eq(report.n + report.r, HYGIENE_WORKERS);
    for (int i = 0; i < DIM; i += 7)
        for (int j = 0; j < DIM; j += 5) {
            double want = 0.0;
            for (int k = 0; k < DIM; k++)
                want += (double) a[i * DIM + k] * b[k * DIM + j];
            ck_assert_msg(fabs(c[i * DIM + j] - want) < 1e-4, "c[%d][%d] = %g, want %g", i, j,
                          c[i * DIM + j], want);
        }
}

static void one_cycle(int cycle, const float *a, const float *b, float *c)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.local_workers = HYGIENE_WORKERS;
    config.parity = 1;
    config.min_flops = 0;
    config.log_level = CDC_LOG_ERROR;
    cdc_context_t *context = NULL;
    int rc = cdc_context_new(&config, &context);
    ck_assert_msg(rc == CDC_OK, "cycle %d: cdc_context_new: %s (%s)", cycle, cdc_err_name(rc),
                  cdc_last_error());
    if (cycle % 3 == 0)
        small_call(context, a, b, c);
    cdc_context_destroy(&context);
    ck_assert_ptr_null(context);
    /* Every worker reaped: no child of this process is left, dead or alive. */
    errno = 0;
    pid_t left = waitpid(-1, NULL, WNOHANG);
    ck_assert_msg(left == -1 && errno == ECHILD, "cycle %d: a child is left (waitpid: %d, %s)",
                  cycle, (int) left, strerror(errno));
}

START_TEST(test_create_destroy_flat)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 5);
    float *a = cdc_test_alloc(sizeof(float) * DIM * DIM);
    float *b = cdc_test_alloc(sizeof(float) * DIM * DIM);
    float *c = cdc_test_alloc(sizeof(float) * DIM * DIM);
    cdc_test_fill_uniform(&rng, a, DIM * DIM);
    cdc_test_fill_uniform(&rng, b, DIM * DIM);
    int warmup = cycles < HYGIENE_WARMUP * 2 ? cycles / 2 : HYGIENE_WARMUP;
    double start = cdc_test_now_s();
    for (int i = 0; i < warmup; i++)
        one_cycle(i, a, b, c);
    footprint_t base = footprint(), worst = base;
    for (int i = warmup; i < cycles; i++) {
        one_cycle(i, a, b, c);
        footprint_t now = footprint();
        ck_assert_msg(now.fds == base.fds, "cycle %d: %d descriptors open, %d after warm-up", i,
                      now.fds, base.fds);
        ck_assert_msg(now.threads == base.threads, "cycle %d: %d threads, %d after warm-up", i,
                      now.threads, base.threads);
        worst.rss_kib = now.rss_kib > worst.rss_kib ? now.rss_kib : worst.rss_kib;
    }
    footprint_t end = footprint();
    fprintf(stderr,
            "hygiene: %d cycles (%d warm-up) of %d embedded workers in %.1f s; after warm-up "
            "rss %ld KiB, fds %d, threads %d; at the end rss %ld KiB (max %ld), fds %d, "
            "threads %d\n",
            cycles, warmup, HYGIENE_WORKERS, cdc_test_now_s() - start, base.rss_kib, base.fds,
            base.threads, end.rss_kib, worst.rss_kib, end.fds, end.threads);
    ck_assert_msg(!check_rss || end.rss_kib <= base.rss_kib + HYGIENE_RSS_SLACK_KIB,
                  "resident memory grew from %ld KiB to %ld KiB over %d cycles", base.rss_kib,
                  end.rss_kib, cycles - warmup);
    free(a);
    free(b);
    free(c);
}
END_TEST

static Suite *hygiene_suite(void)
{
    Suite *suite = suite_create("hygiene");
    TCase *tcase = tcase_create("hygiene");
    tcase_set_timeout(tcase, 1200);
    tcase_add_test(tcase, test_create_destroy_flat);
    suite_add_tcase(suite, tcase);
    return suite;
}

int main(void)
{
    setenv("CDCGEMM_WORKER_BIN", CDC_WORKER_BIN, 1);
    const char *sanitized = getenv("CDC_TEST_SANITIZED");
    check_rss = !(sanitized && strcmp(sanitized, "0") != 0);
    const char *text = getenv("CDC_HYGIENE_CYCLES");
    if (text && *text) {
        char *end = NULL;
        long v = strtol(text, &end, 10);
        if (*end || v < 2 || v > 1000000) {
            fprintf(stderr, "CDC_HYGIENE_CYCLES '%s': expected an integer >= 2\n", text);
            return 2;
        }
        cycles = (int) v;
    }
    return cdc_test_run_suite(hygiene_suite());
}
