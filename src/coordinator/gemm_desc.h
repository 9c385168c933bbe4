/* gemm_desc.h - a coded GEMM as a front end describes it to the driver
 * (driver.h): its operands (views of the caller's memory, cached weights,
 * or a conv input's patches) and what happens to the product. */
#ifndef CDC_GEMM_DESC_H_INCLUDED
#define CDC_GEMM_DESC_H_INCLUDED

#include "encoded_weights.h"
#include "gemm_operands.h"
#include "geometry.h"

#include <stdint.h>

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

/* Bt as the im2col patches of a batch of images (a conv layer's input):
   never built here; each task carries the input (or its band of it) and
   runs im2col where it runs. Bt's rows are batch x out_h x out_w, its k
   the filters' (C·kh·kw). */
typedef struct {
    const cdc_conv_geometry_t *geometry;
    int64_t batch;
    const float *input;     /* batch x C x H x W                            */
} cdc_patches_t;

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
    int channels_major; /* BIAS_RELU: T is channels x (outer x inner), a
                           conv's: laid out into y before bias and ReLU  */
} cdc_epilogue_t;

/* A coded GEMM as a front end describes it. */
typedef struct {
    cdc_gemm_operand_t a, bt; /* T (a rows x bt rows) = A·Btᵀ, inner k       */
    int transposed;           /* T is the caller's result transposed: the
                                 caller's rows are T's columns              */
    cdc_epilogue_t epilogue;  /* BIAS_RELU: T is written into out directly  */
    const cdc_patches_t *patches; /* non-NULL: Bt is these patches (bt.view
                                 gives its rows and k only), A the filters
                                 (weights), and the plan comes resolved and
                                 sized by the front end (its costs are its
                                 own): ROWS cuts the filters, COLUMNS the
                                 output rows into bands of the input
                                 (driver_spatial.c)                        */
} cdc_gemm_desc_t;

#endif
