/* row_parts.c - a weight matrix's rows, copied or borrowed (row_parts.h). */
#define _DEFAULT_SOURCE /* madvise */
#include "row_parts.h"

#include "error.h"
#include "hash.h"
#include "log.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The copy of cdc__row_parts_alloc sits after the parts, 64-byte aligned
   (cdc__head_alloc). */
#define PARTS_HEAD ((sizeof(cdc_row_parts_t) + 63) / 64 * 64)

static void parts_free(cdc_hold_t *hold)
{
    cdc_row_parts_t *parts = (cdc_row_parts_t *) hold; /* its first member */
    if (parts->borrowed) {
        pthread_mutex_destroy(&parts->lock);
        free(parts->packed);
    }
    free(parts);
}

cdc_row_parts_t *cdc__row_parts_alloc(int64_t rows, int64_t k, float **storage)
{
    cdc_row_parts_t *parts = cdc__head_alloc(PARTS_HEAD, (size_t) rows * (size_t) k *
                                                             sizeof(float),
                                             (void **) storage, "weights");
    if (!parts)
        return NULL;
    memset(parts, 0, sizeof *parts);
    cdc__hold_init(&parts->hold, parts_free);
    parts->rows = rows;
    parts->k = k;
    parts->count = 1;
    parts->part[0] = *storage;
    parts->part_first[1] = rows;
    return parts;
}

cdc_row_parts_t *cdc__row_parts_copy_new(const float *data, int64_t rows, int64_t k)
{
    float *storage;
    cdc_row_parts_t *parts = cdc__row_parts_alloc(rows, k, &storage);
    if (parts)
        memcpy(storage, data, (size_t) rows * (size_t) k * sizeof(float));
    return parts;
}

/* The mapping [*lo, *hi) that holds [from, to), from /proc/self/maps:
   NULL when it is one read-only mapping of a file, else why not. */
static const char *file_mapping_of(const void *from, const void *to, uintptr_t *lo,
                                   uintptr_t *hi)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps)
        return "cannot be checked (/proc/self/maps unreadable)";
    char line[4096 + 128], perms[8] = "";
    unsigned long start = 0, end = 0, inode = 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, maps))
        found = sscanf(line, "%lx-%lx %7s %*s %*s %lu", &start, &end, perms, &inode) == 4 &&
                (uintptr_t) from >= start && (uintptr_t) from < end;
    fclose(maps);
    if (!found)
        return "is not mapped";
    if ((uintptr_t) to > end)
        return "runs past the end of its mapping";
    if (perms[0] != 'r' || perms[1] != '-' || inode == 0)
        return "is not in a read-only file mapping";
    *lo = start;
    *hi = end;
    return NULL;
}

int cdc__row_parts_borrow(const cdc_weight_part_t *list, int count, int64_t k, int drop_pages,
                          cdc_row_parts_t **parts_p)
{
    *parts_p = NULL;
    cdc_row_parts_t *parts = calloc(1, sizeof *parts);
    if (!parts)
        return cdc__fail(CDC_ENOMEM, "borrowed weights");
    cdc__hold_init(&parts->hold, parts_free);
    pthread_mutex_init(&parts->lock, NULL);
    parts->borrowed = 1;
    parts->drop_pages = drop_pages;
    parts->k = k;
    parts->count = count;
    for (int i = 0; i < count; i++) {
        parts->part[i] = list[i].rows;
        parts->part_first[i + 1] = parts->part_first[i] + list[i].count;
        const char *refused = drop_pages ? file_mapping_of(list[i].rows,
                                                           list[i].rows + list[i].count * k,
                                                           &parts->map_lo[i], &parts->map_hi[i])
                                         : NULL;
        if (refused) {
            cdc__row_parts_close(parts);
            return cdc__fail(CDC_EINVAL, "borrowed weights with CDC_BORROW_FILE_MAPPED: part %d "
                             "%s", i, refused);
        }
    }
    parts->rows = parts->part_first[count];
    *parts_p = parts;
    return CDC_OK;
}

/* The part row `row` lies in. */
static int part_of(const cdc_row_parts_t *parts, int64_t row)
{
    int i = 0;
    while (i + 1 < parts->count && row >= parts->part_first[i + 1])
        i++;
    return i;
}

int cdc__row_parts_spans(const cdc_row_parts_t *parts, int64_t first, int64_t count)
{
    return count > 0 && part_of(parts, first) != part_of(parts, first + count - 1);
}

/* The run of rows from `first` that lies in one part, at most count rows:
   its rows through *run. */
static int64_t run_at(const cdc_row_parts_t *parts, int64_t first, int64_t count,
                      const float **run)
{
    int i = part_of(parts, first);
    int64_t end = parts->part_first[i + 1];
    *run = parts->part[i] + (first - parts->part_first[i]) * parts->k;
    return end - first < count ? end - first : count;
}

static void copy_rows(const cdc_row_parts_t *parts, int64_t first, int64_t count, float *dst)
{
    while (count > 0) {
        const float *run;
        int64_t n = run_at(parts, first, count, &run);
        memcpy(dst, run, (size_t) n * (size_t) parts->k * sizeof(float));
        dst += n * parts->k;
        first += n;
        count -= n;
    }
}

const float *cdc__row_parts_view(const cdc_row_parts_t *parts, int64_t first, int64_t count,
                                 float *scratch)
{
    const float *run;
    if (count <= 0 || run_at(parts, first, count, &run) == count)
        return count > 0 ? run : scratch;
    copy_rows(parts, first, count, scratch);
    return scratch;
}

/* A read fault on a file mapping maps more than the page: the neighbours
   the page cache holds in the aligned window around it ("fault-around"),
   and on recent kernels the whole large folio the page lies in, up to a
   page table's reach (2 MiB). Dropping only the pages read would leave
   those mapped around every range read. */
