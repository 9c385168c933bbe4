/* test_config.c - defaults, CDCGEMM_* parsing, context creation errors. */
#include "cdcgemm.h"
#include "config_env.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const all_vars[] = {
    "CDCGEMM_WORKERS", "CDCGEMM_LOCAL_WORKERS", "CDCGEMM_PARITY", "CDCGEMM_SPLIT",
    "CDCGEMM_WAIT_MS", "CDCGEMM_TIMEOUT_MS", "CDCGEMM_MIN_FLOPS", "CDCGEMM_FAULTS",
    "CDCGEMM_STATS",   "CDCGEMM_LOG",           "CDCGEMM_CODE",    "CDCGEMM_VERIFY",
    "CDCGEMM_DISCOVER_INTERFACE", "CDCGEMM_DISCOVER_WAIT_MS", "CDCGEMM_PLAN",
    "CDCGEMM_PARITY_LAYOUT"};

static void clear_env(void)
{
    for (size_t i = 0; i < sizeof all_vars / sizeof *all_vars; i++)
        unsetenv(all_vars[i]);
}

START_TEST(test_defaults)
{
    cdc_config_t config;
    cdc_config_init(&config);
    ck_assert_int_eq(config.local_workers, 5);
    ck_assert_int_eq(config.parity, 1);
    ck_assert_int_eq(config.split, CDC_SPLIT_AUTO);
    ck_assert_int_eq(config.wait_ms, 0);
    ck_assert_int_eq(config.timeout_ms, 2000);
    ck_assert_int_eq(config.log_level, CDC_LOG_WARN);
    ck_assert_int_eq(config.plan, CDC_PLAN_AUTO); /* issue 26 */
    ck_assert_int_eq(config.parity_layout, CDC_LAYOUT_ROTATED);
    ck_assert_int_eq(config.verify, 1); /* sampled (issue 23) */
    ck_assert_str_eq(config.workers, "");
    clear_env();
    ck_assert_int_eq(cdc_config_from_env(&config), CDC_OK);
    ck_assert_int_eq(config.parity, 1);
}
END_TEST

START_TEST(test_env_good_values)
{
    clear_env();
    setenv("CDCGEMM_WORKERS", "tcp://127.0.0.1:7001,ipc:///tmp/w2", 1);
    setenv("CDCGEMM_LOCAL_WORKERS", "7", 1);
    setenv("CDCGEMM_PARITY", "2", 1);
    setenv("CDCGEMM_SPLIT", "spatial", 1);
    setenv("CDCGEMM_WAIT_MS", "15", 1);
    setenv("CDCGEMM_TIMEOUT_MS", "500", 1);
    setenv("CDCGEMM_MIN_FLOPS", "1e6", 1);
    setenv("CDCGEMM_FAULTS", "crash@w1:after=3", 1);
    setenv("CDCGEMM_STATS", "/tmp/stats.json", 1);
    setenv("CDCGEMM_LOG", "debug", 1);
    setenv("CDCGEMM_PLAN", "profiled", 1);
    setenv("CDCGEMM_PARITY_LAYOUT", "dedicated", 1);
    setenv("CDCGEMM_VERIFY", "2", 1);
    cdc_config_t config;
    cdc_config_init(&config);
    ck_assert_int_eq(cdc_config_from_env(&config), CDC_OK);
    ck_assert_str_eq(config.workers, "tcp://127.0.0.1:7001,ipc:///tmp/w2");
    ck_assert_int_eq(config.local_workers, 7);
    ck_assert_int_eq(config.parity, 2);
    ck_assert_int_eq(config.split, CDC_SPLIT_COLUMNS);
    ck_assert_int_eq(config.wait_ms, 15);
    ck_assert_int_eq(config.timeout_ms, 500);
    ck_assert(config.min_flops == 1e6);
    ck_assert_str_eq(config.faults, "crash@w1:after=3");
    ck_assert_str_eq(config.stats_path, "/tmp/stats.json");
    ck_assert_int_eq(config.log_level, CDC_LOG_DEBUG);
    ck_assert_int_eq(config.plan, CDC_PLAN_PROFILED);
    ck_assert_int_eq(config.parity_layout, CDC_LAYOUT_DEDICATED);
    ck_assert_int_eq(config.verify, 2);
    setenv("CDCGEMM_SPLIT", "channel", 1);
    ck_assert_int_eq(cdc_config_from_env(&config), CDC_OK);
    ck_assert_int_eq(config.split, CDC_SPLIT_ROWS);
    setenv("CDCGEMM_PLAN", "equal", 1);
    ck_assert_int_eq(cdc_config_from_env(&config), CDC_OK);
    ck_assert_int_eq(config.plan, CDC_PLAN_EQUAL);
    setenv("CDCGEMM_PLAN", "auto", 1);
    ck_assert_int_eq(cdc_config_from_env(&config), CDC_OK);
    ck_assert_int_eq(config.plan, CDC_PLAN_AUTO);
    clear_env();
}
END_TEST

