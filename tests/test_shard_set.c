/* test_shard_set.c - an operand cut into n row blocks plus r parity blocks:
   block sizes, valid rows, offsets, aliasing of every data block, parity as
   the code's combination of the blocks zero-padded to the largest and row
   norms, for every small (n, r), with equal and unequal lengths (empty
   blocks included); a set and the source it aliases kept alive by holds past
   their owners. */
#include "cdcgemm.h"
#include "code.h"
#include "shard_set.h"
#include "testutil.h"

#include <float.h>
#include <stdatomic.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_N 8

static float *random_matrix(int64_t rows, int64_t k, uint64_t seed)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, seed);
    float *m = cdc_test_alloc((size_t) (rows * k) * sizeof(float));
    cdc_test_fill_uniform(&rng, m, (size_t) (rows * k));
    return m;
}

/* The code for (n, r), or NULL for r = 0. */
static cdc_code_t *code_for(int n, int r)
{
    cdc_code_t *code = NULL;
    if (r > 0)
        ck_assert_int_eq(cdc__code_new(NULL, n, r, &code), CDC_OK);
    return code;
}

static cdc_shard_set_t *set_new_lengths(const cdc_code_t *code, int n, const int64_t *lengths,
                                        const float *src, int64_t rows, int64_t k)
{
    cdc_shard_set_t *set = NULL;
    ck_assert_msg(cdc__shard_set_new(code, n, lengths, src, rows, k, NULL, &set) == CDC_OK,
                  "%s", cdc_last_error());
    ck_assert_ptr_nonnull(set);
    return set;
}

static cdc_shard_set_t *set_new(const cdc_code_t *code, int n, const float *src, int64_t rows,
                                int64_t k)
{
    return set_new_lengths(code, n, NULL, src, rows, k);
}

/* Unequal lengths of n blocks summing to *rows: a pattern by seed, some
   empty when allow_empty. */
static void some_lengths(int n, uint64_t seed, int allow_empty, int64_t *lengths, int64_t *rows)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, seed);
    *rows = 0;
    for (int i = 0; i < n; i++) {
        float u;
        cdc_test_fill_uniform(&rng, &u, 1);
        lengths[i] = (int64_t) (fabsf(u) * 7.0f) + (allow_empty ? 0 : 1);
        *rows += lengths[i];
    }
    if (*rows == 0)
        lengths[0] = *rows = 1;
}

/* Data block i zero-padded to the set's B rows: the block the code combines
   (the set itself keeps only the real rows, in the source). Caller frees. */
static float *padded_block(const cdc_shard_set_t *set, int i)
{
    float *block = cdc_test_alloc((size_t) (set->block_rows * set->k) * sizeof(float));
    memcpy(block, set->blocks[i], (size_t) (set->len[i] * set->k) * sizeof(float));
    return block;
}

/* Does p point into src's rows x k floats? */
static int inside(const float *p, const float *src, int64_t rows, int64_t k)
{
    return p >= src && p < src + rows * k;
}

/* ---- blocks: sizes, valid rows, aliasing and padding ------------------------ */

START_TEST(test_block_sizes_and_valid_rows)
{
    for (int n = 1; n <= MAX_N; n++)
        for (int64_t rows = 1; rows <= 3 * MAX_N; rows++) {
            float *src = random_matrix(rows, 3, (uint64_t) (n * 100 + rows));
            cdc_shard_set_t *set = set_new(NULL, n, src, rows, 3);
            ck_assert_int_eq(set->n, n);
            ck_assert_int_eq(set->r, 0);
            ck_assert_int_eq(set->rows, rows);
            ck_assert_int_eq(set->k, 3);
            ck_assert_int_eq(set->block_rows, (rows + n - 1) / n);
            int64_t total = 0;
            for (int i = 0; i < n; i++) {
                int64_t first = i * set->block_rows, left = rows - first;
                int64_t want = left <= 0 ? 0 : left < set->block_rows ? left : set->block_rows;
                ck_assert_int_eq(cdc__shard_set_valid_rows(set, i), want);
                total += want;
            }
            ck_assert_int_eq(total, rows);
            cdc__shard_set_retire(&set);
            free(src);
        }
}
END_TEST

