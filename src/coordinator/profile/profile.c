/* profile.c - the workers' live profiles: estimators (pure) and the table
 * the heartbeat and calling threads share (profile.h). */
#include "profile.h"

#include "error.h"
#include "log.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

double cdc__profile_compute_ms(const cdc_worker_profile_t *p, double flops, double streamed)
{
    double gflops = p->gflops > 0 ? p->gflops : CDC_PROFILE_NOMINAL_GFLOPS;
    double ms = flops / (gflops * 1e6);
    return p->gbps > 0 ? fmax(ms, streamed / (p->gbps * 1e6)) : ms;
}

double cdc__profile_predict_ms(const cdc_worker_profile_t *p, double flops, double streamed,
                               double bytes_out, double bytes_in)
{
    double ms = p->rtt_ms > 0 ? p->rtt_ms : 0.0;
    if (p->mbit > 0)
        ms += 8.0 * (bytes_out + bytes_in) / (p->mbit * 1e6) * 1e3;
    return ms + cdc__profile_compute_ms(p, flops, streamed);
}

/* Each of count estimates (*value[i], with samples[i] samples) that has
   none made the mean of the measured ones, or `none` when none is; an
   implausible worker's, the least measured. */
static void assume_mean(double *const *value, const uint64_t *samples, const int *implausible,
                        int count, double none)
{
    double sum = 0.0, least = INFINITY;
    int measured = 0;
    for (int i = 0; i < count; i++)
        if (samples[i] > 0 && *value[i] > 0) {
            sum += *value[i];
            least = fmin(least, *value[i]);
            measured++;
        }
    double assumed = measured ? sum / measured : none;
    for (int i = 0; i < count; i++)
        if (samples[i] == 0)
            *value[i] = implausible[i] && measured ? least : assumed;
}

void cdc__profile_assume_rates(cdc_worker_profile_t *profiles, int count)
{
    double *rate[CDC_MAX_WORKERS], *stream[CDC_MAX_WORKERS];
    uint64_t rate_samples[CDC_MAX_WORKERS], stream_samples[CDC_MAX_WORKERS];
    int implausible[CDC_MAX_WORKERS];
    count = count < CDC_MAX_WORKERS ? count : CDC_MAX_WORKERS;
    for (int i = 0; i < count; i++) {
        rate[i] = &profiles[i].gflops;
        stream[i] = &profiles[i].gbps;
        rate_samples[i] = profiles[i].rate_samples;
        /* a floor is kept (and counts toward the others' assumed one) */
        stream_samples[i] = profiles[i].stream_samples + (uint64_t) profiles[i].gbps_floor;
        implausible[i] = profiles[i].implausible;
    }
    assume_mean(rate, rate_samples, implausible, count, CDC_PROFILE_NOMINAL_GFLOPS);
    assume_mean(stream, stream_samples, implausible, count, 0.0);
}

/* ---- one worker ---------------------------------------------------------- */

void cdc__profile_state_init(cdc_profile_state_t *state)
{
    memset(state, 0, sizeof *state);
}

/* Which side of anchor x is on, counting only a move that counts: +1
   above, -1 below, 0 close enough. */
static int side_of(double x, double anchor, double floor)
{
    double move = fabs(x - anchor);
    if (move <= CDC_PROFILE_MOVE * anchor || move <= floor)
        return 0;
    return x > anchor ? 1 : -1;
}

/* One sample into an estimate that has had `before` samples. Returns 1 when
   it moved for good: its first sample, or PERSIST samples in a row away
   from the anchor on the same side (one outlier breaks the run; samples
   that scatter both ways never make one). Then the estimate starts again
   from the run's mean, the new level, rather than creeping towards it
   through several more "moves". */
static int estimate_add(cdc_profile_estimate_t *e, double sample, uint64_t before, double floor)
{
    if (before == 0) {
        *e = (cdc_profile_estimate_t){sample, sample, 0, 0.0};
        return 1;
    }
    e->value += CDC_PROFILE_ALPHA * (sample - e->value);
    int side = side_of(sample, e->anchor, floor);
    if (side == 0 || (e->away != 0 && (e->away > 0) != (side > 0))) {
        e->away = side; /* a run ends; an away sample on the other side starts one */
        e->run_sum = side ? sample : 0.0;
        return 0;
    }
    e->away += side;
    e->run_sum += sample;
    if (abs(e->away) < CDC_PROFILE_PERSIST)
        return 0;
    e->value = e->anchor = e->run_sum / abs(e->away);
    e->away = 0;
    e->run_sum = 0.0;
    return 1;
}

/* A sample no device could give (rate or bandwidth): nothing the worker
   said of its speed holds, until another process takes its place. */
