/* test_blas.c - the BLAS entry points (cblas_sgemm, sgemm_): semantics on the
   local and the coded path, error exits, and weight detection (operand_cache). */
#include "blas_context.h"
#include "blas_entry.h"
#include "cdcgemm.h"
#include "operand_cache.h"
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


enum { ROW = 101, COL = 102, NT = 111, TR = 112, CT = 113 };

/* ---- error handlers the entry points must find (exported: ENABLE_EXPORTS) -- */
static int xerbla_calls, xerbla_info;
static char xerbla_name[8];
static int cblas_xerbla_calls, cblas_xerbla_info;
static char cblas_xerbla_rout[32];

__attribute__((visibility("default"))) void xerbla_(const char *srname, const int *info,
                                                    size_t len)
{
    xerbla_calls++;
    xerbla_info = *info;
    memset(xerbla_name, 0, sizeof xerbla_name);
    memcpy(xerbla_name, srname, len < 7 ? len : 7);
}

__attribute__((visibility("default"))) void cblas_xerbla(int info, const char *rout,
                                                         const char *form, ...)
{
    (void) form;
    cblas_xerbla_calls++;
    cblas_xerbla_info = info;
    snprintf(cblas_xerbla_rout, sizeof cblas_xerbla_rout, "%s", rout);
}

/* Each test runs in its own process (Check's fork mode), so each can choose
   the threshold before the first call reads the environment. */
static void use_threshold(const char *value)
{
    setenv("CDCGEMM_MIN_FLOPS", value, 1);
    setenv("CDCGEMM_LOCAL_WORKERS", "5", 1);
    /* Semantics, not transport: in process every shard arrives. */
    setenv("CDCGEMM_IN_PROCESS", "1", 1);
    unsetenv("CDCGEMM_WORKERS");
    ck_assert_msg(cdc__blas_min_flops() == atof(value),
                  "threshold already read: run this suite in fork mode");
}

/* ---- semantics against a double reference -------------------------------- */

/* Stored element (i, j) of op(X) where X has ld and is transposed or not,
   in layout (row: X[r*ld+c], col: X[c*ld+r]). */
static double op_at(const float *x, int ld, int transposed, int row_major, int i, int j)
{
    int r = transposed ? j : i, c = transposed ? i : j;
    return row_major ? x[(size_t) r * ld + c] : x[(size_t) c * ld + r];
}

typedef struct {
    int layout, ta, tb;
} form_t;

static form_t form_of(int index)
{
    static const int trans[] = {NT, TR, CT};
    form_t f = {index < 9 ? ROW : COL, trans[(index / 3) % 3], trans[index % 3]};
    return f;
}

/* One call of cblas_sgemm (or sgemm_ for column-major when fortran) against
   the reference; ld padding must stay bit-identical. */
static void check_call(form_t f, int fortran, int m, int n, int k, float alpha, float beta,
                       int nan_c, uint64_t seed)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, seed);
    int row = f.layout == ROW, at = f.ta != NT, bt = f.tb != NT;
    int a_rows = at ? k : m, a_cols = at ? m : k, b_rows = bt ? n : k, b_cols = bt ? k : n;
    int lda = (row ? a_cols : a_rows) + 2, ldb = (row ? b_cols : b_rows) + 3;
    int ldc = (row ? n : m) + 1;
    if (lda < 1) lda = 1;
    size_t a_size = (size_t) lda * (size_t) (row ? a_rows : a_cols) + 1;
    size_t b_size = (size_t) ldb * (size_t) (row ? b_rows : b_cols) + 1;
    size_t c_size = (size_t) ldc * (size_t) (row ? m : n) + 1;
    float *a = cdc_test_alloc(a_size * sizeof *a), *b = cdc_test_alloc(b_size * sizeof *b);
    float *c = cdc_test_alloc(c_size * sizeof *c), *c0 = cdc_test_alloc(c_size * sizeof *c);
    cdc_test_fill_uniform(&rng, a, a_size);
    cdc_test_fill_uniform(&rng, b, b_size);
    cdc_test_fill_uniform(&rng, c, c_size);
    if (nan_c)
        for (size_t i = 0; i < c_size; i++)
            c[i] = NAN;
    memcpy(c0, c, c_size * sizeof *c);

    if (fortran) {
        /* Mixed case: LSAME is case-insensitive. */
        char ta = f.ta == NT ? 'n' : f.ta == TR ? 'T' : 'c';
        char tb = f.tb == NT ? 'N' : f.tb == TR ? 't' : 'C';
        sgemm_(&ta, &tb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc, 1, 1);
    } else {
        cblas_sgemm(f.layout, f.ta, f.tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
    double diff = 0.0, norm = 0.0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int p = 0; p < k; p++)
                s += op_at(a, lda, at, row, i, p) * op_at(b, ldb, bt, row, p, j);
            size_t idx = row ? (size_t) i * ldc + j : (size_t) j * ldc + i;
            double want = alpha * s + (beta == 0.0f ? 0.0 : beta * (double) c0[idx]);
            if (alpha == 0.0f && beta == 1.0f)
                want = c0[idx];
            ck_assert_msg(!isnan(c[idx]), "NaN at (%d, %d)", i, j);
            diff += (c[idx] - want) * (c[idx] - want);
            norm += want * want;
        }
    double err = norm > 0 ? sqrt(diff / norm) : sqrt(diff);
    ck_assert_msg(err <= 2e-6, "layout %d ta %d tb %d fortran %d m %d n %d k %d alpha %g "
                  "beta %g: rel error %g", f.layout, f.ta, f.tb, fortran, m, n, k, alpha,
                  beta, err);
    /* Outside the m x n view: untouched, bit for bit. */
    for (int line = 0; line < (row ? m : n); line++)
        for (int i = row ? n : m; i < ldc; i++) {
            size_t idx = (size_t) line * ldc + i;
            ck_assert_msg(memcmp(&c[idx], &c0[idx], sizeof(float)) == 0, "padding at %zu", idx);
        }
    free(a);
    free(b);
    free(c);
    free(c0);
}

