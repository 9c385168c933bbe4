/* compute.h - the worker's compute thread: weight cache and shard tasks, off the socket thread. */
#ifndef CDC_WORKER_COMPUTE_H_INCLUDED
#define CDC_WORKER_COMPUTE_H_INCLUDED

#include "faults.h"
#include "peer_tasks.h"
#include "server.h"
#include "status.h"
#include "worker_options.h"

#include <stdint.h>

/* A reply from the compute thread with what the fault model needs. With
   report_weights (cdc__worker_compute_start), reply NULL is the notice of a
   WEIGHTS just cached: bytes_in its bytes, started_ms when it was taken in
   (for the link emulation; nothing to send), or of a matrix loaded from the
   weight store: bytes_stored its bytes (for the disk emulation). */
typedef struct {
    cdc_reply_t *reply;
    double compute_ms; /* time the task's GEMM took (0: not a result)  */
    double flops;      /* 2·rows·k·cols                                 */
    double bytes_read; /* operand bytes the GEMM streams: (rows + cols)·k
                          floats (a conv's: its filters and im2col matrix) */
    uint64_t bytes_in; /* request payload bytes                         */
    double started_ms; /* clock (cdc__clock_ms) when the GEMM started   */
    int part;          /* a streamed task's part (0: its first, or whole) */
    uint64_t bytes_stored; /* a notice: bytes read from the weight store */
} cdc_worker_reply_t;

typedef struct cdc_worker_compute cdc_worker_compute_t;

/* Start the compute thread with an empty weight cache bounded by
   options->max_memory, options->max_entries and, per peer scope,
   options->max_peer_memory. Replies are built against server (thread-safe
   calls only) and woken into its wait. Each request it is done with (run,
   skipped or dropped) is released from peer_tasks (may be NULL), where the
   main loop counted it. With report_weights, every WEIGHTS cached is also
   posted among the replies, in order, as a notice (cdc_worker_reply_t with
   reply NULL). lie (NULL: none): what a misreport fault makes every PONG
   claim (faults.h): its max_memory, work counted as the claimed rate times
   the busy time, a new instance each time. Caller owns *compute_p and must
   stop it with cdc__worker_compute_stop. */
int cdc__worker_compute_start(cdc_server_t *server, const cdc_worker_options_t *options,
                              cdc_peer_tasks_t *peer_tasks, int report_weights,
                              const cdc_fault_misreport_t *lie,
                              cdc_worker_compute_t **compute_p);

/* Queue a WEIGHTS or task request (taken over) for the compute thread, which
   handles them in order. Returns CDC_ENOMEM (request destroyed) if it
   cannot be queued. */
int cdc__worker_compute_submit(cdc_worker_compute_t *self, cdc_request_t *request);

/* What a PONG reports: the cache, tasks computed, requests queued or
   running, the work counted (cdc__worker_compute_count_work). Thread-safe
   (the socket thread asks while the compute thread works); the figures
   may be one request old. */
void cdc__worker_compute_status(cdc_worker_compute_t *self, cdc_status_report_t *status);

/* Count a task's work into what PONGs report: flops (2*rows*k*cols), the
   operand bytes its GEMM streamed (bytes_read: whether it is thin,
   status.h) and the time the (emulated) device computed it, busy_ms: the
   real compute plus a slow fault's extra, not link time. Called by the
   socket thread as it takes each RESULT, so a heartbeat PONG (built there
   too) never sees a task's flops without its time. Thread-safe. */
void cdc__worker_compute_count_work(cdc_worker_compute_t *self, double flops, double bytes_read,
                                    double busy_ms);

/* A PONG's status text (status.h) as a payload: the figures above, with
   held (replies the emulated device still holds) added to the load. Used
   by every PONG, heartbeat or barrier. Thread-safe; NULL when out of
   memory. */
cdc_payload_t *cdc__worker_compute_status_payload(cdc_worker_compute_t *self, uint64_t held);

/* The next reply waiting, or NULL. Caller owns it (the reply inside must be
   sent or destroyed, the envelope freed with free()). */
cdc_worker_reply_t *cdc__worker_compute_next(cdc_worker_compute_t *self);

/* Stop taking work and join the thread: the request being computed
   finishes (its reply stays queued for cdc__worker_compute_next); those still
   queued are dropped, counted in dropped_at_exit. Accepts NULL; a second
   call does nothing. */
void cdc__worker_compute_finish(cdc_worker_compute_t *self);

/* Finish (above) if not done yet, release the cache, requests and replies still
   queued; add its counters to *counters; accepts NULL and *NULL; nulls
   *compute_p. */
void cdc__worker_compute_stop(cdc_worker_compute_t **compute_p,
                              cdc_worker_counters_t *counters);

#endif
