/* plan.h - choosing the split: the one that moves fewer bytes per call. */
#ifndef CDC_PLAN_H_INCLUDED
#define CDC_PLAN_H_INCLUDED

#include "cdcgemm.h"
#include "geometry.h"

#include <stdint.h>

/* Per-call bytes (inputs out to every shard + results back) of T = A·Btᵀ
   (A m x k, Bt ncols x k) when A's rows (split = ROWS) or Bt's rows
   (split = COLUMNS) are sharded over n data + r parity shards. Operands named
   cached travel once, not per call, and are not counted. */
double cdc__plan_matmul_bytes(cdc_split_t split, int64_t m, int64_t ncols, int64_t k,
                              int n, int r, int a_cached, int bt_cached);

/* AUTO resolved for T = A·Btᵀ: COLUMNS only when it moves fewer bytes and
   every data shard gets at least one real row of Bt. */
cdc_split_t cdc__plan_matmul_split(int64_t m, int64_t ncols, int64_t k, int n, int r,
                                   int a_cached, int bt_cached);

/* Per-call bytes of a conv layer, channel (ROWS) vs spatial (COLUMNS). */
double cdc__plan_conv_bytes(cdc_split_t split, const cdc_conv_geometry_t *g,
                            int64_t out_channels, int64_t batch, int n, int r);

/* AUTO resolved for a conv layer: spatial only when it moves fewer bytes and
   every data shard gets at least one real output row. */
cdc_split_t cdc__plan_conv_split(const cdc_conv_geometry_t *g, int64_t out_channels,
                                 int64_t batch, int n, int r);

/* Input rows (of the zero-padded input) one spatial band of out_rows output rows reads. */
int64_t cdc__plan_band_height(const cdc_conv_geometry_t *g, int64_t out_rows);

#endif
