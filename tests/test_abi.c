/* test_abi.c - the promises of the public header (docs/abi.md): version macros
   that match project(VERSION) and cdc_version(), the 0.x struct layouts, and
   reserved tails that the library zeroes. Black box: cdcgemm.h only. */
#include "cdcgemm.h"
#include "testutil.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int all_zero(const uint64_t *words, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (words[i] != 0)
            return 0;
    return 1;
}

START_TEST(test_version_matches_library)
{
    ck_assert_ptr_nonnull(cdc_version());
    ck_assert_str_eq(cdc_version(), CDC_VERSION_STRING);
    char composed[64];
    snprintf(composed, sizeof composed, "%d.%d.%d", CDC_VERSION_MAJOR, CDC_VERSION_MINOR,
             CDC_VERSION_PATCH);
    ck_assert_str_eq(composed, CDC_VERSION_STRING);
}
END_TEST

START_TEST(test_version_matches_project)
{
    /* CDC_TEST_PROJECT_VERSION is CMake's PROJECT_VERSION, passed to this test
       only: the generated header must say the same. */
    ck_assert_str_eq(CDC_VERSION_STRING, CDC_TEST_PROJECT_VERSION);
}
END_TEST

START_TEST(test_version_hex_and_soversion)
{
    ck_assert_int_eq(CDC_VERSION_HEX, (CDC_VERSION_MAJOR << 16) | (CDC_VERSION_MINOR << 8) |
                                          CDC_VERSION_PATCH);
    ck_assert_int_eq(CDC_MAKE_VERSION(0, 1, 0), 0x000100);
    ck_assert(CDC_VERSION_HEX >= CDC_MAKE_VERSION(0, 1, 0));
    ck_assert(CDC_VERSION_MINOR < 256 && CDC_VERSION_PATCH < 256);
    ck_assert_int_eq(CDC_SOVERSION, CDC_VERSION_MAJOR);
}
END_TEST

/* The layouts of libcdcgemm.so.0 on LP64 (x86_64, aarch64), fixed at 0.1.0. A
   new field takes reserved slots and leaves these numbers as they are; if this
   fails, the change broke the ABI (docs/abi.md). */
START_TEST(test_layout_frozen)
{
#if UINTPTR_MAX == UINT64_MAX && INT_MAX == 2147483647
    ck_assert_uint_eq(sizeof(cdc_config_t), 7256);
    ck_assert_uint_eq(sizeof(cdc_stats_t), 400);
    ck_assert_uint_eq(sizeof(cdc_call_report_t), 688);
    ck_assert_uint_eq(sizeof(cdc_layer_options_t), 12);
    ck_assert_uint_eq(sizeof(cdc_conv2d_desc_t), 80);
    ck_assert_uint_eq(sizeof(cdc_weight_part_t), 16);
    ck_assert_uint_eq(offsetof(cdc_weight_part_t, count), 8);
    ck_assert_uint_eq(CDC_MAX_WEIGHT_PARTS, 8);
    ck_assert_uint_eq(CDC_BORROW_FILE_MAPPED, 1);
    /* Where the reserved tails end: the struct's end. */
    ck_assert_uint_eq(offsetof(cdc_config_t, reserved) + sizeof(((cdc_config_t *) 0)->reserved),
                      sizeof(cdc_config_t));
    ck_assert_uint_eq(offsetof(cdc_stats_t, reserved) + sizeof(((cdc_stats_t *) 0)->reserved),
                      sizeof(cdc_stats_t));
    ck_assert_uint_eq(offsetof(cdc_call_report_t, reserved) +
                          sizeof(((cdc_call_report_t *) 0)->reserved),
                      sizeof(cdc_call_report_t));
    ck_assert_int_eq(CDC_MAX_WORKERS, 64);
    ck_assert_int_eq(CDC_CONFIG_STR, 1024);
#endif
}
END_TEST

START_TEST(test_config_init_zeroes_reserved)
{
    cdc_config_t config;
    memset(&config, 0xab, sizeof config);
    cdc_config_init(&config);
    ck_assert(all_zero(config.reserved, sizeof config.reserved / sizeof *config.reserved));
}
END_TEST

START_TEST(test_outputs_zero_reserved)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.in_process = 1;
    config.local_workers = 3;
    config.parity = 1;
    cdc_context_t *ctx = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_OK);
    float a[4 * 6], b[6 * 5], c[4 * 5];
    for (size_t i = 0; i < sizeof a / sizeof *a; i++)
        a[i] = (float) i / 7.0f;
    for (size_t i = 0; i < sizeof b / sizeof *b; i++)
        b[i] = 1.0f - (float) i / 11.0f;
    ck_assert_int_eq(cdc_sgemm(ctx, CDC_ROW_MAJOR, CDC_NO_TRANS, CDC_NO_TRANS, 4, 5, 6, 1.0f,
                               a, 6, b, 5, 0.0f, c, 5),
                     CDC_OK);
    cdc_stats_t stats;
    cdc_call_report_t report;
    memset(&stats, 0xab, sizeof stats);
    memset(&report, 0xab, sizeof report);
    ck_assert_int_eq(cdc_context_stats(ctx, &stats), CDC_OK);
    ck_assert_int_eq(cdc_context_last_call(ctx, &report), CDC_OK);
    ck_assert_uint_ge(stats.calls, 1);
    ck_assert(all_zero(stats.reserved, sizeof stats.reserved / sizeof *stats.reserved));
    ck_assert(all_zero(report.reserved, sizeof report.reserved / sizeof *report.reserved));
    cdc_context_destroy(&ctx);
}
END_TEST

static Suite *abi_suite(void)
{
    Suite *suite = suite_create("abi");
    TCase *version = tcase_create("version");
    tcase_add_test(version, test_version_matches_library);
    tcase_add_test(version, test_version_matches_project);
    tcase_add_test(version, test_version_hex_and_soversion);
    suite_add_tcase(suite, version);
    TCase *layout = tcase_create("layout");
    tcase_add_test(layout, test_layout_frozen);
    tcase_add_test(layout, test_config_init_zeroes_reserved);
    tcase_add_test(layout, test_outputs_zero_reserved);
    suite_add_tcase(suite, layout);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(abi_suite());
}
