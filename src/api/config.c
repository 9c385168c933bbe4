/* config.c - defaults and the CDCGEMM_* environment, parsed strictly. */
#include "cdcgemm.h"

#include "code.h"
#include "config_env.h"
#include "discovery.h"
#include "error.h"
#include "faults.h"
#include "keys.h"
#include "log.h"
#include "number.h"

#include <ctype.h>
#include <limits.h>
#include <stdatomic.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cdc_config_init(cdc_config_t *config)
{
    if (!config)
        return;
    memset(config, 0, sizeof *config);
    config->local_workers = 5;
    config->parity = 1;
    config->split = CDC_SPLIT_AUTO;
    config->wait_ms = 0;
    config->timeout_ms = 2000;
    config->min_flops = -1.0;
    config->log_level = CDC_LOG_WARN;
    config->verify = 1;
    config->discover_wait_ms = 3000;
    config->respawn = 1;
    config->parity_layout = CDC_LAYOUT_ROTATED; /* issue 13: it wins (benchmarks.md) */
    config->plan = CDC_PLAN_AUTO;               /* issue 26: it wins (benchmarks.md) */
}

int cdc_split_parse(const char *name, cdc_split_t *split)
{
    static const struct {
        const char *name;
        cdc_split_t split;
    } names[] = {{"auto", CDC_SPLIT_AUTO},       {"output", CDC_SPLIT_ROWS},
                 {"channel", CDC_SPLIT_ROWS},    {"rows", CDC_SPLIT_ROWS},
                 {"spatial", CDC_SPLIT_COLUMNS}, {"columns", CDC_SPLIT_COLUMNS}};
    if (!name || !split)
        return cdc__fail(CDC_EINVAL, "cdc_split_parse: NULL argument");
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (strcmp(name, names[i].name) == 0) {
            *split = names[i].split;
            return CDC_OK;
        }
    }
    return cdc__fail(CDC_EINVAL,
                     "unknown split '%s' (expected auto, output, channel, spatial)", name);
}

/* A whole-string integer in [lo, hi] (strict: cdc__parse_long); anything
   else is an error naming var. */
static int parse_int(const char *var, const char *text, long lo, long hi, int *out)
{
    long value;
    if (cdc__parse_long(text, lo, hi, &value) != 0)
        return cdc__fail(CDC_ECONFIG, "%s='%s': expected an integer in [%ld, %ld]", var,
                         text, lo, hi);
    *out = (int) value;
    return CDC_OK;
}

static int parse_copy(const char *var, const char *text, char *dst, size_t size)
{
    size_t len = strlen(text);
    if (len >= size)
        return cdc__fail(CDC_ECONFIG, "%s: value is %zu bytes, limit %zu", var, len,
                         size - 1);
    memcpy(dst, text, len + 1);
    return CDC_OK;
}

/* Comma-separated ZeroMQ endpoints, each with a known transport prefix. */
static int parse_workers(const char *var, const char *text, char *dst, size_t size)
{
    static const char *const prefixes[] = {"tcp://", "ipc://", "inproc://"};
    int count = 0;
    const char *item = text;
    while (1) {
        const char *comma = strchr(item, ',');
        size_t len = comma ? (size_t) (comma - item) : strlen(item);
        int known = 0;
        for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
            size_t plen = strlen(prefixes[i]);
            if (len > plen && strncmp(item, prefixes[i], plen) == 0)
                known = 1;
        }
        if (!known)
            return cdc__fail(CDC_ECONFIG,
                             "%s: endpoint %d '%.*s' is not tcp://, ipc:// or inproc://",
                             var, count + 1, (int) len, item);
        if (++count > CDC_MAX_WORKERS)
            return cdc__fail(CDC_ECONFIG, "%s: more than %d endpoints", var,
                             CDC_MAX_WORKERS);
        if (!comma)
            break;
        item = comma + 1;
    }
    return parse_copy(var, text, dst, size);
}

/* One parser per variable: value (set, maybe empty) into *c, or an error
   naming var. */
typedef int (*env_parser_t)(const char *var, const char *value, cdc_config_t *c);

static int env_workers(const char *var, const char *value, cdc_config_t *c)
{
    int udp_port, discover = cdc__discovery_parse(value, &udp_port);
    if (discover < 0)
        return cdc__fail(CDC_ECONFIG, "%s='%s': expected discover or discover:PORT with "
                                      "PORT in 1..65535", var, value);
    if (discover)
        return parse_copy(var, value, c->workers, sizeof c->workers);
    return *value ? parse_workers(var, value, c->workers, sizeof c->workers) : CDC_OK;
}

