/* test_gemm.c - cdc_sgemm against OpenBLAS cblas_sgemm: every layout and
   transpose, padded leading dimensions, alpha/beta, zero sizes, which side
   a split cuts, bad input. */
#include "cdcgemm.h"
#include "cdcgemm_testing.h"
#include "testutil.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cdc_layout_t layout;
    cdc_transpose_t ta, tb;
} gemm_form_t;

static cdc_context_t *make_context(int parity, cdc_split_t split)
{
    cdc_config_t config;
    cdc_config_init(&config);
    config.in_process = 1; /* the math, without worker processes */
    config.parity = parity;
    config.split = split;
    cdc_context_t *ctx = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_OK);
    return ctx;
}

/* Stored rows x cols of an operand that is op_rows x op_cols after op(). */
static void stored_shape(cdc_layout_t layout, cdc_transpose_t t, int64_t op_rows,
                         int64_t op_cols, int64_t *ld_min, int64_t *lines)
{
    int64_t rows = t == CDC_NO_TRANS ? op_rows : op_cols;
    int64_t cols = t == CDC_NO_TRANS ? op_cols : op_rows;
    *ld_min = layout == CDC_ROW_MAJOR ? cols : rows;
    *lines = layout == CDC_ROW_MAJOR ? rows : cols;
    if (*ld_min < 1)
        *ld_min = 1;
}

/* One comparison: C from cdc_sgemm (with erase mask) vs cblas_sgemm. */
static void check_one(cdc_context_t *ctx, gemm_form_t f, int64_t m, int64_t n, int64_t k,
                      float alpha, float beta, int nan_c, uint64_t erase, uint64_t seed)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, seed);
    int64_t lda_min, a_lines, ldb_min, b_lines, ldc_min, c_lines;
    stored_shape(f.layout, f.ta, m, k, &lda_min, &a_lines);
    stored_shape(f.layout, f.tb, k, n, &ldb_min, &b_lines);
    stored_shape(f.layout, CDC_NO_TRANS, m, n, &ldc_min, &c_lines);
    int64_t lda = lda_min + 3, ldb = ldb_min + 5, ldc = ldc_min + 2;
    size_t a_size = (size_t) (lda * (a_lines ? a_lines : 1));
    size_t b_size = (size_t) (ldb * (b_lines ? b_lines : 1));
    size_t c_size = (size_t) (ldc * (c_lines ? c_lines : 1));
    float *a = cdc_test_alloc(a_size * sizeof *a), *b = cdc_test_alloc(b_size * sizeof *b);
    float *c = cdc_test_alloc(c_size * sizeof *c), *ref = cdc_test_alloc(c_size * sizeof *c);
    cdc_test_fill_uniform(&rng, a, a_size);
    cdc_test_fill_uniform(&rng, b, b_size);
    cdc_test_fill_uniform(&rng, c, c_size);
    if (nan_c)
        for (size_t i = 0; i < c_size; i++)
            c[i] = NAN;
    memcpy(ref, c, c_size * sizeof *c);

    cblas_sgemm((CBLAS_ORDER) f.layout, (CBLAS_TRANSPOSE) f.ta, (CBLAS_TRANSPOSE) f.tb,
                (int) m, (int) n, (int) k, alpha, a, (int) lda, b, (int) ldb, beta, ref,
                (int) ldc);
    ck_assert_int_eq(cdc_context_erase_next(ctx, erase), CDC_OK);
    int rc = cdc_sgemm(ctx, f.layout, f.ta, f.tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                       ldc);
    ck_assert_msg(rc == CDC_OK, "cdc_sgemm: %s", cdc_last_error());
    /* Inside the m x n view: close to OpenBLAS, no NaN from C when beta = 0.
       Outside it (the ld padding): bit-identical to what was there. */
    double diff = 0.0, norm = 0.0;
    for (int64_t line = 0; line < c_lines; line++)
        for (int64_t i = 0; i < ldc; i++) {
            size_t at = (size_t) (line * ldc + i);
            if (i >= ldc_min || (f.layout == CDC_ROW_MAJOR ? n : m) == 0) {
                ck_assert_msg(memcmp(&c[at], &ref[at], sizeof(float)) == 0,
                              "padding changed at %zu", at);
                continue;
            }
            ck_assert_msg(!isnan(c[at]) && !isnan(ref[at]), "NaN at %zu", at);
            double d = (double) c[at] - ref[at];
            diff += d * d;
            norm += (double) ref[at] * ref[at];
        }
    double err = norm > 0 ? sqrt(diff / norm) : sqrt(diff);
    ck_assert_msg(err <= 1e-5, "layout %d ta %d tb %d m %lld n %lld k %lld alpha %g beta %g: "
                  "rel error %g", f.layout, f.ta, f.tb, (long long) m, (long long) n,
                  (long long) k, alpha, beta, err);
    free(a);
    free(b);
    free(c);
    free(ref);
}

