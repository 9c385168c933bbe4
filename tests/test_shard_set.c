/* test_shard_set.c - an operand cut into n row blocks plus r parity blocks:
   block sizes, valid rows, aliasing of full blocks, zero padding of the tail,
   parity as the code's combination and row norms, for every small (n, r);
   a set and the source it aliases kept alive by holds past their owners. */
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
        ck_assert_int_eq(cdc_code_new(NULL, n, r, &code), CDC_OK);
    return code;
}

static cdc_shard_set_t *set_new(const cdc_code_t *code, int n, const float *src, int64_t rows,
                                int64_t k)
{
    cdc_shard_set_t *set = NULL;
    ck_assert_msg(cdc__shard_set_new(code, n, src, rows, k, NULL, &set) == CDC_OK, "%s",
                  cdc_last_error());
    ck_assert_ptr_nonnull(set);
    return set;
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

START_TEST(test_full_blocks_alias_source)
{
    for (int n = 1; n <= MAX_N; n++)
        for (int64_t rows = 1; rows <= 3 * MAX_N; rows++) {
            const int64_t k = 5;
            float *src = random_matrix(rows, k, (uint64_t) rows);
            cdc_shard_set_t *set = set_new(NULL, n, src, rows, k);
            for (int i = 0; i < n; i++) {
                int full = cdc__shard_set_valid_rows(set, i) == set->block_rows;
                if (full)
                    ck_assert_ptr_eq(set->blocks[i], src + i * set->block_rows * k);
                else
                    ck_assert(!inside(set->blocks[i], src, rows, k));
            }
            if (rows % n == 0)
                ck_assert_ptr_null(set->owned); /* nothing to copy or encode */
            cdc__shard_set_retire(&set);
            free(src);
        }
}
END_TEST

START_TEST(test_tail_zero_padded)
{
    for (int n = 1; n <= MAX_N; n++)
        for (int64_t rows = 1; rows <= 3 * MAX_N; rows++) {
            const int64_t k = 4;
            float *src = random_matrix(rows, k, (uint64_t) (rows * 7 + n));
            cdc_shard_set_t *set = set_new(NULL, n, src, rows, k);
            for (int i = 0; i < n; i++) {
                int64_t valid = cdc__shard_set_valid_rows(set, i);
                const float *block = set->blocks[i];
                /* The real rows are the source's, bit for bit... */
                ck_assert_int_eq(memcmp(block, src + i * set->block_rows * k,
                                        (size_t) (valid * k) * sizeof(float)),
                                 0);
                /* ...and the rest of the block is zero. */
                for (int64_t e = valid * k; e < set->block_rows * k; e++)
                    ck_assert_msg(block[e] == 0.0f, "n %d rows %lld block %d element %lld", n,
                                  (long long) rows, i, (long long) e);
            }
            cdc__shard_set_retire(&set);
            free(src);
        }
}
END_TEST

START_TEST(test_fewer_rows_than_shards)
{
    /* 2 rows over 4 shards: blocks of one row, the last two all padding. */
    float src[2 * 3] = {1, 2, 3, 4, 5, 6};
    cdc_shard_set_t *set = set_new(NULL, 4, src, 2, 3);
    ck_assert_int_eq(set->block_rows, 1);
    ck_assert_ptr_eq(set->blocks[0], src);
    ck_assert_ptr_eq(set->blocks[1], src + 3);
    for (int i = 2; i < 4; i++) {
        ck_assert_int_eq(cdc__shard_set_valid_rows(set, i), 0);
        for (int e = 0; e < 3; e++)
            ck_assert(set->blocks[i][e] == 0.0f);
    }
    ck_assert(set->blocks[2] != set->blocks[3]);
    cdc__shard_set_retire(&set);
}
END_TEST

/* ---- parity: the code's combination of the (padded) data blocks ------------- */

/* Parity block j is G[j] · data, element by element: within rounding of a
   double sum to float, and bit for bit what cdc_code_encode gives for the
   same blocks. */
static void check_parity(const cdc_code_t *code, const cdc_shard_set_t *set)
{
    const int n = set->n, r = set->r;
    const double *g = cdc_code_generator(code);
    const int64_t elements = set->block_rows * set->k;
    for (int j = 0; j < r; j++)
        for (int64_t e = 0; e < elements; e++) {
            double want = 0, scale = 0;
            for (int i = 0; i < n; i++) {
                want += g[j * n + i] * set->blocks[i][e];
                scale += fabs(g[j * n + i] * set->blocks[i][e]);
            }
            ck_assert_msg(fabs(set->blocks[n + j][e] - want) <= 2 * FLT_EPSILON * scale,
                          "n %d r %d parity %d element %lld: %g, want %g", n, r, j,
                          (long long) e, set->blocks[n + j][e], want);
        }
    float *parity[CDC_CODE_MAX_R];
    for (int j = 0; j < r; j++)
        parity[j] = cdc_test_alloc((size_t) elements * sizeof(float));
    ck_assert_int_eq(cdc_code_encode(code, set->block_rows, set->k, set->blocks, set->k,
                                     parity, set->k),
                     CDC_OK);
    for (int j = 0; j < r; j++) {
        ck_assert_int_eq(memcmp(parity[j], set->blocks[n + j],
                                (size_t) elements * sizeof(float)),
                         0);
        free(parity[j]);
    }
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
                cdc_code_destroy(&code);
                free(src);
            }
}
END_TEST

