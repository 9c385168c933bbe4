/* chaos.c - the --chaos grammar (chaos.h) and its seeded schedule. Pure: no
   clock, no signals; strict, every error names the rule and the bad part. */
#include "chaos.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TIME_MS (24.0 * 3600.0 * 1000.0)

static int fail(char *error, size_t size, const char *rule, const char *format, ...)
{
    char what[CDC_CHAOS_ERROR_BYTES];
    va_list args;
    va_start(args, format);
    vsnprintf(what, sizeof what, format, args);
    va_end(args);
    if (error && size) {
        if (rule)
            snprintf(error, size, "rule '%s': %s", rule, what);
        else
            snprintf(error, size, "%s", what);
    }
    return 1;
}

/* A plain decimal (digits, optionally one '.' and digits) then ms or s. */
static int parse_time(const char *text, size_t len, double *ms)
{
    size_t i = 0, digits = 0;
    double value = 0.0, scale = 1.0;
    for (; i < len && text[i] >= '0' && text[i] <= '9'; i++, digits++)
        value = value * 10.0 + (text[i] - '0');
    if (i < len && text[i] == '.') {
        size_t frac = 0;
        for (i++; i < len && text[i] >= '0' && text[i] <= '9'; i++, frac++) {
            scale /= 10.0;
            value += (text[i] - '0') * scale;
        }
        if (frac == 0)
            return 1;
    }
    if (digits == 0 || digits > 9)
        return 1;
    const char *unit = text + i;
    size_t unit_len = len - i;
    if (unit_len == 2 && strncmp(unit, "ms", 2) == 0)
        *ms = value;
    else if (unit_len == 1 && unit[0] == 's')
        *ms = value * 1000.0;
    else
        return 1;
    return *ms > MAX_TIME_MS;
}

static int parse_action(const char *text, size_t len, cdc_chaos_action_t *out)
{
    static const char *const names[] = {"kill", "stop", "restart"};
    for (int a = 0; a < 3; a++)
        if (strlen(names[a]) == len && strncmp(text, names[a], len) == 0) {
            *out = (cdc_chaos_action_t) a;
            return 0;
        }
    return 1;
}

static int parse_target(const char *text, size_t len, cdc_chaos_rule_t *rule)
{
    if (len == 1 && text[0] == '*') {
        rule->target = CDC_CHAOS_TARGET_ALL;
        return 0;
    }
    if (len == 6 && strncmp(text, "random", 6) == 0) {
        rule->target = CDC_CHAOS_TARGET_RANDOM;
        return 0;
    }
    if (len < 2 || len > 3 || text[0] != 'w')
        return 1;
    int index = 0;
    for (size_t i = 1; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return 1;
        index = index * 10 + (text[i] - '0');
    }
    if (index >= CDC_CHAOS_MAX_WORKERS)
        return 1;
    rule->target = CDC_CHAOS_TARGET_ONE;
    rule->index = index;
    return 0;
}

typedef struct {
    int at, every, jitter, for_;
} seen_t;

/* One key=value of a rule's timing. */
static int parse_key(const char *text, size_t len, cdc_chaos_rule_t *rule, seen_t *seen,
                     char *error, size_t size)
{
    const char *eq = memchr(text, '=', len);
    if (!eq)
        return fail(error, size, rule->text, "'%.*s': expected key=value", (int) len, text);
    size_t klen = (size_t) (eq - text), vlen = len - klen - 1;
    const char *value = eq + 1;
    int *flag = NULL;
    if (klen == 2 && strncmp(text, "at", 2) == 0)
        flag = &seen->at;
    else if (klen == 5 && strncmp(text, "every", 5) == 0)
        flag = &seen->every;
    else if (klen == 6 && strncmp(text, "jitter", 6) == 0)
        flag = &seen->jitter;
    else if (klen == 3 && strncmp(text, "for", 3) == 0)
        flag = &seen->for_;
    else
        return fail(error, size, rule->text, "unknown key '%.*s' (at, every, jitter, for)",
                    (int) klen, text);
    if (*flag)
        return fail(error, size, rule->text, "'%.*s' given twice", (int) klen, text);
    *flag = 1;
    const char *tilde = flag == &seen->every ? memchr(value, '~', vlen) : NULL;
    size_t first = tilde ? (size_t) (tilde - value) : vlen;
    double ms = 0.0;
    if (parse_time(value, first, &ms))
        return fail(error, size, rule->text,
                    "%.*s: '%.*s' is not a time (a plain decimal then ms or s, e.g. 500ms, "
                    "2s, 1.5s)",
                    (int) klen, text, (int) first, value);
    if (flag == &seen->at) {
        rule->at_ms = ms;
    } else if (flag == &seen->every) {
        if (ms < 1.0)
            return fail(error, size, rule->text, "every=%.*s: must be at least 1ms", (int) first,
                        value);
        rule->repeat = 1;
        rule->every_ms = ms;
        if (tilde) {
            if (seen->jitter)
                return fail(error, size, rule->text, "jitter given twice ('~' and jitter=)");
            seen->jitter = 1;
            size_t jlen = vlen - first - 1;
            if (parse_time(tilde + 1, jlen, &rule->jitter_ms))
                return fail(error, size, rule->text,
                            "every=...~%.*s: the jitter is not a time (e.g. ~500ms)", (int) jlen,
                            tilde + 1);
        }
    } else if (flag == &seen->jitter) {
        rule->jitter_ms = ms; /* a '~' before it already set seen->jitter */
    } else {
        if (ms < 1.0)
            return fail(error, size, rule->text, "for=%.*s: must be at least 1ms", (int) vlen,
                        value);
        rule->for_ms = ms;
    }
    return 0;
}

