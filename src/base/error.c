/* error.c - status texts and the per-thread detail of the last failure. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error_detail[512];

const char *cdc_strerror(int status)
{
    switch (status) {
#define CDC_STATUS_TEXT_(name, value, text) \
    case CDC_##name:                        \
        return text;
        CDC_STATUS_MAP(CDC_STATUS_TEXT_)
#undef CDC_STATUS_TEXT_
    default:
        return "unknown status";
    }
}

const char *cdc_err_name(int status)
{
    switch (status) {
#define CDC_STATUS_NAME_(name, value, text) \
    case CDC_##name:                        \
        return "CDC_" #name;
        CDC_STATUS_MAP(CDC_STATUS_NAME_)
#undef CDC_STATUS_NAME_
    default:
        return "CDC_UNKNOWN";
    }
}

const char *cdc_last_error(void)
{
    return last_error_detail;
}

int cdc__fail_within(int status, const char *context)
{
    char detail[sizeof last_error_detail];
    const char *colon = strstr(last_error_detail, ": ");
    snprintf(detail, sizeof detail, "%s", colon ? colon + 2 : last_error_detail);
    return cdc__fail(status, "%s: %s", context, detail);
}

int cdc__fail(int status, const char *format, ...)
{
    va_list args;
    int used = snprintf(last_error_detail, sizeof last_error_detail, "%s: ",
                        cdc_strerror(status));
    if (used < 0 || (size_t) used >= sizeof last_error_detail)
        return status;
    va_start(args, format);
    vsnprintf(last_error_detail + used, sizeof last_error_detail - (size_t) used,
              format, args);
    va_end(args);
    return status;
}