START_TEST(test_data_blocks_alias_source)
{
    for (int n = 1; n <= MAX_N; n++)
        for (int64_t rows = 1; rows <= 3 * MAX_N; rows++) {
            const int64_t k = 5;
            float *src = random_matrix(rows, k, (uint64_t) rows);
            cdc_shard_set_t *set = set_new(NULL, n, src, rows, k);
            /* The tail too: it is not padded in memory, only in the code. */
            for (int i = 0; i < n; i++) {
                ck_assert_int_eq(cdc__shard_set_first_row(set, i), i * set->block_rows < rows
                                                                       ? i * set->block_rows
                                                                       : rows);
                ck_assert_ptr_eq(set->blocks[i], src + cdc__shard_set_first_row(set, i) * k);
            }
            ck_assert_ptr_null(set->owned); /* nothing to copy or encode */
            ck_assert_uint_eq(set->layout_key, 0);
            cdc__shard_set_retire(&set);
            free(src);
        }
}
END_TEST

START_TEST(test_fewer_rows_than_shards)
{
    /* 2 rows over 4 shards: blocks of one row, the last two empty (all
       padding: no rows, norms zero). */
    float src[2 * 3] = {1, 2, 3, 4, 5, 6};
    cdc_shard_set_t *set = set_new(NULL, 4, src, 2, 3);
    ck_assert_int_eq(set->block_rows, 1);
    ck_assert_ptr_eq(set->blocks[0], src);
    ck_assert_ptr_eq(set->blocks[1], src + 3);
    for (int i = 2; i < 4; i++) {
        ck_assert_int_eq(cdc__shard_set_valid_rows(set, i), 0);
        ck_assert_int_eq(cdc__shard_set_first_row(set, i), 2);
        ck_assert(set->row_norms[i][0] == 0.0);
    }
    cdc__shard_set_retire(&set);
}
END_TEST

/* ---- parity: the code's combination of the (padded) data blocks ------------- */

/* Parity block j is G[j] · data (the data blocks zero-padded to B rows),
   element by element: within rounding of a double sum to float, and bit for
   bit what cdc__code_encode gives for padded copies of the blocks. */
static void check_parity(const cdc_code_t *code, const cdc_shard_set_t *set)
{
    const int n = set->n, r = set->r;
    const double *g = cdc__code_generator(code);
    const int64_t elements = set->block_rows * set->k;
    float *padded[MAX_N];
    for (int i = 0; i < n; i++)
        padded[i] = padded_block(set, i);
    for (int j = 0; j < r; j++)
        for (int64_t e = 0; e < elements; e++) {
            double want = 0, scale = 0;
            for (int i = 0; i < n; i++) {
                want += g[j * n + i] * padded[i][e];
                scale += fabs(g[j * n + i] * padded[i][e]);
            }
            ck_assert_msg(fabs(set->blocks[n + j][e] - want) <= 2 * FLT_EPSILON * scale,
                          "n %d r %d parity %d element %lld: %g, want %g", n, r, j,
                          (long long) e, set->blocks[n + j][e], want);
        }
    float *parity[CDC_CODE_MAX_R];
    for (int j = 0; j < r; j++)
        parity[j] = cdc_test_alloc((size_t) elements * sizeof(float));
    ck_assert_int_eq(cdc__code_encode(code, set->block_rows, set->k,
                                      (const float *const *) padded, set->k, parity, set->k),
                     CDC_OK);
    for (int j = 0; j < r; j++) {
        ck_assert_int_eq(memcmp(parity[j], set->blocks[n + j],
                                (size_t) elements * sizeof(float)),
                         0);
        free(parity[j]);
    }
    for (int i = 0; i < n; i++)
        free(padded[i]);
}

