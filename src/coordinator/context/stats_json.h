/* stats_json.h - the context's counters and profiles as a JSON file (CDCGEMM_STATS). */
#ifndef CDC_STATS_JSON_H_INCLUDED
#define CDC_STATS_JSON_H_INCLUDED

#include "cdcgemm.h"
#include "profile.h"

#include <stdio.h>

/* The counters of *stats as JSON members ("calls": N, ...), comma-separated,
   with no braces around them: the names CDCGEMM_STATS writes. */
void cdc__stats_write_members(FILE *out, const cdc_stats_t *stats);

/* Write *stats as one JSON object to path (replaced atomically: written to
   path.tmp.PID, then renamed), with the workers' profiles when profile is
   not NULL (cdc__profile_write_json). Returns CDC_OK, or CDC_EINVAL when
   the file cannot be written (cdc_last_error says why). Thread-safe. */
int cdc__stats_write_json(const cdc_stats_t *stats, const cdc_profile_report_t *profile,
                          const char *path);

/* The JSON members `"profile": [...]` (one object per worker: worker, live,
   gflops, mbit, rtt_ms, max_memory, cache_bytes, rate_samples,
   link_samples, generation) and, when known, `"coordinator_profile":
   {gflops, rate_samples}`, comma-separated, to go inside an object. */
void cdc__profile_write_json(FILE *out, const cdc_profile_report_t *profile);

#endif
