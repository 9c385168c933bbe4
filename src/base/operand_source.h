/* operand_source.h - an operand built when it is needed, not kept.
 *
 * The rotated layout's per-worker operands (a worker's data rows and its
 * parity blocks, rotated_set.h) are read on the coordinator only when they
 * go to a worker that lacks them (the first call, a respawned process, a
 * spare, a new home) or run in process: keeping them all would hold about
 * (1 + r/n) times the weights for nothing between those moments. A source
 * builds one into memory of its own when asked; the sender releases it
 * once libzmq has sent it. The wire key's sample of its floats is taken
 * when the source is made, so keys need no build. */
#ifndef CDC_OPERAND_SOURCE_H_INCLUDED
#define CDC_OPERAND_SOURCE_H_INCLUDED

#include "hold.h"

#include <stdint.h>

#define CDC_OPERAND_SAMPLE 16

typedef struct cdc_operand_source cdc_operand_source_t;
struct cdc_operand_source {
    /* Build the operand's rows x k floats into *data, memory kept alive by
       *hold (one reference, the caller's: cdc__hold_release). CDC_OK, or
       CDC_ENOMEM. */
    int (*open)(const cdc_operand_source_t *source, const float **data, cdc_hold_t **hold);
    const void *owner; /* what open builds from                          */
    int index;         /* which of its operands                          */
    uint32_t sample[CDC_OPERAND_SAMPLE]; /* cdc__operand_sample of it    */
};

/* The bits of rows x k floats at (rows * k - 1) * i / 15, i = 0..15: the
   sample of an operand that its wire key mixes in (cdc__client_wire_key).
   Zero when it is empty. */
void cdc__operand_sample(const float *data, int64_t rows, int64_t k,
                         uint32_t sample[CDC_OPERAND_SAMPLE]);

/* The sample of an operand given as data or, without data, built by
   source: the source's (taken when it was made), else data's into
   scratch. */
const uint32_t *cdc__operand_sample_of(const float *data, const cdc_operand_source_t *source,
                                       int64_t rows, int64_t k,
                                       uint32_t scratch[CDC_OPERAND_SAMPLE]);

/* Where the sample's element i lies in an operand of rows x k floats. */
static inline int64_t cdc__operand_sample_at(int64_t rows, int64_t k, int i)
{
    return (rows * k - 1) * i / (CDC_OPERAND_SAMPLE - 1);
}

#endif