START_TEST(test_parity_every_scheme)
{
    size_t count;
    const cdc_code_ops_t *const *schemes = cdc_code_all_ops(&count);
    for (size_t s = 0; s < count; s++)
        for (int r = 1; r <= schemes[s]->max_parity && r <= CDC_CODE_MAX_R; r++) {
            const int n = 5;
            const int64_t rows = 13, k = 6; /* blocks of 3, the last one 1 row */
            cdc_code_t *code = NULL;
            ck_assert_int_eq(cdc_code_new(schemes[s], n, r, &code), CDC_OK);
            float *src = random_matrix(rows, k, 99 + s);
            cdc_shard_set_t *set = set_new(code, n, src, rows, k);
            check_parity(code, set);
            cdc__shard_set_retire(&set);
            cdc_code_destroy(&code);
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
            shards[s] = cdc_test_alloc((size_t) elements * sizeof(float));
            if (s != lost)
                memcpy(shards[s], set->blocks[s], (size_t) elements * sizeof(float));
        }
        uint64_t present = ((UINT64_C(1) << (n + r)) - 1) & ~(UINT64_C(1) << lost);
        ck_assert_int_eq(cdc_code_decode(code, set->block_rows, k, shards, k, present), CDC_OK);
        double error = 0, norm = 0;
        for (int64_t e = 0; e < elements; e++) {
            error += fabs(shards[lost][e] - set->blocks[lost][e]);
            norm += fabs(set->blocks[lost][e]);
        }
        ck_assert_msg(error <= 1e-5 * (norm + 1), "lost %d: error %g", lost, error);
        for (int s = 0; s < n + r; s++)
            free(shards[s]);
    }
    cdc__shard_set_retire(&set);
    cdc_code_destroy(&code);
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
                for (int64_t p = 0; p < set->block_rows; p++) {
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
            cdc_code_destroy(&code);
            free(src);
        }
}
END_TEST

/* ---- arguments ------------------------------------------------------------------ */

