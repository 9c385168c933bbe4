/* footprint.c - glibc's rounding of an allocation, as a budget should count it. */
#include "footprint.h"

#define MMAP_THRESHOLD ((size_t) 128 << 10) /* glibc's default M_MMAP_THRESHOLD */
#define PAGE 4096

size_t cdc__alloc_footprint(size_t size)
{
    if (size >= MMAP_THRESHOLD)
        return (size + 16 + PAGE - 1) / PAGE * PAGE;
    size_t chunk = (size + 8 + 15) / 16 * 16;
    return chunk < 32 ? 32 : chunk;
}
