/* log.c - the one place the library writes diagnostics (stderr, never stdout). */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>

int cdc__log_level = CDC_LOG_WARN;

void cdc__log_write(cdc_log_level_t level, const char *format, ...)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    char line[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(line, sizeof line, format, args);
    va_end(args);
    fprintf(stderr, "cdcgemm %s: %s\n", names[level], line);
}
