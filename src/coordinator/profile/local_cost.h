/* local_cost.h - what a GEMM costs on the coordinator itself, so the profiled
   plan can compare computing a call here with distributing it (issue 12:
   down to no workers, when computing locally is predicted faster).
 *
 * The coordinator is profiled like a worker, but its speed depends on the
 * shape more than a device's emulated rate does: a large GEMM is
 * compute-bound (tens of GFLOP/s on two cores), a thin one (a batch-1 FC
 * layer, a GEMV) reads every weight once and is memory-bound (a 4096 x 9216
 * GEMV takes ~18 ms here: ~4 GFLOP/s). So the prediction is a roofline,
 * max(flops / peak, bytes read / bandwidth), both measured once per process
 * with the same OpenBLAS (a few ms, at the first call that needs it). */
#ifndef CDC_LOCAL_COST_H_INCLUDED
#define CDC_LOCAL_COST_H_INCLUDED

#include <stdint.h>

typedef struct {
    double gflops;      /* a square sgemm's rate                    */
    double gbytes_per_s; /* a large sgemv's: the bytes it reads      */
} cdc_local_speed_t;

/* This process's speed, measured at the first call. Thread-safe. */
cdc_local_speed_t cdc__local_speed(void);

/* Predicted ms for T (m x ncols) = A (m x k) · Btᵀ (ncols x k) here; on an
   emulated coordinator (slow@c, faults.h; 0: not emulated) no less than
   its flops at emulated_gflops nor its operands' bytes at emulated_gbps
   (engine.c makes it so). */
double cdc__local_gemm_ms(int64_t m, int64_t ncols, int64_t k, double emulated_gflops,
                          double emulated_gbps);

#endif