static int env_local_workers(const char *var, const char *value, cdc_config_t *c)
{
    return parse_int(var, value, 1, CDC_MAX_WORKERS, &c->local_workers);
}

static int env_parity(const char *var, const char *value, cdc_config_t *c)
{
    return parse_int(var, value, 0, CDC_MAX_PARITY, &c->parity);
}

static int env_split(const char *var, const char *value, cdc_config_t *c)
{
    if (cdc_split_parse(value, &c->split) != CDC_OK)
        return cdc__fail(CDC_ECONFIG, "%s='%s': expected auto, output, channel or spatial",
                         var, value);
    return CDC_OK;
}

static int env_replan(const char *var, const char *value, cdc_config_t *c)
{
    if (strcmp(value, "keep-shards") == 0)
        c->replan = CDC_REPLAN_KEEP_SHARDS;
    else if (strcmp(value, "keep-parity") == 0)
        c->replan = CDC_REPLAN_KEEP_PARITY;
    else
        return cdc__fail(CDC_ECONFIG, "%s='%s': expected keep-shards or keep-parity", var,
                         value);
    return CDC_OK;
}

static int env_replicate(const char *var, const char *value, cdc_config_t *c)
{
    return parse_int(var, value, 0, 1, &c->replicate);
}

static int env_verify(const char *var, const char *value, cdc_config_t *c)
{
    return parse_int(var, value, 0, 2, &c->verify);
}

static int env_in_process(const char *var, const char *value, cdc_config_t *c)
{
    return parse_int(var, value, 0, 1, &c->in_process);
}

static int env_wait_ms(const char *var, const char *value, cdc_config_t *c)
{
    return parse_int(var, value, 0, 600000, &c->wait_ms);
}

static int env_timeout_ms(const char *var, const char *value, cdc_config_t *c)
{
    return parse_int(var, value, 1, 3600000, &c->timeout_ms);
}

static int env_min_flops(const char *var, const char *value, cdc_config_t *c)
{
    double flops;
    if (cdc__parse_decimal(value, &flops) != 0)
        return cdc__fail(CDC_ECONFIG, "%s='%s': expected a number >= 0", var, value);
    c->min_flops = flops;
    return CDC_OK;
}

static int env_faults(const char *var, const char *value, cdc_config_t *c)
{
    cdc_fault_plan_t plan; /* validated here so a typo fails at start-up */
    int rc = cdc__fault_plan_parse(value, &plan);
    return rc == CDC_OK ? parse_copy(var, value, c->faults, sizeof c->faults) : rc;
}

static int env_stats(const char *var, const char *value, cdc_config_t *c)
{
    return parse_copy(var, value, c->stats_path, sizeof c->stats_path);
}

static int env_log(const char *var, const char *value, cdc_config_t *c)
{
    if (cdc__log_level_parse(value, &c->log_level) != 0)
        return cdc__fail(CDC_ECONFIG, "%s='%s': expected error, warn, info or debug", var,
                         value);
    return CDC_OK;
}

/* CURVE certificates are loaded here too, so a wrong path or file fails at
   start-up with the variable's name; the context loads them again. */
static int env_curve_secret(const char *var, const char *value, cdc_config_t *c)
{
    cdc_curve_cert_t cert;
    if (!*value)
        return CDC_OK;
    if (cdc__curve_load_secret(value, &cert) != CDC_OK)
        return cdc__fail_within(CDC_ECONFIG, var);
    cdc__curve_cert_clear(&cert);
    return parse_copy(var, value, c->curve_secret, sizeof c->curve_secret);
}

static int env_curve_server(const char *var, const char *value, cdc_config_t *c)
{
    cdc_curve_cert_t cert;
    if (!*value)
        return CDC_OK;
    int is_dir = cdc__curve_path_is_dir(value);
    if (is_dir < 0)
        return cdc__fail(CDC_ECONFIG, "%s='%s': no such file or directory", var, value);
    if (!is_dir && cdc__curve_load_public(value, &cert) != CDC_OK)
        return cdc__fail_within(CDC_ECONFIG, var);
    return parse_copy(var, value, c->curve_server, sizeof c->curve_server);
}

static int env_insecure(const char *var, const char *value, cdc_config_t *c)
{
    return parse_int(var, value, 0, 1, &c->insecure);
}

static int env_respawn(const char *var, const char *value, cdc_config_t *c)
{
    int respawn = 0;
    int rc = parse_int(var, value, 0, 1, &respawn);
    if (rc == CDC_OK)
        c->respawn = respawn;
    return rc;
}