START_TEST(test_parity_every_small_code)
{
    for (int n = 1; n <= MAX_N; n++)
        for (int r = 1; r <= CDC_CODE_MAX_R && r <= n; r++)
            for (int64_t rows = 1; rows <= 2 * n + 1; rows++) {
                const int64_t k = 3;
                float *src = random_matrix(rows, k, (uint64_t) (n * 1000 + r * 100 + rows));
                cdc_code_t *code = code_for(n, r);
                cdc_shard_set_t *set = set_new(code, n, src, rows, k);
                ck_assert_int_eq(set->r, r);
                for (int j = 0; j < r; j++) {
                    ck_assert_ptr_nonnull(set->blocks[n + j]);
                    ck_assert(!inside(set->blocks[n + j], src, rows, k));
                }
                check_parity(code, set);
                cdc__shard_set_retire(&set);
                cdc__code_destroy(&code);
                free(src);
            }
}
END_TEST

START_TEST(test_parity_every_scheme)
{
    size_t count;
    const cdc_code_ops_t *const *schemes = cdc__code_all_ops(&count);
    for (size_t s = 0; s < count; s++)
        for (int r = 1; r <= schemes[s]->max_parity && r <= CDC_CODE_MAX_R; r++) {
            const int n = 5;
            const int64_t rows = 13, k = 6; /* blocks of 3, the last one 1 row */
            cdc_code_t *code = NULL;
            ck_assert_int_eq(cdc__code_new(schemes[s], n, r, &code), CDC_OK);
            float *src = random_matrix(rows, k, 99 + s);
            cdc_shard_set_t *set = set_new(code, n, src, rows, k);
            check_parity(code, set);
            cdc__shard_set_retire(&set);
            cdc__code_destroy(&code);
            free(src);
        }
}
END_TEST

START_TEST(test_erased_block_decodes)
{
    /* The set is what a decode needs: any one data block erased comes back
       from the others and parity (padding included). */
    const int n = 4, r = 2;
    const int64_t rows = 10, k = 3;
    float *src = random_matrix(rows, k, 5);
    cdc_code_t *code = code_for(n, r);
    cdc_shard_set_t *set = set_new(code, n, src, rows, k);
    const int64_t elements = set->block_rows * k;
    for (int lost = 0; lost < n; lost++) {
        float *shards[MAX_N + CDC_CODE_MAX_R];
        for (int s = 0; s < n + r; s++) {
            shards[s] = s < n ? padded_block(set, s)
                              : cdc_test_alloc((size_t) elements * sizeof(float));
            if (s >= n)
                memcpy(shards[s], set->blocks[s], (size_t) elements * sizeof(float));
        }
        float *want = padded_block(set, lost);
        memset(shards[lost], 0, (size_t) elements * sizeof(float));
        uint64_t present = ((UINT64_C(1) << (n + r)) - 1) & ~(UINT64_C(1) << lost);
        ck_assert_int_eq(cdc__code_decode(code, set->block_rows, k, shards, k, present), CDC_OK);
        double error = 0, norm = 0;
        for (int64_t e = 0; e < elements; e++) {
            error += fabs(shards[lost][e] - want[e]);
            norm += fabs(want[e]);
        }
        ck_assert_msg(error <= 1e-5 * (norm + 1), "lost %d: error %g", lost, error);
        free(want);
        for (int s = 0; s < n + r; s++)
            free(shards[s]);
    }
    cdc__shard_set_retire(&set);
    cdc__code_destroy(&code);
    free(src);
}
END_TEST

/* ---- row norms: the scale of the parity check -------------------------------- */