static const struct {
    const char *var, *value;
} bad_values[] = {
    {"CDCGEMM_PARITY", "4"},          {"CDCGEMM_PARITY", "-1"},
    {"CDCGEMM_PARITY", "1x"},         {"CDCGEMM_PARITY", ""},
    {"CDCGEMM_LOCAL_WORKERS", "0"},   {"CDCGEMM_LOCAL_WORKERS", "65"},
    {"CDCGEMM_LOCAL_WORKERS", "five"},{"CDCGEMM_SPLIT", "diagonal"},
    {"CDCGEMM_WAIT_MS", "-5"},        {"CDCGEMM_TIMEOUT_MS", "0"},
    {"CDCGEMM_TIMEOUT_MS", "99999999999"}, {"CDCGEMM_MIN_FLOPS", "-1"},
    {"CDCGEMM_MIN_FLOPS", "nan"},     {"CDCGEMM_MIN_FLOPS", "12 "},
    {"CDCGEMM_LOG", "verbose"},       {"CDCGEMM_WORKERS", "udp://1.2.3.4:5"},
    {"CDCGEMM_WORKERS", "tcp://a:1,,tcp://b:2"}, {"CDCGEMM_CODE", "fountain"},
    /* strtol/strtod alone take these (issue 9, finding 8). */
    {"CDCGEMM_PARITY", " 1"},         {"CDCGEMM_PARITY", "+1"},
    {"CDCGEMM_LOCAL_WORKERS", "\t3"}, {"CDCGEMM_TIMEOUT_MS", " 500"},
    {"CDCGEMM_WAIT_MS", "+0"},        {"CDCGEMM_VERIFY", " 1"},
    {"CDCGEMM_VERIFY", "3"},          {"CDCGEMM_VERIFY", "-1"},
    {"CDCGEMM_MIN_FLOPS", " 5"},      {"CDCGEMM_MIN_FLOPS", "+5"},
    {"CDCGEMM_MIN_FLOPS", "0x10"},
    {"CDCGEMM_WORKERS", "discover:"},  {"CDCGEMM_WORKERS", "discover:0"},
    {"CDCGEMM_WORKERS", "discover:70000"}, {"CDCGEMM_WORKERS", "discover: 5"},
    {"CDCGEMM_WORKERS", "discover:+5"}, {"CDCGEMM_DISCOVER_WAIT_MS", "-1"},
    {"CDCGEMM_DISCOVER_WAIT_MS", "3s"},
    {"CDCGEMM_PLAN", "fastest"},      {"CDCGEMM_PLAN", "Profiled"},
    {"CDCGEMM_PARITY_LAYOUT", "raid5"}, {"CDCGEMM_PARITY_LAYOUT", "Rotated"},
    {"CDCGEMM_DISCOVER_INTERFACE", "an-interface-name-far-longer-than-sixty-four-bytes-which-"
                                   "no-kernel-would-allow"},
};

