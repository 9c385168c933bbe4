/* test_profile.c - the live profile of each worker (issue 12, item 1): the
 * estimators alone (pure: EWMA, deltas, a respawn, the generation's
 * hysteresis, the predictor's defaults), a real worker's busy_us and flops
 * in its PONGs (a slow fault sets their ratio, a link fault stays out of
 * them), and embedded workers with slow and link faults ranked by the
 * coordinator's profile, which CDCGEMM_STATS writes out. */
#include "cdcgemm.h"
#include "cdcgemm_testing.h"
#include "context.h"
#include "profile.h"
#include "protocol.h"
#include "status.h"
#include "testutil.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

/* ---- the estimators alone ------------------------------------------------- */

static cdc_status_report_t counters(uint64_t instance, uint64_t flops, uint64_t busy_us)
{
    return (cdc_status_report_t){.max_memory = 1 << 20, .cache_bytes = 4096,
                                 .instance = instance, .busy_us = busy_us, .flops = flops};
}

/* The rate is Δflops / Δbusy between PONGs, the first sample taken as it
   is, then an EWMA; busy spans under 2 ms accumulate; memory comes along. */
START_TEST(test_rate_from_deltas)
{
    cdc_profile_state_t s;
    cdc_worker_profile_t view;
    cdc__profile_state_init(&s);
    cdc__profile_state_view(&s, &view);
    ck_assert(view.gflops == 0.0 && view.mbit == 0.0 && view.rtt_ms < 0);
    cdc_status_report_t st = counters(7, 1000000, 500); /* work from before: the baseline */
    cdc__profile_note_pong(&s, 0.4, &st);
    ck_assert_uint_eq(s.rate_samples, 0);
    st = counters(7, 1000000 + 2000000, 500 + 1000); /* 1 ms busy: not enough yet */
    cdc__profile_note_pong(&s, 0.4, &st);
    ck_assert_uint_eq(s.rate_samples, 0);
    st = counters(7, 1000000 + 4000000, 500 + 2000); /* 2 ms, 4 MFLOP: 2 GFLOP/s */
    cdc__profile_note_pong(&s, 0.4, &st);
    cdc__profile_state_view(&s, &view);
    ck_assert_uint_eq(view.rate_samples, 1);
    ck_assert_double_eq_tol(view.gflops, 2.0, 1e-12);
    ck_assert_double_eq_tol(view.rtt_ms, 0.4, 1e-12);
    ck_assert_uint_eq(view.max_memory, 1 << 20);
    ck_assert_uint_eq(view.cache_bytes, 4096);
    st = counters(7, 5000000 + 6000000, 2500 + 3000); /* 2 GFLOP/s -> 2 + 0.25 (2 - 2) */
    cdc__profile_note_pong(&s, 0.4, &st);
    st = counters(7, 11000000 + 18000000, 5500 + 3000); /* 6 GFLOP/s */
    cdc__profile_note_pong(&s, 0.4, &st);
    cdc__profile_state_view(&s, &view);
    ck_assert_uint_eq(view.rate_samples, 3);
    ck_assert_double_eq_tol(view.gflops, 2.0 + CDC_PROFILE_ALPHA * (6.0 - 2.0), 1e-12);
    /* A PONG without a status (malformed) or a stale round trip (-1) is no sample. */
    cdc__profile_note_pong(&s, -1.0, NULL);
    cdc__profile_state_view(&s, &view);
    ck_assert_uint_eq(view.rate_samples, 3);
    ck_assert_double_eq_tol(view.rtt_ms, 0.4, 1e-12);
}
END_TEST

/* A respawned worker (new instance) starts its counters again: a new
   baseline, estimates kept; counters going backwards without an instance
   (an older worker) do the same. */
START_TEST(test_respawn_resets_baseline)
{
    cdc_profile_state_t s;
    cdc_worker_profile_t view;
    cdc__profile_state_init(&s);
    cdc_status_report_t st = counters(1, 0, 0);
    cdc__profile_note_pong(&s, 1.0, &st);
    st = counters(1, 40000000, 10000); /* 4 GFLOP/s */
    cdc__profile_note_pong(&s, 1.0, &st);
    st = counters(2, 1000, 5); /* another process: small counters, no sample */
    cdc__profile_note_pong(&s, 1.0, &st);
    cdc__profile_state_view(&s, &view);
    ck_assert_uint_eq(view.rate_samples, 1);
    ck_assert_double_eq_tol(view.gflops, 4.0, 1e-12);
    st = counters(2, 1000 + 40000000, 5 + 10000); /* 4 GFLOP/s from its own baseline */
    cdc__profile_note_pong(&s, 1.0, &st);
    cdc__profile_state_view(&s, &view);
    ck_assert_uint_eq(view.rate_samples, 2);
    ck_assert_double_eq_tol(view.gflops, 4.0, 1e-12);
    cdc__profile_state_init(&s); /* instance 0: not reported */
    cdc__profile_note_counters(&s, 0, 50000000, 20000);
    cdc__profile_note_counters(&s, 0, 70000000, 30000); /* 2 GFLOP/s */
    cdc__profile_note_counters(&s, 0, 10, 1);           /* went back: restarted */
    cdc__profile_note_counters(&s, 0, 10 + 8000000, 1 + 2000); /* 4 GFLOP/s */
    ck_assert_uint_eq(s.rate_samples, 2);
    ck_assert_double_eq_tol(s.rate.value, 2.0 + CDC_PROFILE_ALPHA * 2.0, 1e-12);
}
END_TEST

/* Rate samples of `gflops` into s, 3 ms of busy time each. */
static void feed_rate(cdc_profile_state_t *s, double gflops, int samples)
{
    for (int i = 0; i < samples; i++) {
        uint64_t flops = s->base.flops + (uint64_t) (gflops * 3e6);
        cdc__profile_note_counters(s, 1, flops, s->base.busy_us + 3000);
    }
}

