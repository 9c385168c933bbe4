/* test_budget.c - memory budgets (issue 12) on real embedded workers started
   with CDCGEMM_WORKER_MAX_MEMORY=2M: a layer whose shards fit is distributed
   and its shards stay in the workers' caches; a layer whose shards would not
   fit any worker runs on the coordinator, exact, counted in budget_fallbacks,
   and no worker is sent its weights. */
#include "cdcgemm.h"
#include "context.h"
#include "fc_fixture.h"
#include "profile.h"
#include "testutil.h"

#include <stdlib.h>

#define REL_TOL 1e-5
#define WORKERS 5
#define BUDGET (2u << 20)

static cdc_context_t *budget_context(void)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.local_workers = WORKERS;
    config.parity = 1;
    config.timeout_ms = 5000;
    config.log_level = getenv("CDC_TEST_LOG") ? CDC_LOG_INFO : CDC_LOG_ERROR;
    cdc_context_t *context = NULL;
    int rc = cdc_context_new(&config, &context);
    ck_assert_msg(rc == CDC_OK, "cdc_context_new: %s (%s)", cdc_err_name(rc),
                  cdc_last_error());
    /* Every worker's budget as its heartbeats report it (bounded wait). */
    double start = cdc_test_now_s();
    for (;;) {
        cdc_worker_profile_t p[WORKERS];
        int known = 0, count = cdc__context_profile(context, p, WORKERS);
        for (int w = 0; w < count; w++)
            known += p[w].max_memory == BUDGET;
        if (known == WORKERS)
            break;
        ck_assert_msg(cdc_test_now_s() - start < 10.0, "%d of %d budgets reported", known,
                      WORKERS);
        cdc_test_sleep_ms(20);
    }
    return context;
}

static cdc_stats_t stats_of(cdc_context_t *context)
{
    cdc_stats_t stats;
    ck_assert_int_eq(cdc_context_stats(context, &stats), CDC_OK);
    return stats;
}

/* 256 x 1024 weights: 256 KiB shards of 64 rows fit 2 MiB. */
START_TEST(test_fitting_layer_distributed)
{
    cdc_context_t *context = budget_context();
    cdc_test_fc_t f;
    cdc_test_fc_make(&f, context, 256, 1024, 2, 31, 1);
    for (int i = 0; i < 5; i++)
        cdc_test_fc_check(&f, REL_TOL);
    cdc_stats_t stats = stats_of(context);
    ck_assert_uint_eq(stats.budget_fallbacks, 0);
    ck_assert_uint_ge(stats.weight_bytes, 256u * 1024u * sizeof(float));
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

/* 2048 x 1024 weights: shards of 512 rows are 2 MiB of floats, over the
   budget with the cache's own costs; no worker can hold one. */
START_TEST(test_oversized_layer_on_coordinator)
{
    cdc_context_t *context = budget_context();
    cdc_test_fc_t f;
    cdc_test_fc_make(&f, context, 2048, 1024, 2, 32, 1);
    for (int i = 0; i < 4; i++)
        cdc_test_fc_check(&f, REL_TOL);
    cdc_stats_t stats = stats_of(context);
    ck_assert_uint_eq(stats.budget_fallbacks, 4);
    ck_assert_uint_eq(stats.fallbacks, 0); /* planned, not a failure */
    ck_assert_uint_eq(stats.weight_bytes, 0);
    ck_assert_uint_eq(stats.shards_sent, 0);
    cdc_worker_profile_t p[WORKERS];
    int count = cdc__context_profile(context, p, WORKERS);
    for (int w = 0; w < count; w++)
        ck_assert_uint_le(p[w].cache_bytes, BUDGET);
    cdc_test_fc_free(&f);
    cdc_context_destroy(&context);
}
END_TEST

static Suite *budget_suite(void)
{
    Suite *suite = suite_create("budget");
    TCase *tc = tcase_create("embedded");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fitting_layer_distributed);
    tcase_add_test(tc, test_oversized_layer_on_coordinator);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void)
{
    setenv("CDCGEMM_WORKER_BIN", CDC_WORKER_BIN, 1);
    setenv("CDCGEMM_WORKER_MAX_MEMORY", "2M", 1);
    return cdc_test_run_suite(budget_suite());
}