static void note_implausible(cdc_profile_state_t *state)
{
    state->generation += !state->implausible; /* re-plan without its claim */
    state->implausible = 1;
    state->rate_samples = state->stream_samples = 0;
    state->rate_from_thin = 0;
    state->rate = state->stream = (cdc_profile_estimate_t){0};
}

/* now's deltas over *base into *delta once they span
   CDC_PROFILE_MIN_BUSY_US of busy time, now then the base: 1. 0 while
   shorter spans accumulate. -1 when a counter went back (a process that
   does not report its instance restarted): now is the base. */
static int counts_delta(cdc_profile_counts_t *base, cdc_profile_counts_t now,
                        cdc_profile_counts_t *delta)
{
    if (now.flops < base->flops || now.bytes < base->bytes || now.busy_us < base->busy_us) {
        *base = now;
        return -1;
    }
    if (now.busy_us - base->busy_us < CDC_PROFILE_MIN_BUSY_US)
        return 0;
    *delta = (cdc_profile_counts_t){now.flops - base->flops, now.bytes - base->bytes,
                                    now.busy_us - base->busy_us};
    *base = now;
    return 1;
}

/* A bandwidth the device streamed at least (cdc__profile_note_streaming):
   the estimate while no sample is taken, a move that counts when it is. */
static void stream_floor_raise(cdc_profile_state_t *state, double gbps)
{
    if (gbps <= state->stream_floor)
        return;
    if (!state->stream_samples && gbps > state->stream_floor * (1.0 + CDC_PROFILE_MOVE))
        state->generation++;
    state->stream_floor = gbps;
}

void cdc__profile_note_counters(cdc_profile_state_t *state, uint64_t instance, uint64_t flops,
                                uint64_t busy_us)
{
    cdc_profile_counts_t now = {flops, 0, busy_us}, delta;
    /* Another process: a new baseline, estimates kept. */
    if (!state->has_base || instance != state->instance) {
        if (state->has_base)
            state->implausible = 0; /* another process: heard afresh */
        state->has_base = 1;
        state->has_stream_base = 0;
        state->instance = instance;
        state->base = now;
        return;
    }
    int sampled = counts_delta(&state->base, now, &delta);
    if (sampled < 0)
        state->has_stream_base = 0; /* restarted: the thin counters too */
    if (sampled <= 0)
        return;
    double gflops = (double) delta.flops / ((double) delta.busy_us * 1e3);
    if (gflops <= 0)
        return; /* busy without work counted: nothing to say about speed */
    if (state->implausible || gflops < CDC_PROFILE_MIN_GFLOPS ||
        gflops > CDC_PROFILE_MAX_GFLOPS) {
        note_implausible(state);
        return;
    }
    if (state->rate_from_thin) { /* the first that says what the device computes at */
        /* The thin tasks' bandwidth samples were taken before it was
           known: as fast as this, arithmetic bound them (floors only). */
        if (state->stream_samples && state->rate.value >= CDC_PROFILE_AT_RATE * gflops) {
            stream_floor_raise(state, state->stream.value);
            state->stream_samples = 0;
        }
        state->rate_from_thin = 0;
        state->rate_samples = 0;
    }
    state->generation += estimate_add(&state->rate, gflops, state->rate_samples, 0.0);
    state->rate_samples++;
}

void cdc__profile_note_streaming(cdc_profile_state_t *state, uint64_t flops, uint64_t bytes,
                                 uint64_t busy_us)
{
    cdc_profile_counts_t now = {flops, bytes, busy_us}, delta;
    if (!state->has_stream_base) {
        state->has_stream_base = 1;
        state->thin_base = now;
        return;
    }
    if (counts_delta(&state->thin_base, now, &delta) <= 0)
        return;
    double gbps = (double) delta.bytes / ((double) delta.busy_us * 1e3);
    double gflops = (double) delta.flops / ((double) delta.busy_us * 1e3);
    if (gbps <= 0)
        return;
    if (state->implausible || gbps < CDC_PROFILE_MIN_GBPS || gbps > CDC_PROFILE_MAX_GBPS ||
        gflops > CDC_PROFILE_MAX_GFLOPS) {
        note_implausible(state);
        return;
    }
    /* As fast in flops as the device computes (a conv layer's few filters
       against many pixels; a matrix-vector product on a device whose
       memory outpaces its arithmetic): what it streamed says "at least". */
    if (state->rate_samples && !state->rate_from_thin &&
        gflops >= CDC_PROFILE_AT_RATE * state->rate.value) {
        stream_floor_raise(state, gbps);
        return;
    }
    state->generation += estimate_add(&state->stream, gbps, state->stream_samples, 0.0);
    state->stream_samples++;
    /* A device that has computed nothing but thin tasks computes at least
       as fast as they did: the rate until a task that is not thin says. */
    if ((state->rate_samples == 0 || state->rate_from_thin) && gflops > 0) {
        state->rate_from_thin = 1;
        state->generation += estimate_add(&state->rate, gflops, state->rate_samples, 0.0);
        state->rate_samples++;
    }
}

