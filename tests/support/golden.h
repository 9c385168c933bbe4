/* golden.h - loader for the PyTorch golden layer cases in tests/data/golden. */
#ifndef CDC_GOLDEN_H_INCLUDED
#define CDC_GOLDEN_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

typedef enum { CDC_GOLDEN_CONV, CDC_GOLDEN_FC } cdc_golden_kind_t;

/* One line of manifest.tsv. FC: cin = input width, cout = output width. */
typedef struct {
    char name[32];
    cdc_golden_kind_t kind;
    int64_t batch, cin, h, w, cout, kernel, stride, pad, dilation;
    int relu;
    int64_t out_h, out_w;
    char prefix[128];
} cdc_golden_case_t;

/* A case's four arrays, sized from the manifest and checked against the files. */
typedef struct {
    float *in, *weights, *bias, *out;
    size_t in_count, weights_count, bias_count, out_count;
} cdc_golden_data_t;

/* The directory holding manifest.tsv (inside the source tree's tests/data). */
const char *cdc_golden_dir(void);

/* Parse dir/manifest.tsv, skipping '#' and blank lines. On success *cases_p is
   set (caller owns it and must free() it) with *count_p entries; returns 0.
   Returns -1 on a missing file or malformed line, with a message in err. */
int cdc_golden_manifest_load(const char *dir, cdc_golden_case_t **cases_p,
                             size_t *count_p, char *err, size_t err_size);

/* Load a case's float32 little-endian files. Returns 0, or -1 with a message in
   err when a file is missing or its size disagrees with the manifest. On success
   the caller owns *data and releases it with cdc_golden_data_free. */
int cdc_golden_data_load(const char *dir, const cdc_golden_case_t *golden_case,
                         cdc_golden_data_t *data, char *err, size_t err_size);

/* Free a case's arrays; accepts a zeroed or already-freed struct. */
void cdc_golden_data_free(cdc_golden_data_t *data);

#endif