START_TEST(test_env_bad_value_names_variable)
{
    clear_env();
    cdc_config_t config, before;
    cdc_config_init(&config);
    config.parity = 2; /* a non-default value that must survive the failure */
    before = config;
    setenv(bad_values[_i].var, bad_values[_i].value, 1);
    ck_assert_int_eq(cdc_config_from_env(&config), CDC_ECONFIG);
    ck_assert_msg(strstr(cdc_last_error(), bad_values[_i].var) != NULL,
                  "error '%s' does not name %s", cdc_last_error(), bad_values[_i].var);
    ck_assert(memcmp(&config, &before, sizeof config) == 0);
    cdc_context_t *ctx = (cdc_context_t *) 0x1;
    ck_assert_int_eq(cdc_context_new_from_env(&ctx), CDC_ECONFIG);
    ck_assert_ptr_eq(ctx, (cdc_context_t *) 0x1);
    clear_env();
}
END_TEST

START_TEST(test_discover_values)
{
    clear_env();
    cdc_config_t config;
    cdc_config_init(&config);
    ck_assert_int_eq(config.discover_wait_ms, 3000);
    setenv("CDCGEMM_WORKERS", "discover:47001", 1);
    setenv("CDCGEMM_DISCOVER_INTERFACE", "eth0", 1);
    setenv("CDCGEMM_DISCOVER_WAIT_MS", "500", 1);
    ck_assert_int_eq(cdc_config_from_env(&config), CDC_OK);
    ck_assert_str_eq(config.workers, "discover:47001");
    ck_assert_str_eq(config.discover_interface, "eth0");
    ck_assert_int_eq(config.discover_wait_ms, 500);
    /* Discovery admits only trusted keys: without CURVE it is refused. */
    cdc_context_t *ctx = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_ECONFIG);
    ck_assert_msg(strstr(cdc_last_error(), "CDCGEMM_CURVE_SERVER") != NULL, "%s",
                  cdc_last_error());
    ck_assert_ptr_null(ctx);
    clear_env();
}
END_TEST

START_TEST(test_split_names)
{
    cdc_split_t split;
    ck_assert_int_eq(cdc_split_parse("output", &split), CDC_OK);
    ck_assert_int_eq(split, CDC_SPLIT_ROWS);
    ck_assert_int_eq(cdc_split_parse("spatial", &split), CDC_OK);
    ck_assert_int_eq(split, CDC_SPLIT_COLUMNS);
    ck_assert_int_eq(cdc_split_parse("auto", &split), CDC_OK);
    ck_assert_int_eq(split, CDC_SPLIT_AUTO);
    split = CDC_SPLIT_ROWS;
    ck_assert_int_eq(cdc_split_parse("Spatial", &split), CDC_EINVAL);
    ck_assert_int_eq(split, CDC_SPLIT_ROWS);
    ck_assert_int_eq(cdc_split_parse(NULL, &split), CDC_EINVAL);
    ck_assert_int_eq(cdc_split_parse("auto", NULL), CDC_EINVAL);
}
END_TEST