START_TEST(test_row_norms)
{
    for (int n = 1; n <= 5; n++)
        for (int r = 0; r <= 2 && r <= n; r++) {
            const int64_t rows = 11, k = 7;
            float *src = random_matrix(rows, k, (uint64_t) (n + 10 * r));
            cdc_code_t *code = code_for(n, r);
            cdc_shard_set_t *set = set_new(code, n, src, rows, k);
            for (int s = 0; s < n + r; s++) {
                ck_assert_ptr_nonnull(set->row_norms[s]);
                int64_t real = s < n ? cdc__shard_set_valid_rows(set, s) : set->block_rows;
                for (int64_t p = 0; p < real; p++) {
                    double sum = 0;
                    for (int64_t q = 0; q < k; q++)
                        sum += (double) set->blocks[s][p * k + q] * set->blocks[s][p * k + q];
                    ck_assert_double_eq_tol(set->row_norms[s][p], sqrt(sum), 1e-12);
                }
                /* Padding rows have norm zero. */
                if (s < n)
                    for (int64_t p = cdc__shard_set_valid_rows(set, s); p < set->block_rows;
                         p++)
                        ck_assert(set->row_norms[s][p] == 0.0);
            }
            cdc__shard_set_retire(&set);
            cdc__code_destroy(&code);
            free(src);
        }
}
END_TEST

/* ---- unequal blocks -------------------------------------------------------------- */

/* Given lengths: block i is rows [offset_i, offset_i + len_i) of the source,
   aliased; B is the largest; the layout key tells layouts apart (and is 0
   for lengths equal to the equal cut). */
START_TEST(test_unequal_offsets_and_aliasing)
{
    const int64_t k = 3;
    const int64_t lengths[][4] = {{4, 2, 1, 1}, {1, 1, 1, 5}, {0, 3, 0, 5}, {2, 2, 2, 2}};
    uint64_t keys[4];
    float *src = random_matrix(8, k, 41);
    for (int c = 0; c < 4; c++) {
        cdc_shard_set_t *set = set_new_lengths(NULL, 4, lengths[c], src, 8, k);
        int64_t first = 0, largest = 0;
        for (int i = 0; i < 4; i++) {
            ck_assert_int_eq(cdc__shard_set_valid_rows(set, i), lengths[c][i]);
            ck_assert_int_eq(cdc__shard_set_first_row(set, i), first);
            ck_assert_ptr_eq(set->blocks[i], src + first * k);
            first += lengths[c][i];
            largest = lengths[c][i] > largest ? lengths[c][i] : largest;
        }
        ck_assert_int_eq(set->block_rows, largest);
        ck_assert(cdc__shard_set_has_layout(set, 4, 0, lengths[c]));
        ck_assert(!cdc__shard_set_has_layout(set, 4, 0, lengths[(c + 1) % 4]));
        ck_assert_ptr_null(set->owned);
        keys[c] = set->layout_key;
        ck_assert_uint_eq(cdc__shard_set_key(set, 1234) == 1234, keys[c] == 0);
        cdc__shard_set_retire(&set);
    }
    ck_assert_uint_eq(keys[3], 0); /* 2, 2, 2, 2 is the equal cut of 8 */
    for (int c = 0; c < 3; c++) {
        ck_assert_uint_ne(keys[c], 0);
        for (int d = 0; d < c; d++)
            ck_assert_uint_ne(keys[c], keys[d]);
    }
    /* Explicit equal-cut lengths are the NULL layout. */
    cdc_shard_set_t *set = set_new(NULL, 4, src, 8, k);
    ck_assert(cdc__shard_set_has_layout(set, 4, 0, lengths[3]));
    ck_assert(cdc__shard_set_has_layout(set, 4, 0, NULL));
    ck_assert(!cdc__shard_set_has_layout(set, 3, 0, NULL));
    cdc__shard_set_retire(&set);
    free(src);
}
END_TEST

/* Blocks from a first row on (the rows before are the coordinator's share):
   offsets count from the source's row 0, the blocks alias it there, the
   parity combines only them, and the layout (and so the key naming the
   blocks on workers) differs from a cut of every row, even one of the same
   lengths elsewhere; NULL lengths or a first row past the source fail. */