#define FAULT_AROUND_BYTES ((uintptr_t) 2 << 20)

static void drop_range(const void *from, const void *to, uintptr_t lo, uintptr_t hi)
{
    uintptr_t start = (uintptr_t) from / FAULT_AROUND_BYTES * FAULT_AROUND_BYTES;
    uintptr_t end = ((uintptr_t) to + FAULT_AROUND_BYTES - 1) / FAULT_AROUND_BYTES *
                    FAULT_AROUND_BYTES;
    start = start > lo ? start : lo;
    end = end < hi ? end : hi;
    if (end > start)
        (void) madvise((void *) start, end - start, MADV_DONTNEED); /* a hint: best effort */
}

void cdc__row_parts_done(const cdc_row_parts_t *parts, int64_t first, int64_t count)
{
    if (!parts->drop_pages)
        return;
    while (count > 0) {
        const float *run;
        int64_t n = run_at(parts, first, count, &run);
        int i = part_of(parts, first);
        drop_range(run, run + n * parts->k, parts->map_lo[i], parts->map_hi[i]);
        first += n;
        count -= n;
    }
}

void cdc__row_parts_copy(const cdc_row_parts_t *parts, int64_t first, int64_t count,
                         float *dst)
{
    copy_rows(parts, first, count, dst);
    cdc__row_parts_done(parts, first, count);
}

int cdc__row_parts_enter(cdc_row_parts_t *parts)
{
    if (!parts->borrowed)
        return CDC_OK;
    pthread_mutex_lock(&parts->lock);
    if (!parts->closed)
        return CDC_OK;
    pthread_mutex_unlock(&parts->lock);
    return cdc__fail(CDC_ESTATE, "borrowed weights: their layer was destroyed");
}

void cdc__row_parts_leave(cdc_row_parts_t *parts)
{
    if (parts->borrowed)
        pthread_mutex_unlock(&parts->lock);
}

/* Rows cdc__row_parts_each hands over at a time: about 1 MiB, so that
   dropped pages never add up to much at once. */
static int64_t each_rows(const cdc_row_parts_t *parts)
{
    int64_t rows = ((int64_t) 1 << 20) / (parts->k * (int64_t) sizeof(float));
    return rows > 0 ? rows : 1;
}

void cdc__row_parts_each(const cdc_row_parts_t *parts, int64_t first, int64_t count,
                         void (*fn)(void *ctx, const float *run, int64_t at, int64_t rows),
                         void *ctx)
{
    int64_t most = parts->drop_pages ? each_rows(parts) : count;
    while (count > 0) {
        const float *run;
        int64_t n = run_at(parts, first, count < most ? count : most, &run);
        fn(ctx, run, first, n);
        cdc__row_parts_done(parts, first, n);
        first += n;
        count -= n;
    }
}

/* The content hash, a run at a time (cdc__row_parts_each): runs are fed to
   the hash in multiples of 32 bytes, the rest carried to the next, so that
   it is the hash the rows would have contiguous (hash.h), however the parts
   cut them. */
typedef struct {
    cdc_hash_t hash;
    int64_t k;
    unsigned char carry[32];
    size_t held;
} content_hash_t;

static void hash_run(void *ctx, const float *run, int64_t at, int64_t rows)
{
    (void) at;
    content_hash_t *c = ctx;
    const unsigned char *p = (const unsigned char *) run;
    size_t n = (size_t) rows * (size_t) c->k * sizeof(float);
    if (c->held) {
        size_t take = sizeof c->carry - c->held < n ? sizeof c->carry - c->held : n;
        memcpy(c->carry + c->held, p, take);
        c->held += take;
        p += take;
        n -= take;
        if (c->held < sizeof c->carry)
            return;
        cdc__hash_update(&c->hash, c->carry, sizeof c->carry);
        c->held = 0;
    }
    size_t whole = n / sizeof c->carry * sizeof c->carry;
    cdc__hash_update(&c->hash, p, whole);
    memcpy(c->carry, p + whole, n - whole);
    c->held = n - whole;
}

uint64_t cdc__row_parts_hash(const cdc_row_parts_t *parts, uint64_t seed)
{
    content_hash_t c = {.k = parts->k};
    cdc__hash_init(&c.hash, seed);
    cdc__row_parts_each(parts, 0, parts->rows, hash_run, &c);
    cdc__hash_update(&c.hash, c.carry, c.held);
    return cdc__hash_final(&c.hash, (uint64_t) parts->rows * (uint64_t) parts->k * sizeof(float));
}

const float *cdc__row_parts_packed(cdc_row_parts_t *parts)
{
    if (!parts->borrowed)
        return parts->part[0];
    if (!parts->packed) {
        size_t count = (size_t) parts->rows * (size_t) parts->k;
        float *copy = malloc(count * sizeof(float));
        if (!copy) {
            cdc__fail(CDC_ENOMEM, "a contiguous copy of borrowed weights, %zu floats", count);
            return NULL;
        }
        cdc__row_parts_copy(parts, 0, parts->rows, copy);
        CDC_LOG_INFOF("borrowed weights (%lld x %lld) copied whole: this call's split or "
                        "layout keeps them contiguous", (long long) parts->rows,
                        (long long) parts->k);
        parts->packed = copy;
    }
    return parts->packed;
}

void cdc__row_parts_close(cdc_row_parts_t *parts)
{
    if (!parts)
        return;
    if (parts->borrowed) {
        pthread_mutex_lock(&parts->lock);
        parts->closed = 1;
        pthread_mutex_unlock(&parts->lock);
    }
    cdc__hold_retire(&parts->hold);
}
