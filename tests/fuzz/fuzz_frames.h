/* fuzz_frames.h - cut a fuzz input into message frames (shared by the wire fuzzers).
 *
 * Format: a sequence of [u16 little-endian length][that many bytes]; a length
 * longer than what is left takes what is left, so every input is some list
 * of frames and every list of frames up to 64 KiB each is some input.
 * tests/fuzz/make_corpus.c writes seeds in this format. */
#ifndef CDC_FUZZ_FRAMES_H_INCLUDED
#define CDC_FUZZ_FRAMES_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

/* More than any message may have, so "too many frames" is reachable. */
#define CDC_FUZZ_MAX_FRAMES 8

typedef struct {
    const uint8_t *data;
    size_t size;
} cdc_fuzz_frame_t;

/* Up to max frames of data into frames[]; returns how many. *extra counts the
   frames beyond max (their bytes are skipped). */
static inline int cdc_fuzz_split(const uint8_t *data, size_t size, cdc_fuzz_frame_t *frames,
                                 int max, int *extra)
{
    int count = 0;
    *extra = 0;
    while (size >= 2) {
        size_t len = (size_t) data[0] | (size_t) data[1] << 8;
        data += 2;
        size -= 2;
        if (len > size)
            len = size;
        if (count < max)
            frames[count++] = (cdc_fuzz_frame_t){data, len};
        else
            (*extra)++;
        data += len;
        size -= len;
    }
    return count;
}

#endif