static void check_all_shapes(int index)
{
    form_t f = form_of(index);
    static const int shapes[][3] = {{1, 1, 1}, {2, 3, 1}, {9, 5, 3}, {37, 29, 41}, {64, 3, 130},
                                    {5, 70, 9}, {0, 4, 3}, {4, 0, 3}, {6, 4, 0}};
    static const float ab[][2] = {{1, 0}, {0.7f, 1.3f}, {0, 1}, {0, 0}, {-2, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (size_t v = 0; v < sizeof ab / sizeof *ab; v++) {
            uint64_t seed = 1000 * (uint64_t) index + 10 * s + v;
            check_call(f, 0, shapes[s][0], shapes[s][1], shapes[s][2], ab[v][0], ab[v][1],
                       v == 0 || v == 3, seed);
            if (f.layout == COL)
                check_call(f, 1, shapes[s][0], shapes[s][1], shapes[s][2], ab[v][0],
                           ab[v][1], v == 0 || v == 3, seed + 7);
        }
}

/* The entry's row blocks as a BLAS call gets them (blas_context.c): from its
   store of encodings, then its bytes into the cache's count. */
static int entry_shards(cdc_operand_cache_t *cache, cdc_operand_entry_t *entry, int stage,
                        const cdc_code_t *code, int n, int64_t first_row,
                        const int64_t *lengths, const cdc_shard_set_t **set, int *encoded)
{
    int rc = cdc__encoded_weights_shards(&entry->encoded, stage, code, n, first_row, lengths,
                                         set, encoded);
    cdc__operand_entry_settle(cache, entry);
    return rc;
}

START_TEST(test_local_path_semantics)
{
    use_threshold("1e15");
    check_all_shapes(_i);
    cdc_stats_t stats;
    ck_assert_int_eq(cdc__blas_context_stats(&stats), CDC_ESTATE); /* never created */
}
END_TEST

START_TEST(test_coded_path_semantics)
{
    use_threshold("0");
    check_all_shapes(_i);
    cdc_stats_t stats;
    ck_assert_int_eq(cdc__blas_context_stats(&stats), CDC_OK);
    ck_assert_uint_gt(stats.coded_calls, 0);
    cdc__blas_context_shutdown();
}
END_TEST

START_TEST(test_threshold_splits_calls)
{
    use_threshold("100000"); /* 2·M·N·K: 30x30x30 = 54000 local, 50x50x50 coded */
    check_call(form_of(0), 0, 30, 30, 30, 1.0f, 0.0f, 1, 1);
    cdc_stats_t stats;
    ck_assert_int_eq(cdc__blas_context_stats(&stats), CDC_ESTATE);
    check_call(form_of(0), 0, 50, 50, 50, 1.0f, 0.0f, 1, 2);
    ck_assert_int_eq(cdc__blas_context_stats(&stats), CDC_OK);
    ck_assert_uint_eq(stats.coded_calls, 1);
    cdc__blas_context_shutdown();
}
END_TEST

/* The thresholds each plan leaves when CDCGEMM_MIN_FLOPS is unset: auto
   (the default) and profiled let the model see GEMMs from 2e6 flops,
   matrix-vector products (hashed every call) only from 2e8, as the equal
   plan does for both; a set threshold is the override for both. A
   3000x1x1000 product (6e6 flops) stays local under auto, a 200^3 GEMM
   (1.6e7) is coded. */
START_TEST(test_default_thresholds)
{
    static const struct {
        const char *plan, *min_flops;
        double gemm, vector;
        int vector_coded, gemm_coded;
    } cases[] = {{"auto", NULL, 2e6, 2e8, 0, 1},
                 {"equal", NULL, 2e8, 2e8, 0, 0},
                 {NULL, NULL, 2e6, 2e8, 0, 1},
                 {"auto", "5", 5.0, 5.0, 1, 1}};
    const int i = _i;
    setenv("CDCGEMM_LOCAL_WORKERS", "5", 1);
    setenv("CDCGEMM_IN_PROCESS", "1", 1);
    unsetenv("CDCGEMM_WORKERS");
    if (cases[i].plan)
        setenv("CDCGEMM_PLAN", cases[i].plan, 1);
    else
        unsetenv("CDCGEMM_PLAN");
    if (cases[i].min_flops)
        setenv("CDCGEMM_MIN_FLOPS", cases[i].min_flops, 1);
    else
        unsetenv("CDCGEMM_MIN_FLOPS");
    ck_assert(cdc__blas_min_flops() == cases[i].gemm);
    ck_assert(cdc__blas_min_flops_vector() == cases[i].vector);
    cdc_stats_t stats;
    check_call(form_of(0), 0, 3000, 1, 1000, 1.0f, 0.0f, 0, 3);
    ck_assert_int_eq(cdc__blas_context_stats(&stats), cases[i].vector_coded ? CDC_OK : CDC_ESTATE);
    check_call(form_of(0), 0, 200, 200, 200, 1.0f, 0.0f, 0, 4);
    ck_assert_int_eq(cdc__blas_context_stats(&stats),
                     cases[i].vector_coded || cases[i].gemm_coded ? CDC_OK : CDC_ESTATE);
    cdc__blas_context_shutdown();
    unsetenv("CDCGEMM_PLAN");
}
END_TEST

/* ---- error exits ---------------------------------------------------------- */

static void reset_handlers(void)
{
    xerbla_calls = cblas_xerbla_calls = 0;
    xerbla_info = cblas_xerbla_info = 0;
}

static void fortran_error(const char *ta, const char *tb, int m, int n, int k, int lda,
                          int ldb, int ldc, int want)
{
    float a[64], b[64], c[64], alpha = 1.0f, beta = 0.0f;
    for (int i = 0; i < 64; i++)
        a[i] = b[i] = c[i] = 1.0f;
    reset_handlers();
    sgemm_(ta, tb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc, 1, 1);
    ck_assert_int_eq(xerbla_calls, 1);
    ck_assert_int_eq(xerbla_info, want);
    ck_assert_str_eq(xerbla_name, "SGEMM ");
    for (int i = 0; i < 64; i++)
        ck_assert_float_eq(c[i], 1.0f); /* untouched */
}

START_TEST(test_fortran_error_exits)
{
    use_threshold(_i ? "0" : "1e15");
    fortran_error("X", "N", 2, 2, 2, 2, 2, 2, 1);
    fortran_error("N", "/", 2, 2, 2, 2, 2, 2, 2);
    fortran_error("N", "N", -1, 2, 2, 2, 2, 2, 3);
    fortran_error("N", "N", 2, -1, 2, 2, 2, 2, 4);
    fortran_error("N", "N", 2, 2, -1, 2, 2, 2, 5);
    fortran_error("N", "N", 3, 2, 2, 2, 2, 3, 8);  /* lda < M */
    fortran_error("T", "N", 2, 2, 3, 2, 3, 2, 8);  /* lda < K */
    fortran_error("N", "N", 2, 2, 3, 2, 2, 2, 10); /* ldb < K */
    fortran_error("N", "t", 2, 3, 2, 2, 2, 2, 10); /* ldb < N */
    fortran_error("N", "N", 3, 2, 2, 3, 2, 2, 13); /* ldc < M */
    /* Several bad: the first in reference order wins. */
    fortran_error("N", "N", -1, -1, -1, 0, 0, 0, 3);
    fortran_error("N", "N", 2, 2, 2, 0, 0, 0, 8);
    /* Valid calls do not call it. */
    reset_handlers();
    float a[4] = {1, 2, 3, 4}, c[4], alpha = 1.0f, beta = 0.0f;
    int two = 2;
    sgemm_("N", "N", &two, &two, &two, &alpha, a, &two, a, &two, &beta, c, &two, 1, 1);
    ck_assert_int_eq(xerbla_calls, 0);
    ck_assert_float_eq(c[0], 7.0f);
}
END_TEST

static void cblas_error(int layout, int ta, int tb, int m, int n, int k, int lda, int ldb,
                        int ldc, int want)
{
    float a[64], b[64], c[64];
    for (int i = 0; i < 64; i++)
        a[i] = b[i] = c[i] = 1.0f;
    reset_handlers();
    cblas_sgemm(layout, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    ck_assert_int_eq(cblas_xerbla_calls, 1);
    ck_assert_int_eq(cblas_xerbla_info, want);
    ck_assert_str_eq(cblas_xerbla_rout, "cblas_sgemm");
    ck_assert_int_eq(xerbla_calls, 0);
    for (int i = 0; i < 64; i++)
        ck_assert_float_eq(c[i], 1.0f);
}

START_TEST(test_cblas_error_exits)
{
    use_threshold(_i ? "0" : "1e15");
    cblas_error(7, NT, NT, 2, 2, 2, 2, 2, 2, 1);
    cblas_error(COL, 0, NT, 2, 2, 2, 2, 2, 2, 2);
    cblas_error(COL, NT, 114, 2, 2, 2, 2, 2, 2, 3);
    cblas_error(ROW, 0, NT, 2, 2, 2, 2, 2, 2, 2);
    cblas_error(ROW, NT, 0, 2, 2, 2, 2, 2, 2, 3);
    /* Column-major: the Fortran numbers + 1. */
    cblas_error(COL, NT, NT, -1, 2, 2, 2, 2, 2, 4);
    cblas_error(COL, NT, NT, 2, -1, 2, 2, 2, 2, 5);
    cblas_error(COL, NT, NT, 2, 2, -1, 2, 2, 2, 6);
    cblas_error(COL, NT, NT, 3, 2, 2, 2, 2, 3, 9);
    cblas_error(COL, NT, NT, 2, 2, 3, 2, 2, 2, 11);
    cblas_error(COL, NT, NT, 3, 2, 2, 3, 2, 2, 14);
    /* Row-major: the reference CBLAS calls Fortran sgemm with the operands
       swapped, so M and N, lda and ldb trade numbers. */
    cblas_error(ROW, NT, NT, -1, 2, 2, 2, 2, 2, 5);
    cblas_error(ROW, NT, NT, 2, -1, 2, 2, 2, 2, 4);
    cblas_error(ROW, NT, NT, 2, 2, -1, 2, 2, 2, 6);
    cblas_error(ROW, NT, NT, 2, 2, 3, 2, 2, 2, 11); /* lda < K */
    cblas_error(ROW, NT, NT, 2, 3, 2, 2, 2, 3, 9);  /* ldb < N */
    cblas_error(ROW, NT, NT, 2, 3, 2, 2, 3, 2, 14); /* ldc < N */
    cblas_error(ROW, TR, NT, 3, 2, 2, 2, 2, 2, 11); /* lda < M (A is K x M) */
}
END_TEST

/* ---- weight detection ----------------------------------------------------- */

START_TEST(test_hash_sees_every_word_not_padding)
{
    enum { R = 7, K = 9, LD = 12 };
    float x[R * LD];
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 5);
    cdc_test_fill_uniform(&rng, x, R * LD);
    for (int t = 0; t < 2; t++) {
        cdc_operand_t op = {x, t ? K : R, t ? R : K, LD, t};
        uint64_t h = cdc__operand_hash(&op);
        ck_assert_uint_ne(h, 0);
        for (int i = 0; i < R; i++)
            for (int j = 0; j < LD; j++) {
                float saved = x[i * LD + j];
                x[i * LD + j] = nextafterf(saved, 2.0f); /* one ulp */
                uint64_t changed = cdc__operand_hash(&op);
                x[i * LD + j] = saved;
                if (j < K)
                    ck_assert_msg(changed != h, "change at (%d, %d) not seen", i, j);
                else
                    ck_assert_msg(changed == h, "padding (%d, %d) changed the hash", i, j);
            }
        /* Shape is part of the hash: same bytes, other view. */
        cdc_operand_t other = {x, t ? K - 1 : R - 1, t ? R : K, LD, t};
        ck_assert_uint_ne(cdc__operand_hash(&other), h);
    }
}
END_TEST

START_TEST(test_pack_matches_view)
{
    enum { R = 5, K = 7, LD = 9 };
    float x[LD * LD], packed[R * K];
    for (int i = 0; i < LD * LD; i++)
        x[i] = (float) i;
    cdc_operand_t op = {x, R, K, LD, 0};
    cdc__operand_pack(&op, packed);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < K; j++)
            ck_assert_float_eq(packed[i * K + j], x[i * LD + j]);
    cdc_operand_t opt = {x, R, K, LD, 1};
    cdc__operand_pack(&opt, packed);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < K; j++)
            ck_assert_float_eq(packed[i * K + j], x[j * LD + i]);
}
END_TEST

