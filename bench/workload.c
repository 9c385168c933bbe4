/* workload.c - layers to run, their data, and the uncoded reference outputs. */
#include "workload.h"

#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int add_layer(cdc_workload_t *workload, const cdc_model_layer_t *shape,
                     int64_t batch, const char *name)
{
    if (workload->count >= CDC_BENCH_MAX_LAYERS) {
        fprintf(stderr, "cdcgemm-bench: more than %d layers\n", CDC_BENCH_MAX_LAYERS);
        return 1;
    }
    cdc_bench_layer_t *l = &workload->layers[workload->count++];
    memset(l, 0, sizeof *l);
    l->shape = *shape;
    l->batch = batch;
    snprintf(l->name, sizeof l->name, "%s", name);
    l->shape.name = l->name;
    return 0;
}

int cdc_workload_add_layer(cdc_workload_t *workload, const cdc_model_layer_t *shape)
{
    return add_layer(workload, shape, 1, shape->name);
}

int cdc_workload_add_model(cdc_workload_t *workload, const char *model)
{
    size_t count;
    const cdc_model_layer_t *layers = cdc_model_layers(model, &count);
    if (!layers) {
        fprintf(stderr, "cdcgemm-bench: unknown model '%s' (alexnet, vgg16)\n", model);
        return 1;
    }
    for (size_t i = 0; i < count; i++)
        if (cdc_workload_add_layer(workload, &layers[i]))
            return 1;
    return 0;
}

int cdc_workload_add_spec(cdc_workload_t *workload, const char *spec)
{
    cdc_model_layer_t shape;
    memset(&shape, 0, sizeof shape);
    long long a, b, c, d, e, f, g, batch = 1;
    char tail;
    if (strncmp(spec, "fc:", 3) == 0) {
        int got = sscanf(spec + 3, "%lldx%lld:%lld%c", &a, &b, &batch, &tail);
        if ((got != 2 && got != 3) || a < 1 || b < 1 || batch < 1) {
            fprintf(stderr, "cdcgemm-bench: --layer '%s': expected fc:OUTxIN[:batch]\n", spec);
            return 1;
        }
        shape.kind = CDC_MODEL_FC;
        shape.out_channels = a;
        shape.in_channels = b;
        shape.h = shape.w = shape.kernel = shape.stride = 1;
    } else if (strncmp(spec, "conv:", 5) == 0) {
        int got = sscanf(spec + 5, "%lldx%lldx%lld:%lld:%lld:%lld:%lld%c", &a, &b, &c, &d, &e,
                         &f, &g, &tail);
        if (got != 7 || a < 1 || b < 1 || c < 1 || d < 1 || e < 1 || f < 1 || g < 0) {
            fprintf(stderr,
                    "cdcgemm-bench: --layer '%s': expected conv:CxHxW:COUT:K:STRIDE:PAD\n",
                    spec);
            return 1;
        }
        shape.kind = CDC_MODEL_CONV;
        shape.in_channels = a;
        shape.h = b;
        shape.w = c;
        shape.out_channels = d;
        shape.kernel = e;
        shape.stride = f;
        shape.pad = g;
    } else {
        fprintf(stderr, "cdcgemm-bench: --layer '%s': expected fc:... or conv:...\n", spec);
        return 1;
    }
    return add_layer(workload, &shape, batch, spec);
}

static int layer_new(const cdc_bench_layer_t *l, cdc_context_t *context, cdc_split_t split,
                     int parity, cdc_layer_t **object)
{
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = split;
    options.parity = parity;
    options.relu = 1;
    int rc;
    if (l->shape.kind == CDC_MODEL_CONV) {
        cdc_conv2d_desc_t desc = {l->shape.in_channels, l->shape.out_channels,
                                  l->shape.kernel,      l->shape.kernel,
                                  l->shape.stride,      l->shape.stride,
                                  l->shape.pad,         l->shape.pad,
                                  1,                    1};
        rc = cdc_conv2d_new(context, &desc, l->weights, l->bias, &options, object);
    } else {
        rc = cdc_fc_new(context, l->shape.out_channels, l->shape.in_channels, l->weights,
                        l->bias, &options, object);
    }
    if (rc != CDC_OK)
        fprintf(stderr, "cdcgemm-bench: layer %s: %s\n", l->name, cdc_last_error());
    return rc != CDC_OK;
}