START_TEST(test_bad_arguments)
{
    float src[12] = {0};
    cdc_shard_set_t *set = NULL;
    ck_assert_int_eq(cdc__shard_set_new(NULL, 0, src, 4, 3, NULL, &set), CDC_EINVAL);
    ck_assert_int_eq(cdc__shard_set_new(NULL, CDC_CODE_MAX_N + 1, src, 4, 3, NULL, &set),
                     CDC_EINVAL);
    ck_assert_int_eq(cdc__shard_set_new(NULL, 2, src, 0, 3, NULL, &set), CDC_EINVAL);
    ck_assert_int_eq(cdc__shard_set_new(NULL, 2, src, 4, 0, NULL, &set), CDC_EINVAL);
    ck_assert_int_eq(cdc__shard_set_new(NULL, 2, NULL, 4, 3, NULL, &set), CDC_EINVAL);
    ck_assert_int_eq(cdc__shard_set_new(NULL, 2, src, 4, 3, NULL, NULL), CDC_EINVAL);
    /* A code for another n. */
    cdc_code_t *code = code_for(3, 1);
    ck_assert_int_eq(cdc__shard_set_new(code, 2, src, 4, 3, NULL, &set), CDC_EINVAL);
    ck_assert_ptr_null(set);
    cdc_code_destroy(&code);
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
    cdc_hold_init(&src->hold, source_free);
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
    ck_assert_int_eq(cdc__shard_set_new(code, N, src->m, ROWS, K, &src->hold, &set), CDC_OK);
    ck_assert_int_eq(cdc_hold_refs(&src->hold), 2); /* the owner's and the set's */
    ck_assert_ptr_eq(set->blocks[0], src->m);        /* aliased, not copied */
    size_t block = (size_t) set->block_rows * K;
    float *want = cdc_test_alloc((size_t) (N + R) * block * sizeof(float));
    for (int s = 0; s < N + R; s++)
        memcpy(want + (size_t) s * block, set->blocks[s], block * sizeof(float));

    cdc_hold_t *holder = cdc_hold_retain(cdc__shard_set_hold(set));
    const cdc_shard_set_t *kept = set;
    cdc_hold_retire(&src->hold); /* the layer or cache drops its weights */
    cdc__shard_set_retire(&set); /* and its set */
    ck_assert_ptr_null(set);
    ck_assert_int_eq(atomic_load(&frees), 0);
    ck_assert(cdc_hold_retired(holder));
    for (int s = 0; s < N + R; s++)
        ck_assert_int_eq(memcmp(kept->blocks[s], want + (size_t) s * block,
                                block * sizeof(float)),
                         0);
    cdc_hold_release(holder); /* the last: the set, then the source */
    ck_assert_int_eq(atomic_load(&frees), 1);
    free(want);
    cdc_code_destroy(&code);
}
END_TEST

/* The set's owner drops it while the source's owner keeps the source: the
   source stays, with only its owner's reference. */
START_TEST(test_set_released_before_source)
{
    atomic_int frees = 0;
    source_t *src = source_new(6, 3, &frees);
    cdc_shard_set_t *set = NULL;
    ck_assert_int_eq(cdc__shard_set_new(NULL, 3, src->m, 6, 3, &src->hold, &set), CDC_OK);
    cdc__shard_set_retire(&set);
    ck_assert_int_eq(atomic_load(&frees), 0);
    ck_assert_int_eq(cdc_hold_refs(&src->hold), 1);
    cdc_hold_retire(&src->hold);
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
    ck_assert_int_eq(cdc_hold_refs(cdc__shard_set_hold(set)), 1);
    cdc__shard_set_retire(&set);

    atomic_int frees = 0;
    source_t *held = source_new(4, 3, &frees);
    ck_assert_int_eq(cdc__shard_set_new(NULL, 0, held->m, 4, 3, &held->hold, &set),
                     CDC_EINVAL);
    cdc_code_t *code = code_for(3, 1);
    ck_assert_int_eq(cdc__shard_set_new(code, 2, held->m, 4, 3, &held->hold, &set),
                     CDC_EINVAL);
    ck_assert_int_eq(cdc_hold_refs(&held->hold), 1);
    cdc_hold_retire(&held->hold);
    ck_assert_int_eq(atomic_load(&frees), 1);
    cdc_code_destroy(&code);
}
END_TEST

static Suite *shard_set_suite(void)
{
    Suite *suite = suite_create("shard_set");
    TCase *blocks = tcase_create("blocks");
    tcase_add_test(blocks, test_block_sizes_and_valid_rows);
    tcase_add_test(blocks, test_full_blocks_alias_source);
    tcase_add_test(blocks, test_tail_zero_padded);
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
