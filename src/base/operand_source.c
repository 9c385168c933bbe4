/* operand_source.c - the sample of an operand (operand_source.h). */
#include "operand_source.h"

#include <string.h>

void cdc__operand_sample(const float *data, int64_t rows, int64_t k,
                         uint32_t sample[CDC_OPERAND_SAMPLE])
{
    memset(sample, 0, CDC_OPERAND_SAMPLE * sizeof *sample);
    for (int i = 0; i < CDC_OPERAND_SAMPLE && rows * k > 0; i++)
        memcpy(&sample[i], data + cdc__operand_sample_at(rows, k, i), sizeof *sample);
}

const uint32_t *cdc__operand_sample_of(const float *data, const cdc_operand_source_t *source,
                                       int64_t rows, int64_t k,
                                       uint32_t scratch[CDC_OPERAND_SAMPLE])
{
    if (!data && source)
        return source->sample;
    cdc__operand_sample(data, rows, k, scratch);
    return scratch;
}
