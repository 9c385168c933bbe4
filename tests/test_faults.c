/* test_faults.c - the CDCGEMM_FAULTS grammar and reproducible fault decisions. */
#include "cdcgemm.h"
#include "faults.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_parse_every_kind)
{
    cdc_fault_plan_t plan;
    ck_assert_int_eq(
        cdc__fault_plan_parse("crash@w1:after=3;hang@w0:after=2,for=500;"
                              "delay@*:dist=exp,mean=20,p=0.5;drop@w2:p=0.1;corrupt@w3:p=0.01;"
                              "slow@*:gflops=0.2;link@*:mbit=94,lat=0.3;seed=42;slow@w4:x=2.5",
                              &plan),
        CDC_OK);
    ck_assert_int_eq(plan.count, 8);
    ck_assert_uint_eq(plan.seed, 42);
    ck_assert_int_eq(plan.rules[0].kind, CDC_FAULT_CRASH);
    ck_assert_int_eq(plan.rules[0].target, 1);
    ck_assert_int_eq(plan.rules[0].after, 3);
    ck_assert_int_eq(plan.rules[1].kind, CDC_FAULT_HANG);
    ck_assert(plan.rules[1].for_ms == 500);
    ck_assert_int_eq(plan.rules[2].target, -1);
    ck_assert_int_eq(plan.rules[2].dist, CDC_DIST_EXP);
    ck_assert(plan.rules[2].ms == 20 && plan.rules[2].p == 0.5);
    ck_assert(plan.rules[5].gflops == 0.2);
    ck_assert(plan.rules[6].mbit == 94 && plan.rules[6].lat_ms == 0.3);
    ck_assert(plan.rules[7].x == 2.5);
    ck_assert_int_eq(cdc__fault_plan_parse("", &plan), CDC_OK);
    ck_assert_int_eq(plan.count, 0);
    ck_assert(cdc__fault_coordinator(&plan).gflops == 0.0);
    ck_assert(cdc__fault_coordinator(&plan).gbps == 0.0);
}
END_TEST

/* misreport: the PONG's claims, latest rule's value per key; it draws
   nothing, so the calls' fault sequence is the same with it. */
START_TEST(test_misreport)
{
    cdc_fault_plan_t plan, plain;
    cdc_fault_state_t state, plain_state;
    cdc_fault_misreport_t lie;
    ck_assert_int_eq(cdc__fault_plan_parse("misreport@w1:memory=1,rate=1e11;drop@*:p=0.5;"
                                           "misreport@*:flap=1",
                                           &plan),
                     CDC_OK);
    ck_assert_int_eq(cdc__fault_plan_parse("drop@*:p=0.5", &plain), CDC_OK);
    cdc__fault_state_init(&state, &plan, 1);
    cdc__fault_misreport(&state, &lie);
    ck_assert(lie.memory == 1.0 && lie.rate == 1e11 && lie.flap == 1);
    cdc__fault_state_init(&state, &plan, 0);
    cdc__fault_misreport(&state, &lie);
    ck_assert(lie.memory == 0.0 && lie.rate == 0.0 && lie.flap == 1);
    cdc__fault_state_init(&plain_state, &plain, 0);
    for (int i = 0; i < 50; i++) {
        cdc_fault_decision_t a, b;
        cdc__fault_next(&state, 1.0, 1e6, 0, 0, 0, &a);
        cdc__fault_next(&plain_state, 1.0, 1e6, 0, 0, 0, &b);
        ck_assert_int_eq(a.drop, b.drop);
    }
}
END_TEST