/* The generation: bumps on the first measurement, never for one outlier nor
   for samples that scatter around the estimate, and once when the rate
   moves for good (3 samples in a row more than 20 % away on one side),
   the estimate then taking the new level at once. */
START_TEST(test_generation_hysteresis)
{
    cdc_profile_state_t s;
    cdc__profile_state_init(&s);
    cdc__profile_note_counters(&s, 1, 0, 0);
    feed_rate(&s, 10.0, 1);
    ck_assert_uint_eq(s.generation, 1); /* first measured */
    feed_rate(&s, 10.0, 5);
    for (int i = 0; i < 20; i++) /* scattered both ways, 50 % off */
        feed_rate(&s, i % 2 ? 5.0 : 15.0, 1);
    ck_assert_uint_eq(s.generation, 1);
    feed_rate(&s, 30.0, 1); /* one outlier */
    feed_rate(&s, 10.0, 3);
    feed_rate(&s, 30.0, 2); /* two are not a move for good */
    feed_rate(&s, 10.0, 3);
    ck_assert_uint_eq(s.generation, 1);
    feed_rate(&s, 2.5, 2);
    ck_assert_uint_eq(s.generation, 1);
    feed_rate(&s, 2.5, 1); /* 4x slower, a third time: for good */
    ck_assert_uint_eq(s.generation, 2);
    ck_assert_double_eq_tol(s.rate.value, 2.5, 1e-12);
    feed_rate(&s, 2.5, 40); /* settled: no staircase of bumps */
    ck_assert_uint_eq(s.generation, 2);
    ck_assert_double_eq_tol(s.rate.value, 2.5, 1e-12);
    /* A round trip must also move by 1 ms: 0.1 -> 0.8 ms is noise. */
    cdc_profile_state_t r;
    cdc__profile_state_init(&r);
    for (int i = 0; i < 10; i++)
        cdc__profile_note_pong(&r, i ? 0.8 : 0.1, NULL);
    ck_assert_uint_eq(r.generation, 1);
    /* A longer round trip counts once the window holds nothing shorter. */
    for (int i = 0; i < CDC_PROFILE_RTT_WINDOW; i++)
        cdc__profile_note_pong(&r, 5.0, NULL);
    ck_assert_uint_eq(r.generation, 1);
    for (int i = 0; i < 10; i++)
        cdc__profile_note_pong(&r, 5.0, NULL);
    ck_assert_uint_eq(r.generation, 2);
    ck_assert_double_eq_tol(r.rtt.value, 5.0, 1e-12);
    /* A busy worker answers most PINGs after its task (7 ms): the round
       trip stays the idle one's, and nothing moves. */
    cdc_profile_state_t busy;
    cdc__profile_state_init(&busy);
    for (int i = 0; i < 200; i++)
        cdc__profile_note_pong(&busy, i % 5 == 0 ? 0.5 : 7.0, NULL);
    ck_assert_uint_eq(busy.generation, 1);
    ck_assert_double_eq_tol(busy.rtt.value, 0.5, 1e-12);
}
END_TEST

/* The link: comm = elapsed - flops / rate - rtt over the bytes, only with a
   known rate and comm clearly positive. */
START_TEST(test_link_estimate)
{
    cdc_profile_state_t s;
    cdc_worker_profile_t view;
    cdc__profile_state_init(&s);
    cdc__profile_note_transfer(&s, 100.0, 1e6, 0.0, 1e6); /* no rate yet: no sample */
    ck_assert_uint_eq(s.link_samples, 0);
    cdc__profile_note_counters(&s, 1, 0, 0);
    cdc__profile_note_counters(&s, 1, 4000000, 4000); /* 1 GFLOP/s */
    cdc__profile_note_pong(&s, 2.0, NULL);            /* rtt 2 ms */
    /* 20 MFLOP: 20 ms of compute; 2 ms round trip; 80 ms for 1 MB: 100 Mbit/s. */
    cdc__profile_note_transfer(&s, 102.0, 20e6, 0.0, 1e6);
    cdc__profile_state_view(&s, &view);
    ck_assert_uint_eq(view.link_samples, 1);
    ck_assert_double_eq_tol(view.mbit, 100.0, 1e-9);
    /* Compute explains nearly all of it: noise, not a sample. */
    cdc__profile_note_transfer(&s, 22.5, 20e6, 0.0, 1e6);
    cdc__profile_note_transfer(&s, 10.0, 1e6, 0.0, 32768); /* too few bytes to say anything */
    cdc__profile_note_transfer(&s, 10.0, 1e6, 0.0, 1e6); /* 7 ms of 10: a sample, 8 Mbit / 7 ms */
    cdc__profile_state_view(&s, &view);
    ck_assert_uint_eq(view.link_samples, 2);
    ck_assert_double_eq_tol(view.mbit, 100.0 + CDC_PROFILE_ALPHA * (8e6 / 7e3 - 100.0), 1e-9);
}
END_TEST

/* Queueing only makes a link look slower: a slow sample among fast ones
   (a call that waited behind weights) leaves the estimate alone, while a
   link that stays slow for a window's worth of samples is taken. */
START_TEST(test_link_window_max)
{
    cdc_profile_state_t s;
    cdc_worker_profile_t view;
    cdc__profile_state_init(&s);
    cdc__profile_note_counters(&s, 1, 0, 0);
    cdc__profile_note_counters(&s, 1, 4000000, 4000); /* 1 GFLOP/s */
    cdc__profile_note_pong(&s, 2.0, NULL);
    cdc__profile_note_transfer(&s, 102.0, 20e6, 0.0, 1e6); /* 100 Mbit/s */
    for (int i = 0; i < 3; i++)
        cdc__profile_note_transfer(&s, 822.0, 20e6, 0.0, 1e6); /* 10 Mbit/s: queued */
    cdc__profile_state_view(&s, &view);
    ck_assert_double_eq_tol(view.mbit, 100.0, 1e-9);
    uint64_t generation = view.generation;
    for (int i = 0; i < CDC_PROFILE_LINK_WINDOW; i++)
        cdc__profile_note_transfer(&s, 822.0, 20e6, 0.0, 1e6);
    cdc__profile_state_view(&s, &view);
    ck_assert_double_eq_tol(view.mbit, 10.0, 1e-9); /* the new level, at once */
    ck_assert_uint_eq(view.generation, generation + 1);
}
END_TEST

