/* grow.c - room for one more item in an array that doubles (grow.h). */
#include "grow.h"

#include <stdint.h>
#include <stdlib.h>

void *cdc__grow(void *items, size_t *capacity, size_t count, size_t item_size, size_t first)
{
    if (count < *capacity)
        return items;
    size_t grown_capacity = *capacity ? 2 * *capacity : first;
    if (grown_capacity < *capacity || grown_capacity > SIZE_MAX / item_size)
        return NULL;
    void *grown = realloc(items, grown_capacity * item_size);
    if (grown)
        *capacity = grown_capacity;
    return grown;
}
