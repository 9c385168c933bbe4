/* config.c - defaults and the CDCGEMM_* environment, parsed strictly. */
#include "cdcgemm.h"

#include "code.h"
#include "error.h"
#include "faults.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
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

/* A whole-string integer in [lo, hi]; anything else is an error naming var. */
static int parse_int(const char *var, const char *text, long lo, long hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < lo || value > hi)
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

int cdc_config_from_env(cdc_config_t *config)
{
    if (!config)
        return cdc__fail(CDC_EINVAL, "cdc_config_from_env: config is NULL");
    /* Parse into a copy so a bad variable leaves *config as it was. */
    cdc_config_t parsed = *config;
    const char *value;
    int rc = CDC_OK;

    if (rc == CDC_OK && (value = getenv("CDCGEMM_WORKERS")) && *value)
        rc = parse_workers("CDCGEMM_WORKERS", value, parsed.workers, sizeof parsed.workers);
    if (rc == CDC_OK && (value = getenv("CDCGEMM_LOCAL_WORKERS")))
        rc = parse_int("CDCGEMM_LOCAL_WORKERS", value, 1, CDC_MAX_WORKERS,
                       &parsed.local_workers);
    if (rc == CDC_OK && (value = getenv("CDCGEMM_PARITY")))
        rc = parse_int("CDCGEMM_PARITY", value, 0, CDC_MAX_PARITY, &parsed.parity);
    if (rc == CDC_OK && (value = getenv("CDCGEMM_SPLIT"))) {
        if (cdc_split_parse(value, &parsed.split) != CDC_OK)
            rc = cdc__fail(CDC_ECONFIG,
                           "CDCGEMM_SPLIT='%s': expected auto, output, channel or spatial",
                           value);
    }
    if (rc == CDC_OK && (value = getenv("CDCGEMM_REPLAN"))) {
        if (strcmp(value, "keep-shards") == 0)
            parsed.replan = CDC_REPLAN_KEEP_SHARDS;
        else if (strcmp(value, "keep-parity") == 0)
            parsed.replan = CDC_REPLAN_KEEP_PARITY;
        else
            rc = cdc__fail(CDC_ECONFIG,
                           "CDCGEMM_REPLAN='%s': expected keep-shards or keep-parity", value);
    }
    if (rc == CDC_OK && (value = getenv("CDCGEMM_REPLICATE")))
        rc = parse_int("CDCGEMM_REPLICATE", value, 0, 1, &parsed.replicate);
    if (rc == CDC_OK && (value = getenv("CDCGEMM_VERIFY")))
        rc = parse_int("CDCGEMM_VERIFY", value, 0, 1, &parsed.verify);
    if (rc == CDC_OK && (value = getenv("CDCGEMM_IN_PROCESS")))
        rc = parse_int("CDCGEMM_IN_PROCESS", value, 0, 1, &parsed.in_process);
    if (rc == CDC_OK && (value = getenv("CDCGEMM_WAIT_MS")))
        rc = parse_int("CDCGEMM_WAIT_MS", value, 0, 600000, &parsed.wait_ms);
    if (rc == CDC_OK && (value = getenv("CDCGEMM_TIMEOUT_MS")))
        rc = parse_int("CDCGEMM_TIMEOUT_MS", value, 1, 3600000, &parsed.timeout_ms);
    if (rc == CDC_OK && (value = getenv("CDCGEMM_MIN_FLOPS"))) {
        char *end = NULL;
        errno = 0;
        double flops = strtod(value, &end);
        if (errno != 0 || end == value || *end != '\0' || !isfinite(flops) || flops < 0)
            rc = cdc__fail(CDC_ECONFIG,
                           "CDCGEMM_MIN_FLOPS='%s': expected a number >= 0", value);
        else
            parsed.min_flops = flops;
    }
    if (rc == CDC_OK && (value = getenv("CDCGEMM_FAULTS"))) {
        cdc_fault_plan_t plan; /* validated here so a typo fails at start-up */
        rc = cdc_fault_plan_parse(value, &plan);
        if (rc == CDC_OK)
            rc = parse_copy("CDCGEMM_FAULTS", value, parsed.faults, sizeof parsed.faults);
    }
    if (rc == CDC_OK && (value = getenv("CDCGEMM_STATS")))
        rc = parse_copy("CDCGEMM_STATS", value, parsed.stats_path,
                        sizeof parsed.stats_path);
    if (rc == CDC_OK && (value = getenv("CDCGEMM_LOG"))) {
        static const char *const levels[] = {"error", "warn", "info", "debug"};
        int found = -1;
        for (int i = 0; i < 4; i++)
            if (strcmp(value, levels[i]) == 0)
                found = i;
        if (found < 0)
            rc = cdc__fail(CDC_ECONFIG,
                           "CDCGEMM_LOG='%s': expected error, warn, info or debug", value);
        else
            parsed.log_level = (cdc_log_level_t) found;
    }
    if (rc == CDC_OK && (value = getenv("CDCGEMM_CODE")) && *value) {
        if (!cdc_code_find_ops(value))
            rc = cdc__fail(CDC_ECONFIG, "CDCGEMM_CODE='%s': unknown code scheme", value);
        else
            rc = parse_copy("CDCGEMM_CODE", value, parsed.code, sizeof parsed.code);
    }
    if (rc == CDC_OK)
        *config = parsed;
    return rc;
}
