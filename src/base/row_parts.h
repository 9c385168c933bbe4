/* row_parts.h - a weight matrix's rows where its owner keeps them: one
 * array the library copied (cdc_fc_new, a BLAS operand the cache keeps), or
 * up to CDC_MAX_WEIGHT_PARTS arrays the caller lends (cdc_fc_new_borrowed:
 * a model's mapped file, q, k and v stacked without a copy).
 *
 * Borrowed rows are only read, while the owner lives: by the calls (under
 * the context's call lock, which cdc_layer_destroy takes too) and, between
 * cdc__row_parts_enter and _leave, by the threads that ship a worker its
 * operand in the background; once the owner lets go (cdc__row_parts_close)
 * those fail to enter instead of reading memory the caller may have
 * unmapped.
 * What must stay contiguous past a call (the dedicated layout's blocks,
 * which sends and slot manifests alias) is a copy made once, on demand
 * (cdc__row_parts_packed). With drop_pages the caller promises a read-only
 * file mapping: after reading rows the library gives their pages back
 * (MADV_DONTNEED), so the coordinator's resident memory does not grow with
 * the model; a later read maps them again from the file. */
#ifndef CDC_ROW_PARTS_H_INCLUDED
#define CDC_ROW_PARTS_H_INCLUDED

#include "cdcgemm.h"
#include "hold.h"

#include <pthread.h>
#include <stdint.h>

typedef struct {
    cdc_hold_t hold;          /* first: the owner's reference, and the holders' */
    int64_t rows, k;
    int count;                /* parts, in row order                            */
    const float *part[CDC_MAX_WEIGHT_PARTS];
    int64_t part_first[CDC_MAX_WEIGHT_PARTS + 1]; /* part i's first row; [count] = rows */
    int borrowed;             /* the caller's memory (else the library's copy)  */
    int drop_pages;           /* borrowed from a read-only file mapping         */
    uintptr_t map_lo[CDC_MAX_WEIGHT_PARTS], map_hi[CDC_MAX_WEIGHT_PARTS]; /* with
                                 drop_pages: the mapping each part lies in    */
    pthread_mutex_t lock;     /* borrowed: enter/leave against close            */
    int closed;               /* borrowed: the owner let go                     */
    float *packed;            /* borrowed: the contiguous copy, once asked      */
} cdc_row_parts_t;

/* A copy of rows x k floats at data (row-major, contiguous) the parts own;
   NULL (cdc_last_error set) when out of memory. The caller owns the first
   reference (cdc__row_parts_close). */
cdc_row_parts_t *cdc__row_parts_copy_new(const float *data, int64_t rows, int64_t k);

/* The same without data: the copy's memory, *storage, for the caller to fill. */
cdc_row_parts_t *cdc__row_parts_alloc(int64_t rows, int64_t k, float **storage);

/* Borrowed parts (count of them, each rows x k floats contiguous), not
   copied. With drop_pages each must lie in one read-only mapping of a file
   (/proc/self/maps says so), else CDC_EINVAL naming the part;
   CDC_ENOMEM. */
int cdc__row_parts_borrow(const cdc_weight_part_t *parts, int count, int64_t k, int drop_pages,
                          cdc_row_parts_t **parts_p);

/* Whether rows [first, first + count) lie in more than one part (a view of
   them needs scratch). */
int cdc__row_parts_spans(const cdc_row_parts_t *parts, int64_t first, int64_t count);

/* Rows [first, first + count), contiguous: in place when they lie in one
   part, else copied into scratch (count x k floats). The call path only
   (the owner alive): the pointer is read after this returns. */
const float *cdc__row_parts_view(const cdc_row_parts_t *parts, int64_t first, int64_t count,
                                 float *scratch);

/* Rows [first, first + count) copied into dst, then done with them. The
   call path, or between enter and leave. */
void cdc__row_parts_copy(const cdc_row_parts_t *parts, int64_t first, int64_t count,
                         float *dst);

/* Reading off the call path (a background thread building an operand):
   enter before, leave after; enter fails with CDC_ESTATE once the owner let
   go, and close waits for a reader that entered. */
int cdc__row_parts_enter(cdc_row_parts_t *parts);
void cdc__row_parts_leave(cdc_row_parts_t *parts);

/* Done reading rows [first, first + count) for now: with drop_pages, their
   pages go back to the file. */
void cdc__row_parts_done(const cdc_row_parts_t *parts, int64_t first, int64_t count);

/* fn over rows [first, first + count), a contiguous run at a time (at: the
   run's first row; with drop_pages at most about 1 MiB), then done with
   them. */
void cdc__row_parts_each(const cdc_row_parts_t *parts, int64_t first, int64_t count,
                         void (*fn)(void *ctx, const float *run, int64_t at, int64_t rows),
                         void *ctx);

/* The hash of the rows (hash.h) with seed: cdc__hash_bytes of them
   contiguous, however the parts cut them (their pages given back as read). */
uint64_t cdc__row_parts_hash(const cdc_row_parts_t *parts, uint64_t seed);

/* Every row contiguous, for what aliases them past a call (shard sets):
   the library's own copy; borrowed parts are copied once (kept until the
   parts go). NULL when out of memory. The call path only. */
const float *cdc__row_parts_packed(cdc_row_parts_t *parts);

/* The owner lets go: borrowed rows are read no more (waits for a copy in
   progress), and the owner's reference is dropped. */
void cdc__row_parts_close(cdc_row_parts_t *parts);

#endif