START_TEST(test_cache_detects_repeats_and_changes)
{
    enum { M = 6, N = 5, K = 4 };
    float w[M * K], x[N * K];
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 9);
    cdc_test_fill_uniform(&rng, w, M * K);
    cdc_operand_cache_t *cache = NULL;
    ck_assert_int_eq(cdc__operand_cache_new(8, 1 << 20, &cache), CDC_OK);
    cdc_operand_t a = {w, M, K, K, 0}, bt = {x, N, K, K, 0};
    int side;
    cdc_operand_entry_t *entry;
    /* First call: nothing known. */
    cdc_test_fill_uniform(&rng, x, N * K);
    ck_assert_int_eq(cdc__operand_cache_match(cache, &a, &bt, &side, &entry), CDC_OK);
    ck_assert_int_eq(side, 0);
    /* Same weights, new input: a is the weights, packed exactly. */
    cdc_test_fill_uniform(&rng, x, N * K);
    ck_assert_int_eq(cdc__operand_cache_match(cache, &a, &bt, &side, &entry), CDC_OK);
    ck_assert_int_eq(side, 1);
    ck_assert_ptr_nonnull(entry->packed);
    ck_assert_int_eq(memcmp(entry->packed, w, sizeof w), 0);
    uint64_t key = entry->key;
    ck_assert_uint_ne(key, 0);
    /* Weights changed in place (one element): never the stale copy. */
    w[13] += 1.0f;
    cdc_test_fill_uniform(&rng, x, N * K);
    ck_assert_int_eq(cdc__operand_cache_match(cache, &a, &bt, &side, &entry), CDC_OK);
    ck_assert_int_eq(side, 0);
    /* Seen again unchanged: promoted again, with the new contents and key. */
    cdc_test_fill_uniform(&rng, x, N * K);
    ck_assert_int_eq(cdc__operand_cache_match(cache, &a, &bt, &side, &entry), CDC_OK);
    ck_assert_int_eq(side, 1);
    ck_assert_int_eq(memcmp(entry->packed, w, sizeof w), 0);
    ck_assert_uint_ne(entry->key, key);
    /* Weights as bt (column-major callers): found on that side. */
    cdc_operand_t a2 = {x, N, K, K, 0}, bt2 = {w, M, K, K, 0};
    cdc_test_fill_uniform(&rng, x, N * K);
    ck_assert_int_eq(cdc__operand_cache_match(cache, &a2, &bt2, &side, &entry), CDC_OK);
    ck_assert_int_eq(side, 2);
    cdc__operand_cache_destroy(&cache);
    ck_assert_ptr_null(cache);
}
END_TEST

