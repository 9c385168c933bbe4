/* conv_bands.c - cut a conv input into bands of rows and encode their
 * parity (conv_bands.h). */
#include "conv_bands.h"

#include "error.h"
#include "plan.h"
#include "scratch.h"

#include <stdlib.h>
#include <string.h>

/* Copy the input rows a band needs (in zero-padded row coordinates) from each
   of `planes` h x w planes into band_h x w planes, zeros where the rows fall in
   the padding. */
static void cut_band(const cdc_conv_geometry_t *g, int64_t planes, const float *x,
                     int64_t first_padded_row, int64_t band_h, float *band)
{
    size_t row_bytes = (size_t) g->w * sizeof(float);
    for (int64_t bc = 0; bc < planes; bc++) {
        const float *plane = x + bc * g->h * g->w;
        float *dst = band + bc * band_h * g->w;
        for (int64_t t = 0; t < band_h; t++) {
            int64_t row = first_padded_row + t - g->pad_h;
            if (row >= 0 && row < g->h)
                memcpy(dst + t * g->w, plane + row * g->w, row_bytes);
            else
                memset(dst + t * g->w, 0, row_bytes);
        }
    }
}

/* Output rows and geometry of every band (see cdc__conv_bands_encode):
   *total the floats of all bands. */
static int bands_layout(int n, int r, int64_t here_rows, const int64_t *lengths,
                        const cdc_conv_geometry_t *g, int64_t batch, cdc_conv_bands_t *bands,
                        size_t *total)
{
    /* Output rows past a band's end whose windows still reach its rows. */
    int64_t halo = (cdc__plan_band_height(g, 1) - 1) / g->stride_h;
    int64_t equal = (g->out_h - here_rows + n - 1) / n, first = here_rows;
    memset(bands, 0, sizeof *bands);
    bands->here_rows = here_rows;
    *total = 0;
    if (here_rows > 0) {
        bands->here_geometry = *g;
        bands->here_geometry.h = cdc__plan_band_height(g, here_rows);
        bands->here_geometry.pad_h = 0;
        int rc = cdc__conv_geometry_finish(&bands->here_geometry);
        if (rc != CDC_OK)
            return rc;
        *total += (size_t) batch * (size_t) (g->channels * bands->here_geometry.h * g->w);
    }
    for (int i = 0; i < n; i++) {
        int64_t left = g->out_h - first;
        int64_t len = lengths ? lengths[i] : left < equal ? left : equal;
        bands->first_row[i] = first;
        bands->real_rows[i] = len;
        bands->block_rows = len > bands->block_rows ? len : bands->block_rows;
        first += len;
    }
    for (int s = 0; s < n + r; s++) {
        int64_t len = s < n ? bands->real_rows[s] : bands->block_rows;
        int64_t rows = len + (s < n && len > 0 ? halo : 0);
        bands->out_rows[s] = rows < bands->block_rows ? rows : bands->block_rows;
        bands->geometry[s] = *g;
        if (bands->out_rows[s] == 0)
            continue; /* an empty band: nothing to compute */
        bands->geometry[s].h = cdc__plan_band_height(g, bands->out_rows[s]);
        bands->geometry[s].pad_h = 0;
        int rc = cdc__conv_geometry_finish(&bands->geometry[s]);
        if (rc != CDC_OK)
            return rc;
        *total += (size_t) batch * (size_t) (g->channels * bands->geometry[s].h * g->w);
    }
    return CDC_OK;
}

/* The bands' parity, one (image, channel) plane of every band at a time, so
   it is summed while the cut planes are still in cache. A data band is zero
   below its real rows: its halo rows are zeros too, and past its end the
   code's padding is read from zeros (zero_rows rows). */
static int bands_parity(const cdc_code_t *code, int n, const cdc_conv_geometry_t *g,
                        int64_t planes, cdc_conv_bands_t *bands, const float *zeros)
{
    int r = cdc__code_r(code);
    int64_t heights[CDC_CODE_MAX_N], parity_h = bands->geometry[n].h;
    for (int i = 0; i < n; i++)
        heights[i] =
            bands->real_rows[i] > 0 ? cdc__plan_band_height(g, bands->real_rows[i]) : 0;
    for (int64_t bc = 0; bc < planes; bc++) {
        const float *data[CDC_CODE_MAX_N];
        float *parity[CDC_CODE_MAX_R];
        for (int i = 0; i < n; i++)
            data[i] = heights[i] > 0 ? bands->input[i] + bc * bands->geometry[i].h * g->w
                                     : zeros;
        for (int j = 0; j < r; j++)
            parity[j] = (float *) bands->input[n + j] + bc * parity_h * g->w;
        int rc = cdc__encode_ragged(code, data, heights, parity_h, g->w, parity, zeros,
                                    parity_h);
        if (rc != CDC_OK)
            return rc;
    }
    return CDC_OK;
}

int cdc__conv_bands_encode(const cdc_code_t *code, int n, int64_t here_rows,
                           const int64_t *lengths, const cdc_conv_geometry_t *g, int64_t batch,
                           const float *x, cdc_conv_bands_t *bands)
{
    int r = code ? cdc__code_r(code) : 0, shards = n + r;
    if (here_rows < 0 || here_rows >= g->out_h)
        return cdc__fail(CDC_EINVAL, "spatial split: a share of %lld of %lld output rows",
                         (long long) here_rows, (long long) g->out_h);
    size_t total;
    int rc = bands_layout(n, r, here_rows, lengths, g, batch, bands, &total);
    if (rc != CDC_OK)
        return rc;
    float *storage = cdc__scratch(CDC_SCRATCH_BANDS, total);
    if (!storage)
        return cdc__fail(CDC_ENOMEM, "%d input bands of %zu floats", shards, total);
    int64_t planes = batch * g->channels;
    if (here_rows > 0) { /* from the first padded row: rows 0..here_rows-1 */
        cut_band(g, planes, x, 0, bands->here_geometry.h, storage);
        bands->here_input = storage;
        storage += (size_t) planes * (size_t) (bands->here_geometry.h * g->w);
    }
    for (int s = 0; s < shards; s++) {
        bands->input[s] = storage;
        if (bands->out_rows[s] > 0)
            storage += (size_t) planes * (size_t) (bands->geometry[s].h * g->w);
    }
    for (int i = 0; i < n; i++) {
        if (bands->out_rows[i] == 0)
            continue;
        int64_t band_h = bands->geometry[i].h;
        int64_t real_h = cdc__plan_band_height(g, bands->real_rows[i]);
        float *band = (float *) bands->input[i];
        for (int64_t bc = 0; bc < planes; bc++) {
            float *plane = band + bc * band_h * g->w;
            cut_band(g, 1, x + bc * g->h * g->w, bands->first_row[i] * g->stride_h, real_h,
                     plane);
            memset(plane + real_h * g->w, 0,
                   (size_t) ((band_h - real_h) * g->w) * sizeof(float));
        }
    }
    if (r == 0)
        return CDC_OK;
    float *zeros = calloc((size_t) (bands->geometry[n].h * g->w), sizeof(float));
    if (!zeros)
        return cdc__fail(CDC_ENOMEM, "a zero band plane");
    rc = bands_parity(code, n, g, planes, bands, zeros);
    free(zeros);
    return rc;
}