START_TEST(test_blocks_from_a_first_row)
{
    const int64_t k = 3, rows = 10, lengths[] = {3, 3, 2};
    float *src = random_matrix(rows, k, 43);
    cdc_code_t *code = code_for(3, 2);
    cdc_shard_set_t *set = NULL, *whole = NULL;
    ck_assert_int_eq(cdc__shard_set_new_from(code, 3, 2, lengths, src, rows, k, NULL, &set),
                     CDC_OK);
    int64_t first = 2;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(cdc__shard_set_first_row(set, i), first);
        ck_assert_ptr_eq(set->blocks[i], src + first * k);
        first += lengths[i];
    }
    ck_assert_int_eq(set->block_rows, 3);
    check_parity(code, set);
    ck_assert(cdc__shard_set_has_layout(set, 3, 2, lengths));
    ck_assert(!cdc__shard_set_has_layout(set, 3, 0, lengths));
    ck_assert(!cdc__shard_set_has_layout(set, 3, 2, NULL));
    const int64_t every_row[] = {3, 3, 4};
    whole = set_new_lengths(code, 3, every_row, src, rows, k);
    ck_assert_uint_ne(set->layout_key, 0);
    ck_assert_uint_ne(cdc__shard_set_key(set, 77), cdc__shard_set_key(whole, 77));
    cdc__shard_set_retire(&whole);
    cdc__shard_set_retire(&set);
    ck_assert_int_eq(cdc__shard_set_new_from(code, 3, 2, NULL, src, rows, k, NULL, &set),
                     CDC_EINVAL);
    ck_assert_int_eq(cdc__shard_set_new_from(code, 3, rows, lengths, src, rows, k, NULL, &set),
                     CDC_EINVAL);
    const int64_t short_lengths[] = {3, 3, 3};
    ck_assert_int_eq(
        cdc__shard_set_new_from(code, 3, 2, short_lengths, src, rows, k, NULL, &set),
        CDC_EINVAL);
    ck_assert_ptr_null(set);
    cdc__code_destroy(&code);
    free(src);
}
END_TEST

/* Parity of unequal blocks (empty ones too) is the code's combination of the
   blocks zero-padded to B, for every small code; a wide k makes the encoder
   walk the ended blocks' zeros in several chunks. */
START_TEST(test_unequal_parity_every_small_code)
{
    for (int n = 1; n <= MAX_N; n++)
        for (int r = 1; r <= CDC_CODE_MAX_R && r <= n; r++)
            for (int variant = 0; variant < 3; variant++) {
                int64_t lengths[MAX_N], rows;
                some_lengths(n, (uint64_t) (n * 100 + r * 10 + variant), variant & 1, lengths,
                             &rows);
                /* 8192 columns: zeros two rows at a time. */
                const int64_t k = variant == 2 ? 8192 : 3;
                if (variant == 2 && (n % 3 != 2 || r != (n < 3 ? n : 3)))
                    continue;
                float *src = random_matrix(rows, k, (uint64_t) (n * 1000 + r * 100 + variant));
                cdc_code_t *code = code_for(n, r);
                cdc_shard_set_t *set = set_new_lengths(code, n, lengths, src, rows, k);
                for (int j = 0; j < r; j++)
                    ck_assert(!inside(set->blocks[n + j], src, rows, k));
                check_parity(code, set);
                cdc__shard_set_retire(&set);
                cdc__code_destroy(&code);
                free(src);
            }
}
END_TEST

/* Every data block of an unequal cut comes back from the others and parity
   (any one, with r = 1; any two, with r = 2), padding included; the row
   norms are the real rows' and 0 for the padding. */
