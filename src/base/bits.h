/* bits.h - bit helpers over the 64-bit shard and worker masks. */
#ifndef CDC_BITS_H_INCLUDED
#define CDC_BITS_H_INCLUDED

#include <stdint.h>

/* Set bits in x: shards in a mask, workers in a plan. */
static inline int cdc__popcount64(uint64_t x)
{
    return __builtin_popcountll(x);
}

#endif
