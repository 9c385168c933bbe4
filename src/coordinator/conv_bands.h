/* conv_bands.h - the input of a conv layer's spatial split: bands of input
 * rows, one per block of output rows, and their parity. */
#ifndef CDC_CONV_BANDS_H_INCLUDED
#define CDC_CONV_BANDS_H_INCLUDED

#include "code.h"
#include "geometry.h"
#include "shard_set.h"

#include <stdint.h>

/* The input bands of a spatial split: shard s's band of input rows (with
   its halo, in zero-padded row coordinates; pad_h = 0 in its geometry) and
   the output rows it computes. */
typedef struct {
    int64_t block_rows;                        /* B: the longest band's rows  */
    int64_t first_row[CDC_CODE_MAX_N];         /* a data band's first output
                                                  row in the layer's output */
    int64_t real_rows[CDC_CODE_MAX_N];         /* its output rows            */
    int64_t out_rows[CDC_MAX_SHARDS];          /* rows its task computes:
                                                  real + halo rows
                                                  (driver_spatial.c); B
                                                  for parity               */
    cdc_conv_geometry_t geometry[CDC_MAX_SHARDS]; /* of one image's band     */
    const float *input[CDC_MAX_SHARDS];        /* batch images' bands        */
    int64_t here_rows;                         /* the coordinator's share:
                                                  output rows 0..here_rows-1,
                                                  outside the code; the data
                                                  bands follow (0: none)   */
    cdc_conv_geometry_t here_geometry;         /* its band's, as a data band's */
    const float *here_input;                   /* its batch images' bands    */
} cdc_conv_bands_t;

/* Spatial split input: the band of the first here_rows output rows (the
   coordinator's share; 0: none), then the n bands of input rows that n
   output-row blocks of lengths[0..n-1] rows need (NULL: ceil((out_h -
   here_rows) / n) rows each, the tail shorter), and r parity bands as long
   as the longest, encoded. The bands' memory is this thread's scratch
   buffer: valid until the thread's next call. */
int cdc__conv_bands_encode(const cdc_code_t *code, int n, int64_t here_rows,
                           const int64_t *lengths, const cdc_conv_geometry_t *g, int64_t batch,
                           const float *x, cdc_conv_bands_t *bands);

#endif
