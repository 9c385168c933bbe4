/* rotated_layout.h - one coded product in the rotated parity layout: every
 * worker computes its data rows first and streams them; parity blocks are
 * computed only for the stripes that lost a data block (docs/codes.md).
 * The call engine (engine.h) runs it. */
#ifndef CDC_ROTATED_LAYOUT_H_INCLUDED
#define CDC_ROTATED_LAYOUT_H_INCLUDED

#include "context.h"
#include "encoded_weights.h"
#include "layout.h"
#include "plan.h"
#include "rotated_set.h"

typedef struct {
    cdc_call_layout_t layout;          /* first: the engine's view (set by the run) */
    const cdc_rotated_set_t *set; /* the cut operand: A's rows (weights)     */
    uint64_t a_key;               /* the weights' key (the set's layout is
                                     mixed in here)                          */
    cdc_shard_task_t proto;       /* what every task shares: kind, k, cols
                                     and bt (bt_key, bt_hold) or geometry,
                                     batch and input                         */
    float *out;                   /* set->rows x proto.cols, row-major: row i
                                     of the product of the set's row i        */
    cdc_shard_task_t share;       /* the coordinator's share (no rows: none):
                                     the rows before the set's, computed here
                                     while the workers run (sized stripes)   */
    cdc_split_t split;            /* the report's, in the caller's terms     */
    int wanted_r;                 /* the parity asked for (plan.h)           */
    int here;                     /* CDC_HERE_* (plan.h): every block here   */
    /* The run's own (cdc__rotated_call_run). */
    float *tails;                 /* worker w's parity results: W x r·B x cols */
    double *col_norms;            /* the product's columns' operand norms,
                                     computed when first needed             */
    double *row_norms;            /* one stripe's blocks' row norms          */
} cdc_rotated_call_t;

/* Whether a call of this plan over rows of the cut operand runs in the
   rotated layout: it could (cdc__plan_rotated_eligible), nothing is sent
   here instead (no budget or speed; a coordinator's share only with sized
   stripes), every worker holds its operand within its budget, and the plan is
   the equal one (equal stripes, cut by the set) or sized stripes
   (plan->rotated). */
int cdc__rotated_wanted(cdc_context_t *context, const cdc_call_plan_t *plan, int64_t rows);

/* Weights in this layout (encoded_weights.h): a cdc_rotated_set_t. */
extern const cdc_layout_encoding_t cdc__rotated_encoding;

/* Run it through the engine: one streamed task per worker (its data rows,
   then its parity blocks). On CDC_OK every row of out is the product. */
int cdc__rotated_call_run(cdc_context_t *context, cdc_rotated_call_t *call);

#endif
