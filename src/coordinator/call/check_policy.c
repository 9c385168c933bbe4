/* check_policy.c - when a call checks its results, how long it waits for
 * the parity it checks with, and how inexact a decode it accepts. */
#include "engine.h"

#include "clock.h"

#include <math.h>

/* The sample: the first calls (a device that corrupts every result is
   caught at once), then one in 16: each costs a call r/n more work in the
   layout that streams parity (every worker computes a parity block after
   its data),
   so under 2% of the calls' time at n >= 4. */
#define CDC_VERIFY_FIRST 4
#define CDC_VERIFY_EVERY 16

int cdc__verify_this_call(cdc_context_t *context)
{
    pthread_mutex_lock(&context->lock);
    uint64_t sequence = context->verify_sequence++;
    int verify = context->config.verify, check = CDC_CHECK_NONE;
    if (verify != 0 && context->corruption_seen) /* a device known to corrupt */
        check = CDC_CHECK_STRICT;
    else if (verify == 1 && sequence < CDC_VERIFY_FIRST)
        check = CDC_CHECK_FIRST;
    else if (verify == 2 || (verify == 1 && sequence % CDC_VERIFY_EVERY == 0))
        check = CDC_CHECK_SAMPLED;
    pthread_mutex_unlock(&context->lock);
    return check;
}

void cdc__check_wait_start(cdc_check_wait_t *wait, int check, int parity_after)
{
    wait->started_ms = cdc__clock_ms();
    wait->decodable_ms = -1.0;
    wait->patience = (check == CDC_CHECK_FIRST ? 2.0 : 0.5) + (parity_after ? 1.0 : 0.0);
}

int cdc__check_wait_over(cdc_check_wait_t *wait, int decodable, int checkable)
{
    if (!decodable || checkable)
        return decodable;
    double now = cdc__clock_ms();
    if (wait->decodable_ms < 0.0)
        wait->decodable_ms = now;
    return now >= wait->decodable_ms + wait->patience * (wait->decodable_ms - wait->started_ms);
}

double cdc__decode_limit(int64_t k)
{
    const double unit_roundoff = 5.9604644775390625e-8, max_predicted_error = 1e-4;
    double limit = max_predicted_error / (unit_roundoff * sqrt((double) (k > 1 ? k : 1)));
    return limit > 8.0 ? limit : 8.0;
}
