/* models.h - layer shapes of AlexNet and VGG-16 (ImageNet, 224x224 input). */
#ifndef CDC_MODELS_H_INCLUDED
#define CDC_MODELS_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

typedef enum { CDC_MODEL_CONV, CDC_MODEL_FC } cdc_model_layer_kind_t;

typedef struct {
    const char *name;
    cdc_model_layer_kind_t kind;
    int64_t in_channels; /* FC: input width  */
    int64_t h, w;        /* FC: 1, 1         */
    int64_t out_channels;/* FC: output width */
    int64_t kernel, stride, pad; /* FC: 1, 1, 0 */
} cdc_model_layer_t;

/* Layers of "alexnet" (torchvision) or "vgg16"; NULL for another name. */
const cdc_model_layer_t *cdc_model_layers(const char *model, size_t *count);

/* Inner GEMM dimension: in_channels * kernel^2 (conv) or the input width (FC). */
int64_t cdc_model_layer_inner(const cdc_model_layer_t *layer);

#endif