/* slow@c: the coordinator's emulated speed, and no worker's rule. */
START_TEST(test_coordinator_target)
{
    cdc_fault_plan_t plan;
    cdc_fault_state_t state;
    cdc_fault_decision_t d;
    ck_assert_int_eq(cdc__fault_plan_parse("slow@c:gflops=0.5;slow@*:gflops=1", &plan), CDC_OK);
    ck_assert_int_eq(plan.rules[0].target, CDC_FAULT_COORDINATOR);
    ck_assert(cdc__fault_coordinator(&plan).gflops == 0.5);
    ck_assert(cdc__fault_coordinator(&plan).gbps == 0.0);
    cdc__fault_state_init(&state, &plan, 0);
    ck_assert_int_eq(state.plan.count, 1); /* the worker keeps slow@* only */
    cdc__fault_next(&state, 1.0, 1e8, 0, 0, 0, &d);
    ck_assert_double_eq_tol(d.slow_ms, 99.0, 1e-6); /* 0.1 GFLOP at 1 GFLOP/s */
    /* A memory-bound coordinator (a Pi's GEMV): the larger of the two times. */
    ck_assert_int_eq(cdc__fault_plan_parse("slow@c:gflops=4,gbps=2", &plan), CDC_OK);
    cdc_emulated_device_t c = cdc__fault_coordinator(&plan);
    ck_assert(c.gflops == 4.0 && c.gbps == 2.0);
    ck_assert_double_eq_tol(cdc__emulated_ms(c, 8e6, 1e6), 2.0, 1e-9);  /* compute */
    ck_assert_double_eq_tol(cdc__emulated_ms(c, 2e6, 16e6), 8.0, 1e-9); /* memory */
    ck_assert_int_eq(cdc__fault_plan_parse("slow@c:gbps=0.5", &plan), CDC_OK);
    ck_assert_double_eq_tol(cdc__emulated_ms(cdc__fault_coordinator(&plan), 1e9, 1e6), 2.0,
                            1e-9);
}
END_TEST

static const char *const bad_plans[] = {
    "crash",                  "crash@",              "crash@w",
    "crash@x1",               "crash@w1.5",          "crash@w64",
    "explode@w1",             "crash@w1:after",      "crash@w1:after=-1",
    "crash@w1:after=1.5",     "crash@w1:p=0.5",      "delay@w1",
    "delay@w1:ms=5,dist=gamma", "delay@w1:ms=abc",   "drop@*:p=1.5",
    "slow@*",                 "slow@*:x=0.5",        "slow@*:x=2,gflops=1",
    "link@*:mbit=0",          "crash@w1;;drop@*:p=0.1", "seed=abc",
    "seed=1.5",               "drop@*:p=0.1,",       "hang@w0:for=-3",
    /* strtod alone takes these (issue 9, finding 8). */
    "crash@w 3",              "crash@w+3",           "crash@w0x3",
    "crash@w-0",              "crash@w3 ",           "drop@*:p= 0.5",
    "drop@*:p=+0.5",          "delay@*:ms=0x10",     "seed= 4",
    /* The coordinator takes slow:gflops= and/or gbps= only. */
    "crash@c",                "slow@c:x=2",          "slow@c:gflops=1,after=3",
    "delay@c:ms=5",           "slow@cc:gflops=1",
    /* misreport: some claim, in range; flap is 0 or 1; not the coordinator. */
    "misreport@w1",           "misreport@w1:memory=0", "misreport@w1:flap=2",
    "misreport@w1:rate=0",    "misreport@w1:p=1",    "misreport@c:memory=1",
    /* gbps: with gflops or alone, not with x, in range. */
    "slow@*:x=2,gbps=1",      "slow@*:gbps=0",       "slow@*:gbps=1e5",
    "slow@c:gbps=1,after=2",
    /* disk: mbyte= in range, nothing else, not the coordinator. */
    "disk@w1",                "disk@*:mbyte=0",      "disk@*:mbyte=2e6",
    "disk@*:mbyte=40,p=1",    "disk@c:mbyte=40",
};

START_TEST(test_parse_rejects)
{
    cdc_fault_plan_t plan, before;
    memset(&plan, 0x5a, sizeof plan);
    before = plan;
    ck_assert_int_eq(cdc__fault_plan_parse(bad_plans[_i], &plan), CDC_ECONFIG);
    ck_assert_msg(strstr(cdc_last_error(), "CDCGEMM_FAULTS") != NULL, "%s", cdc_last_error());
    ck_assert(memcmp(&plan, &before, sizeof plan) == 0);
}
END_TEST

