/* number.c - whole-string decimal parsing that refuses what strtol/strtod would forgive. */
#include "number.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int cdc__parse_long(const char *text, long lo, long hi, long *out)
{
    const char *digits = lo < 0 && text[0] == '-' ? text + 1 : text;
    if (!isdigit((unsigned char) digits[0]))
        return -1;
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || *end != '\0' || value < lo || value > hi)
        return -1;
    *out = value;
    return 0;
}

int cdc__parse_decimal(const char *text, double *out)
{
    if (!(isdigit((unsigned char) text[0]) || text[0] == '.') || strpbrk(text, "xX"))
        return -1;
    char *end = NULL;
    errno = 0;
    double value = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !isfinite(value))
        return -1;
    *out = value;
    return 0;
}