/* A status's counters split into the thin tasks' and the others' (a
   report whose thin part exceeds its whole is taken as all the others'). */
static void note_work(cdc_profile_state_t *state, const cdc_status_report_t *status)
{
    uint64_t thin_busy = status->thin_busy_us, thin_flops = status->thin_flops;
    uint64_t thin_bytes = status->thin_bytes;
    if (thin_busy > status->busy_us || thin_flops > status->flops)
        thin_busy = thin_flops = thin_bytes = 0;
    cdc__profile_note_counters(state, status->instance, status->flops - thin_flops,
                               status->busy_us - thin_busy);
    cdc__profile_note_streaming(state, thin_flops, thin_bytes, thin_busy);
}

void cdc__profile_note_pong(cdc_profile_state_t *state, double rtt_ms,
                            const cdc_status_report_t *status)
{
    if (rtt_ms >= 0) {
        /* The least of the window: a PING that waited behind a task
           measured the task, not the way there and back. */
        state->rtt_window[state->rtt_samples % CDC_PROFILE_RTT_WINDOW] = rtt_ms;
        double least = rtt_ms;
        for (uint64_t i = 0; i <= state->rtt_samples && i < CDC_PROFILE_RTT_WINDOW; i++)
            least = state->rtt_window[i] < least ? state->rtt_window[i] : least;
        state->generation +=
            estimate_add(&state->rtt, least, state->rtt_samples, CDC_PROFILE_MOVE_RTT_MS);
        state->rtt_samples++;
    }
    if (!status)
        return;
    state->max_memory = status->max_memory;
    state->cache_bytes = status->cache_bytes;
    note_work(state, status);
}

/* A link sample (Mbit/s) into the window; the estimator is fed the
   window's largest. */
static void link_sample(cdc_profile_state_t *state, double mbit_sample)
{
    state->link_window[state->link_samples % CDC_PROFILE_LINK_WINDOW] = mbit_sample;
    uint64_t filled = state->link_samples + 1;
    double mbit = 0.0;
    for (uint64_t i = 0; i < filled && i < CDC_PROFILE_LINK_WINDOW; i++)
        mbit = state->link_window[i] > mbit ? state->link_window[i] : mbit;
    state->generation += estimate_add(&state->link, mbit, state->link_samples, 0.0);
    state->link_samples++;
}

/* The link's bandwidth (Mbit/s) that moving bytes in what elapsed_ms leaves
   beside the compute and the round trip would mean: 1 with it in *mbit, 0
   when there is nothing to tell (no rate yet: compute and transfer cannot
   be told apart; a few KB say more about jitter than about the link; a
   remainder within the noise: the link is not what the call waited for). */
static int link_remainder(const cdc_profile_state_t *state, double elapsed_ms, double flops,
                          double streamed, double bytes, double *mbit)
{
    if (state->rate_samples == 0 || bytes < CDC_PROFILE_MIN_LINK_BYTES)
        return 0;
    double rtt = state->rtt_samples ? state->rtt.value : 0.0;
    cdc_worker_profile_t estimates;
    cdc__profile_state_view(state, &estimates);
    double comm = elapsed_ms - cdc__profile_compute_ms(&estimates, flops, streamed) - rtt;
    if (comm < CDC_PROFILE_MIN_COMM_MS)
        return 0;
    *mbit = 8.0 * bytes / (comm * 1e3);
    return 1;
}

void cdc__profile_note_transfer(cdc_profile_state_t *state, double elapsed_ms, double flops,
                                double streamed, double bytes)
{
    double mbit;
    if (link_remainder(state, elapsed_ms, flops, streamed, bytes, &mbit))
        link_sample(state, mbit);
}

void cdc__profile_note_cut(cdc_profile_state_t *state, double elapsed_ms, double flops,
                           double streamed, double bytes)
{
    double bound; /* the link is slower than this */
    if (!link_remainder(state, elapsed_ms, flops, streamed, bytes, &bound))
        return;
    if (state->link_samples && state->link.value <= bound) {
        link_sample(state, state->link.value); /* consistent: one more sample */
        return;
    }
    /* Faster samples in the window are contradicted now: capped, so the
       window's largest follows the bound at once. */
    for (int i = 0; i < CDC_PROFILE_LINK_WINDOW; i++)
        state->link_window[i] = state->link_window[i] > bound ? bound : state->link_window[i];
    link_sample(state, bound);
}

