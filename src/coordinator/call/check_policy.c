/* check_policy.c - when a call checks its results, how long it waits for
 * the parity it checks with, and how inexact a decode it accepts. */
#include "engine.h"

#include "clock.h"

#include <math.h>

/* The sample: the first calls (a device that corrupts every result is
   caught at once), then calls drawn on a budget of the calls' time: every
   coded call earns CDC_VERIFY_BUDGET of its time, and a call is checked
   whenever the earnings cover what checks have cost. A check costs its
   call the wait past decodable for the parity it checks with: little
   where parity streams beside the data, a whole band's time where it is
   sent on demand (a spatial band, sent once a worker is free). A count
   (one call in 16) cost the demo's AlexNet requests 5%: with 8 coded calls
   a request, every sampled call was conv1 of every other request, an
   on-demand band that a check makes 1.7x slower. Each sampled check is
   charged at least CDC_VERIFY_MIN_CHARGE of its call's time, so at most 1
   call in 13 is sampled where checks are free. The first calls' checks
   are not charged: they are the context's start-up, often while the
   weights are shipped (seconds a call), and charged they put off the next
   check by minutes. */
#define CDC_VERIFY_FIRST 4
#define CDC_VERIFY_BUDGET 0.02
#define CDC_VERIFY_MIN_CHARGE 0.25

int cdc__verify_this_call(cdc_context_t *context)
{
    pthread_mutex_lock(&context->lock);
    uint64_t sequence = context->verify_sequence++;
    int verify = context->config.verify, check = CDC_CHECK_NONE;
    if (verify != 0 && context->corruption_seen) /* a device known to corrupt */
        check = CDC_CHECK_STRICT;
    else if (verify == 1 && sequence < CDC_VERIFY_FIRST)
        check = CDC_CHECK_FIRST;
    else if (verify == 2 || (verify == 1 && context->verify_credit_ms >= 0.0))
        check = CDC_CHECK_SAMPLED;
    pthread_mutex_unlock(&context->lock);
    return check;
}

void cdc__verify_account(cdc_context_t *context, int check, double call_ms, double wait_ms)
{
    double earned = CDC_VERIFY_BUDGET * call_ms, charge = call_ms * CDC_VERIFY_MIN_CHARGE;
    charge = wait_ms > charge ? wait_ms : charge;
    /* No savings: calls the sample could not draw (a stretch of strict
       ones) do not buy a burst of checks later. */
    context->verify_credit_ms += earned;
    if (context->verify_credit_ms > earned)
        context->verify_credit_ms = earned;
    if (check == CDC_CHECK_SAMPLED)
        context->verify_credit_ms -= charge;
}

double cdc__check_wait_past_decodable(const cdc_check_wait_t *wait, double done_ms)
{
    return wait->decodable_ms >= 0.0 && done_ms > wait->decodable_ms
               ? done_ms - wait->decodable_ms
               : 0.0;
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
