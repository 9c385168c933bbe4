/* test_chaos_spec.c - the bench's --chaos grammar and seeded schedule
   (bench/chaos.c): what parses, what is refused and the message naming the
   bad part, the run checks, and the schedule's timing and determinism. */
#include "chaos.h"
#include "testutil.h"

#include <math.h>
#include <string.h>

static cdc_chaos_spec_t parse_ok(const char *text)
{
    cdc_chaos_spec_t spec;
    char error[CDC_CHAOS_ERROR_BYTES] = "";
    int rc = cdc_chaos_parse(text, &spec, error, sizeof error);
    ck_assert_msg(rc == 0, "'%s' refused: %s", text, error);
    return spec;
}

/* text is refused and the message holds every one of the fragments. */
static void parse_bad(const char *text, const char *fragment, const char *fragment2)
{
    cdc_chaos_spec_t spec;
    char error[CDC_CHAOS_ERROR_BYTES] = "";
    ck_assert_msg(cdc_chaos_parse(text, &spec, error, sizeof error) != 0, "'%s' accepted",
                  text);
    ck_assert_msg(strstr(error, fragment) != NULL, "'%s': message '%s' lacks '%s'", text, error,
                  fragment);
    ck_assert_msg(!fragment2 || strstr(error, fragment2) != NULL,
                  "'%s': message '%s' lacks '%s'", text, error, fragment2);
}

START_TEST(test_parse_example)
{
    cdc_chaos_spec_t s =
        parse_ok("kill@random:every=2s;stop@w2:every=10s,for=1s;restart@w1:at=5s;seed=7");
    ck_assert_int_eq(s.count, 3);
    ck_assert_uint_eq(s.seed, 7);
    ck_assert_int_eq(s.rules[0].action, CDC_CHAOS_KILL);
    ck_assert_int_eq(s.rules[0].target, CDC_CHAOS_TARGET_RANDOM);
    ck_assert_int_eq(s.rules[0].repeat, 1);
    ck_assert_double_eq(s.rules[0].every_ms, 2000.0);
    ck_assert_double_eq(s.rules[0].jitter_ms, 0.0);
    ck_assert_int_eq(s.rules[1].action, CDC_CHAOS_STOP);
    ck_assert_int_eq(s.rules[1].target, CDC_CHAOS_TARGET_ONE);
    ck_assert_int_eq(s.rules[1].index, 2);
    ck_assert_double_eq(s.rules[1].every_ms, 10000.0);
    ck_assert_double_eq(s.rules[1].for_ms, 1000.0);
    ck_assert_int_eq(s.rules[2].action, CDC_CHAOS_RESTART);
    ck_assert_int_eq(s.rules[2].index, 1);
    ck_assert_int_eq(s.rules[2].repeat, 0);
    ck_assert_double_eq(s.rules[2].at_ms, 5000.0);
    ck_assert_str_eq(s.rules[1].text, "stop@w2:every=10s,for=1s");
}
END_TEST

START_TEST(test_parse_forms)
{
    cdc_chaos_spec_t s = parse_ok("kill@*:at=250ms");
    ck_assert_uint_eq(s.seed, 1); /* the default */
    ck_assert_int_eq(s.rules[0].target, CDC_CHAOS_TARGET_ALL);
    ck_assert_double_eq(s.rules[0].at_ms, 250.0);
    s = parse_ok("kill@w0:every=2s~500ms");
    ck_assert_double_eq(s.rules[0].jitter_ms, 500.0);
    s = parse_ok("kill@w0:jitter=0.25s,every=1.5s");
    ck_assert_double_eq(s.rules[0].jitter_ms, 250.0);
    ck_assert_double_eq(s.rules[0].every_ms, 1500.0);
    s = parse_ok("seed=42;stop@w63:for=100ms,at=0s");
    ck_assert_uint_eq(s.seed, 42);
    ck_assert_int_eq(s.rules[0].index, 63);
    ck_assert_double_eq(s.rules[0].at_ms, 0.0);
}
END_TEST

