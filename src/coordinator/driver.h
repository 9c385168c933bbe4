/* driver.h - the one coded-GEMM path: cdc_sgemm, the BLAS entry points and
   the layers describe their operands, then call it. */
#ifndef CDC_DRIVER_H_INCLUDED
#define CDC_DRIVER_H_INCLUDED

#include "dedicated_layout.h"
#include "encoded_weights.h"
#include "gemm_operands.h"
#include "plan.h"
#include "rotated_set.h"

/* One operand of T = A·Btᵀ: rows x k as the caller stores it, or weights. */
typedef struct {
    cdc_operand_t view;     /* per-call operand: packed (unless in_place)
                               and, if cut, encoded per call               */
    cdc_weights_t *weights; /* non-NULL: cached weights (view gives rows, k) */
    int in_place;           /* the view is rows x k contiguous and the
                               caller's memory outlives the call: cut and
                               send it as it is (a layer's input). The GEMM
                               front ends pack instead: with views of
                               caller memory in place the BLAS path's coded
                               768^3..1024^3 calls measured 1.5-2x slower
                               on workers (cdcgemm-bench blas threshold). */
} cdc_gemm_operand_t;

/* What happens to T once every data result is in. */
typedef enum {
    CDC_EPILOGUE_STORE,    /* C = alpha·T + beta·C (BLAS rules)             */
    CDC_EPILOGUE_BIAS_RELU /* T is y: y += bias per channel, then ReLU      */
} cdc_epilogue_kind_t;

typedef struct {
    cdc_epilogue_kind_t kind;
    float *out;       /* STORE: C as a row-major view of T's shape; else y  */
    int64_t ld;       /* STORE: C's leading dimension                       */
    float alpha, beta;
    const float *bias; /* BIAS_RELU: one per channel, or NULL               */
    int relu;
    int64_t outer, channels, inner; /* BIAS_RELU: y is outer x channels x inner */
} cdc_epilogue_t;

/* A coded GEMM as a front end describes it. */
typedef struct {
    cdc_gemm_operand_t a, bt; /* T (a rows x bt rows) = A·Btᵀ, inner k       */
    int transposed;           /* T is the caller's result transposed: the
                                 caller's rows are T's columns              */
    cdc_epilogue_t epilogue;  /* BIAS_RELU: T is written into out directly  */
} cdc_gemm_desc_t;

/* Run the coded GEMM: resolve the split (an AUTO plan->split by the bytes
   each moves, cached weights not counted) and the operand it cuts, size its
   data blocks (cdc__plan_size_blocks), encode
   (pack per-call operands, cut and encode the cut one unless it is cached),
   dispatch and decode (cdc__dedicated_call_run), assemble T, apply the
   epilogue, count the call. plan comes from cdc__plan_resolve; on return it
   holds the split used. On error the output is untouched for STORE
   (undefined for BIAS_RELU). The caller holds the context's call lock
   (cdc__context_call_begin: the public entry points do). */
int cdc__driver_gemm(cdc_context_t *context, const cdc_gemm_desc_t *desc,
                     cdc_call_plan_t *plan);

/* The epilogue over T (rows x cols, contiguous) and the call's count: the
   last step of every front end's call (conv runs its own tasks first). */
void cdc__driver_finish(cdc_context_t *context, const cdc_epilogue_t *epilogue,
                        const float *t, int64_t rows, int64_t cols);

#endif
