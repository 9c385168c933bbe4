/* clock.h - the one monotonic clock and sleep of the library. */
#ifndef CDC_CLOCK_H_INCLUDED
#define CDC_CLOCK_H_INCLUDED

/* Milliseconds on CLOCK_MONOTONIC, with microsecond resolution (shard
   response times are well under a millisecond on loopback). */
double cdc__clock_ms(void);

/* Sleep ms milliseconds (nothing for ms <= 0), resuming after a signal: a
   caller that must react to one polls its flag between short sleeps. */
void cdc__sleep_ms(double ms);

#endif
