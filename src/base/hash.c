/* hash.c - a four-lane multiply-xorshift hash with a murmur3-style finaliser. */
#include "hash.h"

#include <string.h>

static const uint64_t HASH_MUL = 0x9E3779B97F4A7C15ull;

/* Each step is a bijection of h for a fixed word: xor, odd multiply, xorshift. */
static inline uint64_t hash_step(uint64_t h, uint64_t word)
{
    h ^= word;
    h *= HASH_MUL;
    h ^= h >> 32;
    return h;
}

static inline uint64_t hash_avalanche(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

void cdc__hash_init(cdc_hash_t *hash, uint64_t seed)
{
    for (int l = 0; l < CDC_HASH_LANES; l++)
        hash->lanes[l] = hash_avalanche((uint64_t) (l + 1) * HASH_MUL ^ seed);
}

void cdc__hash_update(cdc_hash_t *hash, const void *data, size_t size)
{
    const unsigned char *bytes = data;
    size_t i = 0;
    uint64_t l0 = hash->lanes[0], l1 = hash->lanes[1], l2 = hash->lanes[2],
             l3 = hash->lanes[3];
    for (; i + 32 <= size; i += 32) {
        uint64_t w[4];
        memcpy(w, bytes + i, 32);
        l0 = hash_step(l0, w[0]);
        l1 = hash_step(l1, w[1]);
        l2 = hash_step(l2, w[2]);
        l3 = hash_step(l3, w[3]);
    }
    for (; i + 8 <= size; i += 8) {
        uint64_t w;
        memcpy(&w, bytes + i, 8);
        l0 = hash_step(l0, w);
    }
    if (i < size) {
        /* The tail with its length above it, so "ab" and "ab\0" differ. */
        uint64_t tail = 0;
        memcpy(&tail, bytes + i, size - i);
        l0 = hash_step(l0, tail ^ ((uint64_t) (size - i) << 56));
    }
    hash->lanes[0] = l0;
    hash->lanes[1] = l1;
    hash->lanes[2] = l2;
    hash->lanes[3] = l3;
}

uint64_t cdc__hash_final(const cdc_hash_t *hash, uint64_t salt)
{
    uint64_t h = hash_avalanche(salt);
    for (int l = 0; l < CDC_HASH_LANES; l++)
        h = hash_avalanche(h ^ hash->lanes[l]);
    return h ? h : 1;
}

uint64_t cdc__hash_bytes(const void *data, size_t size, uint64_t seed)
{
    cdc_hash_t hash;
    cdc__hash_init(&hash, seed);
    cdc__hash_update(&hash, data, size);
    return cdc__hash_final(&hash, (uint64_t) size);
}

uint64_t cdc__hash_mix(uint64_t h, uint64_t v)
{
    /* h is spread before v goes in: with (h + c) ^ v, small consecutive
       pairs such as (key 1, shard 2) and (key 2, shard 1) would collide. */
    return hash_avalanche(hash_avalanche(h + HASH_MUL) ^ v);
}
