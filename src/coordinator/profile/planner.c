/* planner.c - block lengths and homes by predicted latency (planner.h).
 *
 * The problem. Devices differ: equal blocks let the slowest home set every
 * call's latency while the fast ones idle. With each home's time linear in
 * its block's length (t_i = c_i + s_i * len_i), the latency of a call is the
 * time by which every shard is done, parity included: a parity block is as
 * long as the longest data block (codes combine blocks of one shape), so it
 * bounds how long any data block may be.
 *
 * The continuous answer. For a deadline T every data home can take
 * len_i(T) = min((T - c_i) / s_i, cap(T)) rows, cap(T) being the length the
 * slowest parity home computes by T; the sum grows with T, so bisection finds
 * the T at which they just cover the rows. Then whole rows: floors, and the
 * rows left go one at a time where they raise the latency least. A home
 * whose fixed cost (its round trip, the whole operand it is sent) is past T
 * gets no rows: an empty block is not sent, so the call uses fewer workers
 * when the link dominates.
 *
 * Homes. Which workers hold parity changes the answer (a parity on the
 * slowest device caps every block at what that device computes), so every
 * choice of the r parity homes among the n + r cheapest workers is sized and
 * the best kept. */
#include "planner.h"

#include "cdcgemm.h"
#include "error.h"

#include <math.h>
#include <stdlib.h>

#define PLANNER_MAX_SHARDS 64
/* Beyond this many parity choices the r cheapest workers hold parity. */
#define PLANNER_MAX_CHOICES 4096

static double finish_ms(const cdc_shard_cost_t *c, double len)
{
    return c->fixed_ms + c->per_row_ms * len;
}

/* A data block's finish: an empty one is not sent, its result known at once. */
static double data_finish_ms(const cdc_shard_cost_t *c, int64_t len)
{
    return len > 0 ? finish_ms(c, (double) len) : 0.0;
}

double cdc__planner_latency(const cdc_shard_cost_t *data, int n,
                            const cdc_shard_cost_t *parity, int r, const int64_t *len)
{
    double worst = 0.0;
    int64_t longest = 0;
    for (int i = 0; i < n; i++) {
        double t = data_finish_ms(&data[i], len[i]);
        worst = t > worst ? t : worst;
        longest = len[i] > longest ? len[i] : longest;
    }
    for (int j = 0; j < r; j++) {
        double t = finish_ms(&parity[j], (double) longest);
        worst = t > worst ? t : worst;
    }
    return worst;
}

static int compare_ms(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

double cdc__planner_latency_first_n(const cdc_shard_cost_t *data, int n,
                                    const cdc_shard_cost_t *parity, int r, const int64_t *len)
{
    double done[PLANNER_MAX_SHARDS];
    int64_t longest = 0;
    for (int i = 0; i < n; i++) {
        done[i] = data_finish_ms(&data[i], len[i]);
        longest = len[i] > longest ? len[i] : longest;
    }
    for (int j = 0; j < r; j++)
        done[n + j] = finish_ms(&parity[j], (double) longest);
    qsort(done, (size_t) (n + r), sizeof *done, compare_ms);
    return done[n - 1];
}

/* The most rows home c may hold. */
static double cap_of(const cdc_shard_cost_t *c)
{
    return c->max_rows > 0.0 ? c->max_rows : INFINITY;
}

/* Rows a home of cost c computes by deadline t (fractional, >= 0), within
   what it may hold. */
static double rows_by(const cdc_shard_cost_t *c, double t)
{
    double rows = (t - c->fixed_ms) / c->per_row_ms;
    rows = rows < cap_of(c) ? rows : cap_of(c);
    return rows > 0.0 ? rows : 0.0;
}

/* The most whole rows data block i may have: its home's cap and the parity
   homes' (a parity block is as long as the longest data block). */
static int64_t block_cap(const cdc_shard_cost_t *data, int i, const cdc_shard_cost_t *parity,
                         int r)
{
    double cap = cap_of(&data[i]);
    for (int j = 0; j < r; j++)
        cap = cap_of(&parity[j]) < cap ? cap_of(&parity[j]) : cap;
    return cap >= (double) INT64_MAX ? INT64_MAX : (int64_t) floor(cap);
}

/* Whether the caps leave room for the rows (a home that can hold no row
   gets an empty block). */
static int rows_fit(const cdc_shard_cost_t *data, int n, const cdc_shard_cost_t *parity, int r,
                    int64_t rows)
{
    int64_t room = 0;
    for (int i = 0; i < n; i++) {
        int64_t cap = block_cap(data, i, parity, r);
        if (cap > 0)
            room = cap >= rows - room ? rows : room + cap;
    }
    return room >= rows;
}

/* The rows all data homes cover by deadline t, each capped by the parity. */
static double rows_covered(const cdc_shard_cost_t *data, int n,
                           const cdc_shard_cost_t *parity, int r, double t, double *cap)
{
    *cap = INFINITY;
    for (int j = 0; j < r; j++) {
        double c = rows_by(&parity[j], t);
        *cap = c < *cap ? c : *cap;
    }
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        double l = rows_by(&data[i], t);
        sum += l < *cap ? l : *cap;
    }
    return sum;
}

