/* external.h - worker processes the bench starts itself (--external W) and
   gives the library as CDCGEMM_WORKERS endpoints: not the library's children,
   so --chaos may restart them on the same endpoint. */
#ifndef CDC_EXTERNAL_H_INCLUDED
#define CDC_EXTERNAL_H_INCLUDED

#include "cdcgemm.h"

#include <stdatomic.h>
#include <sys/types.h>

typedef struct {
    int count;
    char dir[256];                   /* private mkdtemp directory        */
    char endpoints[CDC_CONFIG_STR];  /* ipc://DIR/w0,...                 */
    char faults[CDC_CONFIG_STR];     /* given to every worker (--faults) */
    char binary[4096];               /* cdcgemm-worker beside the bench  */
    atomic_int pids[CDC_MAX_WORKERS];
    int incarnation[CDC_MAX_WORKERS];
} cdc_external_t;

/* Start count workers on ipc endpoints (each --index i, --faults, one
   thread per core share) and wait until every one has bound (5 s at most).
   Nonzero with a message when one cannot start. */
int cdc_external_start(cdc_external_t *x, int count, const char *faults);

/* The process serving worker i now (arg: the cdc_external_t). */
pid_t cdc_external_pid(void *arg, int i);

/* SIGKILL worker i, reap it and start it again on the same endpoint (with
   --incarnation, so one-shot fault rules do not fire again); the new pid or
   -1. Called from one thread at a time. */
pid_t cdc_external_restart(void *arg, int i);

/* SIGTERM every worker, wait (1 s, then SIGKILL), reap, remove the
   directory. */
void cdc_external_stop(cdc_external_t *x);

#endif
