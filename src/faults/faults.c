/* faults.c - parse CDCGEMM_FAULTS and draw reproducible per-call fault decisions. */
#include "faults.h"

#include "cdcgemm.h"
#include "error.h"
#include "number.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {"crash", "hang",  "delay", "drop",
                                         "corrupt", "slow", "link", "misreport", "disk"};

/* Which keys each kind accepts (a key outside its list is an error). */
static const char *const kind_keys[][6] = {
    {"after", NULL},
    {"after", "for", NULL},
    {"dist", "ms", "mean", "p", NULL},
    {"p", NULL},
    {"p", NULL},
    {"x", "gflops", "gbps", "after", NULL},
    {"mbit", "lat", NULL},
    {"memory", "rate", "flap", NULL},
    {"mbyte", NULL},
};

static int key_allowed(cdc_fault_kind_t kind, const char *key, size_t len)
{
    for (int i = 0; kind_keys[kind][i]; i++)
        if (strlen(kind_keys[kind][i]) == len && strncmp(kind_keys[kind][i], key, len) == 0)
            return 1;
    return 0;
}

static int parse_number(const char *rule, const char *key, const char *text, size_t len,
                        double lo, double hi, double *out)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return cdc__fail(CDC_ECONFIG, "CDCGEMM_FAULTS: rule '%s': %s needs a number", rule, key);
    memcpy(buf, text, len);
    buf[len] = '\0';
    double v;
    if (cdc__parse_decimal(buf, &v) != 0 || v < lo || v > hi)
        return cdc__fail(CDC_ECONFIG, "CDCGEMM_FAULTS: rule '%s': %s=%s, expected %g..%g",
                         rule, key, buf, lo, hi);
    *out = v;
    return CDC_OK;
}

/* "seed=N": the plan's generator seed, an integer up to 2^53. */
static int parse_seed(const char *text, cdc_fault_plan_t *plan)
{
    double seed = 0;
    int rc = parse_number(text, "seed", text + 5, strlen(text + 5), 0, 9007199254740992.0,
                          &seed);
    if (rc == CDC_OK && seed != floor(seed))
        rc = cdc__fail(CDC_ECONFIG, "CDCGEMM_FAULTS: seed must be an integer");
    if (rc == CDC_OK)
        plan->seed = (uint64_t) seed;
    return rc;
}

/* KIND, the len bytes before '@'. */
static int parse_kind(const char *text, size_t len, cdc_fault_rule_t *r)
{
    int kind = -1;
    for (int k = 0; k < (int) (sizeof kind_names / sizeof *kind_names); k++)
        if (len == strlen(kind_names[k]) && strncmp(text, kind_names[k], len) == 0)
            kind = k;
    if (kind < 0)
        return cdc__fail(CDC_ECONFIG,
                         "CDCGEMM_FAULTS: rule '%s': unknown kind (crash, hang, delay, drop, "
                         "corrupt, slow, link, misreport)",
                         text);
    r->kind = (cdc_fault_kind_t) kind;
    return CDC_OK;
}

/* TARGET: "*" (every worker), "wINDEX", or "c" (the coordinator). */
static int parse_target(const char *text, const char *target, size_t len, cdc_fault_rule_t *r)
{
    if (len == 1 && (target[0] == '*' || target[0] == 'c')) {
        r->target = target[0] == '*' ? -1 : CDC_FAULT_COORDINATOR;
        return CDC_OK;
    }
    /* wINDEX with INDEX decimal digits only: "w 3", "w+3", "w0x3" are typos. */
    size_t digits = 0;
    while (digits + 1 < len && isdigit((unsigned char) target[digits + 1]))
        digits++;
    if (len < 2 || target[0] != 'w' || digits != len - 1)
        return cdc__fail(CDC_ECONFIG,
                         "CDCGEMM_FAULTS: rule '%s': target must be wINDEX (decimal), * or c",
                         text);
    double index = 0;
    int rc = parse_number(text, "target index", target + 1, len - 1, 0, CDC_MAX_WORKERS - 1,
                          &index);
    if (rc != CDC_OK)
        return rc;
    if (index != floor(index))
        return cdc__fail(CDC_ECONFIG, "CDCGEMM_FAULTS: rule '%s': bad target", text);
    r->target = (int) index;
    return CDC_OK;
}

/* Which of the keys that need each other a rule has set. */
typedef struct {
    int ms; /* delay: ms= or mean=        */
    int x;  /* slow: x= or gflops=        */
    int lie; /* misreport: some key       */
    int mbyte; /* disk: mbyte=            */
} rule_keys_seen_t;