START_TEST(test_context_rejects_bad_config)
{
    cdc_config_t config;
    cdc_context_t *ctx = NULL;
    cdc_config_init(&config);
    config.parity = 3; /* 5 workers: n = 2 < r = 3 */
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_ECONFIG);
    ck_assert_ptr_null(ctx);
    cdc_config_init(&config);
    config.local_workers = 0;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_ECONFIG);
    cdc_config_init(&config);
    config.split = (cdc_split_t) 9;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_ECONFIG);
    cdc_config_init(&config);
    config.verify = 3;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_ECONFIG);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "verify"));
    cdc_config_init(&config); /* the enumerations, set by a program, not parsed */
    config.plan = 3;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_ECONFIG);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "plan = 3"));
    cdc_config_init(&config);
    config.parity_layout = -1;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_ECONFIG);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "parity_layout = -1"));
    ck_assert_ptr_null(ctx);
    cdc_config_init(&config); /* an endpoint longer than the client's names hold */
    int at = snprintf(config.workers, sizeof config.workers, "ipc:///tmp/");
    memset(config.workers + at, 'w', 300);
    config.workers[at + 300] = '\0';
    config.parity = 0;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_ECONFIG);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "endpoint 0 is 311 bytes, at most 255"));
    ck_assert_int_eq(cdc_context_new(NULL, &ctx), CDC_EINVAL);
    cdc_config_init(&config);
    ck_assert_int_eq(cdc_context_new(&config, NULL), CDC_EINVAL);
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_OK);
    ck_assert_ptr_nonnull(ctx);
    ck_assert_ptr_nonnull(cdc_context_config(ctx));
    ck_assert_int_eq(cdc_context_config(ctx)->parity, 1);
    cdc_context_destroy(&ctx);
    ck_assert_ptr_null(ctx);
    cdc_context_destroy(&ctx); /* NULL is accepted */
    cdc_context_destroy(NULL);
}
END_TEST

START_TEST(test_status_texts)
{
    ck_assert_str_eq(cdc_err_name(CDC_ELD), "CDC_ELD");
    ck_assert_str_eq(cdc_strerror(CDC_OK), "success");
    ck_assert_str_eq(cdc_strerror(CDC_EDECODE), "not enough shards to decode");
    ck_assert_str_eq(cdc_err_name(12345), "CDC_UNKNOWN");
}
END_TEST

START_TEST(test_closest_variable)
{
    ck_assert_str_eq(cdc__config_closest_variable("CDCGEMM_PARTIY"), "CDCGEMM_PARITY");
    ck_assert_str_eq(cdc__config_closest_variable("CDCGEMM_WORKER"), "CDCGEMM_WORKERS");
    ck_assert_str_eq(cdc__config_closest_variable("CDCGEMM_TIMEOUT"), "CDCGEMM_TIMEOUT_MS");
    ck_assert_str_eq(cdc__config_closest_variable("CDCGEMM_WORKERBIN"), "CDCGEMM_WORKER_BIN");
    ck_assert_str_eq(cdc__config_closest_variable("CDCGEMM_CURVE_SECRT"),
                     "CDCGEMM_CURVE_SECRET");
    ck_assert_str_eq(cdc__config_closest_variable("CDCGEMM_INSECUR"), "CDCGEMM_INSECURE");
    ck_assert_str_eq(cdc__config_closest_variable("CDCGEMM_parity"), "CDCGEMM_PARITY");
    ck_assert_ptr_null(cdc__config_closest_variable("CDCGEMM_XYZZY_PLUGH"));
    ck_assert_ptr_null(cdc__config_closest_variable("CDCGEMM_PARITY")); /* itself */
    ck_assert(cdc__config_variable_known("CDCGEMM_PARITY"));
    ck_assert(cdc__config_variable_known("CDCGEMM_WORKER_BIN"));
    ck_assert(cdc__config_variable_known("CDCGEMM_CURVE_SERVER"));
    ck_assert(!cdc__config_variable_known("CDCGEMM_PARTIY"));
}
END_TEST

/* What cdc_config_from_env writes to stderr over `calls` calls. */
static void config_stderr(int calls, char *text, size_t size)
{
    char path[] = "/tmp/cdc-config-stderr-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    for (int i = 0; i < calls; i++) {
        cdc_config_t config;
        cdc_config_init(&config);
        ck_assert_int_eq(cdc_config_from_env(&config), CDC_OK); /* a warning, not an error */
        ck_assert_int_eq(config.parity, 1);
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t got = pread(fd, text, size - 1, 0);
    text[got > 0 ? got : 0] = '\0';
    close(fd);
    unlink(path);
}

static int occurrences(const char *text, const char *word)
{
    int count = 0;
    for (const char *at = text; (at = strstr(at, word)); at += strlen(word))
        count++;
    return count;
}

