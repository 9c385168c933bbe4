/* shard_set.h - an operand cut into n equal row blocks plus r parity blocks. */
#ifndef CDC_SHARD_SET_H_INCLUDED
#define CDC_SHARD_SET_H_INCLUDED

#include "code.h"
#include "hold.h"

#include <stdint.h>

#define CDC_MAX_SHARDS (CDC_CODE_MAX_N + CDC_CODE_MAX_R)

typedef struct {
    int n, r;
    int64_t rows;           /* rows of the source operand                      */
    int64_t block_rows;     /* ceil(rows / n): rows of every block             */
    int64_t k;              /* columns of every block                          */
    const float *blocks[CDC_MAX_SHARDS]; /* n data then r parity, block_rows x k */
    const double *row_norms[CDC_MAX_SHARDS]; /* 2-norm of every block row: the
                                               scale of the parity check       */
    float *owned;           /* zero-padded tail blocks and the parity blocks   */
    double *norms;          /* storage of row_norms                            */
    cdc_hold_t hold;        /* keeps the blocks (and the source they alias)
                               alive: see cdc__shard_set_hold                  */
    cdc_hold_t *src_hold;   /* the source's, retained while the set lives;
                               NULL: the caller keeps src alive              */
} cdc_shard_set_t;

/* Cut src (rows x k, row-major, contiguous) into n blocks of ceil(rows/n) rows
   and encode r = cdc_code_r(code) parity blocks (code may be NULL for r = 0).
   Full data blocks alias src; the partial tail is a zero-padded copy.
   src_hold, when not NULL, is the hold that keeps src alive: the set retains
   it and releases it when the set itself goes, so the blocks stay readable
   through the set's hold after src's owner lets go. With NULL (a per-call
   set) src must outlive the set. The caller owns the set's first reference
   and lets go of it with cdc__shard_set_retire. */
int cdc__shard_set_new(const cdc_code_t *code, int n, const float *src, int64_t rows,
                       int64_t k, cdc_hold_t *src_hold, cdc_shard_set_t **set_p);

/* The owner is done with the set: retire its hold (cdc_hold_retire). The
   memory goes now, or when the last holder (a zero-copy send in flight, the
   client's slot manifest) releases it. Accepts NULL and *NULL; nulls
   *set_p. */
void cdc__shard_set_retire(cdc_shard_set_t **set_p);

/* The hold on the set's blocks: retain it to keep every block (data and
   parity) readable past the owner's retire. Not NULL for a set. */
cdc_hold_t *cdc__shard_set_hold(const cdc_shard_set_t *set);

/* Rows of data block i that are real (not padding). */
int64_t cdc__shard_set_valid_rows(const cdc_shard_set_t *set, int i);

#endif