/* The keys' combinations: at or every, jitter with every only and not above
   it, for with stop only and required there. */
static int check_rule(const cdc_chaos_rule_t *rule, const seen_t *seen, char *error,
                      size_t size)
{
    if (seen->at && seen->every)
        return fail(error, size, rule->text, "at= and every= exclude each other");
    if (!seen->at && !seen->every)
        return fail(error, size, rule->text, "needs at=TIME (once) or every=TIME (repeatedly)");
    if (seen->jitter && !seen->every)
        return fail(error, size, rule->text, "jitter needs every=");
    if (rule->jitter_ms >= rule->every_ms && seen->jitter)
        return fail(error, size, rule->text, "jitter (%gms) must be below every= (%gms)",
                    rule->jitter_ms, rule->every_ms);
    if (rule->action == CDC_CHAOS_STOP && !seen->for_)
        return fail(error, size, rule->text, "stop needs for=TIME (how long until SIGCONT)");
    if (rule->action != CDC_CHAOS_STOP && seen->for_)
        return fail(error, size, rule->text, "for= is for stop only");
    return 0;
}

static int parse_rule(const char *text, size_t len, cdc_chaos_rule_t *rule, char *error,
                      size_t size)
{
    memset(rule, 0, sizeof *rule);
    snprintf(rule->text, sizeof rule->text, "%.*s", (int) len, text);
    const char *at = memchr(text, '@', len);
    if (!at)
        return fail(error, size, rule->text, "expected ACTION@TARGET:TIMING or seed=N");
    size_t alen = (size_t) (at - text);
    if (parse_action(text, alen, &rule->action))
        return fail(error, size, rule->text, "unknown action '%.*s' (kill, stop, restart)",
                    (int) alen, text);
    const char *rest = at + 1, *end = text + len;
    const char *colon = memchr(rest, ':', (size_t) (end - rest));
    size_t tlen = colon ? (size_t) (colon - rest) : (size_t) (end - rest);
    if (parse_target(rest, tlen, rule))
        return fail(error, size, rule->text,
                    "target '%.*s': expected wI (I a worker index below %d, decimal digits), "
                    "random or *",
                    (int) tlen, rest, CDC_CHAOS_MAX_WORKERS);
    if (!colon || colon + 1 == end)
        return fail(error, size, rule->text, "needs at=TIME (once) or every=TIME (repeatedly)");
    seen_t seen = {0, 0, 0, 0};
    for (const char *p = colon + 1; p <= end;) {
        const char *comma = memchr(p, ',', (size_t) (end - p));
        const char *stop = comma ? comma : end;
        if (stop == p)
            return fail(error, size, rule->text, "empty key (a stray ',')");
        if (parse_key(p, (size_t) (stop - p), rule, &seen, error, size))
            return 1;
        p = stop + 1;
    }
    return check_rule(rule, &seen, error, size);
}

static int parse_seed(const char *text, size_t len, uint64_t *seed)
{
    if (len == 0 || len > 19)
        return 1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return 1;
        v = v * 10 + (uint64_t) (text[i] - '0');
    }
    *seed = v;
    return 0;
}