START_TEST(test_parse_refused)
{
    parse_bad("", "empty", NULL);
    parse_bad("kill@w1:at=1s;", "stray ';'", NULL);
    parse_bad("kill@w1:at=1s;;kill@w2:at=1s", "stray ';'", NULL);
    parse_bad("seed=3", "no rule", NULL);
    parse_bad("seed=3;seed=4;kill@*:at=1s", "seed given twice", NULL);
    parse_bad("seed=-3;kill@*:at=1s", "seed=-3", "decimal digits");
    parse_bad("kill", "'kill'", "ACTION@TARGET");
    parse_bad("boom@w1:at=1s", "unknown action 'boom'", NULL);
    parse_bad("kill@w1", "'kill@w1'", "at=TIME");
    parse_bad("kill@w1:", "'kill@w1:'", "at=TIME");
    parse_bad("kill@w 1:at=1s", "target 'w 1'", NULL);
    parse_bad("kill@w+1:at=1s", "target 'w+1'", NULL);
    parse_bad("kill@w64:at=1s", "target 'w64'", NULL);
    parse_bad("kill@w:at=1s", "target 'w'", NULL);
    parse_bad("kill@any:at=1s", "target 'any'", NULL);
    parse_bad("kill@w1:at=1", "at: '1' is not a time", NULL);
    parse_bad("kill@w1:at=1h", "'1h' is not a time", NULL);
    parse_bad("kill@w1:at=-1s", "'-1s' is not a time", NULL);
    parse_bad("kill@w1:at=1.s", "'1.s'", NULL);
    parse_bad("kill@w1:every=0ms", "every=0ms", "at least 1ms");
    parse_bad("kill@w1:every=2s~x", "~x", "jitter is not a time");
    parse_bad("kill@w1:every=2s~500ms,jitter=1s", "given twice", "jitter");
    parse_bad("kill@w1:jitter=1s,every=2s~500ms", "jitter given twice", NULL);
    parse_bad("kill@w1:every=2s,jitter=2s", "jitter (2000ms) must be below", NULL);
    parse_bad("kill@w1:at=1s,jitter=10ms", "jitter needs every=", NULL);
    parse_bad("kill@w1:at=1s,every=2s", "exclude each other", NULL);
    parse_bad("kill@w1:at=1s,at=2s", "'at' given twice", NULL);
    parse_bad("kill@w1:at=1s,,", "stray ','", NULL);
    parse_bad("kill@w1:at=1s,count=3", "unknown key 'count'", NULL);
    parse_bad("kill@w1:at", "'at': expected key=value", NULL);
    parse_bad("stop@w2:every=10s", "'stop@w2:every=10s'", "stop needs for=");
    parse_bad("kill@w2:every=10s,for=1s", "for= is for stop only", NULL);
    parse_bad("kill@w1:at=1s;kill@w2:at=nope", "rule 'kill@w2:at=nope'", "'nope'");
}
END_TEST

START_TEST(test_check_run)
{
    char error[CDC_CHAOS_ERROR_BYTES] = "";
    cdc_chaos_spec_t s = parse_ok("kill@w4:at=1s;restart@w1:at=5s");
    ck_assert_int_eq(cdc_chaos_check(&s, 5, 1, error, sizeof error), 0);
    ck_assert_int_ne(cdc_chaos_check(&s, 4, 1, error, sizeof error), 0);
    ck_assert_ptr_nonnull(strstr(error, "w4: the run has 4 workers"));
    ck_assert_int_ne(cdc_chaos_check(&s, 5, 0, error, sizeof error), 0);
    ck_assert_ptr_nonnull(strstr(error, "restart@w1:at=5s"));
    ck_assert_ptr_nonnull(strstr(error, "supervisor"));
}
END_TEST

