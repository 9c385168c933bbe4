/* driver_spatial.h - the driver's spatial split of a conv layer (gemm_desc.h). */
#ifndef CDC_DRIVER_SPATIAL_H_INCLUDED
#define CDC_DRIVER_SPATIAL_H_INCLUDED

#include "context.h"
#include "gemm_desc.h"
#include "plan.h"

/* desc->patches cut into bands of output rows (plan: COLUMNS, sized), the
   filters (desc->a) whole to every shard: y (the epilogue's out, batch x
   channels x out_h·out_w) gets every row of the product. */
int cdc__driver_spatial(cdc_context_t *context, const cdc_gemm_desc_t *desc,
                        const cdc_call_plan_t *plan);

#endif
