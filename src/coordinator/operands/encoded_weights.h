/* encoded_weights.h - a weight matrix the coordinator keeps encoded between
 * calls, for layers and BLAS operands alike: its row blocks and parity per
 * plan (shard sets: the one in use and one being staged), its rows as a
 * parity layout lays them out (layout encodings, likewise: the one in use
 * and one being staged), and its row norms (the parity check's and the accuracy guard's
 * scale). The owner keeps the rows themselves (src, held by hold) and
 * serialises the calls (the context's call lock). */
#ifndef CDC_ENCODED_WEIGHTS_H_INCLUDED
#define CDC_ENCODED_WEIGHTS_H_INCLUDED

#include "code.h"
#include "hold.h"
#include "row_parts.h"
#include "shard_set.h"

#include <stddef.h>
#include <stdint.h>

/* How a parity layout encodes weights (layout/): a new encoding of src
   (rows x k, kept alive by its hold, which the encoding may retain) for
   code, cut as sizes gives (the layout's per-worker rows; NULL: its equal
   cut), whether one is of it, its bytes, its retire. */
typedef struct {
    int (*encode)(const cdc_code_t *code, cdc_row_parts_t *src, int64_t rows, int64_t k,
                  const int64_t *sizes, void **encoding);
    int (*matches)(const void *encoding, const cdc_code_t *code, int64_t rows, int64_t k,
                   const int64_t *sizes);
    size_t (*bytes)(const void *encoding);
    void (*retire)(void *encoding);
} cdc_layout_encoding_t;

typedef struct {
    cdc_row_parts_t *src;   /* rows x k (the owner's); its hold keeps it
                               alive, the encodings retain it              */
    int64_t rows, k;
    cdc_shard_sets_t sets;
    const cdc_layout_encoding_t *layout; /* what made the encodings (NULL: none) */
    void *encoding;         /* the one the calls use                          */
    void *staged_encoding;  /* re-sized, on its way to the workers (NULL: none) */
    double *norms;          /* rows entries, computed on first use           */
} cdc_encoded_weights_t;

/* Nothing encoded yet, of src. */
void cdc__encoded_weights_init(cdc_encoded_weights_t *weights, cdc_row_parts_t *src);

/* The row blocks (n of these lengths from first_row on, NULL: equal) and
   parity for (code, n), as cdc__shard_sets_get: for a call (stage 0) or
   for staging (stage 1); *encoded = 1 when this encoded them. */
int cdc__encoded_weights_shards(cdc_encoded_weights_t *weights, int stage,
                                const cdc_code_t *code, int n, int64_t first_row,
                                const int64_t *lengths, const cdc_shard_set_t **set,
                                int *encoded);

/* The rows as layout encodes them for code, cut as sizes gives (NULL: the
   layout's equal cut): for a call (stage 0) the one in use when it
   matches, else the staged one when it does (now in use: the calls moved
   to it), else encoded now, replacing the one in use; for staging (stage
   1) the one in use or the staged one when either matches, else encoded
   now as the staged one. *encoded = 1 when this encoded it. */
int cdc__encoded_weights_layout(cdc_encoded_weights_t *weights,
                                const cdc_layout_encoding_t *layout, const cdc_code_t *code,
                                const int64_t *sizes, int stage, const void **encoding,
                                int *encoded);

/* The row norms, computed on first use; NULL when out of memory. */
const double *cdc__encoded_weights_norms(cdc_encoded_weights_t *weights);

/* Bytes held beside src: shard sets, layout encoding, norms. */
size_t cdc__encoded_weights_bytes(const cdc_encoded_weights_t *weights);

/* A weight matrix its front end keeps between calls (a layer's weights, a
   BLAS operand the cache found repeating), as it lends it to the driver:
   its rows, their encodings (store), and a hook the front end counts
   with whenever the driver encoded something of it.

   Holds (hold.h): a shard task that names a cached operand by key carries
   a hold that keeps it readable past the call, so the transport can send
   it without a copy. The cut weights' tasks hold their shard set
   (cdc__shard_set_hold; the set holds `hold` in turn, its data blocks alias
   the rows, cdc__weights_packed), the whole weights' tasks hold `hold`
   itself. */
typedef struct cdc_weights cdc_weights_t;
struct cdc_weights {
    cdc_hold_t *hold;      /* keeps the rows (store->src) alive              */
    uint64_t set_key;      /* names its row blocks on workers (nonzero)      */
    uint64_t whole_key;    /* names the whole matrix on workers (nonzero)    */
    cdc_encoded_weights_t *store;
    void (*encoded)(cdc_weights_t *self); /* after an encode of row blocks or
                              a layout's operands (may be NULL)            */
    void *owner;
};

/* cdc__encoded_weights_shards, _layout and _norms of the lent weights;
   the first two call its hook when they encoded something. */
int cdc__weights_shards(cdc_weights_t *weights, int stage, const cdc_code_t *code, int n,
                        int64_t first_row, const int64_t *lengths,
                        const cdc_shard_set_t **set);
int cdc__weights_layout(cdc_weights_t *weights, const cdc_layout_encoding_t *layout,
                        const cdc_code_t *code, const int64_t *sizes, int stage,
                        const void **encoding);
const double *cdc__weights_norms(cdc_weights_t *weights);

/* The rows, contiguous (cdc__row_parts_packed: borrowed ones copied once);
   NULL when out of memory. */
const float *cdc__weights_packed(const cdc_weights_t *weights);

/* The rows as their owner keeps them. */
cdc_row_parts_t *cdc__weights_rows(const cdc_weights_t *weights);

/* Retire everything encoded (a send in flight may still hold it) and free
   the norms; src and hold stay the owner's. Back to nothing encoded. */
void cdc__encoded_weights_retire(cdc_encoded_weights_t *weights);

#endif
