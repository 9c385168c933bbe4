/* weight_store.h - the worker's weight matrices kept on its device's disk.
 *
 * A device that restarts keeps its storage: a worker started with --store
 * DIR writes each matrix it caches into DIR, and the process that replaces
 * it (a crash, a respawn, a reboot) loads them back when a coordinator asks
 * (protocol.h, CDC_MSG_STORED) instead of receiving them again over its
 * link. One file per matrix, named by its cache key (scope and content):
 * a 64-byte header (magic, key, shape, a hash of the floats) and the floats.
 * Written to a temporary name and renamed, so a file under its final name
 * was written whole; its floats are checked against the hash when loaded,
 * so a file the disk damaged is removed, never served. Bounded by bytes:
 * the oldest files go first.
 *
 * Not thread-safe: the compute thread owns it, as it owns the cache. */
#ifndef CDC_WEIGHT_STORE_H_INCLUDED
#define CDC_WEIGHT_STORE_H_INCLUDED

#include "weight_cache.h"

#include <stddef.h>
#include <stdint.h>

#define CDC_WEIGHT_STORE_HEADER 64 /* bytes before the floats in a file */

typedef struct {
    size_t count;        /* files held                                       */
    uint64_t bytes;      /* their size on disk                               */
    uint64_t saved;      /* files written by this process                    */
    uint64_t loaded;     /* matrices loaded and checked                      */
    uint64_t bytes_read; /* their floats                                     */
    uint64_t damaged;    /* files removed: wrong size, header or hash        */
    uint64_t evicted;    /* files removed to stay within max_bytes           */
    uint64_t failed;     /* writes that failed (full disk, permissions)      */
} cdc_weight_store_stats_t;

typedef struct cdc_weight_store cdc_weight_store_t;

/* Open the store in dir (created, mode 0700, when missing; its parent must
   exist), bounded by max_bytes (> 0). Lists the files already there
   (contents are checked only when loaded), removes unfinished temporary
   ones, and evicts the oldest while over max_bytes. CDC_EINVAL naming dir
   when it cannot be created or read. Caller owns *store_p. */
int cdc__weight_store_open(const char *dir, uint64_t max_bytes, cdc_weight_store_t **store_p);

/* Accepts NULL and *NULL; nulls *store_p. Files stay on disk. */
void cdc__weight_store_close(cdc_weight_store_t **store_p);

/* Whether a file for key is listed (not yet checked). */
int cdc__weight_store_has(const cdc_weight_store_t *self, cdc_weight_key_t key);

/* Write the rows x k floats of data under key, unless a file for key is
   there already (a key names content). A matrix larger than max_bytes is
   not stored. A failed write (full disk) is logged and counted, never
   fatal: the store only saves a transfer. CDC_OK, or the failure's status. */
int cdc__weight_store_save(cdc_weight_store_t *self, cdc_weight_key_t key, int64_t rows,
                           int64_t k, const float *data);

/* Load key's matrix, which must be rows x k, into *value: the file mapped
   read-only (value->release unmaps it; alloc_bytes is the mapping's size),
   its floats checked against the hash. CDC_OK with value->data NULL when
   there is none, or the file was damaged (then it is removed and counted);
   CDC_ENOMEM when it cannot be mapped. */
int cdc__weight_store_load(cdc_weight_store_t *self, cdc_weight_key_t key, int64_t rows,
                           int64_t k, cdc_weight_value_t *value);

void cdc__weight_store_stats(const cdc_weight_store_t *self, cdc_weight_store_stats_t *stats);

#endif
