/* code.h - systematic real-valued erasure codes over equal-shaped float blocks.
 *
 * The coordinator never names a scheme: it asks for a code by (n, r) and an
 * optional scheme name, and uses the generic encode/decode/check below. Each
 * scheme lives in its own file and contributes one cdc_code_ops_t: the rule
 * that fills its r x n generator. Everything else (encode, decode in double
 * precision, the parity consistency check) is shared linear algebra.
 *
 * Shard numbering: data shards 0..n-1, parity shards n..n+r-1. Parity j is
 * P_j = sum_i G[j][i] * X_i. A "block" is a rows x cols row-major float matrix
 * with a leading dimension; all blocks of one call share rows, cols and ld.
 */
#ifndef CDC_CODE_H_INCLUDED
#define CDC_CODE_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#define CDC_CODE_MAX_N 64
#define CDC_CODE_MAX_R 3
/* The present mask of decode/check is 64 bits wide, so n + r <= 64 as well. */
#define CDC_CODE_MAX_SHARDS 64

typedef struct cdc_code_ops {
    const char *name;   /* "sum", "chebyshev", "gaussian", ...           */
    int max_parity;     /* largest r the scheme supports                  */
    /* Fill g (r x n, row-major) for n data and r parity shards. 0 or status. */
    int (*generator)(int n, int r, double *g);
} cdc_code_ops_t;

typedef struct cdc_code cdc_code_t;

/* The scheme used when none is named: "sum" for r = 1, the best-conditioned
   structured scheme for r >= 2. */
const cdc_code_ops_t *cdc__code_default_ops(int r);
/* Scheme by name, or NULL. */
const cdc_code_ops_t *cdc__code_find_ops(const char *name);

/* Every built-in scheme, in registry order; *count receives their number. */
const cdc_code_ops_t *const *cdc__code_all_ops(size_t *count);

/* The built-in schemes (one file each under codes/). */
extern const cdc_code_ops_t cdc_code_sum_ops;       /* r = 1, all ones      */
extern const cdc_code_ops_t cdc_code_chebyshev_ops; /* rows 1, x, x^2       */
extern const cdc_code_ops_t cdc_code_rotation_ops;  /* rows 1, cos t, sin t */
extern const cdc_code_ops_t cdc_code_circle_ops;    /* shifted circle, default r >= 2 */
extern const cdc_code_ops_t cdc_code_gaussian_ops;  /* seeded N(0,1), comparison only */

/* Build a code for n data, r parity shards (1 <= n <= CDC_CODE_MAX_N,
   0 <= r <= CDC_CODE_MAX_R, r <= n, n + r <= CDC_CODE_MAX_SHARDS,
   r <= ops->max_parity). ops NULL = default for r. Returns CDC_OK, CDC_EINVAL
   (bad argument, *code_p untouched) or CDC_ENOMEM. Caller owns *code_p and
   must destroy it when done. A code is immutable: calls on one code may run
   from several threads at once. */
int cdc__code_new(const cdc_code_ops_t *ops, int n, int r, cdc_code_t **code_p);
/* Destroy a code; accepts NULL and *NULL; nulls *code_p. */
void cdc__code_destroy(cdc_code_t **code_p);

int cdc__code_n(const cdc_code_t *code);
int cdc__code_r(const cdc_code_t *code);
const char *cdc__code_name(const cdc_code_t *code);
/* r x n generator, row-major, owned by the code. */
const double *cdc__code_generator(const cdc_code_t *code);

/* parity[j] = sum_i G[j][i] * data[i] for j < r, accumulated in double.
   data has n block pointers (ld_data), parity r (ld_parity). */
int cdc__code_encode(const cdc_code_t *code, int64_t rows, int64_t cols,
                     const float *const *data, int64_t ld_data,
                     float *const *parity, int64_t ld_parity);

/* shards has n + r pointers to rows x cols blocks (ld). Bit i of present is set
   when shard i holds a result. Rebuild every missing data shard in place
   (shards[i] of a missing data shard must be a writable buffer); parity
   shards are never rebuilt. Uses the best-conditioned available parities,
   solves in double. CDC_EDECODE when more data shards are missing than
   available parities. */
int cdc__code_decode(const cdc_code_t *code, int64_t rows, int64_t cols,
                     float *const *shards, int64_t ld, uint64_t present);

/* The error amplification of the decode cdc__code_decode would do with this
   present mask: ||G[S,M]^-1||_2 * ||G[S,:]||_F over the parities S it would
   choose and the missing data shards M. A rebuilt block's relative error is
   about u * sqrt(k) * this (docs/codes.md). 0 when no data shard is missing,
   INFINITY when the mask cannot be decoded. */
double cdc__code_decode_amplification(const cdc_code_t *code, uint64_t present);

/* Element-wise scale of a shard's rounding error: result element (p, q) of
   shard s came from a length-k dot product of vectors with 2-norms
   row[p] * col[q] (row/col norms of the shard's operands). */
typedef struct {
    const double *row; /* rows entries */
    const double *col; /* cols entries */
} cdc_shard_scale_t;

/* Consistency check of present shards against the parity equations with a
   rounding-aware tolerance for an inner dimension k. Returns 0 when
   consistent, CDC_ECORRUPT when not; *bad_shard is then the located shard
   (r >= 2 and enough parities present) or -1 when it cannot be located.
   scales has n + r entries. */
int cdc__code_check(const cdc_code_t *code, int64_t rows, int64_t cols,
                    const float *const *shards, int64_t ld, uint64_t present,
                    const cdc_shard_scale_t *scales, int64_t k, int *bad_shard);

/* Worst 2-norm condition number over every square submatrix of G that a
   decode may use (diagnostic for choosing generators). */
double cdc__code_worst_condition(const cdc_code_t *code);

#endif
