/* rotated_set.h - an operand cut in the rotated parity layout (codes/stripes.h):
 * each worker's operand is its data rows, contiguous, then its parity blocks.
 *
 * The source X (rows x k) is cut into W contiguous ranges, one per worker
 * (rows / W each, give or take a row), and each range into the n data blocks
 * that worker holds, one from each of n stripes. A stripe's r parity blocks
 * (B rows: the longest data block) are coded with the (n, r) code over its n
 * data blocks, zero-padded to B, and sit on the other r workers. So worker
 * w's operand is X's rows [data_first[w], data_first[w] + data_rows[w]) and
 * r parity blocks after them: computed in that order, its data rows give
 * rows of the product as they are, and its parity rows only serve a stripe
 * that lost a data block. The operands are not kept: each is built from the
 * source, which the set holds, when it must go to a worker (the wire sends
 * each as one matrix) or run here, and freed after (operand_source.h). What
 * stays is the tables, every operand row's norm and the wire keys' samples:
 * the source's rows x 8 bytes and (W·r·B) x 8 more. */
#ifndef CDC_ROTATED_SET_H_INCLUDED
#define CDC_ROTATED_SET_H_INCLUDED

#include "code.h"
#include "hold.h"
#include "operand_source.h"
#include "row_parts.h"
#include "stripes.h"

#include <stdint.h>

typedef struct {
    cdc_stripes_t layout;  /* W = workers, n data and r parity blocks a stripe */
    const cdc_code_t *code; /* the code the stripes were encoded with         */
    int64_t rows, k;       /* the source                                       */
    int64_t block_rows;    /* B: the longest data block; parity blocks' rows   */
    int64_t *block_first;  /* W·n: data block b of stripe s (index s·n + b)
                              is source rows [block_first, + block_len)       */
    int64_t *block_len;
    int64_t data_first[CDC_STRIPES_MAX_WORKERS]; /* worker w's data rows      */
    int64_t data_rows[CDC_STRIPES_MAX_WORKERS];
    cdc_row_parts_t *src;  /* the source is its rows [src_first, + rows): the
                              set holds a reference to src's hold           */
    int64_t src_first;
    cdc_operand_source_t source[CDC_STRIPES_MAX_WORKERS]; /* worker w's
                              operand, data_rows[w] + r·B rows x k:
                              cdc__rotated_operand_open                     */
    const double *operand_norms[CDC_STRIPES_MAX_WORKERS]; /* the 2-norm of
                              every row of worker w's operand: the parity
                              check's rounding scale (code.h)               */
    int sized;             /* data_rows were given (cdc__rotated_set_new_sized) */
    uint64_t key_mix;      /* mixed into the weights' key: this layout's name
                              and, when sized, its cut                      */
    double *norms;         /* storage of operand_norms                        */
    cdc_hold_t hold;       /* keeps the operands alive (as a shard set's)     */
} cdc_rotated_set_t;

/* Whether rows can be cut in the rotated layout of W workers with r parity
   blocks a stripe: every one of the W·(W - r) data blocks gets a row. */
int cdc__rotated_fits(int64_t rows, int workers, int r);

/* Cut the source, src's rows [first, first + rows) (of k floats), for
   code's (n, r) over W = n + r workers, encoding every stripe's parity once
   for the operands' row norms and samples. The set reads src again whenever
   an operand is built (it retains src's hold). CDC_EINVAL when the rows do
   not fit (cdc__rotated_fits), CDC_ENOMEM. The caller owns the first
   reference: cdc__rotated_set_retire. */
int cdc__rotated_set_new(const cdc_code_t *code, cdc_row_parts_t *src, int64_t first,
                         int64_t rows, int64_t k, cdc_rotated_set_t **set_p);

/* The same with worker w's data rows given, worker_rows[w] (sized stripes:
   rows in proportion to each worker's speed, issue 26): each at least n (a
   row for each of its data blocks), summing to rows. A stripe's data blocks
   then differ in length; its parity blocks are as long as the longest data
   block of any stripe (B), every block zero-padded to it for the code, so
   any r lost workers still decode as with the equal cut. The key names the
   cut. CDC_EINVAL when the sizes do not fit. */
int cdc__rotated_set_new_sized(const cdc_code_t *code, cdc_row_parts_t *src, int64_t first,
                               int64_t rows, int64_t k, const int64_t *worker_rows,
                               cdc_rotated_set_t **set_p);

/* Worker w's operand built: its data rows, then its parity blocks (by
   stripe), data_rows[w] + r·B rows x k floats into *data, kept alive by
   *hold (one reference, the caller's: cdc__hold_release); the same bytes
   every time; any thread. CDC_ENOMEM, or CDC_ESTATE once borrowed rows'
   owner let go (row_parts.h). */
int cdc__rotated_operand_open(const cdc_rotated_set_t *set, int w, const float **data,
                              cdc_hold_t **hold);

/* Whether the set is the layout of code's (n, r) over rows x k, cut as
   worker_rows gives (NULL: equally, cdc__rotated_set_new). */
int cdc__rotated_set_matches(const cdc_rotated_set_t *set, const cdc_code_t *code,
                             int64_t rows, int64_t k, const int64_t *worker_rows);

/* Worker w's operand rows: its data rows and r parity blocks of B. */
int64_t cdc__rotated_operand_rows(const cdc_rotated_set_t *set, int w);

/* The key the workers cache their operands under, of weights named
   weights_key (it names this layout and cut too): what the tasks and a
   staging of the set must both say. */
uint64_t cdc__rotated_operand_key(const cdc_rotated_set_t *set, uint64_t weights_key);

/* B, the parity blocks' rows, of a set cut as worker_rows gives (workers
   of them, n data blocks each): the longest data block. */
int64_t cdc__rotated_parity_rows(const int64_t *worker_rows, int workers, int n);

/* The owner is done with it (cdc__hold_retire); accepts NULL and *NULL. */
void cdc__rotated_set_retire(cdc_rotated_set_t **set_p);

/* The hold on the set's operands: retain it to keep them readable past
   the owner's retire (a zero-copy send, the client's slot manifest). */
cdc_hold_t *cdc__rotated_set_hold(const cdc_rotated_set_t *set);

/* Data block b of stripe s: its rows, contiguous (cdc__row_parts_view
   into scratch, block_rows x k floats, when they span parts), and their
   count. The call path only. */
const float *cdc__rotated_block_rows(const cdc_rotated_set_t *set, int s, int b,
                                     float *scratch, int64_t *rows);

/* Done reading data block b of stripe s for now (row_parts.h: its pages
   given back). */
void cdc__rotated_block_done(const cdc_rotated_set_t *set, int s, int b);

/* Whether data block b of stripe s lies across two parts of the source (a
   view of it needs scratch); whether any block does. */
int cdc__rotated_block_spans(const cdc_rotated_set_t *set, int s, int b);
int cdc__rotated_blocks_span(const cdc_rotated_set_t *set);

/* The index among worker w's parity blocks (its order: by stripe) of stripe
   s's parity block j, held by w; -1 when w does not hold it. */
int cdc__rotated_parity_index(const cdc_rotated_set_t *set, int worker, int stripe, int j);

#endif