/* A cut call (the worker's tasks still pending when the call ended, issue
   26): the wait is a lower bound on their time, so an upper bound on the
   link. A device that is never waited for is measured from those bounds;
   a bound the estimate already respects says nothing. */
START_TEST(test_link_bound_from_cut_calls)
{
    cdc_profile_state_t s;
    cdc_worker_profile_t view;
    cdc__profile_state_init(&s);
    cdc__profile_note_cut(&s, 100.0, 1e6, 0.0, 1e6); /* no rate yet: nothing */
    ck_assert_uint_eq(s.link_samples, 0);
    cdc__profile_note_counters(&s, 1, 0, 0);
    cdc__profile_note_counters(&s, 1, 4000000, 4000); /* 1 GFLOP/s */
    cdc__profile_note_pong(&s, 2.0, NULL);            /* rtt 2 ms */
    /* Never measured (a free link to the predictor), cut at 102 ms: 20 ms of
       compute, 2 ms round trip, so 1 MB took more than 80 ms: < 100 Mbit/s. */
    cdc__profile_note_cut(&s, 102.0, 20e6, 0.0, 1e6);
    cdc__profile_state_view(&s, &view);
    ck_assert_uint_eq(view.link_samples, 1);
    ck_assert_double_eq_tol(view.mbit, 100.0, 1e-9);
    uint64_t generation = view.generation;
    /* A looser bound (cut sooner): the estimate already says slower; it
       agrees, a sample at the estimate. */
    cdc__profile_note_cut(&s, 52.0, 20e6, 0.0, 1e6);
    cdc__profile_state_view(&s, &view);
    ck_assert_uint_eq(view.link_samples, 2);
    ck_assert_double_eq_tol(view.mbit, 100.0, 1e-9);
    /* Compute alone explains the wait: nothing. */
    cdc__profile_note_cut(&s, 21.0, 20e6, 0.0, 1e6);
    ck_assert_uint_eq(s.link_samples, 2);
    /* Tighter bounds, calls in a row: < 10 Mbit/s. The window's faster
       sample is contradicted, so the estimate takes the new level as
       completed calls would (test_link_window_max), after PERSIST of them,
       not a window's worth. */
    for (int i = 0; i < CDC_PROFILE_PERSIST; i++)
        cdc__profile_note_cut(&s, 822.0, 20e6, 0.0, 1e6);
    cdc__profile_state_view(&s, &view);
    ck_assert_double_eq_tol(view.mbit, 10.0, 1e-9);
    ck_assert_uint_eq(view.generation, generation + 1);
    /* Then it completes calls at its real speed, 4 Mbit/s: measured, once
       the window holds no bound (the window's largest is what counts). */
    for (int i = 0; i < CDC_PROFILE_LINK_WINDOW + CDC_PROFILE_PERSIST; i++)
        cdc__profile_note_transfer(&s, 2022.0, 20e6, 0.0, 1e6);
    cdc__profile_state_view(&s, &view);
    ck_assert_double_eq_tol(view.mbit, 4.0, 1e-9);
}
END_TEST

/* The predictor, and what it assumes when something is not measured. */
START_TEST(test_predict_defaults)
{
    cdc_worker_profile_t p = {.gflops = 2.0, .mbit = 80.0, .rtt_ms = 0.5, .rate_samples = 3};
    /* 0.5 + 8 * 1e6 / 80e6 * 1e3 (100) + 4e9 / 2e9 * 1e3 (2000) */
    ck_assert_double_eq_tol(cdc__profile_predict_ms(&p, 4e9, 0.0, 6e5, 4e5), 2100.5, 1e-9);
    cdc_worker_profile_t unknown = {.gflops = 0.0, .mbit = 0.0, .rtt_ms = -1.0};
    /* Free link, no round trip, the nominal rate. */
    ck_assert_double_eq_tol(cdc__profile_predict_ms(&unknown, 3e9, 0.0, 1e9, 1e9),
                            3e9 / (CDC_PROFILE_NOMINAL_GFLOPS * 1e9) * 1e3, 1e-9);
    cdc_worker_profile_t set[3] = {p, unknown, p};
    set[2].gflops = 4.0;
    cdc__profile_assume_rates(set, 3);
    ck_assert_double_eq_tol(set[1].gflops, 3.0, 1e-12); /* the mean of those measured */
    ck_assert_uint_eq(set[1].rate_samples, 0);          /* still tells it apart */
    ck_assert_double_eq_tol(set[0].gflops, 2.0, 1e-12);
    cdc_worker_profile_t none[2] = {unknown, unknown};
    cdc__profile_assume_rates(none, 2);
    ck_assert_double_eq_tol(none[0].gflops, CDC_PROFILE_NOMINAL_GFLOPS, 1e-12);
}
END_TEST

/* A fresh state after a baseline PONG of process `instance` and then one
   reporting flops in busy_us, of which thin_flops in thin_busy_us
   streaming thin_bytes; that report into *last. */
static void thin_reported(cdc_profile_state_t *s, uint64_t instance, uint64_t flops,
                          uint64_t busy_us, uint64_t thin_flops, uint64_t thin_busy_us,
                          uint64_t thin_bytes, cdc_status_report_t *last)
{
    cdc__profile_state_init(s);
    *last = counters(instance, 0, 0);
    cdc__profile_note_pong(s, -1, last);
    *last = counters(instance, flops, busy_us);
    last->thin_flops = thin_flops;
    last->thin_busy_us = thin_busy_us;
    last->thin_bytes = thin_bytes;
    cdc__profile_note_pong(s, -1, last);
}

