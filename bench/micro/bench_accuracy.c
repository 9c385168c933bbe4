/* bench_accuracy.c - what a decode costs in precision, per n and losses, and
 * what the accuracy guard (cdc__decode_limit) does with it: the numbers
 * behind docs/codes.md's trade-off.
 *
 * A (n blocks of 32 rows x k, uniform [-1, 1)) split by rows, B (k x 16);
 * every shard result (data and parity) an OpenBLAS float32 GEMM; for each
 * number of lost data blocks e, a few random loss patterns decoded twice:
 * with every parity present (the decoder picks the best e) and with only
 * the worst e parities (as when a stripe's first parity to arrive is a
 * poor one). One line each: the error amplification A, the guard's limit
 * at k, whether it accepts, and the worst relative Frobenius error of the
 * rebuilt blocks against a double reference. */
#include "bench_accuracy.h"

#include "bench_util.h"
#include "bits.h"
#include "blas_backend.h"
#include "cdcgemm.h"
#include "code.h"
#include "engine.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 32, COLS = 16, PATTERNS = 6 };

typedef struct {
    int n, r, total;
    int64_t k;
    float *a, *b;           /* A: n·ROWS x k, B: k x COLS                      */
    float *parity_operand;  /* r·ROWS x k                                       */
    float *results;         /* (n + r) blocks of ROWS x COLS, float32 products  */
    double *reference;      /* n blocks, in double                              */
} accuracy_case_t;

/* The figures in docs/codes.md come from this stream (a 64-bit LCG, its top
   53 bits): cdc_bench_fill's 32-bit one would draw other loss patterns. */
static uint64_t next_random(uint64_t *state)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return *state >> 11;
}

static float uniform(uint64_t *state)
{
    return (float) ((double) next_random(state) / 9007199254740992.0 * 2.0 - 1.0);
}

static void case_free(accuracy_case_t *c)
{
    free(c->a);
    free(c->b);
    free(c->parity_operand);
    free(c->results);
    free(c->reference);
}

static int case_make(accuracy_case_t *c, const cdc_code_t *code, int64_t k, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    c->n = cdc__code_n(code);
    c->r = cdc__code_r(code);
    c->total = c->n + c->r;
    c->k = k;
    size_t a_floats = (size_t) c->n * ROWS * (size_t) k;
    c->a = cdc_bench_xmalloc(a_floats * sizeof(float));
    c->b = cdc_bench_xmalloc((size_t) k * COLS * sizeof(float));
    c->parity_operand = cdc_bench_xmalloc((size_t) c->r * ROWS * (size_t) k * sizeof(float));
    c->results = cdc_bench_xmalloc((size_t) c->total * ROWS * COLS * sizeof(float));
    c->reference = cdc_bench_xmalloc((size_t) c->n * ROWS * COLS * sizeof(double));
    for (size_t i = 0; i < a_floats; i++)
        c->a[i] = uniform(&seed);
    for (size_t i = 0; i < (size_t) k * COLS; i++)
        c->b[i] = uniform(&seed);
    const float *data[CDC_CODE_MAX_N];
    float *parity[CDC_CODE_MAX_R];
    for (int i = 0; i < c->n; i++)
        data[i] = c->a + (size_t) i * ROWS * (size_t) k;
    for (int j = 0; j < c->r; j++)
        parity[j] = c->parity_operand + (size_t) j * ROWS * (size_t) k;
    int rc = cdc__code_encode(code, ROWS, k, data, k, parity, k);
    if (rc != CDC_OK) {
        case_free(c);
        return rc;
    }
    cdc__blas_sgemm_rm(0, 0, (int64_t) c->n * ROWS, COLS, k, 1.0f, c->a, k, c->b, COLS, 0.0f,
                       c->results, COLS);
    cdc__blas_sgemm_rm(0, 0, (int64_t) c->r * ROWS, COLS, k, 1.0f, c->parity_operand, k, c->b,
                       COLS, 0.0f, c->results + (size_t) c->n * ROWS * COLS, COLS);
    for (int64_t p = 0; p < (int64_t) c->n * ROWS; p++)
        for (int q = 0; q < COLS; q++) {
            double sum = 0.0;
            for (int64_t i = 0; i < k; i++)
                sum += (double) c->a[p * k + i] * (double) c->b[i * COLS + q];
            c->reference[p * COLS + q] = sum;
        }
    return CDC_OK;
}

/* Decode the loss `present` on a copy of the results; the rebuilt blocks'
   relative Frobenius error against the reference, or -1 when it fails. */