void cdc__profile_state_view(const cdc_profile_state_t *state, cdc_worker_profile_t *out)
{
    *out = (cdc_worker_profile_t){
        .gflops = state->rate_samples ? state->rate.value : 0.0,
        .gbps = state->stream_samples ? state->stream.value : state->stream_floor,
        .mbit = state->link_samples ? state->link.value : 0.0,
        .rtt_ms = state->rtt_samples ? state->rtt.value : -1.0,
        .max_memory = state->max_memory,
        .cache_bytes = state->cache_bytes,
        .rate_samples = state->rate_samples,
        .link_samples = state->link_samples,
        .stream_samples = state->stream_samples,
        .gbps_floor = !state->stream_samples && state->stream_floor > 0.0,
        .generation = state->generation,
        .live = 0,
        .implausible = state->implausible,
    };
}

/* ---- the table ----------------------------------------------------------- */

/* One lock for the whole table: every update is a few arithmetic
   operations, and the writers (heartbeat thread, calling thread) never
   hold another lock of the client's while they call in. */
struct cdc_profile {
    pthread_mutex_t lock;
    cdc_profile_state_t workers[CDC_MAX_WORKERS];
    cdc_profile_state_t self; /* the coordinator's CPU */
};

int cdc__profile_new(cdc_profile_t **profile_p)
{
    cdc_profile_t *self = calloc(1, sizeof *self);
    if (!self || pthread_mutex_init(&self->lock, NULL) != 0) {
        free(self);
        return cdc__fail(CDC_ENOMEM, "worker profiles");
    }
    for (int w = 0; w < CDC_MAX_WORKERS; w++)
        cdc__profile_state_init(&self->workers[w]);
    cdc__profile_state_init(&self->self);
    *profile_p = self;
    return CDC_OK;
}

void cdc__profile_destroy(cdc_profile_t **profile_p)
{
    if (!profile_p || !*profile_p)
        return;
    pthread_mutex_destroy(&(*profile_p)->lock);
    free(*profile_p);
    *profile_p = NULL;
}

void cdc__profile_pong(cdc_profile_t *profile, int w, double rtt_ms,
                       const cdc_status_report_t *status)
{
    if (w < 0 || w >= CDC_MAX_WORKERS)
        return;
    pthread_mutex_lock(&profile->lock);
    int was = profile->workers[w].implausible;
    cdc__profile_note_pong(&profile->workers[w], rtt_ms, status);
    int now = profile->workers[w].implausible;
    pthread_mutex_unlock(&profile->lock);
    if (now && !was)
        CDC_LOG_WARNF("worker %d reports a compute rate outside %g..%g GFLOP/s or a streaming "
                      "bandwidth outside %g..%g GB/s: its speed reports are ignored and it is "
                      "planned as the slowest device until another process takes its place",
                      w, CDC_PROFILE_MIN_GFLOPS, CDC_PROFILE_MAX_GFLOPS, CDC_PROFILE_MIN_GBPS,
                      CDC_PROFILE_MAX_GBPS);
}

void cdc__profile_transfer(cdc_profile_t *profile, int w, double elapsed_ms, double flops,
                           double streamed, double bytes)
{
    if (w < 0 || w >= CDC_MAX_WORKERS)
        return;
    pthread_mutex_lock(&profile->lock);
    cdc__profile_note_transfer(&profile->workers[w], elapsed_ms, flops, streamed, bytes);
    pthread_mutex_unlock(&profile->lock);
}

void cdc__profile_cut(cdc_profile_t *profile, int w, double elapsed_ms, double flops,
                      double streamed, double bytes)
{
    if (w < 0 || w >= CDC_MAX_WORKERS)
        return;
    pthread_mutex_lock(&profile->lock);
    cdc__profile_note_cut(&profile->workers[w], elapsed_ms, flops, streamed, bytes);
    pthread_mutex_unlock(&profile->lock);
}

void cdc__profile_self(cdc_profile_t *profile, uint64_t flops, uint64_t busy_us)
{
    pthread_mutex_lock(&profile->lock);
    cdc__profile_note_counters(&profile->self, 0, flops, busy_us);
    pthread_mutex_unlock(&profile->lock);
}

void cdc__profile_snapshot(cdc_profile_t *profile, cdc_worker_profile_t *out, int count,
                           cdc_worker_profile_t *self)
{
    if (count > CDC_MAX_WORKERS)
        count = CDC_MAX_WORKERS;
    pthread_mutex_lock(&profile->lock);
    for (int w = 0; w < count; w++)
        cdc__profile_state_view(&profile->workers[w], &out[w]);
    if (self) {
        cdc__profile_state_view(&profile->self, self);
        self->rtt_ms = 0.0;
        self->live = 1;
    }
    pthread_mutex_unlock(&profile->lock);
}
