/* scratch.c - per-thread reusable buffers (freed when the thread exits). */
#include "scratch.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct {
    float *data[CDC_SCRATCH_COUNT];
    size_t count[CDC_SCRATCH_COUNT];
} scratch_set_t;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_set_free(void *p)
{
    scratch_set_t *set = p;
    for (int i = 0; i < CDC_SCRATCH_COUNT; i++)
        free(set->data[i]);
    free(set);
}

static void scratch_key_create(void)
{
    pthread_key_create(&scratch_key, scratch_set_free);
}

float *cdc__scratch(cdc_scratch_slot_t slot, size_t count)
{
    pthread_once(&scratch_once, scratch_key_create);
    scratch_set_t *set = pthread_getspecific(scratch_key);
    if (!set) {
        set = calloc(1, sizeof *set);
        if (!set || pthread_setspecific(scratch_key, set) != 0) {
            free(set);
            return NULL;
        }
    }
    if (set->count[slot] < count) {
        float *grown = malloc((count ? count : 1) * sizeof *grown);
        if (!grown)
            return NULL;
        free(set->data[slot]);
        set->data[slot] = grown;
        set->count[slot] = count;
    }
    return set->data[slot];
}