/* Thin work since r: its counters advanced, reported to s. */
static void thin_more(cdc_profile_state_t *s, cdc_status_report_t *r, uint64_t flops,
                      uint64_t bytes, uint64_t busy_us)
{
    r->busy_us += busy_us;
    r->thin_busy_us += busy_us;
    r->flops += flops;
    r->thin_flops += flops;
    r->thin_bytes += bytes;
    cdc__profile_note_pong(s, -1, r);
}

/* A roofline per worker: the thin tasks' counters (status.h) give the
   bandwidth and stay out of the rate (but for a device that computed
   nothing else yet); a prediction is the larger of the two terms; a link
   sample leaves the memory's time out of the link; a report whose thin
   part exceeds its whole counts whole; a bandwidth no memory has makes
   the worker implausible. */
START_TEST(test_roofline_estimates)
{
    /* 32 MFLOP in 8 ms (4 GFLOP/s), and 8 MB streamed in 8 ms (1 GB/s) by
       thin tasks of 4 MFLOP (which alone would say 0.25 GFLOP/s). */
    cdc_profile_state_t s;
    cdc_status_report_t r;
    thin_reported(&s, 1, 36000000, 16000, 4000000, 8000, 8000000, &r);
    cdc_worker_profile_t p;
    cdc__profile_state_view(&s, &p);
    ck_assert_double_eq_tol(p.gflops, 4.0, 1e-9);
    ck_assert_double_eq_tol(p.gbps, 1.0, 1e-9);
    ck_assert_uint_eq(p.rate_samples, 1);
    ck_assert_uint_eq(p.stream_samples, 1);
    /* Thin work only since: a bandwidth sample (0.5 GB/s), the rate kept. */
    thin_more(&s, &r, 1000000, 2000000, 4000);
    cdc__profile_state_view(&s, &p);
    ck_assert_double_eq_tol(p.gflops, 4.0, 1e-9);
    ck_assert_uint_eq(p.rate_samples, 1);
    ck_assert_double_eq_tol(p.gbps, 1.0 + CDC_PROFILE_ALPHA * (0.5 - 1.0), 1e-9);
    ck_assert_uint_eq(p.stream_samples, 2);
    /* The larger term: a matrix-vector product's bytes, a GEMM's flops. */
    ck_assert_double_eq_tol(cdc__profile_predict_ms(&p, 2e6, 4e6, 0.0, 0.0), 4e6 / (p.gbps * 1e6),
                            1e-9);
    ck_assert_double_eq_tol(cdc__profile_predict_ms(&p, 4e9, 1e6, 0.0, 0.0), 1000.0, 1e-9);
    /* 20 ms for 1 MB moved and 8 MB streamed at 0.875 GB/s (9.14 ms): the
       link had the other 10.86 ms, not the 19.5 the flops alone leave. */
    cdc__profile_note_transfer(&s, 20.0, 2e6, 8e6, 1e6);
    cdc__profile_state_view(&s, &p);
    ck_assert_uint_eq(p.link_samples, 1);
    ck_assert_double_eq_tol(p.mbit, 8.0 * 1e6 / ((20.0 - 8e6 / (0.875 * 1e6)) * 1e3), 1e-6);

    /* Thin tasks only: their rate (8 MFLOP in 8 ms) stands for the device's
       until a task that is not thin gives one (12 MFLOP in 4 ms). */
    cdc_profile_state_t gemv;
    thin_reported(&gemv, 4, 8000000, 8000, 8000000, 8000, 16000000, &r);
    cdc__profile_state_view(&gemv, &p);
    ck_assert_double_eq_tol(p.gflops, 1.0, 1e-9);
    ck_assert_double_eq_tol(p.gbps, 2.0, 1e-9);
    ck_assert_uint_eq(p.rate_samples, 1);
    r.flops += 12000000;
    r.busy_us += 4000;
    cdc__profile_note_pong(&gemv, -1, &r);
    cdc__profile_state_view(&gemv, &p);
    ck_assert_double_eq_tol(p.gflops, 3.0, 1e-9); /* replaced, not averaged */
    ck_assert_uint_eq(p.rate_samples, 1);
    /* They ran at a third of it: bound by memory, their sample stands. */
    ck_assert_uint_eq(p.stream_samples, 1);
    ck_assert(!p.gbps_floor);

    /* A thin part larger than the whole: every task counted for the rate. */
    cdc_profile_state_t odd;
    thin_reported(&odd, 2, 8000000, 4000, 0, 5000, 1000000, &r);
    cdc__profile_state_view(&odd, &p);
    ck_assert_double_eq_tol(p.gflops, 2.0, 1e-9);
    ck_assert_uint_eq(p.stream_samples, 0);

    /* 100 TB/s: no memory streams that; nothing it says of its speed holds. */
    cdc_profile_state_t liar;
    thin_reported(&liar, 3, 8000000, 4000 + 2000, 0, 2000, (uint64_t) 2e14, &r);
    cdc__profile_state_view(&liar, &p);
    ck_assert(p.implausible);
    ck_assert_uint_eq(p.rate_samples + p.stream_samples, 0);
    ck_assert(p.gflops == 0.0 && p.gbps == 0.0);

    /* Unmeasured bandwidths are assumed the mean of the measured; none
       measured, none assumed (no memory term). */
    cdc_worker_profile_t set[3] = {{.gbps = 1.0, .stream_samples = 1},
                                   {.gbps = 0.0},
                                   {.gbps = 3.0, .stream_samples = 2}};
    cdc__profile_assume_rates(set, 3);
    ck_assert_double_eq_tol(set[1].gbps, 2.0, 1e-12);
    cdc_worker_profile_t none[2] = {{.gflops = 1.0, .rate_samples = 1}, {.gbps = 0.0}};
    cdc__profile_assume_rates(none, 2);
    ck_assert(none[0].gbps == 0.0 && none[1].gbps == 0.0);
}
END_TEST