static int env_plan(const char *var, const char *value, cdc_config_t *c)
{
    if (strcmp(value, "equal") == 0)
        c->plan = CDC_PLAN_EQUAL;
    else if (strcmp(value, "profiled") == 0)
        c->plan = CDC_PLAN_PROFILED;
    else if (strcmp(value, "auto") == 0)
        c->plan = CDC_PLAN_AUTO;
    else
        return cdc__fail(CDC_ECONFIG, "%s='%s': expected auto, equal or profiled", var, value);
    return CDC_OK;
}

static int env_parity_layout(const char *var, const char *value, cdc_config_t *c)
{
    if (strcmp(value, "dedicated") == 0)
        c->parity_layout = CDC_LAYOUT_DEDICATED;
    else if (strcmp(value, "rotated") == 0)
        c->parity_layout = CDC_LAYOUT_ROTATED;
    else
        return cdc__fail(CDC_ECONFIG, "%s='%s': expected rotated or dedicated", var, value);
    return CDC_OK;
}

static int env_data_shards(const char *var, const char *value, cdc_config_t *c)
{
    return parse_int(var, value, 1, CDC_MAX_WORKERS, &c->data_shards);
}

static int env_discover_interface(const char *var, const char *value, cdc_config_t *c)
{
    return parse_copy(var, value, c->discover_interface, sizeof c->discover_interface);
}

static int env_discover_wait_ms(const char *var, const char *value, cdc_config_t *c)
{
    int wait_ms = 0;
    int rc = parse_int(var, value, 0, 600000, &wait_ms);
    if (rc == CDC_OK)
        c->discover_wait_ms = wait_ms;
    return rc;
}

static int env_code(const char *var, const char *value, cdc_config_t *c)
{
    if (!*value)
        return CDC_OK;
    if (!cdc__code_find_ops(value))
        return cdc__fail(CDC_ECONFIG, "%s='%s': unknown code scheme", var, value);
    return parse_copy(var, value, c->code, sizeof c->code);
}

/* Every variable the library reads, in the order they are checked. */
static const struct {
    const char *name;
    env_parser_t parse;
} env_variables[] = {
    {"CDCGEMM_WORKERS", env_workers},       {"CDCGEMM_LOCAL_WORKERS", env_local_workers},
    {"CDCGEMM_PARITY", env_parity},         {"CDCGEMM_SPLIT", env_split},
    {"CDCGEMM_REPLAN", env_replan},         {"CDCGEMM_REPLICATE", env_replicate},
    {"CDCGEMM_VERIFY", env_verify},         {"CDCGEMM_IN_PROCESS", env_in_process},
    {"CDCGEMM_WAIT_MS", env_wait_ms},       {"CDCGEMM_TIMEOUT_MS", env_timeout_ms},
    {"CDCGEMM_MIN_FLOPS", env_min_flops},   {"CDCGEMM_FAULTS", env_faults},
    {"CDCGEMM_STATS", env_stats},           {"CDCGEMM_LOG", env_log},
    {"CDCGEMM_CODE", env_code},             {"CDCGEMM_PARITY_LAYOUT", env_parity_layout},
    {"CDCGEMM_CURVE_SECRET", env_curve_secret}, {"CDCGEMM_CURVE_SERVER", env_curve_server},
    {"CDCGEMM_INSECURE", env_insecure},
    {"CDCGEMM_DISCOVER_INTERFACE", env_discover_interface},
    {"CDCGEMM_DISCOVER_WAIT_MS", env_discover_wait_ms},
    {"CDCGEMM_RESPAWN", env_respawn},       {"CDCGEMM_DATA_SHARDS", env_data_shards},
    {"CDCGEMM_PLAN", env_plan},
};

extern char **environ;

/* Variables read elsewhere (the supervisor, cdcgemm-worker): known, so they
   draw no "unknown variable" warning. */
static const char *const other_variables[] = {
    "CDCGEMM_WORKER_BIN",
    "CDCGEMM_WORKER_MAX_MEMORY",
    "CDCGEMM_WORKER_STORE",
};

#define ENV_COUNT (sizeof env_variables / sizeof *env_variables)
#define OTHER_COUNT (sizeof other_variables / sizeof *other_variables)

static const char *known_name(size_t i)
{
    return i < ENV_COUNT ? env_variables[i].name : other_variables[i - ENV_COUNT];
}

int cdc__config_variable_known(const char *name)
{
    for (size_t i = 0; i < ENV_COUNT + OTHER_COUNT; i++)
        if (strcmp(name, known_name(i)) == 0)
            return 1;
    return 0;
}

#define NAME_MAX_EDIT 64 /* longer names are compared on their first 64 bytes */