int cdc_chaos_parse(const char *spec, cdc_chaos_spec_t *out, char *error, size_t size)
{
    memset(out, 0, sizeof *out);
    out->seed = 1;
    if (!spec || !spec[0])
        return fail(error, size, NULL, "empty chaos spec");
    int seeded = 0;
    const char *end = spec + strlen(spec);
    for (const char *p = spec; p <= end;) {
        const char *semi = memchr(p, ';', (size_t) (end - p));
        const char *stop = semi ? semi : end;
        size_t len = (size_t) (stop - p);
        if (len == 0)
            return fail(error, size, NULL, "empty rule at offset %d (a stray ';')",
                        (int) (p - spec));
        if (len >= 5 && strncmp(p, "seed=", 5) == 0) {
            if (seeded)
                return fail(error, size, NULL, "seed given twice");
            if (parse_seed(p + 5, len - 5, &out->seed))
                return fail(error, size, NULL, "'%.*s': the seed is decimal digits", (int) len,
                            p);
            seeded = 1;
        } else {
            if (out->count == CDC_CHAOS_MAX_RULES)
                return fail(error, size, NULL, "more than %d rules", CDC_CHAOS_MAX_RULES);
            if (parse_rule(p, len, &out->rules[out->count], error, size))
                return 1;
            out->count++;
        }
        p = stop + 1;
    }
    if (out->count == 0)
        return fail(error, size, NULL, "no rule besides the seed");
    return 0;
}

int cdc_chaos_check(const cdc_chaos_spec_t *spec, int workers, int can_restart, char *error,
                    size_t size)
{
    for (int i = 0; i < spec->count; i++) {
        const cdc_chaos_rule_t *r = &spec->rules[i];
        if (r->target == CDC_CHAOS_TARGET_ONE && r->index >= workers)
            return fail(error, size, r->text, "w%d: the run has %d workers (w0 .. w%d)",
                        r->index, workers, workers - 1);
        if (r->action == CDC_CHAOS_RESTART && !can_restart)
            return fail(error, size, r->text,
                        "restart needs workers the bench started itself (--external W); "
                        "embedded workers are respawned by the library's supervisor: use "
                        "kill");
    }
    return 0;
}

static double interval(cdc_chaos_schedule_t *s, int i)
{
    const cdc_chaos_rule_t *r = &s->spec.rules[i];
    double ms = r->every_ms;
    if (r->jitter_ms > 0)
        ms += r->jitter_ms * cdc_test_rng_uniform(&s->rng[i], -1.0, 1.0);
    return ms > 1.0 ? ms : 1.0;
}

void cdc_chaos_schedule_init(cdc_chaos_schedule_t *s, const cdc_chaos_spec_t *spec)
{
    memset(s, 0, sizeof *s);
    s->spec = *spec;
    for (int i = 0; i < spec->count; i++) {
        /* One stream per rule from the seed. */
        cdc_test_rng_seed(&s->rng[i], spec->seed ^ (0xd1b54a32d192ed03ull * (uint64_t) (i + 1)));
        s->next_ms[i] = spec->rules[i].repeat ? interval(s, i) : spec->rules[i].at_ms;
    }
}

double cdc_chaos_peek(const cdc_chaos_schedule_t *s)
{
    double best = -1.0;
    for (int i = 0; i < s->spec.count; i++)
        if (s->next_ms[i] >= 0 && (best < 0 || s->next_ms[i] < best))
            best = s->next_ms[i];
    return best;
}

int cdc_chaos_next(cdc_chaos_schedule_t *s, double until_ms, cdc_chaos_firing_t *out)
{
    int best = -1;
    for (int i = 0; i < s->spec.count; i++)
        if (s->next_ms[i] >= 0 && (best < 0 || s->next_ms[i] < s->next_ms[best]))
            best = i;
    if (best < 0 || s->next_ms[best] > until_ms)
        return 0;
    out->t_ms = s->next_ms[best];
    out->rule = best;
    s->next_ms[best] = s->spec.rules[best].repeat ? s->next_ms[best] + interval(s, best) : -1.0;
    return 1;
}

int cdc_chaos_pick(cdc_chaos_schedule_t *s, int rule, int live)
{
    if (live < 1 || rule < 0 || rule >= s->spec.count)
        return -1;
    return (int) (cdc_test_rng_next(&s->rng[rule]) % (uint64_t) live);
}

const char *cdc_chaos_action_name(cdc_chaos_action_t action)
{
    static const char *const names[] = {"kill", "stop", "restart"};
    return names[action];
}