/* Issue 9, finding 8: CDCGEMM_PARTIY=2 was silently ignored. */
START_TEST(test_unknown_variable_warned_once)
{
    clear_env();
    setenv("CDCGEMM_PARTIY", "2", 1);
    setenv("CDCGEMM_WORKER_BIN", "/nonexistent", 1); /* known: read by the supervisor */
    char text[4096];
    config_stderr(3, text, sizeof text);
    ck_assert_msg(occurrences(text, "CDCGEMM_PARTIY") == 1, "stderr: '%s'", text);
    ck_assert_msg(strstr(text, "cdcgemm warn:") && strstr(text, "CDCGEMM_PARITY"),
                  "stderr: '%s'", text);
    ck_assert_msg(!strstr(text, "WORKER_BIN"), "stderr: '%s'", text);
    unsetenv("CDCGEMM_PARTIY");
    unsetenv("CDCGEMM_WORKER_BIN");
}
END_TEST

/* A name with control characters is shown escaped (a terminal must not act
   on them), and one of 256 bytes or more is warned of too (issue 24). */
START_TEST(test_unknown_variable_shown_safely)
{
    clear_env();
    setenv("CDCGEMM_X\x1b[2J\a", "1", 1);
    char text[4096];
    config_stderr(1, text, sizeof text);
    ck_assert_msg(strstr(text, "CDCGEMM_X\\x1b[2J\\x07 is not a cdcgemm variable"),
                  "stderr: '%s'", text);
    ck_assert_ptr_null(strchr(text, '\x1b'));
    ck_assert_ptr_null(strchr(text, '\a'));
    unsetenv("CDCGEMM_X\x1b[2J\a");
}
END_TEST

/* The warning comes once per process: a test of its own. */
START_TEST(test_unknown_long_variable_warned)
{
    clear_env();
    char text[4096];
    char name[301];
    memset(name, 'Z', sizeof name - 1);
    memcpy(name, "CDCGEMM_", 8);
    name[sizeof name - 1] = '\0';
    setenv(name, "1", 1);
    config_stderr(1, text, sizeof text);
    ck_assert_msg(strstr(text, "CDCGEMM_ZZZ") && strstr(text, "(300 bytes) is not"),
                  "stderr: '%s'", text);
    unsetenv(name);
}
END_TEST

START_TEST(test_unknown_variable_quiet_below_warn)
{
    clear_env();
    setenv("CDCGEMM_PARTIY", "2", 1);
    setenv("CDCGEMM_LOG", "error", 1);
    char text[4096];
    config_stderr(1, text, sizeof text);
    ck_assert_str_eq(text, "");
    unsetenv("CDCGEMM_PARTIY");
    clear_env();
}
END_TEST

static Suite *config_suite(void)
{
    Suite *suite = suite_create("config");
    TCase *defaults = tcase_create("defaults");
    tcase_add_test(defaults, test_defaults);
    tcase_add_test(defaults, test_status_texts);
    suite_add_tcase(suite, defaults);
    TCase *env = tcase_create("environment");
    tcase_add_test(env, test_env_good_values);
    tcase_add_loop_test(env, test_env_bad_value_names_variable, 0,
                        (int) (sizeof bad_values / sizeof *bad_values));
    tcase_add_test(env, test_split_names);
    tcase_add_test(env, test_discover_values);
    suite_add_tcase(suite, env);
    TCase *unknown = tcase_create("unknown_variables");
    tcase_add_test(unknown, test_closest_variable);
    tcase_add_test(unknown, test_unknown_variable_warned_once);
    tcase_add_test(unknown, test_unknown_variable_shown_safely);
    tcase_add_test(unknown, test_unknown_long_variable_warned);
    tcase_add_test(unknown, test_unknown_variable_quiet_below_warn);
    suite_add_tcase(suite, unknown);
    TCase *context = tcase_create("context");
    tcase_add_test(context, test_context_rejects_bad_config);
    suite_add_tcase(suite, context);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(config_suite());
}