/* dist=fixed|exp|pareto. */
static int parse_dist(const char *text, const char *value, size_t len, cdc_fault_rule_t *r)
{
    if (len == 5 && strncmp(value, "fixed", 5) == 0)
        r->dist = CDC_DIST_FIXED;
    else if (len == 3 && strncmp(value, "exp", 3) == 0)
        r->dist = CDC_DIST_EXP;
    else if (len == 6 && strncmp(value, "pareto", 6) == 0)
        r->dist = CDC_DIST_PARETO;
    else
        return cdc__fail(CDC_ECONFIG,
                         "CDCGEMM_FAULTS: rule '%s': dist must be fixed, exp or pareto", text);
    return CDC_OK;
}

/* misreport's keys: any claim a PONG can carry, absurd ones included (that
   is the point); flap is 0 or 1. */
static int parse_misreport(const char *text, const char *key, size_t key_len,
                           const char *value, size_t value_len, cdc_fault_rule_t *r)
{
    double flap = 0;
    if (key_len == 6 && strncmp(key, "memory", 6) == 0)
        return parse_number(text, "memory", value, value_len, 1, 1e18, &r->memory);
    if (key_len == 4 && strncmp(key, "rate", 4) == 0)
        return parse_number(text, "rate", value, value_len, 1e-9, 1e18, &r->rate);
    int rc = parse_number(text, "flap", value, value_len, 0, 1, &flap);
    if (rc == CDC_OK && flap != floor(flap))
        rc = cdc__fail(CDC_ECONFIG, "CDCGEMM_FAULTS: rule '%s': flap is 0 or 1", text);
    r->flap = (int) flap;
    return rc;
}

/* One key=value the rule's kind accepts, into *r. */
static int parse_key(const char *text, const char *key, size_t key_len, const char *value,
                     size_t value_len, cdc_fault_rule_t *r, rule_keys_seen_t *seen)
{
    double v = 0;
    int rc = CDC_OK;
#define KEY_IS(name) (key_len == strlen(name) && strncmp(key, name, key_len) == 0)
    if (KEY_IS("dist")) {
        rc = parse_dist(text, value, value_len, r);
    } else if (KEY_IS("after")) {
        rc = parse_number(text, "after", value, value_len, 0, 1e15, &v);
        if (rc == CDC_OK && v != floor(v))
            rc = cdc__fail(CDC_ECONFIG, "CDCGEMM_FAULTS: rule '%s': after must be a count",
                           text);
        r->after = (long) v;
    } else if (KEY_IS("for")) {
        rc = parse_number(text, "for", value, value_len, 0, 1e9, &r->for_ms);
    } else if (KEY_IS("ms") || KEY_IS("mean")) {
        rc = parse_number(text, "ms", value, value_len, 0, 1e9, &r->ms);
        seen->ms = 1;
    } else if (KEY_IS("p")) {
        rc = parse_number(text, "p", value, value_len, 0, 1, &r->p);
    } else if (KEY_IS("x")) {
        rc = parse_number(text, "x", value, value_len, 1, 1e6, &r->x);
        seen->x = 1;
    } else if (KEY_IS("gflops")) {
        rc = parse_number(text, "gflops", value, value_len, 1e-6, 1e6, &r->gflops);
        seen->x = 1;
    } else if (KEY_IS("gbps")) {
        rc = parse_number(text, "gbps", value, value_len, 1e-6, 1e4, &r->gbps);
        seen->x = 1;
    } else if (KEY_IS("mbit")) {
        rc = parse_number(text, "mbit", value, value_len, 1e-3, 1e6, &r->mbit);
    } else if (KEY_IS("lat")) {
        rc = parse_number(text, "lat", value, value_len, 0, 1e6, &r->lat_ms);
    } else if (KEY_IS("mbyte")) {
        rc = parse_number(text, "mbyte", value, value_len, 1e-3, 1e6, &r->mbyte);
        seen->mbyte = 1;
    } else if (KEY_IS("memory") || KEY_IS("rate") || KEY_IS("flap")) {
        rc = parse_misreport(text, key, key_len, value, value_len, r);
        seen->lie = 1;
    }
#undef KEY_IS
    return rc;
}

