/* plan_calibration.c - the workers measured before the first sized plan
 * (profiled_plan.h, cdc__profiled_plan_calibrate).
 *
 * Why. A measured plan sizes nothing until every worker has given its rate,
 * and a worker gives it only by computing: so the first calls ran equal
 * blocks, the first weights went to the workers in equal blocks, and once
 * the rates were in, the sized ones were staged over the same links, one
 * worker at a time: on identical devices over WiFi, 116 MB moved and 17 s
 * of slower calls only to give the coordinator its share of the FC layers
 * (docs/benchmarks.md, "The adaptive default"). A few
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
 * CALIBRATION_MAX_ROWS (67 MFLOP: 2.2 ms at 30 GFLOP/s). Then the links:
 * rounds of CALIBRATION_LINK_ROWS back to back, whose transfers give each
 * link its samples (CDC_PLAN_MIN_LINK_SAMPLES), up to
 * CALIBRATION_LINK_ROUNDS. Without them the plan took every link as free
 * until the first calls measured it, sized the first weights for free
 * links, then re-sized them once the links were in: on the mix of
 * docs/benchmarks.md (AlexNet, 94 Mbit/s), 320 MB staged in the background
 * and 426 of 480 calls decoded around a worker taking its blocks in, in 2
 * runs of 3. Last the memory: a matrix of CALIBRATION_MAX_ROWS rows
 * (2 MiB) sent to every worker once, as cached weights, then
 * CALIBRATION_STREAM_REPEATS matrix-vector products against it back to
 * back (a vector each way per round) and a heartbeat, at most
 * CALIBRATION_STREAM_BATCHES times: each worker's bandwidth (profile.h's
 * roofline), which the rate rounds' GEMMs cannot give. 32 MiB streamed
 * take 2 ms (one sample) at 16 GB/s. Without it a language model's token
 * steps, bound by memory, were first sized by the rate (8x too fast on a
 * Pi-class device), then re-sized once they had measured themselves
 * (461 MB staged, 18 s stalls; docs/llm.md), and a CNN's batch-1 FC layers
 * were re-sized in the middle of the demo (fc6's 94 MB of blocks staged
 * while a worker crashed). The matrix stays in the workers' caches until
 * their LRU needs the room.
 *
 * When. Only before weights of CALIBRATION_MIN_HELD bytes or more go out
 * to be cached: a per-call operand is cut afresh by every call, and a
 * smaller cached one is re-staged (0.1 s over 94 Mbit/s) for less than
 * the calibration's half second, which a program that makes a few small
 * calls and exits would otherwise pay on its first (1.4 s here for two
 * workers: test_hygiene's contexts). */
#include "profiled_plan.h"

#include "bits.h"
#include "clock.h"
#include "error.h"
#include "executor.h"
#include "hold.h"
#include "log.h"

#include <stdlib.h>
#include <string.h>

#define CALIBRATION_MIN_ROWS 32
#define CALIBRATION_MAX_ROWS 2048
#define CALIBRATION_COLS 64
#define CALIBRATION_K 256
#define CALIBRATION_MS 3000.0  /* a bound on the whole: the plan does without */
#define CALIBRATION_ROUNDS 12
#define CALIBRATION_PONG_MS 150.0 /* a heartbeat (100 ms) and its PONG      */
#define CALIBRATION_MIN_HELD (1 << 20) /* bytes of cached weights            */
#define CALIBRATION_LINK_ROWS 256 /* 384 KiB a task both ways: 33 ms on WiFi    */
#define CALIBRATION_LINK_ROUNDS 6
#define CALIBRATION_STREAM_REPEATS 16 /* back to back before a heartbeat */
#define CALIBRATION_STREAM_BATCHES 2
/* Names the calibration's cached matrix on the workers ("cal-strm"). */
#define CALIBRATION_STREAM_KEY UINT64_C(0x63616c2d7374726d)

/* One round: worker w's task is shard w of W, all of them data, rows x
   cols over CALIBRATION_K, against a (cached under a_key when it is
   nonzero, a_hold keeping it: one copy on each worker, a_whole); it waits
   for the live ones (a dead worker is sent nothing). */
static int calibration_round(cdc_context_t *context, int workers, uint64_t live, int64_t rows,
                             int64_t cols, const float *a, uint64_t a_key, cdc_hold_t *a_hold,
                             const float *bt, float *result)
{
    cdc_shard_task_t tasks[CDC_MAX_WORKERS];
    for (int w = 0; w < workers; w++)
        tasks[w] = (cdc_shard_task_t){
            .kind = CDC_TASK_GEMM, .shard = w, .cover = w, .a = a, .a_rows = rows,
            .a_key = a_key, .a_hold = a_hold, .a_whole = a_key != 0, .k = CALIBRATION_K,
            .bt = bt, .cols = cols,
            .result = result + (size_t) w * (size_t) rows * (size_t) cols};
    uint64_t arrived = 0;
    int needed = cdc__popcount64(live & cdc__low_bits(workers));
    return context->executor->ops->run(context->executor, tasks, workers, workers,
                                       needed > 0 ? needed : 1, NULL, &arrived);
}

typedef struct {
    int workers, rounds;
    uint64_t live;
    double started;
    float *a, *bt, *result;
} calibration_t;

/* Rounds of growing GEMMs, each followed by a heartbeat, until every live
   worker has the rate samples the plan sizes by. */