START_TEST(test_env_rejects_bad_faults)
{
    cdc_config_t config;
    cdc_config_init(&config);
    setenv("CDCGEMM_FAULTS", "crash@w1:after=x", 1);
    ck_assert_int_eq(cdc_config_from_env(&config), CDC_ECONFIG);
    ck_assert_str_eq(config.faults, "");
    setenv("CDCGEMM_FAULTS", "crash@w1:after=4", 1);
    ck_assert_int_eq(cdc_config_from_env(&config), CDC_OK);
    ck_assert_str_eq(config.faults, "crash@w1:after=4");
    unsetenv("CDCGEMM_FAULTS");
}
END_TEST

static double sequence_sum(const char *spec, int worker, int calls)
{
    cdc_fault_plan_t plan;
    cdc_fault_state_t state;
    ck_assert_int_eq(cdc__fault_plan_parse(spec, &plan), CDC_OK);
    cdc__fault_state_init(&state, &plan, worker);
    double sum = 0;
    for (int i = 0; i < calls; i++) {
        cdc_fault_decision_t d;
        cdc__fault_next(&state, 1.0, 0, 0, 0, 0, &d);
        sum += d.delay_ms * (i + 1) + d.drop * 1000.0 * i;
    }
    return sum;
}

START_TEST(test_same_seed_same_sequence)
{
    const char *a = "delay@*:dist=exp,mean=5;drop@*:p=0.2;seed=7";
    ck_assert(sequence_sum(a, 0, 500) == sequence_sum(a, 0, 500));
    ck_assert(sequence_sum(a, 0, 500) != sequence_sum(a, 1, 500)); /* per-worker stream */
    ck_assert(sequence_sum(a, 0, 500) !=
              sequence_sum("delay@*:dist=exp,mean=5;drop@*:p=0.2;seed=8", 0, 500));
}
END_TEST

START_TEST(test_distributions)
{
    static const struct {
        const char *spec;
        double mean;
    } cases[] = {{"delay@*:dist=exp,mean=10", 10},
                 {"delay@*:dist=pareto,mean=10", 10},
                 {"delay@*:ms=3", 3},
                 {"delay@*:ms=10,p=0.25", 2.5}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        cdc_fault_plan_t plan;
        cdc_fault_state_t state;
        ck_assert_int_eq(cdc__fault_plan_parse(cases[c].spec, &plan), CDC_OK);
        cdc__fault_state_init(&state, &plan, 0);
        double sum = 0;
        const int draws = 200000;
        for (int i = 0; i < draws; i++) {
            cdc_fault_decision_t d;
            cdc__fault_next(&state, 0, 0, 0, 0, 0, &d);
            ck_assert(d.delay_ms >= 0);
            sum += d.delay_ms;
        }
        /* Pareto with shape 2 has infinite variance: allow more slack. */
        double tol = c == 1 ? 0.08 : 0.02;
        ck_assert_msg(fabs(sum / draws - cases[c].mean) <= tol * cases[c].mean,
                      "%s: mean %g", cases[c].spec, sum / draws);
    }
}
END_TEST

START_TEST(test_crash_hang_drop_corrupt)
{
    cdc_fault_plan_t plan;
    cdc_fault_state_t s0, s1;
    ck_assert_int_eq(cdc__fault_plan_parse("crash@w1:after=3;hang@w0:after=2,for=50;"
                                           "drop@w0:p=0.3;corrupt@w1:p=1",
                                           &plan),
                     CDC_OK);
    cdc__fault_state_init(&s0, &plan, 0);
    cdc__fault_state_init(&s1, &plan, 1);
    int drops = 0;
    for (int call = 0; call < 10000; call++) {
        cdc_fault_decision_t d0, d1;
        cdc__fault_next(&s0, 0, 0, 0, 0, 0, &d0);
        cdc__fault_next(&s1, 0, 0, 0, 0, 0, &d1);
        ck_assert_int_eq(d0.crash, 0);
        ck_assert_int_eq(d1.crash, call >= 3);
        ck_assert(d0.hang_ms == (call == 2 ? 50.0 : -1.0));
        ck_assert(d1.hang_ms == -1.0);
        ck_assert_int_eq(d1.corrupt, 1);
        ck_assert_int_eq(d0.corrupt, 0);
        ck_assert_int_eq(d1.drop, 0);
        drops += d0.drop;
    }
    ck_assert_msg(abs(drops - 3000) < 150, "drops %d of 10000 at p = 0.3", drops);
}
END_TEST