/* The comma-separated k=v list after ':' (NULL: none). */
static int parse_keys(const char *text, const char *list, cdc_fault_rule_t *r,
                      rule_keys_seen_t *seen)
{
    for (const char *kv = list; kv;) {
        const char *comma = strchr(kv, ',');
        size_t len = comma ? (size_t) (comma - kv) : strlen(kv);
        const char *eq = memchr(kv, '=', len);
        if (!eq || eq == kv)
            return cdc__fail(CDC_ECONFIG, "CDCGEMM_FAULTS: rule '%s': '%.*s' is not k=v",
                             text, (int) len, kv);
        size_t key_len = (size_t) (eq - kv);
        if (!key_allowed(r->kind, kv, key_len))
            return cdc__fail(CDC_ECONFIG, "CDCGEMM_FAULTS: rule '%s': %s takes no key '%.*s'",
                             text, kind_names[r->kind], (int) key_len, kv);
        int rc = parse_key(text, kv, key_len, eq + 1, len - key_len - 1, r, seen);
        if (rc != CDC_OK)
            return rc;
        kv = comma ? comma + 1 : NULL;
    }
    return CDC_OK;
}

/* Keys a kind cannot do without, and keys that exclude each other. */
static int check_rule(const char *text, const cdc_fault_rule_t *r, const rule_keys_seen_t *seen)
{
    if (r->kind == CDC_FAULT_DELAY && !seen->ms)
        return cdc__fail(CDC_ECONFIG, "CDCGEMM_FAULTS: rule '%s': delay needs ms= or mean=",
                         text);
    if (r->kind == CDC_FAULT_SLOW && (!seen->x || (r->x > 0 && (r->gflops > 0 || r->gbps > 0))))
        return cdc__fail(CDC_ECONFIG,
                         "CDCGEMM_FAULTS: rule '%s': slow needs x=, or gflops= and/or gbps=",
                         text);
    if (r->kind == CDC_FAULT_DISK && !seen->mbyte)
        return cdc__fail(CDC_ECONFIG, "CDCGEMM_FAULTS: rule '%s': disk needs mbyte=", text);
    if (r->kind == CDC_FAULT_MISREPORT && !seen->lie)
        return cdc__fail(CDC_ECONFIG,
                         "CDCGEMM_FAULTS: rule '%s': misreport needs memory=, rate= or flap=",
                         text);
    if (r->target == CDC_FAULT_COORDINATOR &&
        (r->kind != CDC_FAULT_SLOW || r->x > 0 || r->after > 0))
        return cdc__fail(CDC_ECONFIG,
                         "CDCGEMM_FAULTS: rule '%s': the coordinator (c) takes only "
                         "slow:gflops=G and/or gbps=B",
                         text);
    return CDC_OK;
}

/* One rule: "seed=N" or KIND@TARGET[:k=v,...], appended to plan. */
static int parse_rule(const char *rule, size_t rule_len, cdc_fault_plan_t *plan)
{
    char text[256];
    if (rule_len >= sizeof text)
        return cdc__fail(CDC_ECONFIG, "CDCGEMM_FAULTS: rule longer than %zu bytes",
                         sizeof text - 1);
    memcpy(text, rule, rule_len);
    text[rule_len] = '\0';
    if (strncmp(text, "seed=", 5) == 0)
        return parse_seed(text, plan);

    const char *at = strchr(text, '@');
    if (!at)
        return cdc__fail(CDC_ECONFIG, "CDCGEMM_FAULTS: rule '%s' is not KIND@TARGET[:k=v,...]",
                         text);
    cdc_fault_rule_t r;
    memset(&r, 0, sizeof r);
    r.p = 1.0;
    r.dist = CDC_DIST_FIXED;
    const char *target = at + 1, *colon = strchr(target, ':');
    size_t target_len = colon ? (size_t) (colon - target) : strlen(target);
    rule_keys_seen_t seen = {0, 0, 0, 0};
    int rc;
    if ((rc = parse_kind(text, (size_t) (at - text), &r)) != CDC_OK ||
        (rc = parse_target(text, target, target_len, &r)) != CDC_OK ||
        (rc = parse_keys(text, colon ? colon + 1 : NULL, &r, &seen)) != CDC_OK ||
        (rc = check_rule(text, &r, &seen)) != CDC_OK)
        return rc;
    if (plan->count >= CDC_FAULT_MAX_RULES)
        return cdc__fail(CDC_ECONFIG, "CDCGEMM_FAULTS: more than %d rules",
                         CDC_FAULT_MAX_RULES);
    plan->rules[plan->count++] = r;
    return CDC_OK;
}

