/* profiled_plan.c - slot homes and block lengths from the live profile.
 *
 * The problem. The planner (planner.c) needs one cost line per worker for
 * the call at hand; the profile (profile.c) has each worker's compute rate,
 * link and round trip. A cost line is the profile's prediction for the
 * call's work as a function of a block's rows: the fixed part (round trip,
 * the bytes every shard gets) and the part per row (its compute, its bytes).
 *
 * Hysteresis. New lengths for a cached operand, or a slot's new home,
 * re-ship weights, so neither may follow every wobble of the measurements.
 * The plan is made from an anchored copy of the profile, taken anew only
 * when some estimate moved for good (the profile's generation: a move of
 * 20% that persists): between two such moves every call of a layer gets
 * the same lengths. Even then an operand keeps the lengths it was given
 * (remembered per shape and cost), and the slots their homes, unless the
 * new ones are predicted 10% faster (20% for weights the workers cache
 * already): a measurement that moved without changing the answer much (a
 * link estimate, say) ships nothing. New lengths of weights the workers
 * cache are staged (plan_staging.c): the calls keep the old ones until
 * every home holds its new block. The first lengths come after the
 * workers are measured (plan_calibration.c), so the first weights shipped
 * are sized already.
 *
 * Failures. A dead worker keeps its measured line and its slots: the
 * placement already covers a dead home (a spare, or an erasure decoded from
 * parity, then the respawned process), and moving homes on every death
 * would ship weights twice. The planner's parity placement (planner.h) is
 * what keeps the calls after a crash from waiting on a slow device.
 *
 * Until n workers have been measured (a rate from two heartbeats after each
 * computed), calls run on equal blocks; those calls are what measures them.
 * A worker still unmeasured then is taken to run at the slowest rate
 * measured: it is a spare that never stood in, or a device whose every
 * shard was cancelled before it finished (a parity that is never needed:
 * on identical devices any one, on a mix the slowest). No slower guess:
 * on identical devices that would move homes for nothing. Given a block by
 * the plan, it finishes it and gets measured; the profile then re-plans.
 *
 * Sized stripes. In the rotated layout every worker computes data rows on
 * every call and parity only on demand, so its rows are sized as an
 * uncoded call's blocks over the n + r slots (the planner with r = 0),
 * with the same homes, share, hysteresis and staging; they wait until
 * every worker is measured, which every call does. */
#include "profiled_plan.h"

#include "clock.h"
#include "hash.h"
#include "log.h"
#include "planner.h"
#include "rotated_set.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A change of homes must be predicted this much faster than keeping them. */
#define PLAN_SWITCH_GAIN 0.9
/* New lengths for weights the workers already cache, this much: they move
   the operand's bytes over every link again and, while one worker takes its
   new blocks in, leave the calls one erasure short. The model's error on
   real calls is 8-17% (docs/benchmarks.md): a 10% gain is within it. */
#define PLAN_RESHIP_GAIN 0.8
/* Stripes' rows are remembered apart from any dedicated blocks of the same
   shape (an uncoded call over n + r slots has the same shape). */
#define STRIPES_KEY_TAG UINT64_C(0x73747269706573)
/* After a repair the estimates still hold what was measured beside it
   (the coordinator building the returning worker's operand, the host and
   links shared with the transfer): new lengths wait this long more, a few
   heartbeats of fresh samples. Without it the demo's fc6 was re-sized on
   those samples as soon as its redundancy was back (1 run in 16), and that
   staging ran past the end of the run. */
#define PLAN_AFTER_REPAIR_MS 2000.0
/* A staging leaves the calls one erasure short for as long as it takes:
   an operand's next one waits this many times that long after it (at most
   a third of the time spent staging, whatever the estimates do). On this
   host the demo's FC estimates moved by 20% every few seconds, and fc6 was
   staged four times in a row, the crash inside the last. */
#define PLAN_RESTAGE_AFTER 2.0
/* New lengths for cached weights re-ship them (a staging of seconds, the
   calls one erasure short meanwhile): they must have been predicted enough
   faster by every call of the operand's shape for this long first. On this
   host the demo's FC estimates swung by 20-30% for a few seconds at a time
   (five workers sharing its memory), and a staging started on one swing
   was given up on the next, or ran into the crash. */
#define PLAN_RESIZE_CONFIRM_MS 3000.0
/* The most calls a shape's hold on an operand's lengths counts
   (vote_shape): a new workload takes them over after this many calls. */
#define SHAPE_VOTE_CAP 16
/* Which of a worker's estimates have samples enough to plan by (0..7). */
static uint64_t usable_bits(const cdc_worker_profile_t *p)
{
    return (uint64_t) (p->rate_samples >= CDC_PLAN_MIN_RATE_SAMPLES) +
           2 * (uint64_t) (p->link_samples >= CDC_PLAN_MIN_LINK_SAMPLES) +
           4 * (uint64_t) (p->stream_samples >= CDC_PLAN_MIN_STREAM_SAMPLES || p->gbps_floor);
}

/* The slowest device measured: the rate and the link a worker whose own are
   not trusted is planned with. An implausible one is planned as the worst
   device on every term, round trip included: nothing it says of itself
   holds, and any term better than the others' would give it more rows. */
typedef struct {
    double gflops, mbit; /* mbit 0: no link measured (free, as unmeasured) */
    double gbps;         /* 0: no bandwidth measured (no memory term)       */
    double rtt_ms;       /* the longest round trip measured (0: none)       */
} slowest_t;

/* Worker p's terms made no better than the slowest device's. */
static void plan_as_slowest(cdc_worker_profile_t *p, const slowest_t *slowest)
{
    p->gflops = slowest->gflops;
    p->gbps = slowest->gbps;
    if (slowest->mbit > 0.0 && !(p->mbit > 0.0 && p->mbit < slowest->mbit))
        p->mbit = slowest->mbit;
    p->rtt_ms = p->rtt_ms > slowest->rtt_ms ? p->rtt_ms : slowest->rtt_ms;
}

/* Whether worker p computes cost's rows at its bandwidth rather than its
   rate (profile.h's roofline): a block's time is the larger of two lines
   in its rows, flops at the rate and streamed bytes at the bandwidth, and
   the per-row terms decide which one a block of any but a few rows is on
   (its rows of the cut operand are most of what it streams). */
