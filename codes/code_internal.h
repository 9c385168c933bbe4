/* code_internal.h - what code.c and code_check.c share: the code itself (its
 * generator, filled once by the scheme's ops) and the argument check of a
 * block's shape. Only those two include it; everyone else has code.h. */
#ifndef CDC_CODE_INTERNAL_H_INCLUDED
#define CDC_CODE_INTERNAL_H_INCLUDED

#include "code.h"

#include <stdint.h>

struct cdc_code {
    const cdc_code_ops_t *ops;
    int n;
    int r;
    int ones_row0; /* row 0 is all ones: a lone erasure is parity - sum */
    double g[CDC_CODE_MAX_R * CDC_CODE_MAX_N];
};

/* CDC_OK when rows x cols with leading dimension ld (named ld_name in the
   message) is a valid block, else the error, reported for fn. */
int cdc__code_check_shape(const char *fn, int64_t rows, int64_t cols, int64_t ld,
                          const char *ld_name);

#endif