int cdc__fault_plan_parse(const char *text, cdc_fault_plan_t *plan)
{
    if (!text || !plan)
        return cdc__fail(CDC_EINVAL, "cdc__fault_plan_parse: NULL argument");
    cdc_fault_plan_t parsed;
    memset(&parsed, 0, sizeof parsed);
    parsed.seed = 1;
    for (const char *rule = text; *rule;) {
        const char *semi = strchr(rule, ';');
        size_t len = semi ? (size_t) (semi - rule) : strlen(rule);
        if (len == 0)
            return cdc__fail(CDC_ECONFIG, "CDCGEMM_FAULTS: empty rule in '%s'", text);
        int rc = parse_rule(rule, len, &parsed);
        if (rc != CDC_OK)
            return rc;
        rule = semi ? semi + 1 : rule + len;
    }
    *plan = parsed;
    return CDC_OK;
}

/* splitmix64: a tiny, well-mixed generator; reproducible everywhere. */
static uint64_t next_u64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double next_unit(uint64_t *state)
{
    return (double) (next_u64(state) >> 11) * (1.0 / 9007199254740992.0);
}

void cdc__fault_state_init(cdc_fault_state_t *state, const cdc_fault_plan_t *plan, int worker)
{
    memset(state, 0, sizeof *state);
    state->worker = worker;
    state->plan.seed = plan->seed;
    for (int i = 0; i < plan->count; i++)
        if (plan->rules[i].target == -1 || plan->rules[i].target == worker)
            state->plan.rules[state->plan.count++] = plan->rules[i];
    /* Each worker gets its own stream from the one seed. */
    state->rng = plan->seed * 0x2545F4914F6CDD1Dull + (uint64_t) worker + 1;
}

void cdc__fault_state_set_incarnation(cdc_fault_state_t *state, int incarnation)
{
    state->incarnation = incarnation > 0 ? incarnation : 0;
    /* Not the first process's draws over again. */
    state->rng += (uint64_t) state->incarnation * 0x9E3779B97F4A7C15ull;
}

static double draw_delay(const cdc_fault_rule_t *r, uint64_t *rng)
{
    double u = next_unit(rng);
    switch (r->dist) {
    case CDC_DIST_EXP:
        return -r->ms * log1p(-u);
    case CDC_DIST_PARETO: {
        /* Shape 2 (finite mean, heavy tail); scale set so the mean is ms. */
        const double shape = 2.0, scale = r->ms * (shape - 1.0) / shape;
        return scale / pow(1.0 - u, 1.0 / shape);
    }
    default:
        return r->ms;
    }
}

/* Time rule r's link takes to carry bytes (0 for an unlimited one). */
static double link_transfer_ms(const cdc_fault_rule_t *r, size_t bytes)
{
    return r->mbit > 0 ? (double) bytes * 8.0 / (r->mbit * 1e3) : 0.0;
}

int cdc__fault_link(const cdc_fault_state_t *state, size_t bytes, double *transfer_ms,
                    double *latency_ms)
{
    int links = 0;
    *transfer_ms = *latency_ms = 0.0;
    for (int i = 0; i < state->plan.count; i++) {
        const cdc_fault_rule_t *r = &state->plan.rules[i];
        if (r->kind != CDC_FAULT_LINK)
            continue;
        links++;
        *transfer_ms += link_transfer_ms(r, bytes);
        *latency_ms += r->lat_ms;
    }
    return links > 0;
}

double cdc__fault_disk_ms(const cdc_fault_state_t *state, size_t bytes)
{
    double ms = 0.0;
    for (int i = 0; i < state->plan.count; i++)
        if (state->plan.rules[i].kind == CDC_FAULT_DISK)
            ms += (double) bytes / (state->plan.rules[i].mbyte * 1e3);
    return ms;
}

/* Whether slow rule r stretches call `call`: from its after= on (a respawned
   process is the same device: the change already happened), and only while
   no slow rule of a later onset is in force (a device that became slower
   is that speed now, not both). */
static int slow_in_force(const cdc_fault_state_t *state, const cdc_fault_rule_t *r, long call)
{
    long onset = -1;
    for (int i = 0; i < state->plan.count; i++) {
        const cdc_fault_rule_t *o = &state->plan.rules[i];
        if (o->kind == CDC_FAULT_SLOW && (state->incarnation > 0 || call >= o->after))
            onset = o->after > onset ? o->after : onset;
    }
    return (state->incarnation > 0 || call >= r->after) && r->after == onset;
}

/* The time slow rule r adds to a task that computed flops, streaming
   bytes_read of operands, in compute_ms: x times the compute, or the
   emulated device's time, the larger of flops at gflops and bytes_read at
   gbps (the ones set), beyond the real compute. */
static double slow_extra_ms(const cdc_fault_rule_t *r, double compute_ms, double flops,
                            double bytes_read)
{
    if (r->x > 0)
        return (r->x - 1.0) * compute_ms;
    cdc_emulated_device_t device = {r->gflops, r->gbps};
    return cdc__emulated_ms(device, flops, bytes_read) - compute_ms;
}