START_TEST(test_slow_and_link)
{
    cdc_fault_plan_t plan;
    cdc_fault_state_t state;
    cdc_fault_decision_t d;
    ck_assert_int_eq(cdc__fault_plan_parse("slow@*:gflops=0.2", &plan), CDC_OK);
    cdc__fault_state_init(&state, &plan, 3);
    cdc__fault_next(&state, 1.0, 2e8, 0, 0, 0, &d); /* 0.2 GFLOP at 0.2 GFLOP/s = 1 s */
    ck_assert_double_eq_tol(d.delay_ms, 999.0, 1e-6);
    ck_assert_double_eq_tol(d.slow_ms, 999.0, 1e-6); /* all of it compute */
    cdc__fault_next(&state, 2000.0, 2e8, 0, 0, 0, &d); /* already slower than emulated */
    ck_assert(d.delay_ms == 0.0 && d.slow_ms == 0.0);
    ck_assert_int_eq(cdc__fault_plan_parse("slow@*:x=3", &plan), CDC_OK);
    cdc__fault_state_init(&state, &plan, 0);
    cdc__fault_next(&state, 4.0, 0, 0, 0, 0, &d);
    ck_assert_double_eq_tol(d.delay_ms, 8.0, 1e-9);
    ck_assert_double_eq_tol(d.slow_ms, 8.0, 1e-9);
    ck_assert(d.latency_ms == 0.0);
    ck_assert_int_eq(cdc__fault_plan_parse("link@*:mbit=94,lat=0.3", &plan), CDC_OK);
    cdc__fault_state_init(&state, &plan, 0);
    cdc__fault_next(&state, 0, 0, 0, 1000000, 175000, &d); /* 1.175 MB at 94 Mbit/s */
    ck_assert_double_eq_tol(d.delay_ms, 0.6 + 1175000.0 * 8 / 94e3, 1e-9);
    ck_assert_double_eq_tol(d.latency_ms, 0.6, 1e-12); /* 2 lat: not on the device */
    ck_assert(d.slow_ms == 0.0); /* link time is not compute */
    ck_assert_int_eq(cdc__fault_plan_parse("slow@w1:x=3", &plan), CDC_OK);
    cdc__fault_state_init(&state, &plan, 0); /* not this worker's rule */
    cdc__fault_next(&state, 4.0, 0, 0, 0, 0, &d);
    ck_assert(d.delay_ms == 0.0);
}
END_TEST

/* A memory-bound device (issue 27): gbps= bounds the operand bytes a task
   streams as gflops= bounds its flops; the device takes the larger. */
START_TEST(test_slow_memory_bandwidth)
{
    cdc_fault_plan_t plan;
    cdc_fault_state_t state;
    cdc_fault_decision_t d;
    ck_assert_int_eq(cdc__fault_plan_parse("slow@*:gflops=1,gbps=0.5", &plan), CDC_OK);
    ck_assert_double_eq(plan.rules[0].gbps, 0.5);
    cdc__fault_state_init(&state, &plan, 0);
    /* A matrix-vector product: 4096 x 1024 weights (16 MiB), 8.4 MFLOP: 8.4 ms of
       compute at 1 GFLOP/s, 33.6 ms of streaming at 0.5 GB/s: memory-bound. */
    double weights = 4096.0 * 1024 * 4, flops = 2.0 * 4096 * 1024;
    cdc__fault_next(&state, 1.0, flops, weights, 0, 0, &d);
    ck_assert_double_eq_tol(d.slow_ms, weights / 0.5e6 - 1.0, 1e-9);
    /* The same weights against 64 columns: 537 MFLOP, compute-bound. */
    cdc__fault_next(&state, 1.0, 64 * flops, weights + 64 * 1024 * 4, 0, 0, &d);
    ck_assert_double_eq_tol(d.slow_ms, 64 * flops / 1e6 - 1.0, 1e-9);
    /* gbps alone: the bytes only; x= stretches the compute whatever they are. */
    ck_assert_int_eq(cdc__fault_plan_parse("slow@*:gbps=2", &plan), CDC_OK);
    cdc__fault_state_init(&state, &plan, 0);
    cdc__fault_next(&state, 1.0, 1e12, 4e6, 0, 0, &d);
    ck_assert_double_eq_tol(d.slow_ms, 4e6 / 2e6 - 1.0, 1e-9);
    /* A streamed task's later part: the same rule. */
    cdc__fault_part(&state, 0.5, 1e12, 8e6, 0, &d);
    ck_assert_double_eq_tol(d.slow_ms, 8e6 / 2e6 - 0.5, 1e-9);
}
END_TEST