static int streaming_bound(const cdc_worker_profile_t *p, const cdc_block_cost_t *cost)
{
    return p->gbps > 0.0 && p->gflops > 0.0 &&
           cost->streamed_per_row / p->gbps > cost->flops_per_row / p->gflops;
}

/* Worker p's line for this call's work; slowest: the slowest device
   measured, whose rate (and bandwidth) is assumed for a worker not
   measured yet. */
static cdc_shard_cost_t cost_line(const cdc_worker_profile_t *p, const cdc_block_cost_t *cost,
                                  const slowest_t *slowest)
{
    cdc_worker_profile_t trusted = *p;
    if (trusted.rate_samples < CDC_PLAN_MIN_RATE_SAMPLES)
        trusted.gflops = slowest->gflops;
    /* A floor (profile.h) is the worker's own: no other's slowness. */
    if (trusted.stream_samples < CDC_PLAN_MIN_STREAM_SAMPLES && !trusted.gbps_floor)
        trusted.gbps = slowest->gbps;
    if (trusted.link_samples < CDC_PLAN_MIN_LINK_SAMPLES)
        trusted.mbit = 0.0;
    if (p->implausible)
        plan_as_slowest(&trusted, slowest);
    p = &trusted;
    /* On one line of the roofline: the other term is left out (0); a
       halo's rows stream what any rows do. */
    int memory = streaming_bound(p, cost);
    double flops_row = memory ? 0.0 : cost->flops_per_row;
    double flops_fixed = memory ? 0.0 : cost->flops_fixed;
    double streamed_row = memory ? cost->streamed_per_row : 0.0;
    double streamed_halo = cost->flops_per_row > 0.0
                               ? cost->flops_fixed / cost->flops_per_row * streamed_row
                               : 0.0;
    double streamed_fixed = memory ? cost->streamed_fixed : 0.0;
    double base = cdc__profile_predict_ms(p, 0.0, 0.0, 0.0, 0.0);
    double fixed_ms = cdc__profile_predict_ms(p, flops_fixed, streamed_fixed + streamed_halo,
                                              cost->bytes_fixed_out, 0.0);
    double row = cdc__profile_predict_ms(p, flops_row, streamed_row, cost->bytes_per_row_out,
                                         cost->bytes_per_row_in) -
                 base;
    double halo = cdc__profile_predict_ms(p, flops_fixed, streamed_halo, 0.0, 0.0) - base;
    return (cdc_shard_cost_t){fixed_ms, row > 1e-9 ? row : 1e-9,
                              cdc__plan_budget_rows(p->max_memory, cost), halo};
}

/* The lines of the slots' homes: data slots 0..n-1, parity n..n+r-1. */
static void slot_lines(const cdc_shard_cost_t *line, const int *home, int n, int r,
                       cdc_shard_cost_t *data, cdc_shard_cost_t *parity)
{
    for (int s = 0; s < n; s++)
        data[s] = line[home[s]];
    for (int j = 0; j < r; j++)
        parity[j] = line[home[n + j]];
}

/* A spatial band's halo rows (cost->flops_fixed) stop at the longest
   band's length (conv_bands.c computes min(len + halo, longest) rows, a
   parity band the longest's rows alone): the planner counts them whole,
   the predictions of given lengths exactly, as the slot lines here. */
static void slot_lines_exact(const cdc_shard_cost_t *line, const int *home, int n, int r,
                             const cdc_block_cost_t *cost, const int64_t *len,
                             cdc_shard_cost_t *data, cdc_shard_cost_t *parity)
{
    slot_lines(line, home, n, r, data, parity);
    double halo = cost->flops_per_row > 0.0 ? cost->flops_fixed / cost->flops_per_row : 0.0;
    if (!(halo > 0.0))
        return;
    int64_t longest = 0;
    for (int i = 0; i < n; i++)
        longest = len[i] > longest ? len[i] : longest;
    for (int i = 0; i < n; i++) {
        double extra = fmin((double) (longest - len[i]), halo);
        data[i].fixed_ms -= data[i].halo_ms * (1.0 - extra / halo);
    }
    for (int j = 0; j < r; j++)
        parity[j].fixed_ms -= parity[j].halo_ms;
}

/* Lengths for the slots' homes; the predicted latency, or INFINITY when
   they cannot be sized. */
static double lengths_for_homes(const cdc_shard_cost_t *line, const int *home, int n, int r,
                                int64_t rows, int64_t *len)
{
    /* parity zeroed: with r = 0 none is read, which GCC cannot see inlined */
    cdc_shard_cost_t data[CDC_MAX_WORKERS], parity[CDC_MAX_WORKERS] = {{0}};
    slot_lines(line, home, n, r, data, parity);
    double t = INFINITY;
    if (cdc__planner_block_lengths(data, n, parity, r, rows, len, &t) != CDC_OK)
        return INFINITY;
    return t;
}

/* The coordinator's predicted time for its share of c rows (none: 0). */
static double here_line_ms(const cdc_block_cost_t *cost, int64_t c)
{
    return c > 0 ? cost->here_fixed_ms + cost->here_per_row_ms * (double) c : 0.0;
}

/* The predicted latency of given lengths on the slots' homes, the
   coordinator computing `here` rows meanwhile. */
static double latency_of(const cdc_shard_cost_t *line, const int *home, int n, int r,
                         const cdc_block_cost_t *cost, int64_t here, const int64_t *len)
{
    cdc_shard_cost_t data[CDC_MAX_WORKERS], parity[CDC_MAX_WORKERS];
    slot_lines_exact(line, home, n, r, cost, len, data, parity);
    double t = cdc__planner_latency(data, n, parity, r, len);
    return fmax(t, here_line_ms(cost, here));
}

/* Lengths for the slots' homes with the coordinator's share *here of the
   rows (len covers the rest) that makes the predicted latency least; the
   latency (latency_of), or INFINITY when they cannot be sized. The
   workers' time for the rest falls as the share grows and the
   coordinator's rises: the best share is where they cross, found by
   bisection; with a spatial band's halo, which the planner counts whole,
   the exact prediction picks among the shares up to a halo below it. */
