/* stats_json.h - the context's counters as a JSON file (CDCGEMM_STATS). */
#ifndef CDC_STATS_JSON_H_INCLUDED
#define CDC_STATS_JSON_H_INCLUDED

#include "cdcgemm.h"

/* Write *stats as one JSON object to path (replaced atomically: written to
   path.tmp.PID, then renamed). Returns CDC_OK, or CDC_EINVAL when the file
   cannot be written (cdc_last_error says why). Thread-safe. */
int cdc__stats_write_json(const cdc_stats_t *stats, const char *path);

#endif