int cdc_workload_layers_new(const cdc_workload_t *workload, cdc_context_t *context,
                            cdc_split_t split, int parity, cdc_layer_t **layers)
{
    for (int i = 0; i < workload->count; i++) {
        if (layer_new(&workload->layers[i], context, split, parity, &layers[i])) {
            while (i-- > 0)
                cdc_layer_destroy(&layers[i]);
            return 1;
        }
    }
    return 0;
}

int cdc_workload_forward(const cdc_bench_layer_t *l, cdc_layer_t *object, float *y)
{
    if (l->shape.kind == CDC_MODEL_CONV)
        return cdc_conv2d_forward(object, l->batch, l->shape.h, l->shape.w, l->x, y);
    return cdc_fc_forward(object, l->batch, l->x, y);
}

int cdc_workload_prepare(cdc_workload_t *workload, unsigned seed)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.in_process = 1;
    config.local_workers = 1;
    config.parity = 0;
    cdc_context_t *reference = NULL;
    if (cdc_context_new(&config, &reference) != CDC_OK) {
        fprintf(stderr, "cdcgemm-bench: reference context: %s\n", cdc_last_error());
        return 1;
    }
    int failed = 0;
    for (int i = 0; i < workload->count && !failed; i++) {
        cdc_bench_layer_t *l = &workload->layers[i];
        const cdc_model_layer_t *s = &l->shape;
        l->out_h = l->out_w = 1;
        if (s->kind == CDC_MODEL_CONV) {
            cdc_conv2d_desc_t desc = {s->in_channels, s->out_channels, s->kernel, s->kernel,
                                      s->stride,      s->stride,       s->pad,    s->pad,
                                      1,              1};
            if (cdc_conv2d_output_size(&desc, s->h, s->w, &l->out_h, &l->out_w) != CDC_OK) {
                fprintf(stderr, "cdcgemm-bench: layer %s: %s\n", l->name, cdc_last_error());
                failed = 1;
                break;
            }
        }
        l->in_count = (size_t) (l->batch * s->in_channels * s->h * s->w);
        l->w_count = (size_t) (s->out_channels * cdc_model_layer_inner(s));
        l->out_count = (size_t) (l->batch * s->out_channels * l->out_h * l->out_w);
        l->x = cdc_bench_xmalloc(l->in_count * sizeof(float));
        l->weights = cdc_bench_xmalloc(l->w_count * sizeof(float));
        l->bias = cdc_bench_xmalloc((size_t) s->out_channels * sizeof(float));
        l->reference = cdc_bench_xmalloc(l->out_count * sizeof(float));
        cdc_bench_fill(l->x, l->in_count, &seed);
        cdc_bench_fill(l->weights, l->w_count, &seed);
        cdc_bench_fill(l->bias, (size_t) s->out_channels, &seed);
        cdc_layer_t *object = NULL;
        failed = layer_new(l, reference, CDC_SPLIT_ROWS, 0, &object);
        if (!failed && cdc_workload_forward(l, object, l->reference) != CDC_OK) {
            fprintf(stderr, "cdcgemm-bench: reference %s: %s\n", l->name, cdc_last_error());
            failed = 1;
        }
        cdc_layer_destroy(&object);
    }
    cdc_context_destroy(&reference);
    return failed;
}

void cdc_workload_free(cdc_workload_t *workload)
{
    for (int i = 0; i < workload->count; i++) {
        cdc_bench_layer_t *l = &workload->layers[i];
        free(l->x);
        free(l->weights);
        free(l->bias);
        free(l->reference);
        l->x = l->weights = l->bias = l->reference = NULL;
    }
    workload->count = 0;
}
