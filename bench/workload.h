/* workload.h - what a benchmark run computes: model or --layer layers, their
   inputs and reference outputs, and the per-request records. */
#ifndef CDC_WORKLOAD_H_INCLUDED
#define CDC_WORKLOAD_H_INCLUDED

#include "cdcgemm.h"
#include "models.h"

#include <stddef.h>

#define CDC_BENCH_MAX_LAYERS 32

typedef struct {
    cdc_model_layer_t shape;
    char name[32];
    int64_t batch;
    int64_t out_h, out_w;
    size_t in_count, w_count, out_count;
    float *x, *weights, *bias, *reference; /* reference: uncoded, in process */
} cdc_bench_layer_t;

typedef struct {
    int count;
    cdc_bench_layer_t layers[CDC_BENCH_MAX_LAYERS];
} cdc_workload_t;

/* Add a model's layers ("alexnet", "vgg16"); nonzero on an unknown name. */
int cdc_workload_add_model(cdc_workload_t *workload, const char *model);

/* Add one model layer (batch 1); nonzero when the workload is full. */
int cdc_workload_add_layer(cdc_workload_t *workload, const cdc_model_layer_t *shape);

/* Add "fc:OUTxIN[:batch]" or "conv:CxHxW:COUT:K:STRIDE:PAD"; nonzero with a
   message on stderr when the spec is malformed. */
int cdc_workload_add_spec(cdc_workload_t *workload, const char *spec);

/* Random weights and inputs (seeded) and the uncoded reference outputs,
   computed in process with OpenBLAS. Nonzero on failure. */
int cdc_workload_prepare(cdc_workload_t *workload, unsigned seed);

/* Create the layer objects on a context (ReLU on, split and parity given). */
int cdc_workload_layers_new(const cdc_workload_t *workload, cdc_context_t *context,
                            cdc_split_t split, int parity, cdc_layer_t **layers);

/* Forward one layer; status of the library call. */
int cdc_workload_forward(const cdc_bench_layer_t *layer, cdc_layer_t *object, float *y);

void cdc_workload_free(cdc_workload_t *workload);

#endif