/* Thin tasks that ran at the device's own flop rate were bound by its
   arithmetic (a conv layer's 4 filters against 3,025 pixels): what they
   streamed is a floor, the bandwidth the plan uses while no sample is
   taken, never a sample (the calibration still measures); one that ran
   slower measures the memory, and floors no longer count. Samples taken
   before the rate was known become a floor once it shows they ran at it. */
START_TEST(test_bandwidth_floor)
{
    /* 32 MFLOP in 8 ms (4 GFLOP/s); thin: 16 MFLOP streaming 8 MB in 4 ms
       (4 GFLOP/s: at the rate; 2 GB/s at least). */
    cdc_profile_state_t s;
    cdc_status_report_t r;
    thin_reported(&s, 1, 48000000, 12000, 16000000, 4000, 8000000, &r);
    cdc_worker_profile_t p;
    cdc__profile_state_view(&s, &p);
    ck_assert_double_eq_tol(p.gflops, 4.0, 1e-9);
    ck_assert_double_eq_tol(p.gbps, 2.0, 1e-9);
    ck_assert_uint_eq(p.stream_samples, 0);
    ck_assert(p.gbps_floor);
    uint64_t generation = p.generation;
    /* At the rate again: 4 MB in 4 ms, a lower floor, changes nothing;
       32 MB in 4 ms raises it to 8 GB/s, a move that counts. */
    thin_more(&s, &r, 16000000, 4000000, 4000);
    cdc__profile_state_view(&s, &p);
    ck_assert_double_eq_tol(p.gbps, 2.0, 1e-9);
    ck_assert_uint_eq(p.generation, generation);
    thin_more(&s, &r, 16000000, 32000000, 4000);
    cdc__profile_state_view(&s, &p);
    ck_assert_double_eq_tol(p.gbps, 8.0, 1e-9);
    ck_assert(p.gbps_floor && p.stream_samples == 0);
    ck_assert_uint_gt(p.generation, generation);
    /* 2 MFLOP streaming 4 MB in 4 ms: 0.5 GFLOP/s, an eighth of the rate:
       the memory's 1 GB/s, a sample, which the floor no longer overrides. */
    thin_more(&s, &r, 2000000, 4000000, 4000);
    cdc__profile_state_view(&s, &p);
    ck_assert_double_eq_tol(p.gbps, 1.0, 1e-9);
    ck_assert_uint_eq(p.stream_samples, 1);
    ck_assert(!p.gbps_floor);
    ck_assert_double_eq_tol(p.gflops, 4.0, 1e-9); /* the rate kept */

    /* Thin tasks only (8 MFLOP streaming 16 MB in 8 ms: 1 GFLOP/s, 2 GB/s),
       then a task that is not thin at 1.1 GFLOP/s: they ran at the rate, so
       their sample becomes a floor. */
    cdc_profile_state_t early;
    thin_reported(&early, 2, 8000000, 8000, 8000000, 8000, 16000000, &r);
    cdc__profile_state_view(&early, &p);
    ck_assert_uint_eq(p.stream_samples, 1);
    r.flops += 11000000;
    r.busy_us += 10000;
    cdc__profile_note_pong(&early, -1, &r);
    cdc__profile_state_view(&early, &p);
    ck_assert_double_eq_tol(p.gflops, 1.1, 1e-9);
    ck_assert_double_eq_tol(p.gbps, 2.0, 1e-9);
    ck_assert_uint_eq(p.stream_samples, 0);
    ck_assert(p.gbps_floor);
}
END_TEST

/* The table: per worker, out-of-range indexes ignored, the coordinator's own. */
START_TEST(test_table)
{
    cdc_profile_t *table = NULL;
    ck_assert_int_eq(cdc__profile_new(&table), CDC_OK);
    cdc_status_report_t st = counters(3, 0, 0);
    cdc__profile_pong(table, 2, 0.25, &st);
    cdc__profile_pong(table, -1, 0.25, &st);
    cdc__profile_pong(table, CDC_MAX_WORKERS, 0.25, &st);
    st = counters(3, 6000000, 3000);
    cdc__profile_pong(table, 2, 0.25, &st);
    cdc__profile_self(table, 100, 10);
    cdc__profile_self(table, 100 + 30000000, 10 + 10000); /* 3 GFLOP/s */
    cdc_worker_profile_t out[4], self;
    cdc__profile_snapshot(table, out, 4, &self);
    ck_assert(out[0].rtt_ms < 0 && out[0].rate_samples == 0);
    ck_assert_double_eq_tol(out[2].gflops, 2.0, 1e-12);
    ck_assert_double_eq_tol(out[2].rtt_ms, 0.25, 1e-12);
    ck_assert_double_eq_tol(self.gflops, 3.0, 1e-12);
    ck_assert(self.live && self.rtt_ms == 0.0 && self.mbit == 0.0);
    cdc__profile_destroy(&table);
    ck_assert_ptr_null(table);
    cdc__profile_destroy(&table);
}
END_TEST

/* ---- a real worker's PONG ------------------------------------------------- */

/* A TASK_D-cube GEMM: 2 TASK_D^3 flops (4.2 MFLOP): 8.4 ms at 0.5 GFLOP/s,
   several times this machine's real compute of it. */
#define TASK_D 128
#define TASKS 10

typedef struct {
    pid_t pid;
    char dir[40], endpoint[80];
    void *zmq, *socket;
} solo_t;

static void solo_start(solo_t *s, const char *faults)
{
    cdc_test_temp_dir(s->dir, sizeof s->dir, "cdc-profile");
    snprintf(s->endpoint, sizeof s->endpoint, "ipc://%s/w", s->dir);
    cdc_test_worker_t w = {.bin = CDC_WORKER_BIN, .endpoint = s->endpoint, .threads = 1,
                           .parent = 1, .log = "error", .faults = faults};
    s->pid = cdc_test_worker_run(&w);
    s->zmq = zmq_ctx_new();
    s->socket = cdc_test_dealer(s->zmq, s->endpoint, NULL, NULL);
}

