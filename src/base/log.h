/* log.h - level-checked logging to stderr; formats nothing below the level. */
#ifndef CDC_LOG_H_INCLUDED
#define CDC_LOG_H_INCLUDED

#include "cdcgemm.h"

/* Process-wide level, set from the first context's configuration. */
extern int cdc__log_level;

/* A level's name ("error", "warn", "info", "debug") into *level: 0, or -1
   for any other text. */
int cdc__log_level_parse(const char *name, cdc_log_level_t *level);

void cdc__log_write(cdc_log_level_t level, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#define CDC_LOG(level, ...)                      \
    do {                                         \
        if ((int) (level) <= cdc__log_level)     \
            cdc__log_write((level), __VA_ARGS__); \
    } while (0)

#define CDC_LOG_ERRORF(...) CDC_LOG(CDC_LOG_ERROR, __VA_ARGS__)
#define CDC_LOG_WARNF(...) CDC_LOG(CDC_LOG_WARN, __VA_ARGS__)
#define CDC_LOG_INFOF(...) CDC_LOG(CDC_LOG_INFO, __VA_ARGS__)
#define CDC_LOG_DEBUGF(...) CDC_LOG(CDC_LOG_DEBUG, __VA_ARGS__)

#endif
