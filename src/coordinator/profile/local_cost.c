/* local_cost.c - the coordinator's own GEMM speed, measured once (local_cost.h). */
#include "local_cost.h"

#include "blas_backend.h"
#include "clock.h"
#include "task.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

/* Sizes of the calibration: big enough to leave the caches (the sgemv's
   matrix is 32 MiB) and to take a few ms, small enough to be paid once. */
#define CAL_GEMM 384
#define CAL_GEMV_ROWS 2048
#define CAL_GEMV_COLS 4096
#define CAL_REPEAT 3

static pthread_once_t speed_once = PTHREAD_ONCE_INIT;
static cdc_local_speed_t speed = {10.0, 5.0}; /* kept if the calibration cannot run */

/* The fastest of CAL_REPEAT runs: the first pays page faults and warm-up. */
static void measure(void)
{
    size_t square = (size_t) CAL_GEMM * CAL_GEMM;
    size_t wide = (size_t) CAL_GEMV_ROWS * CAL_GEMV_COLS;
    float *a = calloc(square * 3, sizeof(float));
    float *m = calloc(wide + CAL_GEMV_COLS + CAL_GEMV_ROWS, sizeof(float));
    if (!a || !m) {
        free(a);
        free(m);
        return;
    }
    double gemm_ms = 1e30, gemv_ms = 1e30;
    for (int i = 0; i < CAL_REPEAT; i++) {
        double t0 = cdc__clock_ms();
        cdc__blas_sgemm_rm(0, 1, CAL_GEMM, CAL_GEMM, CAL_GEMM, 1.0f, a, CAL_GEMM,
                           a + square, CAL_GEMM, 0.0f, a + 2 * square, CAL_GEMM);
        double t1 = cdc__clock_ms();
        cdc__blas_sgemv_rm(CAL_GEMV_ROWS, CAL_GEMV_COLS, m, CAL_GEMV_COLS, m + wide,
                           m + wide + CAL_GEMV_COLS);
        double t2 = cdc__clock_ms();
        gemm_ms = t1 - t0 < gemm_ms ? t1 - t0 : gemm_ms;
        gemv_ms = t2 - t1 < gemv_ms ? t2 - t1 : gemv_ms;
    }
    if (gemm_ms > 0.0)
        speed.gflops = 2.0 * CAL_GEMM * CAL_GEMM * CAL_GEMM / (gemm_ms * 1e6);
    if (gemv_ms > 0.0)
        speed.gbytes_per_s = (double) wide * sizeof(float) / (gemv_ms * 1e6);
    free(a);
    free(m);
}

cdc_local_speed_t cdc__local_speed(void)
{
    pthread_once(&speed_once, measure);
    return speed;
}

double cdc__local_gemm_ms(int64_t m, int64_t ncols, int64_t k, double emulated_gflops,
                          double emulated_gbps)
{
    cdc_local_speed_t s = cdc__local_speed();
    double flops = cdc__gemm_flops((double) m, (double) ncols, (double) k);
    double bytes = ((double) m * k + (double) ncols * k + (double) m * ncols) * sizeof(float);
    double compute = flops / (s.gflops * 1e6), memory = bytes / (s.gbytes_per_s * 1e6);
    double ms = compute > memory ? compute : memory;
    double streamed = cdc__gemm_streamed_bytes((double) m, (double) ncols, (double) k);
    double emulated = fmax(emulated_gflops > 0.0 ? flops / (emulated_gflops * 1e6) : 0.0,
                           emulated_gbps > 0.0 ? streamed / (emulated_gbps * 1e6) : 0.0);
    return ms > emulated ? ms : emulated;
}