static double lengths_with_share(const cdc_shard_cost_t *line, const int *home, int n, int r,
                                 const cdc_block_cost_t *cost, int64_t rows, int64_t *len,
                                 int64_t *here)
{
    *here = 0;
    double best = lengths_for_homes(line, home, n, r, rows, len);
    if (!isfinite(best))
        return best;
    best = latency_of(line, home, n, r, cost, 0, len);
    if (!(cost->here_per_row_ms > 0.0) || rows <= n || !(here_line_ms(cost, 1) < best))
        return best;
    int64_t lo = 0, hi = rows - n, rest[CDC_MAX_WORKERS];
    while (lo < hi) { /* the largest share the coordinator ends no later with */
        int64_t mid = lo + (hi - lo + 1) / 2;
        double workers = lengths_for_homes(line, home, n, r, rows - mid, rest);
        if (isfinite(workers) && here_line_ms(cost, mid) <= workers)
            lo = mid;
        else
            hi = mid - 1;
    }
    int64_t halo = cost->flops_per_row > 0.0
                       ? (int64_t) ceil(cost->flops_fixed / cost->flops_per_row)
                       : 0;
    for (int64_t c = lo - halo; c <= lo + 1 && c <= rows - n; c++) {
        if (c < 1 || !isfinite(lengths_for_homes(line, home, n, r, rows - c, rest)))
            continue;
        double t = latency_of(line, home, n, r, cost, c, rest);
        if (t < best) {
            best = t;
            *here = c;
            memcpy(len, rest, (size_t) n * sizeof *len);
        }
    }
    return best;
}

/* Whether lengths len fit the memory caps of the slots' homes (a parity
   home holds the longest block). */
static int fits_caps(const cdc_shard_cost_t *line, const int *home, int n, int r,
                     const int64_t *len)
{
    int64_t longest = 0;
    for (int s = 0; s < n; s++) {
        longest = len[s] > longest ? len[s] : longest;
        if (line[home[s]].max_rows > 0.0 && (double) len[s] > line[home[s]].max_rows)
            return 0;
    }
    for (int j = 0; j < r; j++)
        if (line[home[n + j]].max_rows > 0.0 && (double) longest > line[home[n + j]].max_rows)
            return 0;
    return 1;
}

/* Each of len[0..count-1] raised to least, taking rows from the longest
   (the sum is at least count * least). */
static void at_least(int64_t *len, int count, int64_t least)
{
    for (int i = 0; i < count; i++)
        while (len[i] < least) {
            int longest = 0;
            for (int j = 1; j < count; j++)
                longest = len[j] > len[longest] ? j : longest;
            len[longest]--;
            len[i]++;
        }
}

/* Fresh lengths (nothing kept) for n data blocks + r parity on the
   slots' homes, with the coordinator's best share (*here): equal ones
   (*sized 0, *here 0) unless sizing is predicted to pay 10% (or equal
   blocks would not fit the homes' memory): on near-identical devices equal
   blocks also let the first n results of n + r finish the call, which the
   sizing does not count. The latency the sizing predicts, INFINITY when
   they cannot be sized. */
static double block_lengths(const cdc_shard_cost_t *line, const int *home, int n, int r,
                            const cdc_block_cost_t *cost, int64_t rows, int64_t *len,
                            int64_t *here, int *sized)
{
    double t = lengths_with_share(line, home, n, r, cost, rows, len, here);
    *sized = 1;
    if (!isfinite(t))
        return INFINITY;
    int64_t equal[CDC_CODE_MAX_N];
    cdc__plan_equal_lengths(n, rows, equal);
    double t_equal = latency_of(line, home, n, r, cost, 0, equal);
    if (fits_caps(line, home, n, r, equal) && !(t < PLAN_SWITCH_GAIN * t_equal)) {
        memcpy(len, equal, (size_t) n * sizeof *len);
        *here = 0;
        *sized = 0;
        return t_equal;
    }
    return t;
}

/* Fresh rows for sized stripes over `workers` = n + r slots, as uncoded
   blocks (the parity only on demand) with the coordinator's share, each at
   least n rows (one a data block of its stripes); equal (*here 0) unless
   sized ones are predicted 10% faster. Their latency, INFINITY when they
   cannot be sized. */
static double stripe_lengths(const cdc_shard_cost_t *line, const int *home, int n, int workers,
                             const cdc_block_cost_t *cost, int64_t rows, int64_t *len,
                             int64_t *here)
{
    double t = lengths_with_share(line, home, workers, 0, cost, rows, len, here);
    if (!isfinite(t))
        return INFINITY;
    int64_t least = (int64_t) workers * n;
    if (rows - *here < least) {
        *here = rows - least; /* >= 0: the call is eligible */
        lengths_for_homes(line, home, workers, 0, rows - *here, len);
    }
    at_least(len, workers, n);
    t = latency_of(line, home, workers, 0, cost, *here, len);
    int64_t equal[CDC_MAX_WORKERS];
    cdc__plan_equal_lengths(workers, rows, equal);
    double t_equal = latency_of(line, home, workers, 0, cost, 0, equal);
    if (!(t < PLAN_SWITCH_GAIN * t_equal)) {
        memcpy(len, equal, (size_t) workers * sizeof *len);
        *here = 0;
        return t_equal;
    }
    return t;
}

/* After the anchored profile moved (or for a new n + r): new homes, when
   they are predicted enough faster than the ones the slots have. */
static int homes_update(cdc_context_t *context, const cdc_shard_cost_t *line, int n, int r,
                        int64_t rows)
{
    cdc_profiled_state_t *st = &context->profiled;
    int chosen[CDC_MAX_WORKERS];
    double t_new;
    int rc = cdc__planner_homes(line, st->workers, n, r, rows, chosen, &t_new);
    if (rc == CDC_ENOMEM)
        return CDC_OK; /* no homes hold it: the call runs on the coordinator (plan.c) */
    if (rc != CDC_OK)
        return rc;
    /* Where the client has the slots now: worker s before any move; after
       one, the map's first n + r entries (also when n + r changed). */
    if (st->slots == 0)
        for (int s = 0; s < CDC_MAX_WORKERS; s++)
            st->home_of_slot[s] = s;
    st->slots = n + r;
    int64_t len[CDC_MAX_WORKERS];
    double t_now = lengths_for_homes(line, st->home_of_slot, n, r, rows, len);
    if (!(t_new < PLAN_SWITCH_GAIN * t_now))
        return CDC_OK;
    rc = cdc__executor_set_homes(context->executor, chosen, n + r);
    if (rc != CDC_OK)
        return rc;
    memcpy(st->home_of_slot, chosen, (size_t) (n + r) * sizeof(int));
    CDC_LOG_INFOF("profiled plan: homes of %d data + %d parity slots moved (predicted "
                  "%.2f ms)", n, r, t_new);
    return CDC_OK;
}