/* The cached copy and its row blocks outlive the entry: a holder of the
   shard set (a zero-copy send in flight) still reads them after the
   weights changed (the entry demoted) and after the cache is gone. */
START_TEST(test_cache_shards_outlive_entry)
{
    enum { M = 7, N = 5, K = 4 };
    float w[M * K], x[N * K], old[M * K];
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 12);
    cdc_test_fill_uniform(&rng, w, M * K);
    memcpy(old, w, sizeof w);
    cdc_operand_cache_t *cache = NULL;
    ck_assert_int_eq(cdc__operand_cache_new(8, 1 << 20, &cache), CDC_OK);
    cdc_operand_t a = {w, M, K, K, 0}, bt = {x, N, K, K, 0};
    int side, encoded;
    cdc_operand_entry_t *entry;
    for (int call = 0; call < 2; call++) {
        cdc_test_fill_uniform(&rng, x, N * K);
        ck_assert_int_eq(cdc__operand_cache_match(cache, &a, &bt, &side, &entry), CDC_OK);
    }
    ck_assert_int_eq(side, 1);
    cdc_code_t *code = NULL;
    ck_assert_int_eq(cdc__code_new(NULL, 3, 1, &code), CDC_OK);
    const cdc_shard_set_t *set = NULL;
    ck_assert_int_eq(entry_shards(cache, entry, 0, code, 3, 0, NULL, &set, &encoded),
                     CDC_OK);
    ck_assert_ptr_eq(set->blocks[0], entry->packed);
    ck_assert_int_eq(cdc__hold_refs(entry->packed_hold), 2); /* entry, set */
    cdc_hold_t *held = cdc__hold_retain(cdc__shard_set_hold(set));

    w[5] += 1.0f; /* changed in place: the entry is demoted */
    cdc_test_fill_uniform(&rng, x, N * K);
    ck_assert_int_eq(cdc__operand_cache_match(cache, &a, &bt, &side, &entry), CDC_OK);
    ck_assert_int_eq(side, 0);
    cdc__operand_cache_destroy(&cache);
    ck_assert(cdc__hold_retired(held));
    for (int s = 0; s < set->n; s++)
        ck_assert_int_eq(memcmp(set->blocks[s], old + (size_t) s * set->block_rows * K,
                                (size_t) cdc__shard_set_valid_rows(set, s) * K *
                                    sizeof(float)),
                         0);
    cdc__hold_release(held); /* the set, then the copy */
    cdc__code_destroy(&code);
}
END_TEST