START_TEST(test_unequal_decode_and_norms)
{
    const int n = 4;
    const int64_t lengths[] = {1, 1, 1, 5}, rows = 8, k = 6;
    float *src = random_matrix(rows, k, 7);
    for (int r = 1; r <= 2; r++) {
        cdc_code_t *code = code_for(n, r);
        cdc_shard_set_t *set = set_new_lengths(code, n, lengths, src, rows, k);
        const int64_t elements = set->block_rows * k;
        for (int s = 0; s < n + r; s++)
            for (int64_t p = 0; p < set->block_rows; p++) {
                double sum = 0;
                if (s >= n || p < lengths[s])
                    for (int64_t q = 0; q < k; q++)
                        sum += (double) set->blocks[s][p * k + q] * set->blocks[s][p * k + q];
                ck_assert_double_eq_tol(set->row_norms[s][p], sqrt(sum), 1e-12);
            }
        for (uint64_t lost = 1; lost < (UINT64_C(1) << n); lost++) {
            if (__builtin_popcountll(lost) > r)
                continue;
            float *shards[MAX_N + CDC_CODE_MAX_R];
            for (int s = 0; s < n + r; s++) {
                shards[s] = s < n ? padded_block(set, s)
                                  : cdc_test_alloc((size_t) elements * sizeof(float));
                if (s >= n)
                    memcpy(shards[s], set->blocks[s], (size_t) elements * sizeof(float));
                else if (lost & (UINT64_C(1) << s))
                    memset(shards[s], 0xff, (size_t) elements * sizeof(float));
            }
            uint64_t present = ((UINT64_C(1) << (n + r)) - 1) & ~lost;
            ck_assert_int_eq(cdc__code_decode(code, set->block_rows, k, shards, k, present),
                             CDC_OK);
            for (int s = 0; s < n; s++) {
                float *want = padded_block(set, s);
                for (int64_t e = 0; e < elements; e++)
                    ck_assert_msg(fabsf(shards[s][e] - want[e]) <= 1e-5f * (1 + fabsf(want[e])),
                                  "r %d lost %#llx shard %d element %lld: %g, want %g", r,
                                  (unsigned long long) lost, s, (long long) e, shards[s][e],
                                  want[e]);
                free(want);
            }
            for (int s = 0; s < n + r; s++)
                free(shards[s]);
        }
        cdc__shard_set_retire(&set);
        cdc__code_destroy(&code);
    }
    free(src);
}
END_TEST

/* Lengths that are negative or do not sum to rows are refused. */
START_TEST(test_bad_lengths)
{
    float *src = random_matrix(6, 2, 3);
    cdc_shard_set_t *set = NULL;
    const int64_t negative[] = {4, -1, 3}, short_sum[] = {1, 2, 2}, long_sum[] = {3, 3, 1};
    ck_assert_int_eq(cdc__shard_set_new(NULL, 3, negative, src, 6, 2, NULL, &set), CDC_EINVAL);
    ck_assert_int_eq(cdc__shard_set_new(NULL, 3, short_sum, src, 6, 2, NULL, &set), CDC_EINVAL);
    ck_assert_int_eq(cdc__shard_set_new(NULL, 3, long_sum, src, 6, 2, NULL, &set), CDC_EINVAL);
    ck_assert_ptr_null(set);
    free(src);
}
END_TEST

/* ---- arguments ------------------------------------------------------------------ */

