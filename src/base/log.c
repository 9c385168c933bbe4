/* log.c - the one place the library writes diagnostics (stderr, never stdout). */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int cdc__log_level = CDC_LOG_WARN;

/* Indexed by cdc_log_level_t. */
static const char *const level_names[] = {"error", "warn", "info", "debug"};

int cdc__log_level_parse(const char *name, cdc_log_level_t *level)
{
    for (int l = 0; l < (int) (sizeof level_names / sizeof *level_names); l++) {
        if (strcmp(name, level_names[l]) == 0) {
            *level = (cdc_log_level_t) l;
            return 0;
        }
    }
    return -1;
}

void cdc__log_write(cdc_log_level_t level, const char *format, ...)
{
    char line[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(line, sizeof line, format, args);
    va_end(args);
    fprintf(stderr, "cdcgemm %s: %s\n", level_names[level], line);
}
