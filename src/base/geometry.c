/* geometry.c - validating a 2-D convolution's geometry and sizing its output. */
#include "geometry.h"

#include "error.h"

/* a * b into *out unless it overflows int64 (operands are >= 0 here). */
static int mul_ok(int64_t a, int64_t b, int64_t *out)
{
    if (a != 0 && b > INT64_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

static int add_ok(int64_t a, int64_t b, int64_t *out)
{
    if (b > INT64_MAX - a)
        return 0;
    *out = a + b;
    return 1;
}

/* Output length along one axis, or CDC_EDIM with the axis named. */
static int axis_finish(const char *axis, int64_t in, int64_t kernel, int64_t stride,
                       int64_t pad, int64_t dilation, int64_t *out)
{
    int64_t padded, twice_pad, span;
    if (in < 1)
        return cdc__fail(CDC_EDIM, "conv %s = %lld < 1", axis, (long long) in);
    if (kernel < 1)
        return cdc__fail(CDC_EDIM, "conv kernel_%s = %lld < 1", axis, (long long) kernel);
    if (stride < 1)
        return cdc__fail(CDC_EDIM, "conv stride_%s = %lld < 1", axis, (long long) stride);
    if (pad < 0)
        return cdc__fail(CDC_EDIM, "conv pad_%s = %lld < 0", axis, (long long) pad);
    if (dilation < 1)
        return cdc__fail(CDC_EDIM, "conv dilation_%s = %lld < 1", axis,
                         (long long) dilation);
    if (!mul_ok(2, pad, &twice_pad) || !add_ok(in, twice_pad, &padded))
        return cdc__fail(CDC_EDIM, "conv %s + 2 * pad_%s overflows", axis, axis);
    if (!mul_ok(dilation, kernel - 1, &span) || !add_ok(span, 1, &span))
        return cdc__fail(CDC_EDIM, "conv dilation_%s * (kernel_%s - 1) overflows", axis,
                         axis);
    if (span > padded)
        return cdc__fail(CDC_EDIM,
                         "conv output %s is empty: dilated kernel %lld > padded input %lld",
                         axis, (long long) span, (long long) padded);
    *out = (padded - span) / stride + 1;
    return CDC_OK;
}

int cdc__conv_geometry_finish(cdc_conv_geometry_t *g)
{
    int64_t out_h = 0, out_w = 0, rows, cols, cells, image;
    int status;
    if (!g)
        return cdc__fail(CDC_EDIM, "conv geometry is NULL");
    if (g->channels < 1)
        return cdc__fail(CDC_EDIM, "conv channels = %lld < 1", (long long) g->channels);
    status = axis_finish("h", g->h, g->kernel_h, g->stride_h, g->pad_h, g->dilation_h,
                         &out_h);
    if (status != CDC_OK)
        return status;
    status = axis_finish("w", g->w, g->kernel_w, g->stride_w, g->pad_w, g->dilation_w,
                         &out_w);
    if (status != CDC_OK)
        return status;
    /* Every size a caller will allocate or index must fit: the image, the unfolded
       matrix, and its byte count. */
    if (!mul_ok(g->channels, g->h, &image) || !mul_ok(image, g->w, &image) ||
        !mul_ok(image, (int64_t) sizeof(float), &image))
        return cdc__fail(CDC_EDIM, "conv input %lld x %lld x %lld overflows",
                         (long long) g->channels, (long long) g->h, (long long) g->w);
    if (!mul_ok(g->channels, g->kernel_h, &rows) || !mul_ok(rows, g->kernel_w, &rows) ||
        !mul_ok(out_h, out_w, &cols) || !mul_ok(rows, cols, &cells) ||
        !mul_ok(cells, (int64_t) sizeof(float), &cells))
        return cdc__fail(CDC_EDIM, "conv im2col matrix (%lld*%lld*%lld) x (%lld*%lld) "
                                   "overflows",
                         (long long) g->channels, (long long) g->kernel_h,
                         (long long) g->kernel_w, (long long) out_h, (long long) out_w);
    g->out_h = out_h;
    g->out_w = out_w;
    return CDC_OK;
}

/* The span fits: finish checked dilation * (kernel - 1) + 1 for overflow. */
static int axis_padding(const char *axis, int64_t pad, int64_t kernel, int64_t dilation)
{
    int64_t span = dilation * (kernel - 1) + 1;
    if (pad >= span)
        return cdc__fail(CDC_EDIM,
                         "conv pad_%s = %lld is not smaller than the dilated kernel span "
                         "%lld (dilation_%s * (kernel_%s - 1) + 1): the extra rows or "
                         "columns would be all padding",
                         axis, (long long) pad, (long long) span, axis, axis);
    return CDC_OK;
}

int cdc__conv_geometry_check_padding(const cdc_conv_geometry_t *g)
{
    int rc = axis_padding("h", g->pad_h, g->kernel_h, g->dilation_h);
    return rc == CDC_OK ? axis_padding("w", g->pad_w, g->kernel_w, g->dilation_w) : rc;
}