static int costs_valid(const cdc_shard_cost_t *c, int count)
{
    for (int i = 0; i < count; i++)
        if (!(c[i].fixed_ms >= 0.0) || !(c[i].per_row_ms > 0.0) || !isfinite(c[i].fixed_ms) ||
            !isfinite(c[i].per_row_ms))
            return 0;
    return 1;
}

/* The latency if block i grew (delta = +1) or shrank (-1) by one row. */
static double latency_if(const cdc_shard_cost_t *data, int n, const cdc_shard_cost_t *parity,
                         int r, int64_t *len, int i, int delta)
{
    len[i] += delta;
    double t = cdc__planner_latency(data, n, parity, r, len);
    len[i] -= delta;
    return t;
}

int cdc__planner_block_lengths(const cdc_shard_cost_t *data, int n,
                               const cdc_shard_cost_t *parity, int r, int64_t rows,
                               int64_t *len, double *predicted_ms)
{
    if (n < 1 || n > PLANNER_MAX_SHARDS || r < 0 || n + r > PLANNER_MAX_SHARDS || !data ||
        !len || (r > 0 && !parity))
        return cdc__fail(CDC_EINVAL, "planner: n = %d, r = %d", n, r);
    if (rows < 1)
        return cdc__fail(CDC_EINVAL, "planner: %lld rows for %d data blocks", (long long) rows,
                         n);
    if (!costs_valid(data, n) || !costs_valid(parity, r))
        return cdc__fail(CDC_EINVAL,
                         "planner: a cost line is not finite, or a per-row cost is not > 0");
    if (!rows_fit(data, n, parity, r, rows))
        return cdc__fail(CDC_ENOMEM, "planner: %lld rows in %d blocks do not fit the homes' "
                         "memory budgets", (long long) rows, n);

    /* Bisection for the deadline at which the capped blocks cover the rows:
       at hi every home alone could compute all of them. */
    double lo = 0.0, hi = 0.0, cap;
    for (int i = 0; i < n + r; i++) {
        double t = finish_ms(i < n ? &data[i] : &parity[i - n], (double) rows);
        hi = t > hi ? t : hi;
    }
    for (int step = 0; step < 100 && hi - lo > 1e-9 * hi; step++) {
        double mid = 0.5 * (lo + hi);
        if (rows_covered(data, n, parity, r, mid, &cap) >= (double) rows)
            hi = mid;
        else
            lo = mid;
    }
    rows_covered(data, n, parity, r, hi, &cap);

    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        double l = rows_by(&data[i], hi);
        l = l < cap ? l : cap;
        len[i] = (int64_t) floor(l);
        sum += len[i];
    }
    /* Whole rows: each one left (each floor lost < 1 row, so at most n) goes
       where it raises the latency least; should rounding leave rows over,
       they come off where that lowers it most. A home whose fixed cost
       alone passes the latency the others reach keeps an empty block: it
       is sent nothing (fewer workers, when the link dominates). */
    while (sum != rows) {
        int delta = sum < rows ? 1 : -1, best = -1;
        double best_t = INFINITY;
        for (int i = 0; i < n; i++) {
            if ((delta < 0 && len[i] <= 0) || (delta > 0 && len[i] >= block_cap(data, i, parity, r)))
                continue;
            double t = latency_if(data, n, parity, r, len, i, delta);
            if (t < best_t) {
                best_t = t;
                best = i;
            }
        }
        len[best] += delta;
        sum += delta;
    }
    if (predicted_ms)
        *predicted_ms = cdc__planner_latency(data, n, parity, r, len);
    return CDC_OK;
}