static double decode_error(const accuracy_case_t *c, const cdc_code_t *code, uint64_t present)
{
    size_t block = ROWS * COLS;
    float *copy = cdc_bench_xmalloc((size_t) c->total * block * sizeof(float));
    memcpy(copy, c->results, (size_t) c->total * block * sizeof(float));
    float *shards[CDC_CODE_MAX_SHARDS];
    for (int s = 0; s < c->total; s++) {
        shards[s] = copy + (size_t) s * block;
        if (!(present & (UINT64_C(1) << s)))
            memset(shards[s], 0, block * sizeof(float));
    }
    double err = -1.0;
    if (cdc__code_decode(code, ROWS, COLS, shards, COLS, present) == CDC_OK) {
        double diff = 0.0, norm = 0.0;
        for (int s = 0; s < c->n; s++) {
            if (present & (UINT64_C(1) << s))
                continue;
            for (size_t i = 0; i < block; i++) {
                double want = c->reference[(size_t) s * block + i];
                diff += (shards[s][i] - want) * (shards[s][i] - want);
                norm += want * want;
            }
        }
        err = norm > 0.0 ? sqrt(diff / norm) : 0.0;
    }
    free(copy);
    return err;
}

/* The e-subset of the r parities (as a mask) the decode of `lost` trusts
   least: the largest amplification. */
static uint64_t worst_parities(const cdc_code_t *code, int n, int r, uint64_t lost, int e)
{
    uint64_t data = cdc__low_bits(n) & ~lost, worst = 0;
    double worst_a = -1.0;
    for (uint64_t subset = 1; subset < (UINT64_C(1) << r); subset++) {
        if (cdc__popcount64(subset) != e)
            continue;
        double a = cdc__code_decode_amplification(code, data | (subset << n));
        if (isfinite(a) && a > worst_a) {
            worst_a = a;
            worst = subset;
        }
    }
    return worst << n;
}

static int accuracy_row(int n, int r, int64_t k)
{
    cdc_code_t *code = NULL;
    accuracy_case_t c;
    if (cdc__code_new(NULL, n, r, &code) != CDC_OK ||
        case_make(&c, code, k, (uint64_t) (n * 131 + r * 7) + (uint64_t) k) != CDC_OK) {
        fprintf(stderr, "accuracy: %s\n", cdc_last_error());
        cdc__code_destroy(&code);
        return 1;
    }
    double limit = cdc__decode_limit(k);
    uint64_t state = (uint64_t) n * 977 + (uint64_t) r;
    for (int e = 1; e <= r; e++)
        for (int worst = 0; worst <= 1; worst++) {
            double a_max = 0.0, err_max = 0.0;
            for (int pattern = 0; pattern < PATTERNS; pattern++) {
                uint64_t lost = 0;
                while (cdc__popcount64(lost) < e)
                    lost |= UINT64_C(1) << (next_random(&state) % (uint64_t) n);
                uint64_t parities = worst ? worst_parities(code, n, r, lost, e)
                                          : cdc__low_bits(r) << n;
                uint64_t present = (cdc__low_bits(n) & ~lost) | parities;
                double a = cdc__code_decode_amplification(code, present);
                double err = decode_error(&c, code, present);
                a_max = a > a_max ? a : a_max;
                err_max = err > err_max ? err : err_max;
            }
            printf("accuracy n=%d r=%d lost=%d parities=%s k=%lld amplification=%.1f "
                   "limit=%.1f guard=%s rel_error=%.2e predicted=%.2e\n",
                   n, r, e, worst ? "worst" : "all", (long long) k, a_max, limit,
                   a_max <= limit ? "decode" : "compute-here", err_max,
                   5.9604644775390625e-8 * sqrt((double) k) * a_max);
        }
    case_free(&c);
    cdc__code_destroy(&code);
    return 0;
}

int cdc_bench_accuracy(int argc, char **argv)
{
    (void) argv;
    if (argc > 1) {
        fprintf(stderr, "usage: cdcgemm-bench accuracy\n");
        return 1;
    }
    static const struct {
        int n, r;
    } codes[] = {{4, 1}, {4, 3}, {8, 2}, {14, 3}, {16, 2}, {31, 2}, {61, 3}, {62, 2}, {63, 1}};
    static const int64_t ks[] = {256, 2048, 4096};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++)
            if (accuracy_row(codes[i].n, codes[i].r, ks[j]))
                return 1;
    return 0;
}
