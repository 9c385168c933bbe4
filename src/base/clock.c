/* clock.c - CLOCK_MONOTONIC in milliseconds, and a sleep that survives EINTR. */
#include "clock.h"

#include <errno.h>
#include <time.h>

double cdc__clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec * 1e-6;
}

void cdc__sleep_ms(double ms)
{
    if (!(ms > 0))
        return;
    long whole = (long) ms;
    struct timespec ts = {whole / 1000,
                          (whole % 1000) * 1000000L + (long) ((ms - (double) whole) * 1e6)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}