START_TEST(test_schedule_timing)
{
    cdc_chaos_spec_t s = parse_ok("kill@random:every=2s;stop@w2:every=3s,for=1s;kill@w1:at=5s");
    cdc_chaos_schedule_t sched;
    cdc_chaos_schedule_init(&sched, &s);
    /* No jitter: 2 (r0), 3 (r1), 4 (r0), 5 (r2), 6 (r0, before r1's tie) ... */
    static const double want_t[] = {2000, 3000, 4000, 5000, 6000, 6000, 8000};
    static const int want_rule[] = {0, 1, 0, 2, 0, 1, 0};
    cdc_chaos_firing_t f;
    ck_assert_int_eq(cdc_chaos_next(&sched, 1999.0, &f), 0);
    ck_assert_double_eq(cdc_chaos_peek(&sched), 2000.0);
    for (int i = 0; i < 7; i++) {
        ck_assert_int_eq(cdc_chaos_next(&sched, 1e9, &f), 1);
        ck_assert_double_eq(f.t_ms, want_t[i]);
        ck_assert_int_eq(f.rule, want_rule[i]);
    }
    /* The one-shot rule is spent; the others go on. */
    ck_assert_double_eq(sched.next_ms[2], -1.0);
    s = parse_ok("kill@w0:at=1s");
    cdc_chaos_schedule_init(&sched, &s);
    ck_assert_int_eq(cdc_chaos_next(&sched, 1e9, &f), 1);
    ck_assert_int_eq(cdc_chaos_next(&sched, 1e9, &f), 0);
    ck_assert_double_eq(cdc_chaos_peek(&sched), -1.0);
}
END_TEST

START_TEST(test_schedule_jitter_seeded)
{
    cdc_chaos_spec_t s = parse_ok("kill@random:every=2s~500ms;seed=7");
    cdc_chaos_schedule_t a, b;
    cdc_chaos_schedule_init(&a, &s);
    cdc_chaos_schedule_init(&b, &s);
    double last = 0.0, sum = 0.0, lo = 1e9, hi = 0.0;
    int distinct = 0, picks[5] = {0};
    for (int i = 0; i < 2000; i++) {
        cdc_chaos_firing_t fa, fb;
        ck_assert_int_eq(cdc_chaos_next(&a, 1e12, &fa), 1);
        ck_assert_int_eq(cdc_chaos_next(&b, 1e12, &fb), 1);
        ck_assert_double_eq(fa.t_ms, fb.t_ms); /* same seed, same schedule */
        double gap = fa.t_ms - last;
        ck_assert_msg(gap >= 1500.0 && gap <= 2500.0, "interval %g outside 2s ~ 500ms", gap);
        lo = gap < lo ? gap : lo;
        hi = gap > hi ? gap : hi;
        distinct += fabs(gap - 2000.0) > 1.0;
        sum += gap;
        last = fa.t_ms;
        int pa = cdc_chaos_pick(&a, fa.rule, 5), pb = cdc_chaos_pick(&b, fb.rule, 5);
        ck_assert_int_eq(pa, pb);
        ck_assert(pa >= 0 && pa < 5);
        picks[pa]++;
    }
    ck_assert_msg(fabs(sum / 2000.0 - 2000.0) < 30.0, "mean interval %g", sum / 2000.0);
    ck_assert(lo < 1600.0 && hi > 2400.0);
    ck_assert_int_gt(distinct, 1900);
    for (int w = 0; w < 5; w++)
        ck_assert_msg(picks[w] > 300 && picks[w] < 500, "worker %d picked %d of 2000", w,
                      picks[w]);
    ck_assert_int_eq(cdc_chaos_pick(&a, 0, 0), -1);
    /* Another seed, another schedule. */
    s.seed = 8;
    cdc_chaos_schedule_init(&b, &s);
    cdc_chaos_schedule_init(&a, &(cdc_chaos_spec_t){.count = 1, .seed = 7, .rules = {s.rules[0]}});
    cdc_chaos_firing_t fa, fb;
    cdc_chaos_next(&a, 1e12, &fa);
    cdc_chaos_next(&b, 1e12, &fb);
    ck_assert(fa.t_ms != fb.t_ms);
}
END_TEST

static Suite *chaos_suite(void)
{
    Suite *suite = suite_create("chaos_spec");
    TCase *tcase = tcase_create("chaos_spec");
    tcase_add_test(tcase, test_parse_example);
    tcase_add_test(tcase, test_parse_forms);
    tcase_add_test(tcase, test_parse_refused);
    tcase_add_test(tcase, test_check_run);
    tcase_add_test(tcase, test_schedule_timing);
    tcase_add_test(tcase, test_schedule_jitter_seeded);
    suite_add_tcase(suite, tcase);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(chaos_suite());
}
