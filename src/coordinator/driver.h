/* driver.h - the one coded-GEMM path: cdc_sgemm, the BLAS entry points and
   the layers describe their operands, then call it. */
#ifndef CDC_DRIVER_H_INCLUDED
#define CDC_DRIVER_H_INCLUDED

#include "context.h"
#include "gemm_desc.h"
#include "plan.h"



/* Run the coded GEMM: resolve the split (an AUTO plan->split by the bytes
   each moves, cached weights not counted) and the operand it cuts, size its
   data blocks (cdc__plan_size_blocks) (a conv's plan comes resolved and
   sized), encode (pack per-call operands, cut and encode the cut one unless
   it is cached; a conv's spatial split cuts bands, driver_spatial.c), run
   it through the engine in the layout the plan allows, assemble T, apply
   the epilogue, count the call. plan comes from cdc__plan_resolve; on return it
   holds the split used. On error the output is untouched for STORE
   (undefined for BIAS_RELU). The caller holds the context's call lock
   (cdc__context_call_begin: the public entry points do). */
int cdc__driver_gemm(cdc_context_t *context, const cdc_gemm_desc_t *desc,
                     cdc_call_plan_t *plan);

/* Over how many workers a row cut of cached weights of `rows` rows spreads
   under this plan: all n + r when the layout computes no parity fault-free
   (the rotated layout), else the n data shards. */
int cdc__driver_row_cut_spread(cdc_context_t *context, const cdc_call_plan_t *plan,
                               int64_t rows);

/* The epilogue over T (rows x cols, contiguous) and the call's count: the
   last step of every call. */
void cdc__driver_finish(cdc_context_t *context, const cdc_epilogue_t *epilogue,
                        const float *t, int64_t rows, int64_t cols);

#endif