static gemm_form_t form_of(int index)
{
    static const cdc_layout_t layouts[] = {CDC_ROW_MAJOR, CDC_COL_MAJOR};
    static const cdc_transpose_t trans[] = {CDC_NO_TRANS, CDC_TRANS};
    gemm_form_t f = {layouts[index / 4], trans[(index / 2) % 2], trans[index % 2]};
    return f;
}

START_TEST(test_every_form_matches_openblas)
{
    gemm_form_t f = form_of(_i);
    static const cdc_split_t splits[] = {CDC_SPLIT_AUTO, CDC_SPLIT_ROWS, CDC_SPLIT_COLUMNS};
    for (int s = 0; s < 3; s++) {
        cdc_context_t *ctx = make_context(1, splits[s]);
        check_one(ctx, f, 37, 29, 41, 1.0f, 0.0f, 0, 0, 11 + _i);
        check_one(ctx, f, 37, 29, 41, 1.0f, 0.0f, 0, 1u << 2, 12 + _i); /* data shard lost */
        check_one(ctx, f, 64, 3, 130, 0.5f, -1.5f, 0, 1u << 4, 13 + _i); /* parity lost */
        check_one(ctx, f, 5, 70, 9, -2.0f, 1.0f, 0, 1u << 0, 14 + _i);
        check_one(ctx, f, 1, 1, 1, 3.0f, 0.25f, 0, 0, 15 + _i);
        cdc_context_destroy(&ctx);
    }
}
END_TEST

START_TEST(test_beta_zero_ignores_nan)
{
    cdc_context_t *ctx = make_context(1, CDC_SPLIT_AUTO);
    check_one(ctx, form_of(_i), 23, 17, 19, 1.0f, 0.0f, 1, 0, 100 + _i);
    check_one(ctx, form_of(_i), 23, 17, 19, 0.0f, 0.0f, 1, 0, 200 + _i); /* C = 0 */
    check_one(ctx, form_of(_i), 23, 17, 0, 2.0f, 0.0f, 1, 0, 300 + _i);  /* k = 0 */
    cdc_context_destroy(&ctx);
}
END_TEST

START_TEST(test_alpha_beta_cases)
{
    static const float cases[][2] = {{1, 1}, {0, 1}, {0, 2}, {2, -1}, {-1, 0.5f}, {0, 0}};
    cdc_context_t *ctx = make_context(2, CDC_SPLIT_AUTO);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_one(ctx, form_of(_i), 31, 12, 22, cases[i][0], cases[i][1], 0,
                  i % 2 ? (1u << 1) | (1u << 3) : 0, 400 + i);
    cdc_context_destroy(&ctx);
}
END_TEST

START_TEST(test_zero_sizes)
{
    cdc_context_t *ctx = make_context(1, CDC_SPLIT_AUTO);
    gemm_form_t f = form_of(_i);
    check_one(ctx, f, 0, 5, 4, 1.0f, 0.5f, 0, 0, 1);
    check_one(ctx, f, 5, 0, 4, 1.0f, 0.5f, 0, 0, 2);
    check_one(ctx, f, 5, 6, 0, 1.0f, 0.5f, 0, 0, 3);
    check_one(ctx, f, 0, 0, 0, 1.0f, 0.5f, 0, 0, 4);
    /* m = 0 with NULL operands is a valid no-op, as in BLAS. */
    ck_assert_int_eq(cdc_sgemm(ctx, f.layout, f.ta, f.tb, 0, 4, 4, 1.0f, NULL, 4, NULL, 4,
                               0.0f, NULL, 4),
                     CDC_OK);
    cdc_context_destroy(&ctx);
}
END_TEST