/* The entry's shard set follows the plan's block lengths: the same
   lengths reuse it, other lengths encode anew (the old set retired, alive
   while held), and the equal cut and its explicit lengths are one layout. */
START_TEST(test_cache_shards_follow_lengths)
{
    enum { M = 8, N = 5, K = 4 };
    float w[M * K], x[N * K];
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 13);
    cdc_test_fill_uniform(&rng, w, M * K);
    cdc_operand_cache_t *cache = NULL;
    ck_assert_int_eq(cdc__operand_cache_new(8, 1 << 20, &cache), CDC_OK);
    cdc_operand_t a = {w, M, K, K, 0}, bt = {x, N, K, K, 0};
    int side = 0, encoded;
    cdc_operand_entry_t *entry = NULL;
    for (int call = 0; call < 2; call++) {
        cdc_test_fill_uniform(&rng, x, N * K);
        ck_assert_int_eq(cdc__operand_cache_match(cache, &a, &bt, &side, &entry), CDC_OK);
    }
    ck_assert_int_eq(side, 1);
    cdc_code_t *code = NULL;
    ck_assert_int_eq(cdc__code_new(NULL, 4, 1, &code), CDC_OK);
    const int64_t unequal[] = {4, 2, 1, 1}, equal[] = {2, 2, 2, 2};
    const cdc_shard_set_t *set = NULL, *again = NULL;
    ck_assert_int_eq(
        entry_shards(cache, entry, 0, code, 4, 0, unequal, &set, &encoded), CDC_OK);
    ck_assert_int_eq(encoded, 1);
    ck_assert_int_eq(set->block_rows, 4);
    ck_assert_int_eq(
        entry_shards(cache, entry, 0, code, 4, 0, unequal, &again, &encoded), CDC_OK);
    ck_assert_int_eq(encoded, 0);
    ck_assert_ptr_eq(again, set);
    int entries;
    size_t bytes_unequal, bytes_equal;
    cdc__operand_cache_usage(cache, &entries, &bytes_unequal);
    cdc_hold_t *held = cdc__hold_retain(cdc__shard_set_hold(set));
    ck_assert_int_eq(entry_shards(cache, entry, 0, code, 4, 0, NULL, &again, &encoded),
                     CDC_OK);
    ck_assert_int_eq(encoded, 1);
    ck_assert(cdc__hold_retired(held));
    /* One parity block of B rows and B norms per block: B = 4, then 2. */
    cdc__operand_cache_usage(cache, &entries, &bytes_equal);
    ck_assert_uint_eq(bytes_unequal - bytes_equal,
                      2 * K * sizeof(float) + 5 * 2 * sizeof(double));
    ck_assert_int_eq(entry_shards(cache, entry, 0, code, 4, 0, equal, &again, &encoded),
                     CDC_OK);
    ck_assert_int_eq(encoded, 0);
    cdc__hold_release(held);
    cdc__operand_cache_destroy(&cache);
    cdc__code_destroy(&code);
}
END_TEST

