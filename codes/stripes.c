/* stripes.c - the rotated parity layout (stripes.h). */
#include "stripes.h"

#include "cdcgemm.h"
#include "error.h"

int cdc__stripes_init(cdc_stripes_t *layout, int workers, int r)
{
    if (workers < 2 || workers > CDC_STRIPES_MAX_WORKERS)
        return cdc__fail(CDC_EINVAL, "stripes: %d workers (2..%d)", workers,
                         CDC_STRIPES_MAX_WORKERS);
    if (r < 1 || 2 * r > workers) /* the codes ask r <= n */
        return cdc__fail(CDC_EINVAL, "stripes: %d parity blocks a stripe on %d workers "
                         "(1..%d)", r, workers, workers / 2);
    *layout = (cdc_stripes_t){workers, workers - r, r};
    return CDC_OK;
}

int cdc__stripes_worker(const cdc_stripes_t *layout, int stripe, int block)
{
    return (block + stripe) % layout->workers;
}

int cdc__stripes_block(const cdc_stripes_t *layout, int stripe, int worker)
{
    return (worker - stripe % layout->workers + layout->workers) % layout->workers;
}

void cdc__stripes_order(const cdc_stripes_t *layout, int worker, cdc_stripe_block_t *order)
{
    int count = 0;
    for (int parity = 0; parity < 2; parity++) /* data first, then parity */
        for (int s = 0; s < layout->workers; s++) {
            int b = cdc__stripes_block(layout, s, worker);
            if ((b >= layout->n) == parity)
                order[count++] = (cdc_stripe_block_t){s, b};
        }
}

uint64_t cdc__stripes_present(const cdc_stripes_t *layout, int stripe, uint64_t in)
{
    uint64_t present = 0;
    for (int b = 0; b < layout->workers; b++)
        if (in & (UINT64_C(1) << cdc__stripes_worker(layout, stripe, b)))
            present |= UINT64_C(1) << b;
    return present;
}

int cdc__stripes_parity_needed(const cdc_stripes_t *layout, uint64_t lost, uint64_t *parity)
{
    for (int s = 0; s < layout->workers; s++) {
        int missing = 0;
        for (int b = 0; b < layout->n; b++)
            missing += (int) ((lost >> cdc__stripes_worker(layout, s, b)) & 1);
        parity[s] = 0;
        for (int j = 0; j < layout->r && missing > 0; j++)
            if (!((lost >> cdc__stripes_worker(layout, s, layout->n + j)) & 1)) {
                parity[s] |= UINT64_C(1) << j;
                missing--;
            }
        if (missing > 0)
            return cdc__fail(CDC_EDECODE, "stripes: stripe %d lost %d data blocks more than "
                             "its live parity blocks", s, missing);
    }
    return CDC_OK;
}
