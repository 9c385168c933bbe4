/* driver.h - the one coded-GEMM path: cdc_sgemm, the BLAS entry points and
   the layers describe their operands, then call it. */
#ifndef CDC_DRIVER_H_INCLUDED
#define CDC_DRIVER_H_INCLUDED

#include "dedicated_layout.h"
#include "gemm_operands.h"
#include "plan.h"
#include "rotated_set.h"

/* A weight matrix its front end keeps between calls (a layer's weights, a
   BLAS operand the cache found repeating). The driver asks for its row
   blocks only when it cuts it and for its row norms only when the parity
   check or the accuracy guard needs them; the front end encodes and counts
   (weight_encodes) once per plan.

   Holds (hold.h): a shard task that names a cached operand by key carries
   a hold that keeps it readable past the call, so the transport can send
   it without a copy. The cut weights' tasks hold their shard set
   (cdc__shard_set_hold; the set holds `hold` in turn, its data blocks alias
   packed), the whole weights' tasks hold `hold` itself. */
typedef struct cdc_weights cdc_weights_t;
struct cdc_weights {
    const float *packed; /* rows x k, row-major, contiguous                 */
    cdc_hold_t *hold;    /* keeps packed alive; shard sets of it retain it  */
    uint64_t set_key;    /* names its row blocks on workers (nonzero)       */
    uint64_t whole_key;  /* names the whole matrix on workers (nonzero)     */
    /* Its row blocks (of these n lengths from first_row on, NULL: equal)
       + parity for (code, n), encoded on first use and again when the
       layout changes; stage: for lengths being staged, kept beside the set
       in use (cdc_shard_sets_t). */
    int (*shards)(cdc_weights_t *self, int stage, const cdc_code_t *code, int n,
                  int64_t first_row, const int64_t *lengths, const cdc_shard_set_t **set);
    /* Its row norms, computed once; NULL when out of memory. */
    const double *(*norms)(cdc_weights_t *self);
    /* Its rows in the rotated parity layout for code (rotated_set.h),
       encoded on first use and again when the code changes; NULL: this
       owner has none (its calls use the dedicated layout). */
    int (*rotated)(cdc_weights_t *self, const cdc_code_t *code,
                   const cdc_rotated_set_t **set);
    void *owner;
};

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