START_TEST(test_cache_waits_when_both_repeat)
{
    enum { M = 6, N = 5, K = 4 };
    float w[M * K], x[N * K];
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 10);
    cdc_test_fill_uniform(&rng, w, M * K);
    cdc_test_fill_uniform(&rng, x, N * K);
    cdc_operand_cache_t *cache = NULL;
    ck_assert_int_eq(cdc__operand_cache_new(8, 1 << 20, &cache), CDC_OK);
    cdc_operand_t a = {x, N, K, K, 0}, bt = {w, M, K, K, 0};
    int side;
    cdc_operand_entry_t *entry;
    /* The same input twice (row- then column-major form of one product):
       not enough to tell which is the weights. */
    ck_assert_int_eq(cdc__operand_cache_match(cache, &a, &bt, &side, &entry), CDC_OK);
    ck_assert_int_eq(cdc__operand_cache_match(cache, &a, &bt, &side, &entry), CDC_OK);
    ck_assert_int_eq(side, 0);
    /* The input changes, the weights repeat: bt. */
    cdc_test_fill_uniform(&rng, x, N * K);
    ck_assert_int_eq(cdc__operand_cache_match(cache, &a, &bt, &side, &entry), CDC_OK);
    ck_assert_int_eq(side, 2);
    /* A loop on one unchanged product settles on a after three repeats. */
    cdc_operand_t c1 = {w, M, K, K, 1}, c2 = {x, N, K, N, 1};
    for (int call = 0; call < 4; call++) {
        ck_assert_int_eq(cdc__operand_cache_match(cache, &c1, &c2, &side, &entry), CDC_OK);
        ck_assert_int_eq(side, call < 3 ? 0 : 1);
    }
    cdc__operand_cache_destroy(&cache);
}
END_TEST

START_TEST(test_cache_is_bounded)
{
    enum { K = 16, ROWS = 16, MATS = 12 };
    static float w[MATS][ROWS * K], x[ROWS * K];
    cdc_operand_cache_t *cache = NULL;
    /* 6 entries, room for two packed 1 KiB copies. */
    ck_assert_int_eq(cdc__operand_cache_new(6, 2 * ROWS * K * sizeof(float), &cache), CDC_OK);
    int side, entries;
    size_t bytes;
    cdc_operand_entry_t *entry;
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < MATS; i++) {
            for (int j = 0; j < ROWS * K; j++)
                x[j] = (float) (round * 1000 + i * 10 + j);
            cdc_operand_t a = {w[i], ROWS, K, K, 0}, bt = {x, ROWS, K, K, 0};
            ck_assert_int_eq(cdc__operand_cache_match(cache, &a, &bt, &side, &entry), CDC_OK);
            cdc__operand_cache_usage(cache, &entries, &bytes);
            ck_assert_int_le(entries, 6);
            ck_assert_uint_le(bytes, 2 * ROWS * K * sizeof(float));
        }
    /* Two alternating weights fit and keep hitting. */
    for (int round = 0; round < 6; round++) {
        x[0] = (float) round;
        cdc_operand_t a = {w[round % 2], ROWS, K, K, 0}, bt = {x, ROWS, K, K, 0};
        ck_assert_int_eq(cdc__operand_cache_match(cache, &a, &bt, &side, &entry), CDC_OK);
        if (round >= 2)
            ck_assert_int_eq(side, 1);
    }
    cdc__operand_cache_destroy(&cache);
}
END_TEST

/* Repeated calls with one weight matrix: encoded once, then reused; a change
   in place is seen and re-encoded; every result right. */
/* The weights tests' call: row-major C (WM x WN) = W (WM x WK) · X (WK x WN),
   or column-major the same memory as Cᵀ = Xᵀ·Wᵀ; checked against the
   product in double. */
enum { WM = 40, WN = 24, WK = 33 };

static void weights_call(form_t f, const float *w, const float *x, int call)
{
    float c[WM * WN];
    if (f.layout == ROW)
        cblas_sgemm(ROW, NT, NT, WM, WN, WK, 1.0f, w, WK, x, WN, 0.0f, c, WN);
    else
        cblas_sgemm(COL, NT, NT, WN, WM, WK, 1.0f, x, WN, w, WK, 0.0f, c, WN);
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++) {
            double s = 0.0;
            for (int p = 0; p < WK; p++)
                s += (double) w[i * WK + p] * x[p * WN + j];
            ck_assert_msg(fabs(c[i * WN + j] - s) <= 1e-4 * (1 + fabs(s)),
                          "call %d (%d, %d): %g vs %g", call, i, j, c[i * WN + j], s);
        }
}

