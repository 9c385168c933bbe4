/* status.c - the PONG's status text (see status.h). */
#include "status.h"

#include "cdcgemm.h"
#include "error.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *key;
    size_t offset;
} fields[] = {
    {"cache_bytes", offsetof(cdc_status_report_t, cache_bytes)},
    {"cache_entries", offsetof(cdc_status_report_t, cache_entries)},
    {"max_memory", offsetof(cdc_status_report_t, max_memory)},
    {"tasks", offsetof(cdc_status_report_t, tasks)},
    {"load", offsetof(cdc_status_report_t, load)},
    {"instance", offsetof(cdc_status_report_t, instance)},
    {"busy_us", offsetof(cdc_status_report_t, busy_us)},
    {"flops", offsetof(cdc_status_report_t, flops)},
    {"max_task_memory", offsetof(cdc_status_report_t, max_task_memory)},
    {"thin_busy_us", offsetof(cdc_status_report_t, thin_busy_us)},
    {"thin_flops", offsetof(cdc_status_report_t, thin_flops)},
    {"thin_bytes", offsetof(cdc_status_report_t, thin_bytes)},
    {"stored", offsetof(cdc_status_report_t, stored)},
};
#define FIELD_COUNT (sizeof fields / sizeof fields[0])

static uint64_t *field_of(cdc_status_report_t *status, size_t i)
{
    return (uint64_t *) ((char *) status + fields[i].offset);
}

size_t cdc__status_format(const cdc_status_report_t *status, char *out, size_t size)
{
    size_t used = 0;
    if (size)
        out[0] = '\0';
    for (size_t i = 0; i < FIELD_COUNT && size; i++) {
        int n = snprintf(out + used, size - used, "%s=%llu\n", fields[i].key,
                         (unsigned long long) *field_of((cdc_status_report_t *) status, i));
        if (n < 0 || (size_t) n >= size - used) {
            out[used] = '\0'; /* whole lines only */
            break;
        }
        used += (size_t) n;
    }
    return used;
}

/* One "key=value" line (len bytes) into *status. */
static int parse_line(const char *line, size_t len, int number, cdc_status_report_t *status)
{
    const char *eq = memchr(line, '=', len);
    size_t key_len = eq ? (size_t) (eq - line) : 0;
    int ok = eq && key_len > 0 && eq + 1 < line + len;
    for (size_t i = 0; ok && i < key_len; i++)
        ok = (line[i] >= 'a' && line[i] <= 'z') || (line[i] >= '0' && line[i] <= '9') ||
             line[i] == '_';
    uint64_t value = 0;
    for (const char *p = eq ? eq + 1 : line; ok && p < line + len; p++) {
        ok = *p >= '0' && *p <= '9' && value <= (UINT64_MAX - (uint64_t) (*p - '0')) / 10;
        value = value * 10 + (uint64_t) (*p - '0');
    }
    if (!ok)
        return cdc__fail(CDC_EPROTO, "status line %d '%.*s' is not key=decimal", number,
                         (int) (len > 64 ? 64 : len), line);
    for (size_t i = 0; i < FIELD_COUNT; i++)
        if (strlen(fields[i].key) == key_len && memcmp(fields[i].key, line, key_len) == 0)
            *field_of(status, i) = value;
    return CDC_OK; /* an unknown key: a newer worker's, skipped */
}

int cdc__status_parse(const void *text, size_t size, cdc_status_report_t *status)
{
    memset(status, 0, sizeof *status);
    const char *p = text, *end = p + size;
    for (int number = 1; p < end; number++) {
        const char *newline = memchr(p, '\n', (size_t) (end - p));
        size_t len = newline ? (size_t) (newline - p) : (size_t) (end - p);
        if (len > 0) {
            int rc = parse_line(p, len, number, status);
            if (rc != CDC_OK)
                return rc;
        }
        p += len + (newline ? 1 : 0);
    }
    return CDC_OK;
}
