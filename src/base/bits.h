/* bits.h - bit helpers over the 64-bit shard and worker masks. */
#ifndef CDC_BITS_H_INCLUDED
#define CDC_BITS_H_INCLUDED

#include <stdint.h>

/* Set bits in x: shards in a mask, workers in a plan. */
static inline int cdc__popcount64(uint64_t x)
{
    return __builtin_popcountll(x);
}

/* The mask of the n lowest bits, 0 <= n <= 64: (1 << 64) is undefined in C
   (x86 takes the count mod 64 and yields 1, so a 64-worker mask was empty). */
static inline uint64_t cdc__low_bits(int n)
{
    return n >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << n) - 1;
}

#endif
