/* announce.c - cdcgemm-worker --announce (see announce.h). */
#include "announce.h"

#include "cdcgemm.h"
#include "error.h"
#include "keys.h"
#include "number.h"

#include <string.h>

int cdc__worker_announce(const char *bind, const char *curve_secret,
                         const cdc_discovery_where_t *where, cdc_announcer_t **announcer_p)
{
    *announcer_p = NULL;
    if (!curve_secret)
        return cdc__fail(CDC_ECONFIG, "--announce needs --curve-secret and --curve-allow: "
                                      "coordinators admit only workers whose key they trust");
    const char *colon = strrchr(bind, ':');
    long port;
    if (strncmp(bind, "tcp://", 6) != 0 || !colon || cdc__parse_long(colon + 1, 1, 65535,
                                                                      &port) != 0)
        return cdc__fail(CDC_ECONFIG, "--announce: '%s' is not tcp://HOST:PORT with a "
                                      "numeric port", bind);
    cdc_curve_cert_t cert;
    int rc = cdc__curve_load_secret(curve_secret, &cert);
    if (rc == CDC_OK)
        rc = cdc__announcer_new(where, (int) port, cert.public_txt, 0, announcer_p);
    cdc__curve_cert_clear(&cert);
    return rc;
}