/* Worker indices ordered by the cost of an equal block (stable). */
static void order_by_cost(const cdc_shard_cost_t *cost, int workers, double block, int *order)
{
    for (int w = 0; w < workers; w++) {
        int at = w;
        double mine = finish_ms(&cost[w], block);
        while (at > 0 && finish_ms(&cost[order[at - 1]], block) > mine) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = w;
    }
}

static double binomial(int a, int b)
{
    double c = 1.0;
    for (int i = 1; i <= b; i++)
        c = c * (a - b + i) / i;
    return c;
}

/* The next r-subset of 0..m-1 in lexicographic order; 0 after the last. */
static int next_subset(int *pick, int r, int m)
{
    int i = r - 1;
    while (i >= 0 && pick[i] == m - r + i)
        i--;
    if (i < 0)
        return 0;
    pick[i]++;
    for (int j = i + 1; j < r; j++)
        pick[j] = pick[j - 1] + 1;
    return 1;
}

int cdc__planner_homes(const cdc_shard_cost_t *cost, int workers, int n, int r,
                       int64_t rows, int *home_of_slot, double *predicted_ms)
{
    if (!cost || !home_of_slot || n < 1 || r < 0 || n + r > workers ||
        workers > PLANNER_MAX_SHARDS)
        return cdc__fail(CDC_EINVAL, "planner homes: %d data + %d parity slots on %d workers",
                         n, r, workers);
    if (!costs_valid(cost, workers))
        return cdc__fail(CDC_EINVAL, "planner homes: a worker's cost line is not valid");
    int order[PLANNER_MAX_SHARDS];
    order_by_cost(cost, workers, (double) rows / n, order);
    /* The slot holders in worker order, so an unchanged profile keeps slots. */
    int held[PLANNER_MAX_SHARDS], m = n + r;
    for (int i = 0; i < m; i++)
        held[i] = order[i];
    for (int i = 1; i < m; i++)
        for (int j = i; j > 0 && held[j - 1] > held[j]; j--) {
            int t = held[j];
            held[j] = held[j - 1];
            held[j - 1] = t;
        }

    /* pick[j]: the parity home's position in held[] counted from the end, so
       the first choice tried is today's layout (parity on the last slots). */
    int pick[PLANNER_MAX_SHARDS];
    int best_pick[PLANNER_MAX_SHARDS];
    double best_t = INFINITY;
    int exhaustive = binomial(m, r) <= PLANNER_MAX_CHOICES;
    for (int j = 0; j < r; j++)
        pick[j] = j;
    if (!exhaustive) /* the r cheapest workers */
        for (int j = 0; j < r; j++)
            for (int i = 0; i < m; i++)
                if (held[i] == order[j])
                    pick[j] = m - 1 - i;
    do {
        cdc_shard_cost_t data[PLANNER_MAX_SHARDS], parity[PLANNER_MAX_SHARDS];
        int d = 0, p = 0;
        for (int i = 0; i < m; i++) {
            int is_parity = 0;
            for (int j = 0; j < r; j++)
                is_parity |= m - 1 - pick[j] == i;
            if (is_parity)
                parity[p++] = cost[held[i]];
            else
                data[d++] = cost[held[i]];
        }
        int64_t len[PLANNER_MAX_SHARDS];
        double t;
        int rc = cdc__planner_block_lengths(data, n, parity, r, rows, len, &t);
        if (rc == CDC_ENOMEM)
            continue; /* these parity homes cannot hold the longest block */
        if (rc != CDC_OK)
            return rc;
        if (t < best_t) {
            best_t = t;
            for (int j = 0; j < r; j++)
                best_pick[j] = pick[j];
        }
    } while (exhaustive && r > 0 && next_subset(pick, r, m));

    if (!isfinite(best_t))
        return cdc__fail(CDC_ENOMEM, "planner homes: %lld rows do not fit the memory budgets "
                         "of any %d data + %d parity homes", (long long) rows, n, r);
    int d = 0, p = n;
    for (int i = 0; i < m; i++) {
        int is_parity = 0;
        for (int j = 0; j < r; j++)
            is_parity |= m - 1 - best_pick[j] == i;
        home_of_slot[is_parity ? p++ : d++] = held[i];
    }
    if (predicted_ms)
        *predicted_ms = best_t;
    return CDC_OK;
}