START_TEST(test_too_many_erasures_fall_back)
{
    cdc_context_t *ctx = make_context(1, CDC_SPLIT_ROWS);
    cdc_stats_t before, after;
    cdc_context_stats(ctx, &before);
    check_one(ctx, form_of(0), 40, 16, 24, 1.0f, 0.0f, 0, (1u << 0) | (1u << 3), 77);
    cdc_context_stats(ctx, &after);
    ck_assert_uint_eq(after.fallbacks, before.fallbacks + 1);
    ck_assert_uint_eq(after.results_decoded, before.results_decoded);
    cdc_context_destroy(&ctx);
    ctx = make_context(0, CDC_SPLIT_COLUMNS); /* uncoded: every loss is a fallback */
    check_one(ctx, form_of(5), 40, 16, 24, 1.0f, 0.0f, 0, 1u << 1, 78);
    cdc_context_stats(ctx, &after);
    ck_assert_uint_eq(after.fallbacks, 1);
    cdc_context_destroy(&ctx);
}
END_TEST

/* A configured split is in the caller's terms in either layout: rows cuts
   the rows of C, columns its columns. Seen twice: in the call's report, and
   in what came back, since with m far from n what a row cut returns (the
   m x n data results, each shard only its real rows, plus parity results of
   the largest block, ceil(m/d) x n over d data shards) and what a column cut
   does (m x n plus parity m x ceil(n/d)) differ in size. A column-major call computes Cᵀ = Bᵀ·Aᵀ, so cutting the
   first operand of that product would cut C's columns. */
START_TEST(test_split_cuts_the_callers_side)
{
    gemm_form_t f = form_of(_i);
    const int64_t m = 300, n = 5, k = 16;
    static const cdc_split_t splits[] = {CDC_SPLIT_ROWS, CDC_SPLIT_COLUMNS};
    for (int i = 0; i < 2; i++) {
        cdc_context_t *ctx = make_context(1, splits[i]);
        cdc_stats_t before, after;
        cdc_call_report_t report;
        ck_assert_int_eq(cdc_context_stats(ctx, &before), CDC_OK);
        check_one(ctx, f, m, n, k, 1.0f, 0.5f, 0, 0, 200 + (uint64_t) i);
        ck_assert_int_eq(cdc_context_stats(ctx, &after), CDC_OK);
        ck_assert_int_eq(cdc_context_last_call(ctx, &report), CDC_OK);
        ck_assert_msg(report.split == splits[i], "layout %d ta %d tb %d: asked %d, cut %d",
                      f.layout, f.ta, f.tb, splits[i], report.split);
        int64_t data = report.n, shards = report.n + report.r;
        ck_assert_int_ge(data, 2);
        int64_t parity = shards - data;
        uint64_t rows_cut =
            (uint64_t) (m * n + parity * ((m + data - 1) / data) * n) * sizeof(float);
        uint64_t cols_cut =
            (uint64_t) (m * n + parity * m * ((n + data - 1) / data)) * sizeof(float);
        ck_assert_uint_ne(rows_cut, cols_cut);
        ck_assert_msg(after.bytes_in - before.bytes_in ==
                          (splits[i] == CDC_SPLIT_ROWS ? rows_cut : cols_cut),
                      "layout %d ta %d tb %d split %d: %llu result bytes, a row cut "
                      "returns %llu, a column cut %llu", f.layout, f.ta, f.tb, splits[i],
                      (unsigned long long) (after.bytes_in - before.bytes_in),
                      (unsigned long long) rows_cut, (unsigned long long) cols_cut);
        cdc_context_destroy(&ctx);
    }
}
END_TEST

