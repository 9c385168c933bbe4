/* plan_calibration.c - the workers measured before the first sized plan
 * (profiled_plan.h, cdc__profiled_plan_calibrate).
 *
 * Why. A measured plan sizes nothing until every worker has given its rate,
 * and a worker gives it only by computing: so the first calls ran equal
 * blocks, the first weights went to the workers in equal blocks, and once
 * the rates were in, the sized ones were staged over the same links, one
 * worker at a time: on identical devices over WiFi, 116 MB moved and 17 s
 * of slower calls only to give the coordinator its share of the FC layers
 * (docs/benchmarks.md, "The adaptive plan beside the default"). A few
 * small GEMMs first, on operands sent with them, cost a fraction of a
 * second and let the first weights go where they stay.
 *
 * What. Round after round, each live worker computes a rows x
 * CALIBRATION_COLS product over CALIBRATION_K, then the rounds wait a
 * heartbeat so the PONGs carry the workers' busy time and flops, until the
 * plan can size by every worker's rate (CDC_PLAN_MIN_RATE_SAMPLES samples)
 * or CALIBRATION_MS has passed. A rate sample needs 2 ms of busy time
 * (profile.h): the rows start at CALIBRATION_MIN_ROWS (1 MFLOP: 8 ms on a
 * 0.125 GFLOP/s device, so a very slow one is not held for seconds) and
 * grow 4x a round while some worker has not given a first sample, up to
 * CALIBRATION_MAX_ROWS (67 MFLOP: 2.2 ms at 30 GFLOP/s). Links are not
 * waited for: the plan takes an unmeasured link as free, and the later
 * calls measure it. */
#include "profiled_plan.h"

#include "bits.h"
#include "clock.h"
#include "error.h"
#include "executor.h"
#include "log.h"

#include <stdlib.h>

#define CALIBRATION_MIN_ROWS 32
#define CALIBRATION_MAX_ROWS 2048
#define CALIBRATION_COLS 64
#define CALIBRATION_K 256
#define CALIBRATION_MS 3000.0  /* a bound on the whole: the plan does without */
#define CALIBRATION_ROUNDS 12
#define CALIBRATION_PONG_MS 150.0 /* a heartbeat (100 ms) and its PONG      */

/* One round: worker w's task is shard w of W, all of them data; it waits
   for the live ones (a dead worker is sent nothing). */
static int calibration_round(cdc_context_t *context, int workers, uint64_t live, int64_t rows,
                             const float *a, const float *bt, float *result)
{
    cdc_shard_task_t tasks[CDC_MAX_WORKERS];
    for (int w = 0; w < workers; w++)
        tasks[w] = (cdc_shard_task_t){
            .kind = CDC_TASK_GEMM, .shard = w, .cover = w, .a = a, .a_rows = rows,
            .k = CALIBRATION_K, .bt = bt, .cols = CALIBRATION_COLS,
            .result = result + (size_t) w * (size_t) rows * CALIBRATION_COLS};
    uint64_t arrived = 0;
    int needed = cdc__popcount64(live & cdc__low_bits(workers));
    return context->executor->ops->run(context->executor, tasks, workers, workers,
                                       needed > 0 ? needed : 1, NULL, &arrived);
}

void cdc__profiled_plan_calibrate(cdc_context_t *context)
{
    if (context->config.plan == CDC_PLAN_EQUAL || context->profiled.calibrated)
        return;
    context->profiled.calibrated = 1;
    uint64_t live = 0;
    int workers = cdc__executor_worker_count(context->executor);
    if (workers <= 0 || cdc__executor_live(context->executor, &live) <= 0 ||
        cdc__profiled_plan_unmeasured(context, live, CDC_PLAN_MIN_RATE_SAMPLES) == 0)
        return;
    float *a = calloc((size_t) CALIBRATION_MAX_ROWS * CALIBRATION_K, sizeof *a);
    float *bt = calloc((size_t) CALIBRATION_COLS * CALIBRATION_K, sizeof *bt);
    float *result = malloc((size_t) workers * CALIBRATION_MAX_ROWS * CALIBRATION_COLS *
                           sizeof *result);
    double started = cdc__clock_ms();
    int64_t rows = CALIBRATION_MIN_ROWS;
    int rounds = 0, rc = a && bt && result ? CDC_OK : CDC_ENOMEM;
    while (rc == CDC_OK && rounds < CALIBRATION_ROUNDS &&
           cdc__clock_ms() - started < CALIBRATION_MS &&
           cdc__profiled_plan_unmeasured(context, live, CDC_PLAN_MIN_RATE_SAMPLES) > 0) {
        rc = calibration_round(context, workers, live, rows, a, bt, result);
        rounds++;
        cdc__sleep_ms(CALIBRATION_PONG_MS);
        cdc__executor_live(context->executor, &live);
        if (rows < CALIBRATION_MAX_ROWS && cdc__profiled_plan_unmeasured(context, live, 1) > 0)
            rows *= 4; /* too short for a first sample somewhere */
    }
    int left = cdc__profiled_plan_unmeasured(context, live, CDC_PLAN_MIN_RATE_SAMPLES);
    if (rc != CDC_OK)
        CDC_LOG_WARNF("plan calibration: %s; the plan starts from equal blocks",
                      cdc_last_error());
    else
        CDC_LOG_INFOF("plan calibration: %d rounds in %.0f ms, %d of %d workers unmeasured", rounds,
                      cdc__clock_ms() - started, left, workers);
    free(a);
    free(bt);
    free(result);
}
