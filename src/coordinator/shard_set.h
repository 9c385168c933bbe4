/* shard_set.h - an operand cut into n equal row blocks plus r parity blocks. */
#ifndef CDC_SHARD_SET_H_INCLUDED
#define CDC_SHARD_SET_H_INCLUDED

#include "code.h"

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
} cdc_shard_set_t;

/* Cut src (rows x k, row-major, contiguous) into n blocks of ceil(rows/n) rows
   and encode r = cdc_code_r(code) parity blocks (code may be NULL for r = 0).
   Full data blocks alias src, so src must outlive the set; the partial tail
   is a zero-padded copy. Caller owns *set_p (cdc__shard_set_destroy). */
int cdc__shard_set_new(const cdc_code_t *code, int n, const float *src, int64_t rows,
                       int64_t k, cdc_shard_set_t **set_p);
void cdc__shard_set_destroy(cdc_shard_set_t **set_p);

/* Rows of data block i that are real (not padding). */
int64_t cdc__shard_set_valid_rows(const cdc_shard_set_t *set, int i);

#endif
