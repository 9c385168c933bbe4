/* models.c - the AlexNet and VGG-16 layer tables. */
#include "models.h"

#include <string.h>

#define CONV(name, cin, hw, cout, k, s, p) {name, CDC_MODEL_CONV, cin, hw, hw, cout, k, s, p}
#define FC(name, in, out) {name, CDC_MODEL_FC, in, 1, 1, out, 1, 1, 0}

/* torchvision AlexNet: the conv inputs are the sizes after each max-pool. */
static const cdc_model_layer_t alexnet[] = {
    CONV("conv1", 3, 224, 64, 11, 4, 2),   CONV("conv2", 64, 27, 192, 5, 1, 2),
    CONV("conv3", 192, 13, 384, 3, 1, 1),  CONV("conv4", 384, 13, 256, 3, 1, 1),
    CONV("conv5", 256, 13, 256, 3, 1, 1),  FC("fc6", 9216, 4096),
    FC("fc7", 4096, 4096),                 FC("fc8", 4096, 1000),
};

static const cdc_model_layer_t vgg16[] = {
    CONV("conv1_1", 3, 224, 64, 3, 1, 1),    CONV("conv1_2", 64, 224, 64, 3, 1, 1),
    CONV("conv2_1", 64, 112, 128, 3, 1, 1),  CONV("conv2_2", 128, 112, 128, 3, 1, 1),
    CONV("conv3_1", 128, 56, 256, 3, 1, 1),  CONV("conv3_2", 256, 56, 256, 3, 1, 1),
    CONV("conv3_3", 256, 56, 256, 3, 1, 1),  CONV("conv4_1", 256, 28, 512, 3, 1, 1),
    CONV("conv4_2", 512, 28, 512, 3, 1, 1),  CONV("conv4_3", 512, 28, 512, 3, 1, 1),
    CONV("conv5_1", 512, 14, 512, 3, 1, 1),  CONV("conv5_2", 512, 14, 512, 3, 1, 1),
    CONV("conv5_3", 512, 14, 512, 3, 1, 1),  FC("fc6", 25088, 4096),
    FC("fc7", 4096, 4096),                   FC("fc8", 4096, 1000),
};

const cdc_model_layer_t *cdc_model_layers(const char *model, size_t *count)
{
    if (model && strcmp(model, "alexnet") == 0) {
        *count = sizeof alexnet / sizeof *alexnet;
        return alexnet;
    }
    if (model && strcmp(model, "vgg16") == 0) {
        *count = sizeof vgg16 / sizeof *vgg16;
        return vgg16;
    }
    *count = 0;
    return NULL;
}

int64_t cdc_model_layer_inner(const cdc_model_layer_t *layer)
{
    return layer->in_channels * layer->kernel * layer->kernel;
}
