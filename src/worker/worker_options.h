/* worker_options.h - what a worker is started with and what it counts: the
   types the serving loop (worker.h) and its compute thread (compute.h) both
   use, apart, so neither includes the other's header. */
#ifndef CDC_WORKER_OPTIONS_H_INCLUDED
#define CDC_WORKER_OPTIONS_H_INCLUDED

#include "discovery.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *bind;    /* ZeroMQ endpoint to bind (tcp://HOST:PORT, ipc://PATH) */
    size_t max_memory;   /* bound on the weight cache's bytes, its overhead
                            included; LRU eviction                            */
    size_t max_entries;  /* bound on cached matrices (0: 65536)               */
    size_t max_peer_memory; /* bound on one peer's cached weights (0: all of
                            max_memory); docs/security.md                     */
    size_t max_task_memory; /* bound on one task's working set: operands,
                            result, im2col (0: 512 MiB)                       */
    size_t max_peer_tasks;  /* bound on one peer's requests queued or running
                            (0: 64)                                           */
    const char *store;   /* directory of the weight store (weight_store.h);
                            NULL: none                                        */
    size_t store_max;    /* bound on the store's bytes on disk (0: max_memory) */
    int threads;         /* OpenBLAS threads (>= 1)                           */
    const char *faults;  /* CDCGEMM_FAULTS schedule applied to this worker; NULL
                            or "" = none (docs/faults.md)                     */
    int index;           /* this worker's index in the worker list (faults)  */
    int incarnation;     /* > 0: a respawn of this slot (the supervisor's):
                            one-shot fault rules do not fire again           */
    long parent_pid;     /* > 0: exit when getppid() is no longer this (the
                            coordinator that spawned it died)                 */
    const char *curve_secret; /* CURVE: this worker's secret certificate file;
                                 NULL: plaintext (transport/server.h)        */
    const char *curve_allow;  /* CURVE: directory of allowed coordinators'
                                 public certificates                          */
    const cdc_discovery_where_t *announce; /* non-NULL: broadcast this worker's
                                 endpoint and key there once bound
                                 (--announce; needs CURVE and tcp)          */
    volatile sig_atomic_t *reload; /* may be NULL; when it reads nonzero the
                                 loop re-reads curve_allow and clears it
                                 (cdcgemm-worker sets it on SIGHUP)           */
} cdc_worker_options_t;

/* What a worker did; printed at exit and used by tests. */
typedef struct {
    uint64_t messages;        /* messages received                           */
    uint64_t tasks;           /* GEMM/conv tasks computed                    */
    uint64_t weights_cached;  /* WEIGHTS messages accepted                   */
    uint64_t misses;          /* MISS replies (task named an unknown key, or a
                                 STORED one the store lacks)                   */
    uint64_t stored_loaded;   /* matrices a STORED loaded from the store      */
    uint64_t invalid;         /* invalid messages answered with ERROR        */
    uint64_t evictions;       /* cache entries evicted for memory            */
    uint64_t pings;           /* PING answered                               */
    uint64_t delayed;         /* results sent late by a delay/slow/link fault */
    uint64_t dropped;         /* results never sent (drop fault)             */
    uint64_t corrupted;       /* results sent with one element changed       */
    uint64_t hangs;           /* hang faults started                         */
    uint64_t cancelled;       /* tasks skipped: their request was cancelled  */
    uint64_t over_budget;     /* replies dropped: the peer's budget was full */
    uint64_t replies_dropped; /* replies the socket refused: the peer is not
                                 reading (send high-water mark) or is gone    */
    uint64_t refused;         /* requests refused by a limit: --max-task-memory,
                                 --max-peer-tasks                             */
    uint64_t dropped_at_exit; /* queued requests not run: stop (SIGTERM)     */
} cdc_worker_counters_t;

/* Defaults: no endpoint, 1 GiB cache of at most 65536 matrices (a peer may
   use all of it), tasks of up to 512 MiB, 64 requests per peer, 1 thread. */
void cdc__worker_options_init(cdc_worker_options_t *options);

/* The --max-task-memory options apply: the default for 0. */
size_t cdc__worker_task_memory_limit(const cdc_worker_options_t *options);

/* into += from, counter by counter. */
void cdc__worker_counters_add(cdc_worker_counters_t *into, const cdc_worker_counters_t *from);

#endif
