/* shard_set.h - an operand cut into n row blocks (equal, or of given
   lengths) plus r parity blocks as large as the largest. */
#ifndef CDC_SHARD_SET_H_INCLUDED
#define CDC_SHARD_SET_H_INCLUDED

#include "code.h"
#include "hold.h"

#include <stdint.h>

#define CDC_MAX_SHARDS (CDC_CODE_MAX_N + CDC_CODE_MAX_R)

typedef struct {
    int n, r;
    int64_t rows;           /* rows of the source operand                      */
    int64_t first_row;      /* the blocks cut rows [first_row, rows); the rows
                               before are the coordinator's share (plan.h)   */
    int64_t block_rows;     /* B = the largest data block: the padded shape the
                               code combines (parity blocks have B rows)       */
    int64_t k;              /* columns of every block                          */
    int64_t offset[CDC_CODE_MAX_N]; /* data block i: source rows
                                       [offset[i], offset[i] + len[i])        */
    int64_t len[CDC_CODE_MAX_N];
    uint64_t layout_key;    /* 0 for the equal cut (ceil(rows / n) rows each),
                               else a hash of n, r, first_row and the
                               lengths: mixed into
                               the keys that name the blocks on workers
                               (cdc__shard_set_key)                           */
    const float *blocks[CDC_MAX_SHARDS]; /* n data (len[i] x k, aliasing the
                                            source) then r parity (B x k)    */
    const double *row_norms[CDC_MAX_SHARDS]; /* B per block: the 2-norm of
                                               every real row, 0 for padding:
                                               the scale of the parity check */
    float *owned;           /* the parity blocks                               */
    double *norms;          /* storage of row_norms                            */
    cdc_hold_t hold;        /* keeps the blocks (and the source they alias)
                               alive: see cdc__shard_set_hold                  */
    cdc_hold_t *src_hold;   /* the source's, retained while the set lives;
                               NULL: the caller keeps src alive              */
} cdc_shard_set_t;

/* Cut src (rows x k, row-major, contiguous) into n data blocks and encode
   r = cdc__code_r(code) parity blocks (code may be NULL for r = 0). lengths
   (n entries, each >= 0, summing to rows) gives the data blocks' rows; NULL
   is the equal cut of ceil(rows / n) rows (the tail shorter, trailing blocks
   possibly empty). Data blocks alias src; parity is computed over the data
   blocks zero-padded to the largest (no padded copy is made).
   src_hold, when not NULL, is the hold that keeps src alive: the set retains
   it and releases it when the set itself goes, so the blocks stay readable
   through the set's hold after src's owner lets go. With NULL (a per-call
   set) src must outlive the set. The caller owns the set's first reference
   and lets go of it with cdc__shard_set_retire. */
int cdc__shard_set_new(const cdc_code_t *code, int n, const int64_t *lengths,
                       const float *src, int64_t rows, int64_t k, cdc_hold_t *src_hold,
                       cdc_shard_set_t **set_p);

/* The same over src's rows [first_row, rows) only (lengths, never NULL when
   first_row > 0, sum to rows - first_row; offsets count from src's row 0):
   the rows before first_row are computed by the coordinator, outside the
   code. */
int cdc__shard_set_new_from(const cdc_code_t *code, int n, int64_t first_row,
                            const int64_t *lengths, const float *src, int64_t rows, int64_t k,
                            cdc_hold_t *src_hold, cdc_shard_set_t **set_p);

/* The owner is done with the set: retire its hold (cdc__hold_retire). The
   memory goes now, or when the last holder (a zero-copy send in flight, the
   client's slot manifest) releases it. Accepts NULL and *NULL; nulls
   *set_p. */
void cdc__shard_set_retire(cdc_shard_set_t **set_p);

/* The shard sets an owner of cached weights keeps: the one its calls use
   and a staged one, for new block lengths whose weights the workers are
   being sent in the background (plan_staging.c) while the calls go on with
   the old. A call that asks for the staged layout makes it the one in use. */
typedef struct {
    cdc_shard_set_t *in_use, *staged;
    const cdc_code_t *in_use_code, *staged_code; /* the codes they were encoded with */
} cdc_shard_sets_t;

/* The set of src (rows x k, held by src_hold as in cdc__shard_set_new) for
   (code, n, lengths). For a call (stage 0): the one in use when it matches;
   the staged one when it does, which becomes the one in use (the old one
   retired); else encoded anew as the one in use. For staging (stage 1): the
   one in use or the staged one when either matches, else encoded anew as
   the staged one (the previous staged retired). The blocks cut rows
   [first_row, rows) (cdc__shard_set_new_from). *encoded (may be NULL): 1
   when a set was encoded. */
int cdc__shard_sets_get(cdc_shard_sets_t *sets, int stage, const cdc_code_t *code, int n,
                        int64_t first_row, const int64_t *lengths, const float *src,
                        int64_t rows, int64_t k,
                        cdc_hold_t *src_hold, const cdc_shard_set_t **set, int *encoded);
/* Retire both (the owner is done with them, or its source changed). */
void cdc__shard_sets_retire(cdc_shard_sets_t *sets);

/* The hold on the set's blocks: retain it to keep every block (data and
   parity) readable past the owner's retire. Not NULL for a set. */
cdc_hold_t *cdc__shard_set_hold(const cdc_shard_set_t *set);

/* Rows of data block i that are real (its length; the rest of its padded
   B rows are zeros that exist only in the code's algebra). */
int64_t cdc__shard_set_valid_rows(const cdc_shard_set_t *set, int i);

/* The source row data block i starts at. */
int64_t cdc__shard_set_first_row(const cdc_shard_set_t *set, int i);

/* Whether the set is the cut of rows from first_row on into n blocks of
   these lengths (NULL: equal). */
int cdc__shard_set_has_layout(const cdc_shard_set_t *set, int n, int64_t first_row,
                              const int64_t *lengths);

/* key (naming the cut operand on workers) made specific to the set's layout:
   key itself for the equal cut, else key mixed with layout_key (nonzero). */
uint64_t cdc__shard_set_key(const cdc_shard_set_t *set, uint64_t key);

/* Parity of ragged blocks: parity[j] (rows x cols, contiguous) = sum_i
   G[j][i] X_i, where data block i (contiguous, cols wide) has heights[i] <=
   rows real rows and is zero below them. zeros (zero_rows >= 1 rows x cols
   of zeros) stands in for the blocks that have ended, a chunk at a time, so
   no block is ever copied to pad it. */
int cdc__encode_ragged(const cdc_code_t *code, const float *const *data,
                       const int64_t *heights, int64_t rows, int64_t cols,
                       float *const *parity, const float *zeros, int64_t zero_rows);

#endif