static int same_letter(char a, char b)
{
    return toupper((unsigned char) a) == toupper((unsigned char) b);
}

/* Optimal string alignment distance between a and b, ignoring case (at most
   NAME_MAX_EDIT bytes of each): three rows of the edit matrix. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    la = la > NAME_MAX_EDIT ? NAME_MAX_EDIT : la;
    lb = lb > NAME_MAX_EDIT ? NAME_MAX_EDIT : lb;
    size_t rows[3][NAME_MAX_EDIT + 1];
    size_t *before = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = !same_letter(a[i - 1], b[j - 1]);
            size_t best = prev[j - 1] + cost;
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && same_letter(a[i - 1], b[j - 2]) &&
                same_letter(a[i - 2], b[j - 1]) &&
                before[j - 2] + 1 < best)
                best = before[j - 2] + 1; /* PARTIY -> PARITY is one edit */
            cur[j] = best;
        }
        size_t *spare = before;
        before = prev;
        prev = cur;
        cur = spare;
    }
    return prev[lb];
}

const char *cdc__config_closest_variable(const char *name)
{
    static const size_t prefix = sizeof "CDCGEMM_" - 1;
    const char *best = NULL;
    size_t best_distance = (size_t) -1;
    for (size_t i = 0; i < ENV_COUNT + OTHER_COUNT; i++) {
        size_t d = edit_distance(name, known_name(i));
        if (d < best_distance) {
            best_distance = d;
            best = known_name(i);
        }
    }
    size_t tail = strlen(name) > prefix ? strlen(name) - prefix : 0;
    return best && strcmp(best, name) != 0 && 2 * best_distance <= tail + 1 ? best : NULL;
}

/* name (len bytes) as the warning shows it: bytes outside printable ASCII
   as \xNN (a name can hold any byte but '=' and NUL; a terminal must not
   act on them), cut at 120 shown bytes with the whole length said. */
static void printable_name(const char *name, size_t len, char *out, size_t size)
{
    size_t used = 0, i = 0;
    for (; i < len && used + 5 < size && used < 120; i++) {
        unsigned char c = (unsigned char) name[i];
        if (c >= 0x20 && c < 0x7f)
            out[used++] = (char) c;
        else
            used += (size_t) snprintf(out + used, size - used, "\\x%02x", c);
    }
    out[used] = '\0';
    if (i < len)
        snprintf(out + used, size - used, "... (%zu bytes)", len);
}

/* A CDCGEMM_* variable nobody reads is most likely a typo that leaves a
   setting at its default (CDCGEMM_PARTIY=2: one parity, not two). Warn, once
   per process, naming the closest known variable; never an error. Names of
   any length are warned of (a known one is under 64 bytes). */
static void warn_unknown_variables(cdc_log_level_t level)
{
    static atomic_int warned;
    if (level < CDC_LOG_WARN || atomic_load(&warned))
        return;
    int claimed = 0;
    for (char **entry = environ; entry && *entry; entry++) {
        const char *eq = strchr(*entry, '=');
        char name[256], shown[160];
        size_t len = eq ? (size_t) (eq - *entry) : strlen(*entry);
        if (strncmp(*entry, "CDCGEMM_", 8) != 0)
            continue;
        size_t kept = len < sizeof name ? len : sizeof name - 1;
        memcpy(name, *entry, kept);
        name[kept] = '\0';
        if (kept == len && cdc__config_variable_known(name))
            continue;
        if (!claimed && atomic_exchange(&warned, 1))
            return; /* another thread warns */
        claimed = 1;
        const char *closest = kept == len ? cdc__config_closest_variable(name) : NULL;
        printable_name(*entry, len, shown, sizeof shown);
        cdc__log_write(CDC_LOG_WARN, "%s is not a cdcgemm variable and is ignored%s%s%s",
                       shown, closest ? " (did you mean " : "", closest ? closest : "",
                       closest ? "?)" : "");
    }
}

int cdc_config_from_env(cdc_config_t *config)
{
    if (!config)
        return cdc__fail(CDC_EINVAL, "cdc_config_from_env: config is NULL");
    /* Parse into a copy so a bad variable leaves *config as it was. */
    cdc_config_t parsed = *config;
    for (size_t i = 0; i < sizeof env_variables / sizeof *env_variables; i++) {
        const char *value = getenv(env_variables[i].name);
        if (!value)
            continue;
        int rc = env_variables[i].parse(env_variables[i].name, value, &parsed);
        if (rc != CDC_OK)
            return rc;
    }
    warn_unknown_variables(parsed.log_level);
    *config = parsed;
    return CDC_OK;
}