/* A device that becomes slower: slow@w0:...,after=N replaces the rule of an
   earlier onset from call N on (not both), and a respawned process of the
   slot is already the slower device. */
START_TEST(test_slow_from_a_call_on)
{
    cdc_fault_plan_t plan;
    cdc_fault_state_t state;
    cdc_fault_decision_t d;
    ck_assert_int_eq(cdc__fault_plan_parse("slow@w0:gflops=1;slow@w0:gflops=0.25,after=2", &plan),
                     CDC_OK);
    cdc__fault_state_init(&state, &plan, 0);
    const double expected[] = {99.0, 99.0, 399.0, 399.0}; /* 0.1 GFLOP, 1 ms real */
    for (int call = 0; call < 4; call++) {
        cdc__fault_next(&state, 1.0, 1e8, 0, 0, 0, &d);
        ck_assert_msg(fabs(d.slow_ms - expected[call]) < 1e-6, "call %d: slow %.3f ms", call,
                      d.slow_ms);
        ck_assert_int_eq(d.slow_onset, call == 2);
    }
    cdc__fault_state_init(&state, &plan, 0);
    cdc__fault_state_set_incarnation(&state, 1);
    cdc__fault_next(&state, 1.0, 1e8, 0, 0, 0, &d);
    ck_assert_double_eq_tol(d.slow_ms, 399.0, 1e-6);
    ck_assert_int_eq(cdc__fault_plan_parse("slow@*:x=2,after=1", &plan), CDC_OK);
    cdc__fault_state_init(&state, &plan, 0);
    cdc__fault_next(&state, 4.0, 0, 0, 0, 0, &d);
    ck_assert(d.slow_ms == 0.0); /* not yet */
    cdc__fault_next(&state, 4.0, 0, 0, 0, 0, &d);
    ck_assert_double_eq_tol(d.slow_ms, 4.0, 1e-9);
}
END_TEST

/* One message outside the calls (WEIGHTS): the same transfer arithmetic as
   a call's, one-way latency, and no call counted or drawn. */
START_TEST(test_link_of_one_message)
{
    cdc_fault_plan_t plan;
    cdc_fault_state_t state, twin;
    cdc_fault_decision_t d;
    double transfer = -1, latency = -1;
    ck_assert_int_eq(cdc__fault_plan_parse("link@*:mbit=94,lat=0.3;drop@*:p=0.5", &plan),
                     CDC_OK);
    cdc__fault_state_init(&state, &plan, 0);
    twin = state;
    ck_assert_int_eq(cdc__fault_link(&state, 1175000, &transfer, &latency), 1);
    ck_assert_double_eq_tol(transfer, 1175000.0 * 8 / 94e3, 1e-9);
    ck_assert_double_eq_tol(latency, 0.3, 1e-12);
    ck_assert_int_eq(state.calls, 0);
    cdc__fault_next(&state, 0, 0, 0, 1000000, 175000, &d); /* the call's transfer: the same */
    ck_assert_double_eq_tol(d.delay_ms - d.latency_ms, transfer, 1e-9);
    cdc_fault_decision_t e;
    cdc__fault_next(&twin, 0, 0, 0, 1000000, 175000, &e); /* the draws did not move */
    ck_assert_int_eq(d.drop, e.drop);
    ck_assert(state.rng == twin.rng);
    ck_assert_int_eq(cdc__fault_plan_parse("slow@*:x=2;link@w1:mbit=1", &plan), CDC_OK);
    cdc__fault_state_init(&state, &plan, 0); /* no link for this worker */
    ck_assert_int_eq(cdc__fault_link(&state, 1000000, &transfer, &latency), 0);
    ck_assert(transfer == 0.0 && latency == 0.0);
}
END_TEST

