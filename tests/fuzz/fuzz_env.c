/* fuzz_env.c - libFuzzer target: the CDCGEMM_* environment parser.
 *
 * The input is lines; each sets one variable for one cdc_config_from_env:
 *   - a line "NAME=VALUE" whose NAME starts with CDCGEMM_ sets exactly that
 *     (so misspelt and unknown names are reachable);
 *   - any other line's first byte picks one of the names the library reads
 *     (mod their count) and the rest of the line is the value.
 * The variables are set with putenv on buffers this file owns and unset
 * after the call, so the process environment is the same before every run
 * (setenv would keep every value ever set). A config that parses is held to
 * the ranges docs/configuration.md gives. */
#define _XOPEN_SOURCE 700 /* putenv */
#include "cdcgemm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ASSIGNMENTS 16

static const char *const known[] = {
    "CDCGEMM_WORKERS", "CDCGEMM_LOCAL_WORKERS", "CDCGEMM_PARITY",   "CDCGEMM_SPLIT",
    "CDCGEMM_REPLAN",  "CDCGEMM_REPLICATE",     "CDCGEMM_VERIFY",   "CDCGEMM_IN_PROCESS",
    "CDCGEMM_WAIT_MS", "CDCGEMM_TIMEOUT_MS",    "CDCGEMM_MIN_FLOPS", "CDCGEMM_FAULTS",
    "CDCGEMM_STATS",   "CDCGEMM_LOG",           "CDCGEMM_CODE",     "CDCGEMM_PARTIY",
};

#define EXPECT(cond)                                                                      \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "fuzz_env: parsed config violates: %s\n", #cond);             \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

static void check_config(const cdc_config_t *c)
{
    EXPECT(c->local_workers >= 1 && c->local_workers <= CDC_MAX_WORKERS);
    EXPECT(c->parity >= 0 && c->parity <= CDC_MAX_PARITY);
    EXPECT(c->replicate == 0 || c->replicate == 1);
    EXPECT(c->verify >= 0 && c->verify <= 2);
    EXPECT(c->in_process == 0 || c->in_process == 1);
    EXPECT(c->wait_ms >= 0);
    EXPECT(c->timeout_ms >= 1);
    EXPECT(c->min_flops == -1.0 || (isfinite(c->min_flops) && c->min_flops >= 0));
    EXPECT(memchr(c->workers, '\0', sizeof c->workers) != NULL);
    EXPECT(memchr(c->faults, '\0', sizeof c->faults) != NULL);
    EXPECT(memchr(c->stats_path, '\0', sizeof c->stats_path) != NULL);
    EXPECT(memchr(c->code, '\0', sizeof c->code) != NULL);
}

/* "NAME=VALUE" for one input line into a fresh buffer, or NULL. */
static char *assignment(const char *line, size_t len)
{
    const char *eq = memchr(line, '=', len);
    int literal = len > 8 && strncmp(line, "CDCGEMM_", 8) == 0 && eq && eq > line + 8 &&
                  eq - line < 200;
    if (!literal && len == 0)
        return NULL;
    const char *name = literal ? NULL : known[(unsigned char) line[0] % (sizeof known /
                                                                          sizeof *known)];
    size_t size = literal ? len : strlen(name) + 1 + (len - 1);
    char *text = malloc(size + 1);
    if (!text)
        return NULL;
    if (literal)
        memcpy(text, line, len);
    else
        snprintf(text, size + 1, "%s=%.*s", name, (int) (len - 1), line + 1);
    text[size] = '\0';
    /* A NUL in the value ends it; that is what a real environment holds. */
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *set[MAX_ASSIGNMENTS];
    int count = 0;
    const char *p = (const char *) data, *end = p + size;
    while (p < end && count < MAX_ASSIGNMENTS) {
        const char *nl = memchr(p, '\n', (size_t) (end - p));
        size_t len = nl ? (size_t) (nl - p) : (size_t) (end - p);
        char *text = assignment(p, len);
        if (text && strchr(text, '=') && putenv(text) == 0)
            set[count++] = text;
        else
            free(text);
        p += len + 1;
    }
    cdc_config_t config;
    cdc_config_init(&config);
    if (cdc_config_from_env(&config) == CDC_OK)
        check_config(&config);
    for (int i = 0; i < count; i++) {
        /* Unset by the name this buffer gave (a later line may have put a
           second buffer under the same name). */
        char name[256];
        size_t n = (size_t) (strchr(set[i], '=') - set[i]);
        if (n < sizeof name) {
            memcpy(name, set[i], n);
            name[n] = '\0';
            unsetenv(name);
        }
    }
    for (int i = 0; i < count; i++)
        free(set[i]);
    return 0;
}
