/* fc_fixture.h - an FC layer on a context under test, with its answer from
   an uncoded in-process context (OpenBLAS): the fixture of the suites that
   run calls on real workers while something happens to them. */
#ifndef CDC_FC_FIXTURE_H_INCLUDED
#define CDC_FC_FIXTURE_H_INCLUDED

#include "cdcgemm.h"

#include <stdint.h>

typedef struct {
    cdc_layer_t *layer;
    int out, in, batch;
    float *x, *want, *got; /* batch x in; batch x out, twice */
    float *lent;           /* the weights a borrowed layer reads (NULL: copied) */
} cdc_test_fc_t;

/* An out x in FC layer (uniform weights from seed, a bias when with_bias;
   the output split) on context, and its uncoded answer for a batch x in
   input. Fails the test when it cannot be made. */
void cdc_test_fc_make(cdc_test_fc_t *f, cdc_context_t *context, int out, int in, int batch,
                      uint64_t seed, int with_bias);

/* The same layer over weights it borrows (cdc_fc_new_borrowed) in `parts`
   (1 .. CDC_MAX_WEIGHT_PARTS) uneven row parts: the first one row, the
   others sharing the rest unevenly, so that blocks lie across parts. The
   weights live until cdc_test_fc_free. */
void cdc_test_fc_make_borrowed(cdc_test_fc_t *f, cdc_context_t *context, int out, int in,
                               int batch, uint64_t seed, int parts);

/* One forward call; its relative error against the answer (1 when the call
   failed), for callers that count rather than assert. */
double cdc_test_fc_error(cdc_test_fc_t *f);

/* One forward call, asserted to succeed within rel_tol of the answer. */
void cdc_test_fc_check(cdc_test_fc_t *f, double rel_tol);

void cdc_test_fc_free(cdc_test_fc_t *f);

#endif