START_TEST(test_weights_encoded_once)
{
    use_threshold("0");
    form_t f = form_of(_i * 9); /* row-major, then column-major */
    float w[WM * WK], x[WK * WN];
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 77);
    cdc_test_fill_uniform(&rng, w, WM * WK);
    cdc_stats_t stats;
    for (int call = 0; call < 8; call++) {
        if (call == 5)
            w[7] = 3.0f; /* new weights at the same address */
        cdc_test_fill_uniform(&rng, x, WK * WN);
        weights_call(f, w, x, call);
        ck_assert_int_eq(cdc__blas_context_stats(&stats), CDC_OK);
        /* Call 1 promotes (encode 1); call 6 sees the change, call 7 re-encodes. */
        uint64_t want = call < 1 ? 0 : call < 6 ? 1 : 2;
        ck_assert_msg(stats.weight_encodes == want, "call %d: %llu encodes, want %llu", call,
                      (unsigned long long) stats.weight_encodes, (unsigned long long) want);
    }
    ck_assert_uint_eq(stats.weight_hits, 4); /* calls 2..4 and 7 */
    ck_assert_uint_eq(stats.coded_calls, 8);
    cdc__blas_context_shutdown();
}
END_TEST

/* Seven calls with weights w and new inputs: two to promote and encode w,
   then workers 0..4 lost in turn, one a call; every result checked. */
static void lose_each_worker(form_t f, const float *w, cdc_test_rng_t *rng)
{
    float x[WK * WN];
    for (int call = 0; call < 7; call++) {
        cdc_test_fill_uniform(rng, x, WK * WN);
        if (call >= 2)
            ck_assert_int_eq(cdc__blas_context_erase_next(UINT64_C(1) << (call - 2)), CDC_OK);
        weights_call(f, w, x, call);
    }
}

/* CDCGEMM_PARITY_LAYOUT=rotated with the split that cuts the weights (the
   rows of C; auto would cut the input, which moves fewer bytes, and that
   split stays dedicated): once the weights repeat, every call runs in the
   rotated layout (row-major W is A, column-major it is Bt) and stays right
   with each worker lost in turn. Loops 2 and 3: the same under the
   profiled plan (sized stripes: in process nothing measures the devices,
   so they stay equal, cut by the plan rather than the set), the
   coordinator too slow to take a call. */
START_TEST(test_weights_rotated)
{
    form_t f = form_of((_i % 2) * 9);
    if (_i >= 2) {
        setenv("CDCGEMM_PLAN", "profiled", 1);
        setenv("CDCGEMM_FAULTS", "slow@c:gflops=0.001", 1);
    }
    setenv("CDCGEMM_PARITY_LAYOUT", "rotated", 1); /* before use_threshold reads them */
    setenv("CDCGEMM_SPLIT", f.layout == ROW ? "rows" : "columns", 1);
    use_threshold("0");
    float w[WM * WK];
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 78);
    cdc_test_fill_uniform(&rng, w, WM * WK);
    lose_each_worker(f, w, &rng);
    cdc_stats_t stats;
    ck_assert_int_eq(cdc__blas_context_stats(&stats), CDC_OK);
    ck_assert_uint_eq(stats.rotated_calls, 6); /* every call once W is known */
    /* Each lost worker's 4 blocks are decoded, or computed here where the
       accuracy guard refuses the decode (blocks of 2 rows over k = 33: the
       used blocks' norms often pass sqrt(k) times a block's own); the
       decode path carries most of them. */
    ck_assert_uint_ge(stats.results_decoded, 12);
    ck_assert_uint_le(stats.results_decoded, 5 * 4);
    ck_assert_uint_eq(stats.weight_encodes, 1);
    cdc__blas_context_shutdown();
    unsetenv("CDCGEMM_PARITY_LAYOUT");
    unsetenv("CDCGEMM_SPLIT");
    unsetenv("CDCGEMM_PLAN");
    unsetenv("CDCGEMM_FAULTS");
}
END_TEST

/* The accuracy guard in both layouts (the rotated one had none): weights
   whose rows are 1 or 1e-4 at random make a rebuilt block's error
   amplification (the used blocks' row norms over its own) pass sqrt(k) on
   some row, so with each worker lost in turn some lost blocks are computed
   here (fallbacks) instead of decoded, and every result is right. */
START_TEST(test_guard_in_both_layouts)
{
    static const char *const layouts[] = {"rotated", "dedicated"};
    setenv("CDCGEMM_PARITY_LAYOUT", layouts[_i], 1); /* before use_threshold reads it */
    setenv("CDCGEMM_SPLIT", "rows", 1);
    use_threshold("0");
    form_t f = form_of(0);
    float w[WM * WK];
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 79);
    cdc_test_fill_uniform(&rng, w, WM * WK);
    for (int i = 0; i < WM; i++)
        if (cdc_test_rng_next(&rng) & 1)
            for (int p = 0; p < WK; p++)
                w[i * WK + p] *= 1e-4f;
    lose_each_worker(f, w, &rng);
    cdc_stats_t stats;
    ck_assert_int_eq(cdc__blas_context_stats(&stats), CDC_OK);
    ck_assert_msg(stats.fallbacks >= 1, "%s: no rebuilt block refused (%llu decoded)",
                  layouts[_i], (unsigned long long) stats.results_decoded);
    if (_i == 0)
        ck_assert_uint_ge(stats.rotated_calls, 5);
    cdc__blas_context_shutdown();
    unsetenv("CDCGEMM_PARITY_LAYOUT");
    unsetenv("CDCGEMM_SPLIT");
}
END_TEST