static void solo_stop(solo_t *s)
{
    zmq_close(s->socket);
    zmq_ctx_term(s->zmq);
    cdc_test_worker_stop(s->pid, 30.0);
    cdc_test_temp_dir_remove(s->dir);
}

/* The next message within 10 s: its header, and its first payload frame as
   a status report when it is a PONG. */
static cdc_msg_header_t solo_recv(solo_t *s, cdc_status_report_t *status)
{
    cdc_msg_header_t h;
    memset(&h, 0, sizeof h);
    zmq_pollitem_t item = {s->socket, 0, ZMQ_POLLIN, 0};
    ck_assert_int_eq(zmq_poll(&item, 1, 10000), 1);
    zmq_msg_t part;
    zmq_msg_init(&part);
    zmq_msg_recv(&part, s->socket, 0);
    cdc__msg_header_unpack(zmq_msg_data(&part), zmq_msg_size(&part), &h);
    for (int frame = 1; zmq_msg_more(&part); frame++) {
        zmq_msg_close(&part);
        zmq_msg_init(&part);
        zmq_msg_recv(&part, s->socket, 0);
        if (frame == 1 && h.type == CDC_MSG_PONG && status)
            ck_assert_int_eq(cdc__status_parse(zmq_msg_data(&part), zmq_msg_size(&part), status),
                             CDC_OK);
    }
    zmq_msg_close(&part);
    return h;
}

/* A heartbeat PING answered: the worker's status now. */
static cdc_status_report_t solo_status(solo_t *s)
{
    uint8_t packed[CDC_PROTO_HEADER_SIZE];
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_PING);
    h.request_id = 1;
    cdc__msg_header_pack(&h, packed);
    ck_assert_int_eq(zmq_send(s->socket, packed, sizeof packed, 0), (int) sizeof packed);
    cdc_status_report_t status;
    memset(&status, 0, sizeof status);
    while (solo_recv(s, &status).type != CDC_MSG_PONG)
        ;
    return status;
}

/* TASKS tasks of rows x k x cols with inline operands, every RESULT
   awaited. */
static void solo_tasks_shaped(solo_t *s, int rows, int k, int cols)
{
    size_t a_floats = (size_t) rows * k, bt_floats = (size_t) cols * k;
    float *m = cdc_test_alloc((a_floats + bt_floats) * sizeof(float));
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 3);
    cdc_test_fill_uniform(&rng, m, a_floats + bt_floats);
    for (int i = 0; i < TASKS; i++) {
        cdc_msg_header_t h;
        uint8_t packed[CDC_PROTO_HEADER_SIZE];
        cdc__msg_header_init(&h, CDC_MSG_TASK_GEMM);
        h.request_id = 10 + (uint64_t) i;
        h.rows = (uint64_t) rows;
        h.k = (uint64_t) k;
        h.cols = (uint64_t) cols;
        cdc__msg_header_pack(&h, packed);
        zmq_send(s->socket, packed, sizeof packed, ZMQ_SNDMORE);
        zmq_send(s->socket, m, a_floats * sizeof(float), ZMQ_SNDMORE);
        zmq_send(s->socket, m + a_floats, bt_floats * sizeof(float), 0);
    }
    for (int done = 0; done < TASKS;)
        done += solo_recv(s, NULL).type == CDC_MSG_RESULT;
    free(m);
}

/* TASKS cube tasks. */
static void solo_tasks(solo_t *s)
{
    solo_tasks_shaped(s, TASK_D, TASK_D, TASK_D);
}

/* The worker's busy_us and flops: 0 before any task; after TASKS tasks the
   flops exactly, busy_us their compute time; with slow@w0:gflops=0.5 their
   ratio that rate, a link fault on top adding nothing to busy_us. */
START_TEST(test_worker_reports_work)
{
    static const struct {
        const char *faults;
        double gflops; /* 0: no slow fault, any rate */
    } cases[] = {{NULL, 0.0},
                 {"slow@w0:gflops=0.5", 0.5},
                 {"slow@w0:gflops=0.5;link@w0:mbit=40", 0.5}};
    const double task_flops = 2.0 * TASK_D * TASK_D * TASK_D;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        solo_t s;
        solo_start(&s, cases[c].faults);
        cdc_status_report_t before = solo_status(&s);
        ck_assert_uint_eq(before.busy_us, 0);
        ck_assert_uint_eq(before.flops, 0);
        ck_assert_uint_ne(before.instance, 0);
        solo_tasks(&s);
        /* Counted as each RESULT leaves (tasks, from the compute thread,
           may still be one behind). */
        cdc_status_report_t after = solo_status(&s);
        ck_assert_uint_eq(after.flops, (uint64_t) (TASKS * task_flops));
        ck_assert_uint_gt(after.busy_us, 0);
        double gflops = (double) after.flops / ((double) after.busy_us * 1e3);
        if (getenv("CDC_TEST_LOG"))
            fprintf(stderr, "worker %s: %llu us busy, %.3f GFLOP/s\n",
                    cases[c].faults ? cases[c].faults : "(no faults)",
                    (unsigned long long) after.busy_us, gflops);
        /* Emulated: exactly the rate, unless the loaded host computed slower
           still; link time (40 Mbit/s: 39 ms a task, more than the compute)
           would show as a rate under 0.15. */
        if (cases[c].gflops > 0)
            ck_assert_msg(gflops > 0.7 * cases[c].gflops && gflops < 1.05 * cases[c].gflops,
                          "%s: %.3f GFLOP/s", cases[c].faults, gflops);
        solo_stop(&s);
    }
}
END_TEST

