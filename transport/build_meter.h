/* build_meter.h - the bytes of operands built to be sent that libzmq still
 * holds.
 *
 * A worker's operand in the rotated layout is built when it is sent
 * (operand_source.h) and freed once libzmq has written it. A call that
 * ships a large matrix to every worker at once (the first call of a
 * language model's classifier: six operands of 20 MB) would otherwise
 * build them all before the first is written, and the coordinator would
 * hold the matrix again, encoded, at that moment. The meter counts what is
 * built and not yet written; the next build waits, for a bounded time,
 * until that is under the budget. Workers read over ipc or a LAN much
 * faster than the operands are built, so the wait is short; a worker that
 * does not read (stopped, gone) only delays a build by the bound. */
#ifndef CDC_BUILD_METER_H_INCLUDED
#define CDC_BUILD_METER_H_INCLUDED

#include "hold.h"

#include <stddef.h>

typedef struct cdc_build_meter cdc_build_meter_t;

/* A meter of budget bytes; NULL when out of memory. */
cdc_build_meter_t *cdc__build_meter_new(size_t budget);

/* The owner's reference dropped (trackers still in libzmq's hands keep the
   meter until they go). Accepts NULL. */
void cdc__build_meter_release(cdc_build_meter_t *meter);

/* Wait until less than the budget is outstanding, at most wait_ms. Returns
   1 when it waited out the bound, else 0. Accepts NULL (returns 0). */
int cdc__build_meter_wait(cdc_build_meter_t *meter, int wait_ms);

/* A hold for bytes of a built operand (kept alive by built, whose reference
   it takes over): counted against the meter until its last reference goes,
   which then releases built. The caller has the first reference. NULL
   (built released) when out of memory. */
cdc_hold_t *cdc__build_meter_track(cdc_build_meter_t *meter, cdc_hold_t *built, size_t bytes);

/* Bytes outstanding now (tests). */
size_t cdc__build_meter_outstanding(cdc_build_meter_t *meter);

#endif
