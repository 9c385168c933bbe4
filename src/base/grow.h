/* grow.h - room for one more item in an array that doubles. */
#ifndef CDC_GROW_H_INCLUDED
#define CDC_GROW_H_INCLUDED

#include <stddef.h>

/* items holds *capacity items of item_size bytes, count of them used.
   Returns items when one more fits; else the array reallocated to twice
   *capacity (first when empty) and *capacity updated; NULL when out of
   memory (items and *capacity unchanged, still the caller's). */
void *cdc__grow(void *items, size_t *capacity, size_t count, size_t item_size, size_t first);

#endif