/* Thin tasks (status.h) apart: a worker emulating a memory-bound device
   (4 GFLOP/s, 1 GB/s) after cube tasks (compute-bound: 1.05 ms each) and
   matrix-vector products of a 1024 x 1024 matrix (4.2 MB streamed: 4.2 ms
   each, where their flops alone would take 0.5) reports the second kind's
   work, bytes and time apart: the rate of the first kind and the bandwidth
   of the second are what the device was given. */
START_TEST(test_worker_reports_thin_work)
{
    enum { GEMV_ROWS = 1024, GEMV_K = 1024 };
    solo_t s;
    solo_start(&s, "slow@w0:gflops=4,gbps=1");
    solo_tasks(&s);
    cdc_status_report_t thick = solo_status(&s);
    ck_assert_uint_eq(thick.thin_busy_us, 0);
    ck_assert_uint_eq(thick.thin_flops, 0);
    solo_tasks_shaped(&s, GEMV_ROWS, GEMV_K, 1);
    cdc_status_report_t after = solo_status(&s);
    double thin_bytes = (double) TASKS * (GEMV_ROWS + 1) * GEMV_K * sizeof(float);
    ck_assert_uint_eq(after.thin_flops, (uint64_t) TASKS * 2 * GEMV_ROWS * GEMV_K);
    ck_assert_uint_eq(after.thin_bytes, (uint64_t) thin_bytes);
    ck_assert_uint_eq(after.flops - after.thin_flops, thick.flops);
    double gbps = (double) after.thin_bytes / ((double) after.thin_busy_us * 1e3);
    double gflops = (double) (after.flops - after.thin_flops) /
                    ((double) (after.busy_us - after.thin_busy_us) * 1e3);
    /* Emulated: exactly, unless the loaded host was slower still. */
    ck_assert_msg(gbps > 0.7 && gbps < 1.05, "%.3f GB/s", gbps);
    ck_assert_msg(gflops > 2.8 && gflops < 4.2, "%.3f GFLOP/s", gflops);
    solo_stop(&s);
}
END_TEST

/* ---- the coordinator's profile of embedded workers ------------------------ */

/* A 2048 x 1024 FC layer at batch 32 over 4 workers (r = 0): each shard
   512 rows, 33.5 MFLOP (33.5 ms at 1 GFLOP/s, 134 ms at 0.25), 2 MB of
   weights once, then 128 KB of input out and 64 KB of result back per call
   (96 ms at 16 Mbit/s). */
enum { OUT = 2048, IN = 1024, BATCH = 32, WORKERS = 4 };
static const char mix[] = "slow@w0:gflops=1;slow@w1:gflops=0.25;slow@w2:gflops=1;"
                          "slow@w3:gflops=1;link@w2:mbit=16";

static cdc_context_t *embedded_context(const char *faults, const char *stats_path)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.local_workers = WORKERS;
    config.parity = 0;
    config.plan = CDC_PLAN_EQUAL; /* every call measures the workers: none planned here */
    config.timeout_ms = 20000;
    config.log_level = getenv("CDC_TEST_LOG") ? CDC_LOG_INFO : CDC_LOG_ERROR;
    snprintf(config.faults, sizeof config.faults, "%s", faults);
    if (stats_path)
        snprintf(config.stats_path, sizeof config.stats_path, "%s", stats_path);
    cdc_context_t *context = NULL;
    int rc = cdc_context_new(&config, &context);
    ck_assert_msg(rc == CDC_OK, "cdc_context_new: %s", cdc_last_error());
    return context;
}

static cdc_layer_t *fc_layer(cdc_context_t *context, float **x, float **y)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 12);
    float *w = cdc_test_alloc(sizeof(float) * OUT * IN);
    *x = cdc_test_alloc(sizeof(float) * BATCH * IN);
    *y = cdc_test_alloc(sizeof(float) * BATCH * OUT);
    cdc_test_fill_uniform(&rng, w, (size_t) OUT * IN);
    cdc_test_fill_uniform(&rng, *x, (size_t) BATCH * IN);
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = CDC_SPLIT_ROWS;
    cdc_layer_t *layer = NULL;
    ck_assert_int_eq(cdc_fc_new(context, OUT, IN, w, NULL, &options, &layer), CDC_OK);
    free(w);
    return layer;
}

/* Whether the profile has what the assertions need: rate samples from
   every worker, link samples from the slow link. */
static int profile_formed(const cdc_worker_profile_t *p)
{
    for (int w = 0; w < WORKERS; w++)
        if (p[w].rate_samples < 5)
            return 0;
    return p[2].link_samples >= 3;
}

/* The coordinator ranks w1 about 4x slower than the others, and w2's link
   (16 Mbit/s) slower than any other it measured; every worker is live with
   its budget and cache use; CDCGEMM_STATS writes the profile out. */