static int rate_rounds(cdc_context_t *context, calibration_t *cal)
{
    int64_t rows = CALIBRATION_MIN_ROWS;
    int rc = CDC_OK;
    while (rc == CDC_OK && cal->rounds < CALIBRATION_ROUNDS &&
           cdc__clock_ms() - cal->started < CALIBRATION_MS &&
           cdc__profiled_plan_unmeasured(context, cal->live, CDC_PLAN_MIN_RATE_SAMPLES) > 0) {
        rc = calibration_round(context, cal->workers, cal->live, rows, CALIBRATION_COLS, cal->a,
                               0, NULL, cal->bt, cal->result);
        cal->rounds++;
        cdc__sleep_ms(CALIBRATION_PONG_MS);
        cdc__executor_live(context->executor, &cal->live);
        if (rows < CALIBRATION_MAX_ROWS &&
            cdc__profiled_plan_unmeasured(context, cal->live, 1) > 0)
            rows *= 4; /* too short for a first sample somewhere */
    }
    return rc;
}

/* Back-to-back rounds of CALIBRATION_LINK_ROWS (their transfers are the
   link samples; no heartbeat needed) until every live worker's link
   counts, at most CALIBRATION_LINK_ROUNDS: a link fast enough to give no
   sample (profile.h) stays free to the plan, as it should. */
static int link_rounds(cdc_context_t *context, calibration_t *cal)
{
    int rc = CDC_OK;
    for (int i = 0; rc == CDC_OK && i < CALIBRATION_LINK_ROUNDS &&
                    cdc__clock_ms() - cal->started < CALIBRATION_MS &&
                    cdc__profiled_plan_unlinked(context, cal->live) > 0;
         i++, cal->rounds++)
        rc = calibration_round(context, cal->workers, cal->live, CALIBRATION_LINK_ROWS,
                               CALIBRATION_COLS, cal->a, 0, NULL, cal->bt, cal->result);
    return rc;
}

/* Matrix-vector products against a cached matrix, CALIBRATION_STREAM_REPEATS
   rounds then a heartbeat, until every live worker's bandwidth counts, at
   most CALIBRATION_STREAM_BATCHES times; after a first batch that measured
   none, no more (they all stream faster than that can tell). */
static int stream_rounds(cdc_context_t *context, calibration_t *cal)
{
    float *matrix = NULL;
    cdc_hold_t *hold = cdc__hold_alloc((size_t) CALIBRATION_MAX_ROWS * CALIBRATION_K *
                                           sizeof(float),
                                       (void **) &matrix);
    if (!hold)
        return CDC_ENOMEM;
    memset(matrix, 0, (size_t) CALIBRATION_MAX_ROWS * CALIBRATION_K * sizeof(float));
    int rc = CDC_OK, live = 0, unstreamed;
    for (int i = 0; rc == CDC_OK && i < CALIBRATION_STREAM_BATCHES &&
                    cdc__clock_ms() - cal->started < CALIBRATION_MS &&
                    (unstreamed = cdc__profiled_plan_unstreamed(context, cal->live)) > 0 &&
                    !(i > 0 && unstreamed == live);
         i++) {
        for (int j = 0; rc == CDC_OK && j < CALIBRATION_STREAM_REPEATS; j++, cal->rounds++)
            rc = calibration_round(context, cal->workers, cal->live, CALIBRATION_MAX_ROWS, 1,
                                   matrix, CALIBRATION_STREAM_KEY, hold, cal->bt, cal->result);
        cdc__sleep_ms(CALIBRATION_PONG_MS);
        cdc__executor_live(context->executor, &cal->live);
        live = cdc__popcount64(cal->live & cdc__low_bits(cal->workers));
    }
    cdc__hold_retire(hold);
    return rc;
}

void cdc__profiled_plan_calibrate(cdc_context_t *context, double held)
{
    if (context->config.plan == CDC_PLAN_EQUAL || context->profiled.calibrated ||
        held < CALIBRATION_MIN_HELD)
        return;
    context->profiled.calibrated = 1;
    calibration_t cal = {.workers = cdc__executor_worker_count(context->executor)};
    if (cal.workers <= 0 || cdc__executor_live(context->executor, &cal.live) <= 0 ||
        (cdc__profiled_plan_unmeasured(context, cal.live, CDC_PLAN_MIN_RATE_SAMPLES) == 0 &&
         cdc__profiled_plan_unlinked(context, cal.live) == 0))
        return;
    cal.a = calloc((size_t) CALIBRATION_MAX_ROWS * CALIBRATION_K, sizeof *cal.a);
    cal.bt = calloc((size_t) CALIBRATION_COLS * CALIBRATION_K, sizeof *cal.bt);
    cal.result = malloc((size_t) cal.workers * CALIBRATION_MAX_ROWS * CALIBRATION_COLS *
                        sizeof *cal.result);
    cal.started = cdc__clock_ms();
    int rc = cal.a && cal.bt && cal.result ? CDC_OK : CDC_ENOMEM;
    if (rc == CDC_OK)
        rc = rate_rounds(context, &cal);
    if (rc == CDC_OK)
        rc = link_rounds(context, &cal);
    if (rc == CDC_OK)
        rc = stream_rounds(context, &cal);
    if (rc != CDC_OK)
        CDC_LOG_WARNF("plan calibration: %s; the plan starts from equal blocks",
                      cdc_last_error());
    else
        CDC_LOG_INFOF("plan calibration: %d rounds in %.0f ms; of %d workers %d unmeasured, %d "
                      "with no link measured, %d with no bandwidth",
                      cal.rounds, cdc__clock_ms() - cal.started, cal.workers,
                      cdc__profiled_plan_unmeasured(context, cal.live, CDC_PLAN_MIN_RATE_SAMPLES),
                      cdc__profiled_plan_unlinked(context, cal.live),
                      cdc__profiled_plan_unstreamed(context, cal.live));
    free(cal.a);
    free(cal.bt);
    free(cal.result);
}
