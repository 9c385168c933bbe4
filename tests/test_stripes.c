/* test_stripes.c - the rotated parity layout (codes/stripes.h, issue 13):
   every worker holds the same blocks, data computed before parity; every
   erasure pattern of up to r workers leaves each stripe decodable from the
   parity blocks the layout asks for, about one extra block per live worker,
   and the codes rebuild the lost blocks within their error bounds. */
#include "bits.h"
#include "cdcgemm.h"
#include "code.h"
#include "stripes.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_W 8
#define ROWS 8
#define COLS 16

/* Every worker holds each block position once: n data blocks then r
   parity blocks in its order; a stripe's blocks are on distinct workers. */
START_TEST(test_every_worker_holds_the_same)
{
    for (int w = 2; w <= MAX_W; w++)
        for (int r = 1; r <= 3 && 2 * r <= w; r++) {
            cdc_stripes_t l;
            ck_assert_int_eq(cdc__stripes_init(&l, w, r), CDC_OK);
            ck_assert_int_eq(l.n + l.r, w);
            for (int s = 0; s < w; s++) {
                uint64_t seen = 0;
                for (int b = 0; b < w; b++) {
                    int worker = cdc__stripes_worker(&l, s, b);
                    ck_assert_int_eq(cdc__stripes_block(&l, s, worker), b);
                    seen |= UINT64_C(1) << worker;
                }
                ck_assert_int_eq(cdc__popcount64(seen), w);
            }
            for (int worker = 0; worker < w; worker++) {
                cdc_stripe_block_t order[MAX_W];
                cdc__stripes_order(&l, worker, order);
                uint64_t stripes = 0;
                for (int i = 0; i < w; i++) {
                    ck_assert_int_eq(order[i].block >= l.n, i >= l.n); /* data first */
                    ck_assert_int_eq(cdc__stripes_worker(&l, order[i].stripe, order[i].block),
                                     worker);
                    stripes |= UINT64_C(1) << order[i].stripe;
                }
                ck_assert_int_eq(cdc__popcount64(stripes), w);
            }
        }
}
END_TEST

/* Every set of up to r lost workers: each stripe gets as many parity
   blocks as it lost data blocks, all on live workers; no live worker has
   more extra blocks than workers were lost (one each for one lost). More
   than r lost: refused. */
START_TEST(test_every_loss_of_up_to_r_is_covered)
{
    for (int w = 2; w <= MAX_W; w++)
        for (int r = 1; r <= 3 && 2 * r <= w; r++) {
            cdc_stripes_t l;
            ck_assert_int_eq(cdc__stripes_init(&l, w, r), CDC_OK);
            for (uint64_t lost = 0; lost < (UINT64_C(1) << w); lost++) {
                uint64_t parity[MAX_W];
                int rc = cdc__stripes_parity_needed(&l, lost, parity);
                if (cdc__popcount64(lost) > r) {
                    ck_assert_int_eq(rc, CDC_EDECODE);
                    continue;
                }
                ck_assert_int_eq(rc, CDC_OK);
                int extra[MAX_W] = {0};
                for (int s = 0; s < w; s++) {
                    uint64_t present = cdc__stripes_present(&l, s, ~lost);
                    uint64_t data = present & ((UINT64_C(1) << l.n) - 1);
                    ck_assert_int_eq(cdc__popcount64(data) + cdc__popcount64(parity[s]), l.n);
                    ck_assert_uint_eq(parity[s] & ~(present >> l.n), 0);
                    for (int j = 0; j < r; j++)
                        if (parity[s] & (UINT64_C(1) << j))
                            extra[cdc__stripes_worker(&l, s, l.n + j)]++;
                }
                for (int worker = 0; worker < w; worker++)
                    ck_assert_int_le(extra[worker], cdc__popcount64(lost));
            }
        }
}
END_TEST

/* Stripes of random blocks, each coded with the default (n, r) code; for
   every set of up to r lost workers, the lost data blocks rebuilt from the
   parity blocks the layout names match within the codes' bounds. */