/* disk: a store load's time at mbyte MB/s, this worker's rules only; it
   draws nothing, so the calls' fault sequence is the same with it. */
START_TEST(test_disk_of_one_load)
{
    cdc_fault_plan_t plan, plain;
    cdc_fault_state_t state, plain_state;
    ck_assert_int_eq(cdc__fault_plan_parse("disk@w1:mbyte=40;drop@*:p=0.5", &plan), CDC_OK);
    ck_assert_int_eq(cdc__fault_plan_parse("drop@*:p=0.5", &plain), CDC_OK);
    cdc__fault_state_init(&state, &plan, 1);
    ck_assert_double_eq_tol(cdc__fault_disk_ms(&state, 86000000), 2150.0, 1e-9);
    ck_assert_double_eq_tol(cdc__fault_disk_ms(&state, 0), 0.0, 1e-12);
    cdc__fault_state_init(&plain_state, &plain, 1);
    ck_assert(cdc__fault_disk_ms(&plain_state, 86000000) == 0.0);
    for (int i = 0; i < 50; i++) {
        cdc_fault_decision_t a, b;
        cdc__fault_next(&state, 1.0, 1e6, 0, 0, 0, &a);
        cdc__fault_next(&plain_state, 1.0, 1e6, 0, 0, 0, &b);
        ck_assert_int_eq(a.drop, b.drop);
        ck_assert(a.delay_ms == b.delay_ms);
    }
    cdc__fault_state_init(&state, &plan, 0); /* not worker 0's disk */
    ck_assert(cdc__fault_disk_ms(&state, 86000000) == 0.0);
}
END_TEST

/* A respawned worker (incarnation >= 1): crash and hang fired in the slot's
   first process and do not fire again; probabilistic rules keep applying. */
START_TEST(test_incarnation_skips_one_shot)
{
    cdc_fault_plan_t plan;
    ck_assert_int_eq(cdc__fault_plan_parse("crash@w1:after=2;hang@w1:after=1,for=50;"
                                           "drop@w1:p=1;delay@w1:ms=3", &plan),
                     CDC_OK);
    for (int incarnation = 0; incarnation < 3; incarnation++) {
        cdc_fault_state_t state;
        cdc__fault_state_init(&state, &plan, 1);
        cdc__fault_state_set_incarnation(&state, incarnation);
        int crashes = 0, hangs = 0, drops = 0;
        for (int call = 0; call < 10; call++) {
            cdc_fault_decision_t d;
            cdc__fault_next(&state, 1.0, 0, 0, 0, 0, &d);
            crashes += d.crash;
            hangs += d.hang_ms >= 0;
            drops += d.drop;
            ck_assert(d.delay_ms == 3.0);
        }
        ck_assert_int_eq(crashes, incarnation == 0 ? 8 : 0);
        ck_assert_int_eq(hangs, incarnation == 0 ? 1 : 0);
        ck_assert_int_eq(drops, 10);
    }
}
END_TEST

static Suite *faults_suite(void)
{
    Suite *suite = suite_create("faults");
    TCase *grammar = tcase_create("grammar");
    tcase_add_test(grammar, test_parse_every_kind);
    tcase_add_loop_test(grammar, test_parse_rejects, 0,
                        (int) (sizeof bad_plans / sizeof *bad_plans));
    tcase_add_test(grammar, test_env_rejects_bad_faults);
    tcase_add_test(grammar, test_coordinator_target);
    tcase_add_test(grammar, test_misreport);
    suite_add_tcase(suite, grammar);
    TCase *draws = tcase_create("decisions");
    tcase_add_test(draws, test_same_seed_same_sequence);
    tcase_add_test(draws, test_distributions);
    tcase_add_test(draws, test_crash_hang_drop_corrupt);
    tcase_add_test(draws, test_incarnation_skips_one_shot);
    tcase_add_test(draws, test_slow_and_link);
    tcase_add_test(draws, test_slow_memory_bandwidth);
    tcase_add_test(draws, test_slow_from_a_call_on);
    tcase_add_test(draws, test_link_of_one_message);
    tcase_add_test(draws, test_disk_of_one_load);
    suite_add_tcase(suite, draws);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(faults_suite());
}