static uint64_t mix_double(uint64_t h, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    return cdc__hash_mix(h, bits);
}

/* A call's shape: what its cost per row and per block depends on. */
static uint64_t shape_key(const cdc_block_cost_t *cost)
{
    uint64_t h = mix_double(0, cost->flops_per_row);
    h = mix_double(h, cost->flops_fixed);
    h = mix_double(h, cost->streamed_per_row);
    h = mix_double(h, cost->streamed_fixed);
    h = mix_double(h, cost->bytes_fixed_out);
    h = mix_double(h, cost->bytes_per_row_out);
    h = mix_double(h, cost->bytes_per_row_in);
    return h ? h : 1;
}

/* The operand whose lengths are remembered. Weights the workers cache are
   each their own (a model's twelve layers of one shape are shipped and
   staged each on its own: one memory for all of them switched eleven to
   lengths they were never sent) whatever the calls' other operand (a
   language model's 32-token prompt and its 1-token steps): their blocks
   stay where they are shipped, for the shape most of their calls have
   (vote_shape). A per-call operand is cut afresh by every call: each
   shape and cost its own. Not the homes: after they move, the lengths the
   workers hold are kept unless new ones are predicted faster on the new
   homes, and then staged. */
static uint64_t operand_key(const cdc_block_cost_t *cost, int64_t rows, int n, int r)
{
    uint64_t h = cdc__hash_mix((uint64_t) rows, (uint64_t) (n * 64 + r));
    if (cost->held_per_row > 0.0 && cost->held_key) {
        h = cdc__hash_mix(h, cost->held_key);
        h = mix_double(h, cost->held_per_row);
    } else {
        h = cdc__hash_mix(h, shape_key(cost));
    }
    return h ? h : 1;
}

/* The key sized stripes over `workers` slots are remembered by. */
static uint64_t stripes_key(const cdc_block_cost_t *cost, int64_t rows, int workers)
{
    return cdc__hash_mix(operand_key(cost, rows, workers, 0), STRIPES_KEY_TAG);
}

static int64_t sum_of(const int64_t *len, int n)
{
    int64_t sum = 0;
    for (int i = 0; i < n; i++)
        sum += len[i];
    return sum;
}

static int layout_index(const cdc_profiled_state_t *st, uint64_t key)
{
    for (int i = 0; i < CDC_PROFILED_LAYOUTS; i++)
        if (st->layouts[i].key == key)
            return i;
    return -1;
}

/* A call of shape `shape` on layout i's operand: 1 when its lengths are to
   be sized for that shape, 0 when they stay sized for another. The shape
   they are sized for changes only once another has had more of the
   operand's calls than it since (each of its own calls, up to
   SHAPE_VOTE_CAP, and undoes one of the other's): a prompt's call and
   then its token steps move a model's weights once, to the steps' sizes,
   and shapes that take turns move nothing. */
static int vote_shape(cdc_profiled_state_t *st, int i, uint64_t shape)
{
    cdc_profiled_layout_t *l = &st->layouts[i];
    if (shape == l->sized_for) {
        l->sized_calls += l->sized_calls < SHAPE_VOTE_CAP;
        l->challenger_calls -= l->challenger_calls > 0;
        return 1;
    }
    if (shape != l->challenger) {
        l->challenger = shape;
        l->challenger_calls = 0;
    }
    if (++l->challenger_calls <= l->sized_calls)
        return 0;
    l->sized_for = shape;
    l->sized_calls = l->challenger_calls;
    l->challenger = 0;
    l->challenger_calls = 0;
    return 1;
}

/* Whether this call's new lengths wait for a repair (keep_or_remember):
   one under way, or one seen within PLAN_AFTER_REPAIR_MS. */
static void note_repair(cdc_context_t *context)
{
    cdc_profiled_state_t *st = &context->profiled;
    double now = cdc__clock_ms();
    if (cdc__executor_repairing(context->executor))
        st->repair_seen_ms = now;
    st->repairing = st->repair_seen_ms > 0.0 && now - st->repair_seen_ms < PLAN_AFTER_REPAIR_MS;
}

/* Layout l's staging ended (in use, or given up): its next waits
   PLAN_RESTAGE_AFTER times as long as this one took. */
static void restage_later(cdc_profiled_layout_t *l)
{
    double now = cdc__clock_ms();
    l->restage_ms = now + PLAN_RESTAGE_AFTER * (now - l->pending_since_ms);
}

/* Layout i's staging, if one is under way, given up: its lengths are no
   longer wanted (other ones, or another operand's entry). The executor
   forgets it at the end of the call's sizing (forget_dropped): otherwise
   its blocks went on to the workers, each slot an erasure while it took
   them in, for lengths no call would use (the demo's fc6 and fc7, 160 MB,
   its crash inside). */
static void drop_pending(cdc_profiled_state_t *st, int i)
{
    cdc_profiled_layout_t *l = &st->layouts[i];
    if (l->pending_token && !l->pending_staged) {
        st->dropped_token = l->pending_token;
        /* The estimates that started it and then gave it up move too
           much to start another soon. */
        restage_later(l);
    }
    l->pending_token = 0;
}

/* The executor forgets the staging this call gave up (drop_pending). */
static void forget_dropped(cdc_context_t *context)
{
    uint64_t token = context->profiled.dropped_token;
    context->profiled.dropped_token = 0;
    if (token) {
        cdc__executor_unstage(context->executor, token);
        CDC_LOG_INFOF("profiled plan: a staging given up: its lengths are no longer wanted");
    }
}

/* A new entry (the oldest replaced) remembering that operand key was given
   lengths len[0..count-1] and the coordinator's share here for calls of
   shape `shape`; its index. */
