/* consumer.c - a program outside the cdcgemm tree, built against an installed
 * cdcgemm (pkg-config or find_package): checks that the headers it was built
 * with match the library it loaded, and runs an FC layer (and the same with a
 * shard erased through cdcgemm_testing.h) against its own double-precision
 * reference. The CDCGEMM_* environment picks in-process or worker processes.
 * Prints one line:
 *   consumer: version=V coded_calls=N decoded=D fallbacks=F max_rel_error=E
 *             result=PASS|FAIL */
#include <cdcgemm.h>
#include <cdcgemm_testing.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OUT = 48, IN = 64, BATCH = 3 };

static double rel_error(const float *got, const double *want, size_t count)
{
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < count; i++) {
        diff += (got[i] - want[i]) * (got[i] - want[i]);
        norm += want[i] * want[i];
    }
    return norm > 0.0 ? sqrt(diff / norm) : sqrt(diff);
}

/* Uniform in [-1, 1), the same on every machine. */
static float next_uniform(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return (float) ((*seed >> 16) & 0x7fff) / 16384.0f - 1.0f;
}

static int fail(const char *what, int status)
{
    fprintf(stderr, "consumer: %s: %s (%s)\n", what, cdc_strerror(status), cdc_last_error());
    return 1;
}

int main(void)
{
    if (strcmp(cdc_version(), CDC_VERSION_STRING) != 0) {
        fprintf(stderr, "consumer: headers %s, library %s\n", CDC_VERSION_STRING,
                cdc_version());
        return 1;
    }
    static float weights[OUT * IN], bias[OUT], x[BATCH * IN], y[BATCH * OUT];
    static double want[BATCH * OUT];
    unsigned seed = 12345;
    for (size_t i = 0; i < OUT * IN; i++)
        weights[i] = next_uniform(&seed);
    for (size_t i = 0; i < BATCH * IN; i++)
        x[i] = next_uniform(&seed);
    for (size_t i = 0; i < OUT; i++)
        bias[i] = (float) i / OUT;
    for (size_t b = 0; b < BATCH; b++)
        for (size_t o = 0; o < OUT; o++) {
            double sum = bias[o];
            for (size_t i = 0; i < IN; i++)
                sum += (double) x[b * IN + i] * weights[o * IN + i];
            want[b * OUT + o] = sum;
        }

    cdc_context_t *ctx = NULL;
    int rc = cdc_context_new_from_env(&ctx);
    if (rc != CDC_OK)
        return fail("cdc_context_new_from_env", rc);
    cdc_layer_options_t options;
    cdc_layer_options_init(&options);
    options.split = CDC_SPLIT_ROWS;
    options.parity = 1;
    cdc_layer_t *fc = NULL;
    if ((rc = cdc_fc_new(ctx, OUT, IN, weights, bias, &options, &fc)) != CDC_OK)
        return fail("cdc_fc_new", rc);
    double worst = 0.0;
    for (int erase = 0; erase < 2; erase++) {
        if (erase && (rc = cdc_context_erase_next(ctx, UINT64_C(1))) != CDC_OK)
            return fail("cdc_context_erase_next", rc);
        memset(y, 0, sizeof y);
        if ((rc = cdc_fc_forward(fc, BATCH, x, y)) != CDC_OK)
            return fail("cdc_fc_forward", rc);
        double e = rel_error(y, want, BATCH * OUT);
        worst = e > worst ? e : worst;
    }
    cdc_stats_t stats;
    if ((rc = cdc_context_stats(ctx, &stats)) != CDC_OK)
        return fail("cdc_context_stats", rc);
    cdc_layer_destroy(&fc);
    cdc_context_destroy(&ctx);
    /* The erased shard was rebuilt from parity, or (a worker too slow under
       load) computed locally: either way the hook reached the library. */
    int pass = worst < 1e-5 && stats.coded_calls == 2 &&
               stats.results_decoded + stats.fallbacks >= 1;
    printf("consumer: version=%s coded_calls=%llu decoded=%llu fallbacks=%llu "
           "max_rel_error=%.3g result=%s\n", cdc_version(),
           (unsigned long long) stats.coded_calls, (unsigned long long) stats.results_decoded,
           (unsigned long long) stats.fallbacks, worst, pass ? "PASS" : "FAIL");
    return pass ? 0 : 1;
}
