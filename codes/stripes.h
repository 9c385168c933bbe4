/* stripes.h - the rotated parity layout: W stripes of n = W - r data blocks
 * and r parity blocks each, rotated over W workers (RAID-5/6 style).
 *
 * A dedicated parity worker makes every fault-free call pay for redundancy
 * it did not use (issue 13). Here the cut operand is split into W stripes;
 * each stripe is coded on its own with the (n, r) code, and the blocks of
 * stripe s sit on the workers rotated by s: block b of stripe s (data b < n,
 * parity n + j) is on worker (b + s) mod W. Over the W stripes every worker
 * holds each block position once: n data blocks and r parity blocks, the
 * storage of the dedicated (W, n) layout. A worker computes its data blocks
 * first and its parity blocks only when a stripe needs them, so a call that
 * loses nothing computes 1/W of the data on each worker.
 *
 * Pure: no memory, no I/O; the transport and the call use it to place,
 * order and decode. */
#ifndef CDC_STRIPES_H_INCLUDED
#define CDC_STRIPES_H_INCLUDED

#include <stdint.h>

/* At most 64 workers: worker sets are 64-bit masks. */
#define CDC_STRIPES_MAX_WORKERS 64

typedef struct {
    int workers; /* W: stripes, and workers they rotate over */
    int n, r;    /* data and parity blocks of each stripe (n + r = W) */
} cdc_stripes_t;

typedef struct {
    int stripe, block; /* block < n: data block; n + j: parity j */
} cdc_stripe_block_t;

/* The layout of W workers with r parity blocks a stripe (1 <= r <= n, as
   the codes ask; W <= 64). CDC_OK or CDC_EINVAL naming the bad value. */
int cdc__stripes_init(cdc_stripes_t *layout, int workers, int r);

/* The worker that holds block `block` of stripe `stripe`. */
int cdc__stripes_worker(const cdc_stripes_t *layout, int stripe, int block);

/* The block of stripe `stripe` that worker `worker` holds (each worker holds
   exactly one block of every stripe). */
int cdc__stripes_block(const cdc_stripes_t *layout, int stripe, int worker);

/* Worker `worker`'s W blocks in the order it computes them: its n data
   blocks by stripe, then its r parity blocks by stripe. */
void cdc__stripes_order(const cdc_stripes_t *layout, int worker, cdc_stripe_block_t *order);

/* Stripe `stripe`'s present mask for the code (bit b: block b is in) when
   the workers in `in` (bit w) have its blocks. */
uint64_t cdc__stripes_present(const cdc_stripes_t *layout, int stripe, uint64_t in);

/* The parity blocks to compute when the workers in `lost` give nothing:
   parity[s] receives the mask of stripe s's parity blocks (bit j: parity
   j) that rebuild its lost data blocks, the lowest live ones first. CDC_OK;
   CDC_EDECODE when some stripe loses more data blocks than it has live
   parity blocks (more than r workers lost). */
int cdc__stripes_parity_needed(const cdc_stripes_t *layout, uint64_t lost, uint64_t *parity);

#endif