static int layout_claim(cdc_profiled_state_t *st, uint64_t key, uint64_t shape,
                        const int64_t *len, int count, int64_t here)
{
    int i = st->next_layout;
    st->next_layout = (i + 1) % CDC_PROFILED_LAYOUTS;
    drop_pending(st, i);
    st->layouts[i].key = key;
    st->layouts[i].sized_for = shape;
    st->layouts[i].sized_calls = shape != 0; /* 0: for no shape yet, the next call's */
    st->layouts[i].challenger = 0;
    st->layouts[i].challenger_calls = 0;
    st->layouts[i].restage_ms = 0.0;
    st->layouts[i].wanted_since_ms = 0.0;
    memcpy(st->layouts[i].len, len, (size_t) count * sizeof *len);
    st->layouts[i].here = here;
    return i;
}

/* Slots 0..n+r-1 into order, the latest to finish first under lengths len
   (a parity slot computes as many rows as the longest block). */
static void busiest_first(const cdc_shard_cost_t *line, const int *home, int n, int r,
                          const int64_t *len, int *order)
{
    double finish[CDC_MAX_WORKERS];
    int64_t longest = 0;
    for (int s = 0; s < n; s++)
        longest = len[s] > longest ? len[s] : longest;
    for (int s = 0; s < n + r; s++) {
        const cdc_shard_cost_t *c = &line[home[s]];
        finish[s] = c->fixed_ms + c->per_row_ms * (double) (s < n ? len[s] : longest);
        order[s] = s;
    }
    for (int i = 1; i < n + r; i++) /* insertion sort: n + r <= 64 */
        for (int j = i; j > 0 && finish[order[j]] > finish[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
}

/* What slot s holds under lengths len (a parity: the longest block). */
static double slot_held(const cdc_block_cost_t *cost, int n, const int64_t *len, int s)
{
    int64_t longest = 0;
    for (int i = 0; i < n; i++)
        longest = len[i] > longest ? len[i] : longest;
    return cost->held_fixed + cost->held_per_row * (double) (s < n ? len[s] : longest);
}

/* Whether new lengths len may be staged over the operand's old ones (NULL:
   none yet, nothing to stage over): the workers cache the cut operand
   (otherwise nothing is re-shipped), a call can lose one shard (r >= 1:
   the slot being staged is an erasure), and each home's budget holds its
   old block and its new one at once. Not what it caches besides: blocks of
   layouts no longer in use are the first its cache evicts (LRU), and other
   operands are budgeted on their own (plan_budget.c). */
static int may_stage(const cdc_profiled_state_t *st, const cdc_block_cost_t *cost, int n,
                     int r, const int64_t *old, const int64_t *len)
{
    if (!(cost->held_per_row > 0.0) || r < 1)
        return 0;
    for (int s = 0; old && s < n + r; s++) {
        const cdc_worker_profile_t *p = &st->anchored[st->home_of_slot[s]];
        double both = slot_held(cost, n, old, s) + slot_held(cost, n, len, s);
        if (p->max_memory > 0 && both > (double) p->max_memory)
            return 0;
    }
    return 1;
}

/* This call keeps layout i's lengths (and share), into len and *here,
   while its pending ones are staged: plan->stage_* names them, the
   busiest slot first. */
static void keep_while_staging(cdc_profiled_state_t *st, int i, const cdc_shard_cost_t *line,
                               int n, int r, int64_t *len, int64_t *here,
                               cdc_call_plan_t *plan)
{
    plan->stage_token = st->layouts[i].pending_token;
    memcpy(plan->stage_len, st->layouts[i].pending, (size_t) n * sizeof *len);
    plan->stage_here_rows = st->layouts[i].pending_here;
    busiest_first(line, st->home_of_slot, n, r, st->layouts[i].len, plan->stage_order);
    memcpy(len, st->layouts[i].len, (size_t) n * sizeof *len);
    *here = st->layouts[i].here;
}

/* Whether layout i's lengths stay as they are for now, whatever a new
   sizing predicts (a staging already under way goes on). While a lost
   worker's blocks go back to it, the others are measured beside that
   transfer (the coordinator building it, their host and link shared), and
   a new staging could not start before the repair ends anyway: cached
   weights keep their lengths until it has ended (note_repair; a re-size
   decided on those samples moved the demo's FC blocks right after its
   crash, and the redundancy came back 14 s later). And an operand staged
   lately waits PLAN_RESTAGE_AFTER times that staging's time. */
static int lengths_held(const cdc_profiled_state_t *st, int i, int stage)
{
    const cdc_profiled_layout_t *l = &st->layouts[i];
    if (!stage || l->pending_token)
        return 0;
    return st->repairing || cdc__clock_ms() < l->restage_ms;
}

/* The anchored estimates a re-size was decided on, at the info level:
   what moved is what a user asks first when blocks are re-shipped. */
static void log_estimates(const cdc_profiled_state_t *st)
{
    if ((int) CDC_LOG_INFO > cdc__log_level)
        return;
    char text[1024] = "";
    size_t used = 0;
    for (int w = 0; w < st->workers && used < sizeof text; w++) {
        const cdc_worker_profile_t *p = &st->anchored[w];
        used += (size_t) snprintf(text + used, sizeof text - used,
                                  " w%d %.2f GFLOP/s %.0f Mbit/s %.2f GB/s %.2f ms;", w,
                                  p->gflops, p->mbit, p->gbps, p->rtt_ms);
    }
    CDC_LOG_INFOF("profiled plan: re-sized on the estimates%s", text);
}

/* Whether layout l takes new lengths this call predicts `faster`: once
   every call has since PLAN_RESIZE_CONFIRM_MS ago (counted from this one
   when the last did not; the count starts again after a yes); at once for
   an operand the workers do not cache (re-cut by every call at no cost). */
static int resize_confirmed(cdc_profiled_layout_t *l, const cdc_block_cost_t *cost, int faster)
{
    double now = cdc__clock_ms();
    if (!faster) {
        l->wanted_since_ms = 0.0;
        return 0;
    }
    if (l->wanted_since_ms <= 0.0)
        l->wanted_since_ms = now;
    if (cost->held_per_row > 0.0 && now - l->wanted_since_ms < PLAN_RESIZE_CONFIRM_MS)
        return 0;
    l->wanted_since_ms = 0.0;
    return 1;
}

/* Keep the lengths (and coordinator's share) this operand had unless the
   new ones, len and *here, are predicted enough faster; remember what it
   gets. Faster lengths for weights the workers cache (stage: may_stage)
   are staged: this call keeps the old ones, plan->stage_* names the new,
   and the first call after the workers hold them uses them
   (plan_staging.c). Returns the latency of the lengths this call gets,
   which it writes to len and *here. */
static double keep_or_remember(cdc_profiled_state_t *st, uint64_t key,
                               const cdc_shard_cost_t *line, int n, int r,
                               const cdc_block_cost_t *cost, int64_t *len, int64_t *here,
                               double t_new, int stage, cdc_call_plan_t *plan)
{
    const int *home = st->home_of_slot;
    int i = layout_index(st, key);
    uint64_t shape = shape_key(cost);
    if (i < 0) {
        /* First sized: the workers hold no lengths of it yet to keep. */
        layout_claim(st, key, shape, len, n, *here);
        CDC_LOG_INFOF("profiled plan: blocks of %lld rows sized, %lld here (predicted "
                      "%.2f ms)", (long long) sum_of(len, n), (long long) *here, t_new);
        return t_new;
    }
    int64_t *kept = st->layouts[i].len, *pending = st->layouts[i].pending;
    if (st->layouts[i].pending_token && st->layouts[i].pending_staged) {
        memcpy(kept, pending, (size_t) n * sizeof *len);
        st->layouts[i].here = st->layouts[i].pending_here;
        st->layouts[i].pending_token = 0;
        restage_later(&st->layouts[i]);
        CDC_LOG_INFOF("profiled plan: re-sized blocks of %lld rows in use: the workers "
                      "were sent them in the background", (long long) sum_of(kept, n));
    }
    double t_old = latency_of(line, home, n, r, cost, st->layouts[i].here, kept);
    int sized_for_call = vote_shape(st, i, shape);
    if (lengths_held(st, i, stage)) {
        sized_for_call = 0;
        st->layouts[i].wanted_since_ms = 0.0; /* confirmed on fresh samples after */
    }
    /* A staging under way is finished while its lengths still beat the old
       ones, even if newer ones look better still or the gain fell below the
       10% that starts one: restarting it at every move of a settling (or,
       on a loaded host, noisy) estimate would never finish. The next
       re-size, if any, follows once it is in use. Calls of another shape
       than the one it is for leave it be. */
    if (st->layouts[i].pending_token && stage &&
        (!sized_for_call ||
         latency_of(line, home, n, r, cost, st->layouts[i].pending_here, pending) < t_old)) {
        keep_while_staging(st, i, line, n, r, len, here, plan);
        return t_old;
    }
    if (!sized_for_call) { /* the lengths are another shape's: kept */
        memcpy(len, kept, (size_t) n * sizeof *len);
        *here = st->layouts[i].here;
        return t_old;
    }
    drop_pending(st, i); /* none, or no gain any longer */
    int faster = t_new < (stage ? PLAN_RESHIP_GAIN : PLAN_SWITCH_GAIN) * t_old;
    if (!resize_confirmed(&st->layouts[i], cost, faster)) {
        memcpy(len, kept, (size_t) n * sizeof *len);
        *here = st->layouts[i].here;
        return t_old;
    }
    if (!stage) {
        memcpy(kept, len, (size_t) n * sizeof *len);
        st->layouts[i].here = *here;
        CDC_LOG_INFOF("profiled plan: blocks of %lld rows re-sized, %lld here (predicted "
                      "%.2f ms, %.2f ms as they were)", (long long) sum_of(len, n),
                      (long long) *here, t_new, t_old);
        log_estimates(st);
        return t_new;
    }
    memcpy(pending, len, (size_t) n * sizeof *len);
    st->layouts[i].pending_here = *here;
    st->layouts[i].pending_token = ++st->last_token;
    st->layouts[i].pending_staged = 0;
    st->layouts[i].pending_since_ms = cdc__clock_ms();
    CDC_LOG_INFOF("profiled plan: blocks of %lld rows re-sized, %lld here (predicted %.2f ms, "
                  "%.2f ms as they are); their weights go to the workers in the background",
                  (long long) sum_of(len, n), (long long) *here, t_new, t_old);
    log_estimates(st);
    keep_while_staging(st, i, line, n, r, len, here, plan);
    return t_old;
}

void cdc__profiled_plan_staged(cdc_context_t *context, uint64_t token)
{
    cdc_profiled_state_t *st = &context->profiled;
    for (int i = 0; i < CDC_PROFILED_LAYOUTS; i++)
        if (token && st->layouts[i].pending_token == token)
            st->layouts[i].pending_staged = 1;
}

int cdc__profiled_plan_home(const cdc_context_t *context, int n, int r, int s)
{
    const cdc_profiled_state_t *st = &context->profiled;
    return st->slots == n + r ? st->home_of_slot[s] : s;
}

/* Workers of live (an implausible one aside: planned as the slowest) with
   fewer samples than `least` of rate, link or bandwidth (its fields). */
static int live_short_of(cdc_context_t *context, uint64_t live, cdc_worker_profile_t least)
{
    cdc_worker_profile_t now[CDC_MAX_WORKERS];
    int workers = cdc__context_profile(context, now, CDC_MAX_WORKERS), count = 0;
    for (int w = 0; w < workers; w++)
        count += ((live >> w) & 1) && !now[w].implausible &&
                 (now[w].rate_samples < least.rate_samples ||
                  now[w].link_samples < least.link_samples ||
                  now[w].stream_samples < least.stream_samples);
    return count;
}

int cdc__profiled_plan_unmeasured(cdc_context_t *context, uint64_t live, int samples)
{
    return live_short_of(context, live, (cdc_worker_profile_t){.rate_samples = samples});
}

int cdc__profiled_plan_unlinked(cdc_context_t *context, uint64_t live)
{
    return live_short_of(context, live,
                         (cdc_worker_profile_t){.link_samples = CDC_PLAN_MIN_LINK_SAMPLES});
}

int cdc__profiled_plan_unstreamed(cdc_context_t *context, uint64_t live)
{
    return live_short_of(context, live,
                         (cdc_worker_profile_t){.stream_samples = CDC_PLAN_MIN_STREAM_SAMPLES});
}

int cdc__profiled_plan_staging(const cdc_context_t *context)
{
    for (int i = 0; i < CDC_PROFILED_LAYOUTS; i++)
        if (context->profiled.layouts[i].pending_token)
            return 1;
    return 0;
}

int cdc__profiled_plan_confirming(const cdc_context_t *context)
{
    for (int i = 0; i < CDC_PROFILED_LAYOUTS; i++)
        if (context->profiled.layouts[i].wanted_since_ms > 0.0)
            return 1;
    return 0;
}

/* Re-anchor the plan's profile when an estimate moved for good, or when one
   became usable (enough samples): that changes the plan as much. */
static void anchor(cdc_context_t *context)
{
    cdc_profiled_state_t *st = &context->profiled;
    cdc_worker_profile_t now[CDC_MAX_WORKERS];
    int workers = cdc__context_profile(context, now, CDC_MAX_WORKERS);
    uint64_t generation = 0;
    for (int w = 0; w < workers; w++)
        generation += now[w].generation + usable_bits(&now[w]) * ((uint64_t) 1 << 40);
    if (st->workers != workers || st->generation != generation) {
        memcpy(st->anchored, now, (size_t) workers * sizeof *now);
        st->workers = workers;
        st->generation = generation;
        st->homes_stale = 1;
    }
}

/* Every worker's line for this work from the anchored profile: 1 when at
   least n workers have been measured (the others assumed at the slowest
   rate), else 0. */
static int anchored_lines(const cdc_profiled_state_t *st, int n, int r,
                          const cdc_block_cost_t *cost, int64_t rows, cdc_shard_cost_t *line)
{
    if (st->workers < n + r || rows < n)
        return 0;
    int measured = 0;
    slowest_t slowest = {INFINITY, 0.0, 0.0, 0.0};
    for (int w = 0; w < st->workers; w++) {
        const cdc_worker_profile_t *p = &st->anchored[w];
        if (p->rate_samples >= CDC_PLAN_MIN_RATE_SAMPLES) {
            measured++;
            slowest.gflops = p->gflops < slowest.gflops ? p->gflops : slowest.gflops;
        }
        if (p->stream_samples >= CDC_PLAN_MIN_STREAM_SAMPLES && p->gbps > 0 &&
            (slowest.gbps == 0.0 || p->gbps < slowest.gbps))
            slowest.gbps = p->gbps;
        if (p->link_samples >= CDC_PLAN_MIN_LINK_SAMPLES && p->mbit > 0 &&
            (slowest.mbit == 0.0 || p->mbit < slowest.mbit))
            slowest.mbit = p->mbit;
        if (!p->implausible && p->rtt_ms > slowest.rtt_ms)
            slowest.rtt_ms = p->rtt_ms;
    }
    if (measured < n || !(slowest.gflops > 0.0))
        return 0;
    for (int w = 0; w < st->workers; w++)
        line[w] = cost_line(&st->anchored[w], cost, &slowest);
    return 1;
}

/* What a call of the operand `key` would run with now, into len and *here
   (fresh lengths of latency t_fresh there): the lengths the workers hold
   for it, or are being sent, unless the fresh ones beat them by `gain`,
   as keep_or_remember decides. Nothing remembered: len as it is. */
static void as_kept(const cdc_profiled_state_t *st, uint64_t key, const cdc_shard_cost_t *line,
                    const int *home, int n, int r, const cdc_block_cost_t *cost, double gain,
                    double t_fresh, int64_t *len, int64_t *here)
{
    int i = layout_index(st, key);
    if (i < 0)
        return;
    int staging = st->layouts[i].pending_token != 0;
    const int64_t *kept = staging ? st->layouts[i].pending : st->layouts[i].len;
    int64_t kept_here = staging ? st->layouts[i].pending_here : st->layouts[i].here;
    if (st->layouts[i].sized_for == shape_key(cost) &&
        t_fresh < gain * latency_of(line, home, n, r, cost, kept_here, kept))
        return;
    memcpy(len, kept, (size_t) n * sizeof *len);
    *here = kept_here;
}

/* The model's latency for lengths len on the slots' homes (the body of
   cdc__profiled_plan_predict_lengths, the context anchored). */
static int latency_exact(const cdc_profiled_state_t *st, int n, int r,
                         const cdc_block_cost_t *cost, int64_t rows, int64_t here_rows,
                         const int64_t *len, const int *home, double *expected_ms,
                         double *worst_ms)
{
    cdc_shard_cost_t line[CDC_MAX_WORKERS], data[CDC_MAX_WORKERS], parity[CDC_MAX_WORKERS];
    if (!anchored_lines(st, n, r, cost, rows, line))
        return 0;
    slot_lines_exact(line, home, n, r, cost, len, data, parity);
    double here = here_line_ms(cost, here_rows);
    *expected_ms = fmax(here, cdc__planner_latency_first_n(data, n, parity, r, len));
    *worst_ms = fmax(here, cdc__planner_latency(data, n, parity, r, len));
    return 1;
}

int cdc__profiled_plan_predict(cdc_context_t *context, int n, int r, int rotated,
                               const cdc_block_cost_t *cost, int64_t rows,
                               double *predicted_ms)
{
    cdc_profiled_state_t *st = &context->profiled;
    int slots = rotated ? n + r : n, parity = rotated ? 0 : r;
    cdc_shard_cost_t line[CDC_MAX_WORKERS];
    anchor(context);
    if (!anchored_lines(st, slots, parity, cost, rows, line))
        return 0;
    int home[CDC_MAX_WORKERS];
    for (int s = 0; s < n + r; s++)
        home[s] = cdc__profiled_plan_home(context, n, r, s);
    int64_t len[CDC_MAX_WORKERS], here;
    int sized;
    double t = rotated ? stripe_lengths(line, home, n, slots, cost, rows, len, &here)
                       : block_lengths(line, home, n, r, cost, rows, len, &here, &sized);
    if (!isfinite(t))
        return 0;
    uint64_t key = rotated ? stripes_key(cost, rows, slots) : operand_key(cost, rows, n, r);
    double gain = cost->held_per_row > 0.0 && r > 0 ? PLAN_RESHIP_GAIN : PLAN_SWITCH_GAIN;
    as_kept(st, key, line, home, slots, parity, cost, gain, t, len, &here);
    double worst;
    return latency_exact(st, slots, parity, cost, rows, here, len, home, predicted_ms, &worst);
}

int cdc__profiled_plan_predict_lengths(cdc_context_t *context, int n, int r,
                                       const cdc_block_cost_t *cost, int64_t rows,
                                       int64_t here_rows, const int64_t *len, const int *home,
                                       double *expected_ms, double *worst_ms)
{
    anchor(context);
    return latency_exact(&context->profiled, n, r, cost, rows, here_rows, len, home,
                         expected_ms, worst_ms);
}

int cdc__profiled_plan_size(cdc_context_t *context, cdc_call_plan_t *plan,
                            const cdc_block_cost_t *cost, int64_t rows,
                            double *predicted_ms)
{
    cdc_profiled_state_t *st = &context->profiled;
    int n = plan->n, r = cdc__plan_sized_r(plan);
    cdc_shard_cost_t line[CDC_MAX_WORKERS];
    anchor(context);
    note_repair(context);
    if (!anchored_lines(st, n, r, cost, rows, line))
        return 0;
    if (st->homes_stale || st->slots != n + r) {
        int rc = homes_update(context, line, n, r, rows);
        if (rc != CDC_OK)
            return rc;
        st->homes_stale = 0;
    }
    int64_t here;
    int sized;
    double t = block_lengths(line, st->home_of_slot, n, r, cost, rows, plan->block_len, &here,
                             &sized);
    if (!isfinite(t) || !sized)
        return 0;
    uint64_t key = operand_key(cost, rows, n, r);
    int i = layout_index(st, key);
    int stage = may_stage(st, cost, n, r, i >= 0 ? st->layouts[i].len : NULL, plan->block_len);
    t = keep_or_remember(st, key, line, n, r, cost, plan->block_len, &here, t, stage, plan);
    forget_dropped(context);
    plan->here_rows = here;
    plan->sized = 1;
    if (predicted_ms)
        *predicted_ms = t;
    return 1;
}

/* What staging new stripes needs: weights the workers cache, a worker the
   calls can lose (the one being staged), and each home's budget holding
   its old operand and its new one at once. */
static int may_stage_stripes(const cdc_profiled_state_t *st, const cdc_block_cost_t *cost,
                             int n, int r, const int64_t *old, const int64_t *len)
{
    int workers = n + r;
    if (!(cost->held_per_row > 0.0) || r < 1)
        return 0;
    int64_t parity_old = (int64_t) r * cdc__rotated_parity_rows(old, workers, n);
    int64_t parity_new = (int64_t) r * cdc__rotated_parity_rows(len, workers, n);
    for (int w = 0; w < workers; w++) {
        const cdc_worker_profile_t *p = &st->anchored[st->home_of_slot[w]];
        double both = 2.0 * cost->held_fixed +
                      (double) (old[w] + parity_old + len[w] + parity_new) * cost->held_per_row;
        if (p->max_memory > 0 && both > (double) p->max_memory)
            return 0;
    }
    return 1;
}

/* The rows operand `key` had (remembered as equal, rows over count, when it
   had none yet) into len; returns the coordinator's share that goes with
   them. */
static int64_t stripes_kept(cdc_profiled_state_t *st, uint64_t key, int count, int64_t rows,
                            int64_t *len)
{
    int i = layout_index(st, key);
    if (i < 0) {
        int64_t equal[CDC_MAX_WORKERS];
        cdc__plan_equal_lengths(count, rows, equal);
        i = layout_claim(st, key, 0, equal, count, 0); /* sized for no shape yet */
    }
    memcpy(len, st->layouts[i].len, (size_t) count * sizeof *len);
    return st->layouts[i].here;
}

static int size_stripes(cdc_context_t *context, cdc_call_plan_t *plan,
                        const cdc_block_cost_t *cost, int64_t rows)
{
    cdc_profiled_state_t *st = &context->profiled;
    int n = plan->n, r = plan->r, workers = n + r;
    uint64_t key = stripes_key(cost, rows, workers);
    cdc_shard_cost_t line[CDC_MAX_WORKERS];
    anchor(context);
    note_repair(context);
    /* Every worker computes data rows on every call here: all of them are
       measured before the first sizing (a device taken at the slowest rate
       meanwhile would keep too few rows once the rest is within 10%). */
    if (!anchored_lines(st, workers, 0, cost, rows, line)) {
        plan->here_rows = stripes_kept(st, key, workers, rows, plan->block_len);
        return 0;
    }
    /* The homes as for the dedicated blocks (one map serves both layouts:
       a model's spatial layers are dedicated, and their parity is best on
       a fast device); the stripes are sized to whichever homes the slots
       have. */
    if (st->homes_stale || st->slots != workers) {
        int rc = homes_update(context, line, n, r, rows);
        if (rc != CDC_OK)
            return rc;
        st->homes_stale = 0;
    }
    if (st->slots != workers) { /* no homes chosen (none holds it all): worker s */
        for (int s = 0; s < CDC_MAX_WORKERS; s++)
            st->home_of_slot[s] = s;
        st->slots = workers;
    }
    const int *home = st->home_of_slot;
    int64_t len[CDC_MAX_WORKERS], equal[CDC_MAX_WORKERS], here;
    double t = stripe_lengths(line, home, n, workers, cost, rows, len, &here);
    if (!isfinite(t)) {
        plan->here_rows = stripes_kept(st, key, workers, rows, plan->block_len);
        return 0;
    }
    cdc__plan_equal_lengths(workers, rows, equal);
    int i = layout_index(st, key);
    int stage = may_stage_stripes(st, cost, n, r, i >= 0 ? st->layouts[i].len : equal, len);
    keep_or_remember(st, key, line, workers, 0, cost, len, &here, t, stage, plan);
    memcpy(plan->block_len, len, (size_t) workers * sizeof *len);
    plan->here_rows = here;
    return 1;
}

int cdc__profiled_plan_size_stripes(cdc_context_t *context, cdc_call_plan_t *plan,
                                    const cdc_block_cost_t *cost, int64_t rows)
{
    int rc = size_stripes(context, plan, cost, rows);
    forget_dropped(context); /* whichever way it went */
    return rc;
}