START_TEST(test_bad_arguments)
{
    float src[12] = {0};
    cdc_shard_set_t *set = NULL;
    ck_assert_int_eq(cdc__shard_set_new(NULL, 0, NULL, src, 4, 3, NULL, &set), CDC_EINVAL);
    ck_assert_int_eq(cdc__shard_set_new(NULL, CDC_CODE_MAX_N + 1, NULL, src, 4, 3, NULL, &set),
                     CDC_EINVAL);
    ck_assert_int_eq(cdc__shard_set_new(NULL, 2, NULL, src, 0, 3, NULL, &set), CDC_EINVAL);
    ck_assert_int_eq(cdc__shard_set_new(NULL, 2, NULL, src, 4, 0, NULL, &set), CDC_EINVAL);
    ck_assert_int_eq(cdc__shard_set_new(NULL, 2, NULL, NULL, 4, 3, NULL, &set), CDC_EINVAL);
    ck_assert_int_eq(cdc__shard_set_new(NULL, 2, NULL, src, 4, 3, NULL, NULL), CDC_EINVAL);
    /* A code for another n. */
    cdc_code_t *code = code_for(3, 1);
    ck_assert_int_eq(cdc__shard_set_new(code, 2, NULL, src, 4, 3, NULL, &set), CDC_EINVAL);
    ck_assert_ptr_null(set);
    cdc__code_destroy(&code);
}
END_TEST

START_TEST(test_destroy_nulls)
{
    cdc__shard_set_retire(NULL);
    cdc_shard_set_t *set = NULL;
    cdc__shard_set_retire(&set);
    float src[6] = {1, 2, 3, 4, 5, 6};
    set = set_new(NULL, 2, src, 3, 2);
    cdc__shard_set_retire(&set);
    ck_assert_ptr_null(set);
}
END_TEST

/* ---- holds ----------------------------------------------------------------------- */

/* A source matrix whose owner embeds a hold and counts its frees. */
typedef struct {
    cdc_hold_t hold;
    float *m;
    atomic_int *frees;
} source_t;

static void source_free(cdc_hold_t *hold)
{
    source_t *src = (source_t *) hold;
    atomic_fetch_add(src->frees, 1);
    free(src->m);
    free(src);
}

static source_t *source_new(int64_t rows, int64_t k, atomic_int *frees)
{
    source_t *src = cdc_test_alloc(sizeof *src);
    cdc__hold_init(&src->hold, source_free);
    src->m = random_matrix(rows, k, 77);
    src->frees = frees;
    return src;
}

/* The source's owner lets go first, then the set's: a holder of the set
   still reads every block (the aliased data blocks and the owned tail and
   parity; ASan sees any use after free), and its release frees the set and
   then the source, each once. */
START_TEST(test_set_outlives_source_owner)
{
    enum { ROWS = 10, K = 7, N = 4, R = 2 };
    atomic_int frees = 0;
    source_t *src = source_new(ROWS, K, &frees);
    cdc_code_t *code = code_for(N, R);
    cdc_shard_set_t *set = NULL;
    ck_assert_int_eq(cdc__shard_set_new(code, N, NULL, src->m, ROWS, K, &src->hold, &set),
                     CDC_OK);
    ck_assert_int_eq(cdc__hold_refs(&src->hold), 2); /* the owner's and the set's */
    ck_assert_ptr_eq(set->blocks[0], src->m);        /* aliased, not copied */
    size_t block = (size_t) set->block_rows * K, size[N + R];
    float *want = cdc_test_alloc((size_t) (N + R) * block * sizeof(float));
    for (int s = 0; s < N + R; s++) {
        size[s] = (s < N ? (size_t) set->len[s] * K : block) * sizeof(float);
        memcpy(want + (size_t) s * block, set->blocks[s], size[s]);
    }

    cdc_hold_t *holder = cdc__hold_retain(cdc__shard_set_hold(set));
    const cdc_shard_set_t *kept = set;
    cdc__hold_retire(&src->hold); /* the layer or cache drops its weights */
    cdc__shard_set_retire(&set); /* and its set */
    ck_assert_ptr_null(set);
    ck_assert_int_eq(atomic_load(&frees), 0);
    ck_assert(cdc__hold_retired(holder));
    for (int s = 0; s < N + R; s++)
        ck_assert_int_eq(memcmp(kept->blocks[s], want + (size_t) s * block, size[s]), 0);
    cdc__hold_release(holder); /* the last: the set, then the source */
    ck_assert_int_eq(atomic_load(&frees), 1);
    free(want);
    cdc__code_destroy(&code);
}
END_TEST

