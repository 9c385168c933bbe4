/* layer.h - what FC and conv layers share: weights, bias, their encodings. */
#ifndef CDC_LAYER_H_INCLUDED
#define CDC_LAYER_H_INCLUDED

#include "driver.h"
#include "im2col.h"
#include "row_parts.h"

typedef enum { CDC_LAYER_FC, CDC_LAYER_CONV } cdc_layer_kind_t;

struct cdc_layer {
    cdc_context_t *context;
    cdc_layer_kind_t kind;
    cdc_layer_options_t options;
    float *weights;     /* rows x k: FC out x in, conv Cout x (Cin*kh*kw):
                           the library's copy, in parts (NULL: borrowed) */
    cdc_row_parts_t *parts; /* the rows (row_parts.h): the copy or the
                           caller's parts; its hold keeps them past
                           cdc_layer_destroy for the encodings and sends
                           that hold it                                   */
    float *bias;        /* rows, or NULL                                  */
    int64_t rows, k;
    uint64_t weights_key; /* content hash: names the weights on workers   */
    cdc_conv2d_desc_t conv;
    /* The weights' encodings (encoded_weights.h): row blocks + parity for
       the current plan and those being staged, the parity layout's, the
       row norms; a new plan (and cdc_layer_destroy) retires an encoding:
       it goes when its last holder lets go. */
    cdc_encoded_weights_t encoded;
    cdc_split_t last_split;
};

/* Validate options and copy weights/bias into a new layer. */
int cdc__layer_new(cdc_context_t *context, cdc_layer_kind_t kind, int64_t rows,
                   int64_t k, const float *weights, const float *bias,
                   const cdc_layer_options_t *options, cdc_layer_t **layer_p);

/* A layer over rows (parts, taken over: closed on failure) with options
   already validated (opts); bias copied. */
int cdc__layer_new_rows(cdc_context_t *context, cdc_layer_kind_t kind, cdc_row_parts_t *parts,
                        const float *bias, const cdc_layer_options_t *opts,
                        cdc_layer_t **layer_p);

/* The plan of this call (cdc__plan_resolve with the layer's parity and
   split overrides); the split may stay AUTO for the layer's own rule. */
int cdc__layer_plan(cdc_layer_t *layer, cdc_call_plan_t *plan);

/* The layer's weights as the driver takes them (their encodings kept on
   the layer); valid while the layer lives. */
void cdc__layer_weights(cdc_layer_t *layer, cdc_weights_t *weights);

/* The layer's epilogue over y (batch x rows x plane): bias, then ReLU. */
cdc_epilogue_t cdc__layer_epilogue(const cdc_layer_t *layer, int64_t batch, int64_t plane,
                                   float *y);

/* 0 when a * b fits in int64 and stays <= limit, else CDC_EDIM naming what. */
int cdc__check_product(int64_t a, int64_t b, int64_t limit, const char *what);

#endif