START_TEST(test_profile_ranks_faulty_workers)
{
    char stats_path[] = "/tmp/cdc-profile-stats-XXXXXX";
    cdc_test_temp_file(stats_path);
    cdc_context_t *context = embedded_context(mix, stats_path);
    float *x, *y;
    cdc_layer_t *layer = fc_layer(context, &x, &y);
    cdc_worker_profile_t p[CDC_MAX_WORKERS];
    double start = cdc_test_now_s();
    int calls = 0;
    do {
        ck_assert_int_eq(cdc_fc_forward(layer, BATCH, x, y), CDC_OK);
        calls++;
        cdc_test_sleep_ms(20); /* a heartbeat or two between calls */
        ck_assert_int_eq(cdc__context_profile(context, p, CDC_MAX_WORKERS), WORKERS);
    } while (!profile_formed(p) && calls < 80 && cdc_test_now_s() - start < 60);
    for (int w = 0; w < WORKERS; w++)
        if (getenv("CDC_TEST_LOG"))
            fprintf(stderr, "w%d: %.3f GFLOP/s (%llu), %.1f Mbit/s (%llu), rtt %.2f ms, gen %llu\n",
                    w, p[w].gflops, (unsigned long long) p[w].rate_samples, p[w].mbit,
                    (unsigned long long) p[w].link_samples, p[w].rtt_ms,
                    (unsigned long long) p[w].generation);
    ck_assert_msg(profile_formed(p), "after %d calls in %.1f s: samples %llu %llu %llu %llu, "
                  "w2 link %llu", calls, cdc_test_now_s() - start,
                  (unsigned long long) p[0].rate_samples, (unsigned long long) p[1].rate_samples,
                  (unsigned long long) p[2].rate_samples, (unsigned long long) p[3].rate_samples,
                  (unsigned long long) p[2].link_samples);
    double others = (p[0].gflops + p[2].gflops + p[3].gflops) / 3.0;
    for (int w = 0; w < WORKERS; w++) {
        ck_assert(p[w].live);
        ck_assert_uint_eq(p[w].max_memory, (uint64_t) 1 << 30); /* the default --max-memory */
        ck_assert_uint_gt(p[w].cache_bytes, (uint64_t) OUT / WORKERS * IN * sizeof(float));
        ck_assert(p[w].rtt_ms >= 0);
        ck_assert_uint_ge(p[w].generation, 1);
        if (w != 1)
            ck_assert_msg(p[w].gflops > 2.0 * p[1].gflops, "w%d %.3f vs w1 %.3f GFLOP/s", w,
                          p[w].gflops, p[1].gflops);
    }
    /* Injected 4x; the host's own compute time only lowers the fast ones. */
    ck_assert_msg(others / p[1].gflops > 2.5 && others / p[1].gflops < 5.0,
                  "others %.3f, w1 %.3f GFLOP/s", others, p[1].gflops);
    ck_assert_msg(p[2].mbit > 16.0 / 3 && p[2].mbit < 16.0 * 1.5, "w2 link %.1f Mbit/s",
                  p[2].mbit);
    for (int w = 0; w < WORKERS; w++)
        if (w != 2)
            ck_assert_msg(p[w].mbit == 0.0 || p[w].mbit > 2.0 * p[2].mbit,
                          "w%d %.1f vs w2 %.1f Mbit/s", w, p[w].mbit, p[2].mbit);
    cdc_layer_destroy(&layer);
    cdc_context_destroy(&context);
    char text[8192];
    cdc_test_read_text(stats_path, text, sizeof text);
    unlink(stats_path);
    ck_assert_msg(strstr(text, "\"profile\": [{\"worker\": 0, \"live\": true, \"gflops\": ") &&
                      strstr(text, "{\"worker\": 3, ") && !strstr(text, "{\"worker\": 4, ") &&
                      strstr(text, "\"link_samples\": ") &&
                      strstr(text, "\"coordinator_profile\": {\"gflops\": "),
                  "%s", text);
    free(x);
    free(y);
}
END_TEST

/* The coordinator's own CPU: shards it computes itself (every shard
   erased: the call falls back) give it a rate. */
START_TEST(test_profile_of_coordinator)
{
    cdc_context_t *context = embedded_context("", NULL);
    float *x, *y;
    cdc_layer_t *layer = fc_layer(context, &x, &y);
    cdc_worker_profile_t self;
    ck_assert_int_eq(cdc__context_profile_self(context, &self), CDC_OK);
    ck_assert_uint_eq(self.rate_samples, 0);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(cdc_context_erase_next(context, (UINT64_C(1) << WORKERS) - 1), CDC_OK);
        ck_assert_int_eq(cdc_fc_forward(layer, BATCH, x, y), CDC_OK);
        ck_assert_int_eq(cdc__context_profile_self(context, &self), CDC_OK);
    }
    cdc_stats_t stats;
    ck_assert_int_eq(cdc_context_stats(context, &stats), CDC_OK);
    ck_assert_uint_eq(stats.fallbacks, 3);
    ck_assert_uint_ge(self.rate_samples, 1);
    ck_assert(self.gflops > 0.0 && self.live && self.rtt_ms == 0.0);
    if (getenv("CDC_TEST_LOG"))
        fprintf(stderr, "coordinator: %.2f GFLOP/s\n", self.gflops);
    cdc_layer_destroy(&layer);
    cdc_context_destroy(&context);
    /* The in-process executor has no profile. */
    cdc_config_t config;
    cdc_config_init(&config);
    config.in_process = 1;
    ck_assert_int_eq(cdc_context_new(&config, &context), CDC_OK);
    cdc_worker_profile_t p[4];
    ck_assert_int_eq(cdc__context_profile(context, p, 4), 0);
    ck_assert_int_eq(cdc__context_profile_self(context, &self), CDC_EINVAL);
    cdc_context_destroy(&context);
    free(x);
    free(y);
}
END_TEST

static Suite *profile_suite(void)
{
    Suite *suite = suite_create("profile");
    TCase *pure = tcase_create("estimators");
    tcase_add_test(pure, test_rate_from_deltas);
    tcase_add_test(pure, test_respawn_resets_baseline);
    tcase_add_test(pure, test_generation_hysteresis);
    tcase_add_test(pure, test_link_estimate);
    tcase_add_test(pure, test_link_window_max);
    tcase_add_test(pure, test_link_bound_from_cut_calls);
    tcase_add_test(pure, test_predict_defaults);
    tcase_add_test(pure, test_roofline_estimates);
    tcase_add_test(pure, test_bandwidth_floor);
    tcase_add_test(pure, test_table);
    suite_add_tcase(suite, pure);
    TCase *live = tcase_create("live");
    tcase_add_test(live, test_worker_reports_work);
    tcase_add_test(live, test_worker_reports_thin_work);
    tcase_add_test(live, test_profile_ranks_faulty_workers);
    tcase_add_test(live, test_profile_of_coordinator);
    tcase_set_timeout(live, 120);
    suite_add_tcase(suite, live);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(profile_suite());
}