START_TEST(test_bad_arguments_leave_c_untouched)
{
    cdc_context_t *ctx = make_context(1, CDC_SPLIT_AUTO);
    float a[64], b[64], c[64], saved[64];
    for (int i = 0; i < 64; i++)
        a[i] = b[i] = c[i] = saved[i] = (float) i;
    const cdc_layout_t R = CDC_ROW_MAJOR, C = CDC_COL_MAJOR;
    const cdc_transpose_t N = CDC_NO_TRANS, T = CDC_TRANS;
    struct {
        int rc;
        int layout, ta, tb;
        int64_t m, n, k, lda, ldb, ldc;
    } cases[] = {
        {CDC_EINVAL, 7, N, N, 4, 4, 4, 4, 4, 4},
        {CDC_EINVAL, R, 0, N, 4, 4, 4, 4, 4, 4},
        {CDC_EINVAL, R, N, 200, 4, 4, 4, 4, 4, 4},
        {CDC_EDIM, R, N, N, -1, 4, 4, 4, 4, 4},
        {CDC_EDIM, R, N, N, 4, -2, 4, 4, 4, 4},
        {CDC_EDIM, R, N, N, 4, 4, -3, 4, 4, 4},
        {CDC_EDIM, R, N, N, (int64_t) 1 << 40, 4, 4, 4, 4, 4},
        {CDC_ELD, R, N, N, 4, 4, 8, 7, 4, 4},  /* row-major A m x k: lda >= k */
        {CDC_ELD, R, T, N, 6, 4, 8, 5, 4, 4},  /* row-major Aᵀ stored k x m: lda >= m */
        {CDC_ELD, R, N, N, 4, 6, 4, 4, 5, 6},  /* ldb >= n */
        {CDC_ELD, R, N, N, 4, 6, 4, 4, 6, 5},  /* ldc >= n */
        {CDC_ELD, C, N, N, 6, 4, 4, 5, 4, 6},  /* col-major A: lda >= m */
        {CDC_ELD, C, N, N, 6, 4, 4, 6, 4, 5},  /* col-major C: ldc >= m */
        {CDC_ELD, C, N, T, 6, 4, 2, 6, 3, 6},  /* col-major Bᵀ stored n x k: ldb >= n */
        {CDC_ELD, R, N, N, 4, 4, 0, 0, 4, 4},  /* ld >= 1 even for k = 0 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int rc = cdc_sgemm(ctx, (cdc_layout_t) cases[i].layout,
                           (cdc_transpose_t) cases[i].ta, (cdc_transpose_t) cases[i].tb,
                           cases[i].m, cases[i].n, cases[i].k, 1.0f, a, cases[i].lda, b,
                           cases[i].ldb, 0.0f, c, cases[i].ldc);
        ck_assert_msg(rc == cases[i].rc, "case %zu: got %s (%s), want %s", i,
                      cdc_err_name(rc), cdc_last_error(), cdc_err_name(cases[i].rc));
        ck_assert(strlen(cdc_last_error()) > 0);
        ck_assert(memcmp(c, saved, sizeof c) == 0);
    }
    ck_assert_int_eq(cdc_sgemm(NULL, R, N, N, 4, 4, 4, 1.0f, a, 4, b, 4, 0.0f, c, 4),
                     CDC_EINVAL);
    ck_assert_int_eq(cdc_sgemm(ctx, R, N, N, 4, 4, 4, 1.0f, NULL, 4, b, 4, 0.0f, c, 4),
                     CDC_EINVAL);
    ck_assert_int_eq(cdc_sgemm(ctx, R, N, N, 4, 4, 4, 1.0f, a, 4, b, 4, 0.0f, NULL, 4),
                     CDC_EINVAL);
    ck_assert(memcmp(c, saved, sizeof c) == 0);
    cdc_context_destroy(&ctx);
}
END_TEST

static Suite *gemm_suite(void)
{
    Suite *suite = suite_create("gemm");
    TCase *forms = tcase_create("forms");
    tcase_set_timeout(forms, 120);
    tcase_add_loop_test(forms, test_every_form_matches_openblas, 0, 8);
    tcase_add_loop_test(forms, test_zero_sizes, 0, 8);
    tcase_add_loop_test(forms, test_split_cuts_the_callers_side, 0, 8);
    suite_add_tcase(suite, forms);
    TCase *scalars = tcase_create("alpha_beta");
    tcase_add_loop_test(scalars, test_beta_zero_ignores_nan, 0, 8);
    tcase_add_loop_test(scalars, test_alpha_beta_cases, 0, 8);
    suite_add_tcase(suite, scalars);
    TCase *faults = tcase_create("erasures");
    tcase_add_test(faults, test_too_many_erasures_fall_back);
    suite_add_tcase(suite, faults);
    TCase *bad = tcase_create("bad_input");
    tcase_add_test(bad, test_bad_arguments_leave_c_untouched);
    suite_add_tcase(suite, bad);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(gemm_suite());
}