/* A lost shard (data or parity) is rebuilt: the BLAS result stays right.
   (The accuracy guard refuses a rebuilt shard whose error amplification
   exceeds sqrt(k): with blocks spread evenly, seeds 500.. gave one at 6.43
   against 6.40, computed locally, correctly; these seeds keep all ten data
   erasures within it, so the count below still pins the decode path.) */
START_TEST(test_coded_path_with_erasures)
{
    use_threshold("0");
    static const uint64_t masks[] = {1u << 0, 1u << 2, 1u << 4, 0};
    for (int form = 0; form < 18; form += 4)
        for (size_t e = 0; e < sizeof masks / sizeof *masks; e++) {
            ck_assert_int_eq(cdc__blas_context_erase_next(masks[e]), CDC_OK);
            check_call(form_of(form), 0, 37, 29, 41, 0.7f, 1.3f, 0, 600 + form * 10 + e);
        }
    cdc_stats_t stats;
    ck_assert_int_eq(cdc__blas_context_stats(&stats), CDC_OK);
    ck_assert_uint_ge(stats.results_decoded, 10);
    ck_assert_uint_ge(stats.shards_erased, 15);
    cdc__blas_context_shutdown();
}
END_TEST

/* Host threads calling at once, each with its own weights: coded calls are
   serialised, local ones run side by side; every result right. */
static void *thread_calls(void *arg)
{
    int id = *(const int *) arg, bad = 0;
    enum { M = 24, N = 20, K = 16 };
    float w[M * K], x[K * N], c[M * N];
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 900 + (uint64_t) id);
    cdc_test_fill_uniform(&rng, w, M * K);
    for (int call = 0; call < 20; call++) {
        cdc_test_fill_uniform(&rng, x, K * N);
        int m = call % 2 ? M : 4; /* 4x20x16 stays local under the threshold */
        cblas_sgemm(ROW, NT, NT, m, N, K, 1.0f, w, K, x, N, 0.0f, c, N);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < N; j++) {
                double s = 0.0;
                for (int p = 0; p < K; p++)
                    s += (double) w[i * K + p] * x[p * N + j];
                bad += fabs(c[i * N + j] - s) > 1e-4 * (1 + fabs(s));
            }
    }
    *(int *) arg = bad;
    return NULL;
}

START_TEST(test_threads)
{
    use_threshold("10000"); /* 2·24·20·16 = 15360 coded, 2·4·20·16 = 2560 local */
    enum { THREADS = 4 };
    pthread_t threads[THREADS];
    int args[THREADS];
    for (int t = 0; t < THREADS; t++) {
        args[t] = t;
        ck_assert_int_eq(pthread_create(&threads[t], NULL, thread_calls, &args[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        ck_assert_int_eq(pthread_join(threads[t], NULL), 0);
        ck_assert_msg(args[t] == 0, "thread %d: %d wrong elements", t, args[t]);
    }
    cdc_stats_t stats;
    ck_assert_int_eq(cdc__blas_context_stats(&stats), CDC_OK);
    ck_assert_uint_eq(stats.coded_calls, THREADS * 10);
    ck_assert_uint_eq(stats.weight_encodes, THREADS);
    cdc__blas_context_shutdown();
}
END_TEST

static Suite *blas_suite(void)
{
    Suite *s = suite_create("blas");
    TCase *tc = tcase_create("semantics");
    tcase_add_loop_test(tc, test_local_path_semantics, 0, 18);
    tcase_add_loop_test(tc, test_coded_path_semantics, 0, 18);
    tcase_add_test(tc, test_threshold_splits_calls);
    tcase_add_loop_test(tc, test_default_thresholds, 0, 4);
    tcase_add_test(tc, test_coded_path_with_erasures);
    tcase_add_test(tc, test_threads);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_loop_test(tc, test_fortran_error_exits, 0, 2);
    tcase_add_loop_test(tc, test_cblas_error_exits, 0, 2);
    suite_add_tcase(s, tc);
    tc = tcase_create("weights");
    tcase_add_test(tc, test_hash_sees_every_word_not_padding);
    tcase_add_test(tc, test_pack_matches_view);
    tcase_add_test(tc, test_cache_detects_repeats_and_changes);
    tcase_add_test(tc, test_cache_waits_when_both_repeat);
    tcase_add_test(tc, test_cache_shards_outlive_entry);
    tcase_add_test(tc, test_cache_shards_follow_lengths);
    tcase_add_test(tc, test_cache_is_bounded);
    tcase_add_loop_test(tc, test_weights_encoded_once, 0, 2);
    tcase_add_loop_test(tc, test_weights_rotated, 0, 4);
    tcase_add_loop_test(tc, test_guard_in_both_layouts, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return cdc_test_run_suite(blas_suite());
}
