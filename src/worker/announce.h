/* announce.h - cdcgemm-worker --announce: a beacon with this worker's endpoint and key. */
#ifndef CDC_WORKER_ANNOUNCE_H_INCLUDED
#define CDC_WORKER_ANNOUNCE_H_INCLUDED

#include "discovery.h"

/* Start announcing the worker bound to bind (tcp://HOST:PORT with a numeric
   port) whose secret certificate is curve_secret: discovery admits only
   trusted keys, so a worker without CURVE has nothing to announce. Returns
   CDC_OK, or CDC_ECONFIG / CDC_ETRANSPORT with the reason in
   cdc_last_error(). Caller owns *announcer_p. */
int cdc__worker_announce(const char *bind, const char *curve_secret,
                         const cdc_discovery_where_t *where, cdc_announcer_t **announcer_p);

#endif