START_TEST(test_every_pattern_decodes)
{
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 31);
    size_t block = (size_t) ROWS * COLS;
    float *storage = cdc_test_alloc((size_t) MAX_W * MAX_W * block * sizeof(float));
    float *work = cdc_test_alloc((size_t) MAX_W * block * sizeof(float));
    for (int w = 3; w <= MAX_W; w++)
        for (int r = 1; r <= 3 && 2 * r <= w; r++) {
            cdc_stripes_t l;
            ck_assert_int_eq(cdc__stripes_init(&l, w, r), CDC_OK);
            cdc_code_t *code = NULL;
            ck_assert_int_eq(cdc__code_new(cdc__code_default_ops(r), l.n, r, &code), CDC_OK);
            for (int s = 0; s < w; s++) { /* stripe s: blocks s * w .. s * w + w - 1 */
                float *first = storage + (size_t) s * w * block;
                const float *data[MAX_W];
                float *par[MAX_W];
                cdc_test_fill_uniform(&rng, first, (size_t) l.n * block);
                for (int b = 0; b < w; b++) {
                    data[b] = first + (size_t) b * block;
                    par[b] = first + (size_t) (l.n + b) * block;
                }
                ck_assert_int_eq(cdc__code_encode(code, ROWS, COLS, data, COLS, par, COLS),
                                 CDC_OK);
            }
            double bound = r <= 1 || l.n <= 4 ? 1e-5 : 1.5e-5;
            for (uint64_t lost = 1; lost < (UINT64_C(1) << w); lost++) {
                uint64_t parity[MAX_W];
                if (cdc__popcount64(lost) > r)
                    continue;
                ck_assert_int_eq(cdc__stripes_parity_needed(&l, lost, parity), CDC_OK);
                for (int s = 0; s < w; s++) {
                    const float *first = storage + (size_t) s * w * block;
                    uint64_t in = cdc__stripes_present(&l, s, ~lost);
                    /* Only the parity blocks asked for were computed. */
                    uint64_t present = (in & ((UINT64_C(1) << l.n) - 1)) | (parity[s] << l.n);
                    float *shards[MAX_W];
                    for (int b = 0; b < w; b++) {
                        shards[b] = work + (size_t) b * block;
                        if (present & (UINT64_C(1) << b))
                            memcpy(shards[b], first + (size_t) b * block, block * sizeof(float));
                        else
                            memset(shards[b], 0, block * sizeof(float));
                    }
                    ck_assert_int_eq(cdc__code_decode(code, ROWS, COLS, shards, COLS, present),
                                     CDC_OK);
                    double worst = 0.0, scale = 0.0;
                    for (int b = 0; b < l.n; b++)
                        for (size_t e = 0; e < block; e++) {
                            double want = first[(size_t) b * block + e];
                            worst = fmax(worst, fabs(shards[b][e] - want));
                            scale = fmax(scale, fabs(want));
                        }
                    ck_assert_msg(worst <= bound * scale,
                                  "W = %d, r = %d, lost %#llx, stripe %d: error %g of %g", w,
                                  r, (unsigned long long) lost, s, worst, scale);
                }
            }
            cdc__code_destroy(&code);
        }
    free(storage);
    free(work);
}
END_TEST

START_TEST(test_bad_arguments)
{
    cdc_stripes_t l;
    ck_assert_int_eq(cdc__stripes_init(&l, 1, 1), CDC_EINVAL);
    ck_assert_int_eq(cdc__stripes_init(&l, 4, 0), CDC_EINVAL);
    ck_assert_int_eq(cdc__stripes_init(&l, 4, 3), CDC_EINVAL); /* r > n */
    ck_assert_int_eq(cdc__stripes_init(&l, 4, 2), CDC_OK);
    ck_assert_int_eq(cdc__stripes_init(&l, 65, 1), CDC_EINVAL);
}
END_TEST

static Suite *stripes_suite(void)
{
    Suite *suite = suite_create("stripes");
    TCase *tc = tcase_create("stripes");
    tcase_add_test(tc, test_every_worker_holds_the_same);
    tcase_add_test(tc, test_every_loss_of_up_to_r_is_covered);
    tcase_add_test(tc, test_every_pattern_decodes);
    tcase_add_test(tc, test_bad_arguments);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(stripes_suite());
}
