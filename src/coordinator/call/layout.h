/* layout.h - what the call engine (engine.h) asks of a parity layout.
 *
 * A coded call is S stripes of n data and r parity blocks, every block a
 * B x cols product, computed by tasks, one per slot (a worker's place in
 * the call). The layout says which task each slot runs, which blocks of
 * a stripe the tasks' parts brought back, where a block is read and
 * written, and how one data block is computed here; the engine runs the
 * steps every layout shares (dispatch, collect, verify, decode, fall
 * back, account). Two layouts implement it (docs/architecture.md):
 *   dedicated  one stripe; slot b computes block b (the last r slots the
 *              parity), so r workers compute parity on every call, unless
 *              the parity slots are deferrable (sent on demand);
 *   rotated    W stripes over W workers; each worker's task computes its
 *              data blocks first and streams them, its parity blocks
 *              after, only while the call still wants them. */
#ifndef CDC_LAYOUT_H_INCLUDED
#define CDC_LAYOUT_H_INCLUDED

#include "cdcgemm.h"
#include "code.h"
#include "context.h"
#include "plan.h"
#include "task.h"

#include <stdint.h>

typedef struct cdc_call_layout cdc_call_layout_t;

/* What a slot sends (the task op's answer). */
enum {
    CDC_SLOT_SEND = 1, /* the task goes to the executor                     */
    CDC_SLOT_ZERO = 0, /* its blocks are zero (no rows): nothing sent, in   */
    CDC_SLOT_OUT = -1  /* left out by the plan (its home cannot hold it):
                          an erasure the parity covers                      */
};

typedef struct {
    /* Slot's task into *task (result buffers set): CDC_SLOT_*. */
    int (*task)(cdc_call_layout_t *layout, int slot, cdc_shard_task_t *task);
    /* Stripe s's blocks that the tasks' parts brought back (parts[slot]:
       the slot's parts_in, 0 for a slot not sent), bit b for block b of
       n + r, the zero blocks (CDC_SLOT_ZERO) included. */
    uint64_t (*present)(const cdc_call_layout_t *layout, const uint32_t *parts, int s);
    /* After the executor returned: what the layout does with what came
       (the dedicated layout: replicas, padding, injected corruption of the
       slots in corrupted) and the report's oracle_ms. */
    void (*collected)(cdc_call_layout_t *layout, const uint32_t *parts, uint64_t corrupted,
                      cdc_call_report_t *report);
    /* Stripe s's blocks as the code's (n + r) blocks of B x cols: pointers
       to where they are, or copies into scratch (when copies_blocks) of the
       blocks in present, zero-padded, the others zero. */
    void (*gather)(const cdc_call_layout_t *layout, int s, uint64_t present, float *scratch,
                   float **blocks);
    /* Rebuilt data block b of stripe s (in block) to where the caller
       reads it; NULL when gather pointed at it already. */
    void (*scatter)(const cdc_call_layout_t *layout, int s, int b, const float *block);
    /* Stripe s's rounding scales (code.h), n + r of them, valid until the
       next call of this op; CDC_OK, or an error (then nothing is checked
       or guarded). */
    int (*scales)(cdc_call_layout_t *layout, int s, cdc_shard_scale_t *scales);
    /* Compute data block b of stripe s here, into where the caller reads
       it. */
    int (*compute_here)(cdc_call_layout_t *layout, const cdc_context_t *context, int s, int b);
    /* The layout's own counters; the context's lock is held. May be NULL. */
    void (*account)(const cdc_call_layout_t *layout, cdc_context_t *context);
} cdc_call_layout_ops_t;

struct cdc_call_layout {
    const cdc_call_layout_ops_t *ops;
    const cdc_code_t *code;  /* NULL when r = 0                              */
    int n, r;                /* a stripe's data and parity blocks            */
    int stripes, slots;      /* at most 64 of each                            */
    int64_t block_rows, cols; /* B x cols: every block, as the code sees it  */
    int64_t k;               /* the products' inner dimension                */
    int copies_blocks;       /* gather copies into scratch                   */
    uint64_t data_slots;     /* slots whose tasks compute data blocks        */
    uint64_t erasable;       /* slots cdc_context_erase_next may name        */
    int streamed;            /* the engine's goal always rules the call (not
                                only when checking or a data slot is out)  */
    int executor_n;          /* the executor's n (task.h: shard < n is data) */
    int needed;              /* results that suffice, zero slots included    */
    int wanted_r;            /* the redundancy asked for (the report)        */
    cdc_split_t split;       /* the split in the caller's terms (the report) */
    cdc_shard_task_t share;  /* the coordinator's share (no rows: none),
                                computed here while the tasks run           */
    int here;                /* CDC_HERE_* (plan.h): every data block
                                computed here, nothing sent                 */
    uint64_t deferrable;     /* slots whose tasks go on demand (task.h):
                                sent once a data task is lost or late, or,
                                in a call that checks or lost a data slot
                                before dispatch, once a worker is free;
                                0: none                                     */
};

#endif