void cdc__fault_next(cdc_fault_state_t *state, double compute_ms, double flops,
                     double bytes_read, size_t bytes_in, size_t bytes_out,
                     cdc_fault_decision_t *d)
{
    memset(d, 0, sizeof *d);
    d->hang_ms = -1.0;
    long call = state->calls++;
    int once = state->incarnation == 0; /* one-shot rules: the slot's first process */
    for (int i = 0; i < state->plan.count; i++) {
        const cdc_fault_rule_t *r = &state->plan.rules[i];
        if (r->kind == CDC_FAULT_MISREPORT || r->kind == CDC_FAULT_DISK)
            continue; /* PONGs, store loads only: no draw, no shift */
        /* Draw for every probabilistic rule on every call, hit or not, so one
           rule's outcome never shifts another's sequence. */
        double u = next_unit(&state->rng);
        switch (r->kind) {
        case CDC_FAULT_CRASH:
            d->crash |= once && call >= r->after;
            break;
        case CDC_FAULT_HANG:
            if (once && call == r->after)
                d->hang_ms = r->for_ms;
            break;
        case CDC_FAULT_DELAY: {
            double delay = draw_delay(r, &state->rng);
            if (u < r->p)
                d->delay_ms += delay;
            break;
        }
        case CDC_FAULT_DROP:
            d->drop |= u < r->p;
            break;
        case CDC_FAULT_CORRUPT: {
            uint64_t at = next_u64(&state->rng);
            if (u < r->p) {
                d->corrupt = 1;
                d->corrupt_at = at;
            }
            break;
        }
        case CDC_FAULT_SLOW: {
            if (!slow_in_force(state, r, call))
                break;
            d->slow_onset |= once && r->after > 0 && call == r->after;
            double extra = slow_extra_ms(r, compute_ms, flops, bytes_read);
            if (extra > 0) {
                d->delay_ms += extra;
                d->slow_ms += extra;
            }
            break;
        }
        case CDC_FAULT_LINK:
            d->delay_ms += 2.0 * r->lat_ms;
            d->latency_ms += 2.0 * r->lat_ms;
            d->delay_ms += link_transfer_ms(r, bytes_in + bytes_out);
            break;
        case CDC_FAULT_MISREPORT:
        case CDC_FAULT_DISK:
            break;
        }
    }
}

void cdc__fault_part(const cdc_fault_state_t *state, double compute_ms, double flops,
                     double bytes_read, size_t bytes_out, cdc_fault_decision_t *d)
{
    memset(d, 0, sizeof *d);
    d->hang_ms = -1.0;
    long call = state->calls > 0 ? state->calls - 1 : 0; /* the part's task */
    for (int i = 0; i < state->plan.count; i++) {
        const cdc_fault_rule_t *r = &state->plan.rules[i];
        if (r->kind == CDC_FAULT_SLOW && slow_in_force(state, r, call)) {
            double extra = slow_extra_ms(r, compute_ms, flops, bytes_read);
            if (extra > 0) {
                d->delay_ms += extra;
                d->slow_ms += extra;
            }
        } else if (r->kind == CDC_FAULT_LINK) {
            d->delay_ms += r->lat_ms + link_transfer_ms(r, bytes_out);
            d->latency_ms += r->lat_ms;
        }
    }
}

void cdc__fault_misreport(const cdc_fault_state_t *state, cdc_fault_misreport_t *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < state->plan.count; i++) {
        const cdc_fault_rule_t *r = &state->plan.rules[i];
        if (r->kind != CDC_FAULT_MISREPORT)
            continue;
        out->memory = r->memory > 0 ? r->memory : out->memory;
        out->rate = r->rate > 0 ? r->rate : out->rate;
        out->flap |= r->flap;
    }
}

cdc_emulated_device_t cdc__fault_coordinator(const cdc_fault_plan_t *plan)
{
    for (int i = 0; i < plan->count; i++)
        if (plan->rules[i].target == CDC_FAULT_COORDINATOR)
            return (cdc_emulated_device_t){plan->rules[i].gflops, plan->rules[i].gbps};
    return (cdc_emulated_device_t){0.0, 0.0};
}

double cdc__emulated_ms(cdc_emulated_device_t device, double flops, double bytes_read)
{
    double compute = device.gflops > 0.0 ? flops / (device.gflops * 1e6) : 0.0;
    double memory = device.gbps > 0.0 ? bytes_read / (device.gbps * 1e6) : 0.0;
    return compute > memory ? compute : memory;
}