/* The set's owner drops it while the source's owner keeps the source: the
   source stays, with only its owner's reference. */
START_TEST(test_set_released_before_source)
{
    atomic_int frees = 0;
    source_t *src = source_new(6, 3, &frees);
    cdc_shard_set_t *set = NULL;
    ck_assert_int_eq(cdc__shard_set_new(NULL, 3, NULL, src->m, 6, 3, &src->hold, &set), CDC_OK);
    cdc__shard_set_retire(&set);
    ck_assert_int_eq(atomic_load(&frees), 0);
    ck_assert_int_eq(cdc__hold_refs(&src->hold), 1);
    cdc__hold_retire(&src->hold);
    ck_assert_int_eq(atomic_load(&frees), 1);
}
END_TEST

/* A per-call set has no source hold and its own hold starts at one
   reference: retire frees it. Refused arguments take no reference. */
START_TEST(test_per_call_set_and_refusals_hold_nothing)
{
    float src[12] = {0};
    cdc_shard_set_t *set = set_new(NULL, 2, src, 4, 3);
    ck_assert_ptr_null(set->src_hold);
    ck_assert_int_eq(cdc__hold_refs(cdc__shard_set_hold(set)), 1);
    cdc__shard_set_retire(&set);

    atomic_int frees = 0;
    source_t *held = source_new(4, 3, &frees);
    ck_assert_int_eq(cdc__shard_set_new(NULL, 0, NULL, held->m, 4, 3, &held->hold, &set),
                     CDC_EINVAL);
    cdc_code_t *code = code_for(3, 1);
    ck_assert_int_eq(cdc__shard_set_new(code, 2, NULL, held->m, 4, 3, &held->hold, &set),
                     CDC_EINVAL);
    ck_assert_int_eq(cdc__hold_refs(&held->hold), 1);
    cdc__hold_retire(&held->hold);
    ck_assert_int_eq(atomic_load(&frees), 1);
    cdc__code_destroy(&code);
}
END_TEST

static Suite *shard_set_suite(void)
{
    Suite *suite = suite_create("shard_set");
    TCase *blocks = tcase_create("blocks");
    tcase_add_test(blocks, test_block_sizes_and_valid_rows);
    tcase_add_test(blocks, test_data_blocks_alias_source);
    tcase_add_test(blocks, test_fewer_rows_than_shards);
    suite_add_tcase(suite, blocks);
    TCase *parity = tcase_create("parity");
    tcase_add_test(parity, test_parity_every_small_code);
    tcase_add_test(parity, test_parity_every_scheme);
    tcase_add_test(parity, test_erased_block_decodes);
    suite_add_tcase(suite, parity);
    TCase *holds = tcase_create("holds");
    tcase_add_test(holds, test_set_outlives_source_owner);
    tcase_add_test(holds, test_set_released_before_source);
    tcase_add_test(holds, test_per_call_set_and_refusals_hold_nothing);
    suite_add_tcase(suite, holds);
    TCase *norms = tcase_create("norms");
    tcase_add_test(norms, test_row_norms);
    suite_add_tcase(suite, norms);
    TCase *unequal = tcase_create("unequal");
    tcase_set_timeout(unequal, 30);
    tcase_add_test(unequal, test_unequal_offsets_and_aliasing);
    tcase_add_test(unequal, test_unequal_parity_every_small_code);
    tcase_add_test(unequal, test_unequal_decode_and_norms);
    tcase_add_test(unequal, test_bad_lengths);
    tcase_add_test(unequal, test_blocks_from_a_first_row);
    suite_add_tcase(suite, unequal);
    TCase *arguments = tcase_create("arguments");
    tcase_add_test(arguments, test_bad_arguments);
    tcase_add_test(arguments, test_destroy_nulls);
    suite_add_tcase(suite, arguments);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(shard_set_suite());
}
