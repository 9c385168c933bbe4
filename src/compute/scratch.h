/* scratch.h - per-thread buffers reused from call to call. */
#ifndef CDC_SCRATCH_H_INCLUDED
#define CDC_SCRATCH_H_INCLUDED

#include <stddef.h>

/* What a buffer is for: one buffer per purpose per thread, so buffers in use
   at the same time never share memory. */
typedef enum {
    CDC_SCRATCH_IM2COL,  /* a shard's im2col matrix (executor, worker)      */
    CDC_SCRATCH_RESULTS, /* a coded call's n + r shard results             */
    CDC_SCRATCH_BANDS,   /* a spatial split's input bands                  */
    CDC_SCRATCH_COUNT
} cdc_scratch_slot_t;

/* This thread's buffer for slot, at least count floats (contents undefined),
   or NULL when out of memory. Valid until the thread's next call for the same
   slot or its exit. Why: freshly mapped pages cost more than the work done in
   them on large layers (VGG-16 conv1_2: 363 -> 52 ms for one shard), and
   glibc maps buffers over 32 MB afresh on every malloc. The largest buffer a
   thread has needed is kept until the thread exits. */
float *cdc__scratch(cdc_scratch_slot_t slot, size_t count);

#endif
