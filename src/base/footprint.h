/* footprint.h - what an allocation really costs, for budgets that count memory honestly. */
#ifndef CDC_FOOTPRINT_H_INCLUDED
#define CDC_FOOTPRINT_H_INCLUDED

#include <stddef.h>

/* Bytes that malloc(size) takes from the process with glibc: the chunk header
   and 16-byte rounding (at least 32), or whole pages plus a header from the
   mmap threshold (128 KiB) up. An estimate of the allocator's rule, not a
   query; thread-safe. */
size_t cdc__alloc_footprint(size_t size);

#endif
