/* worker.h - the worker daemon's serving loop (used by cdcgemm-worker). */
#ifndef CDC_WORKER_H_INCLUDED
#define CDC_WORKER_H_INCLUDED

#include "worker_options.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>


/* Bind options->bind (a transport server, transport/server.h) and serve
   until *stop becomes nonzero (checked at least every 100 ms, and at once on
   EINTR). The calling thread answers PING and sends replies; shard tasks and
   weights go in order to a compute thread (which owns the weight cache), so
   heartbeats are answered while a long shard computes. Invalid messages get
   an ERROR reply and are counted; the loop keeps serving. A task over
   max_task_memory, conv padding not smaller than the dilated kernel span,
   and a request beyond a peer's max_peer_tasks get an ERROR naming the
   limit and are never queued. Faults from options->faults are applied to results as
   real behaviour (crash: _exit(3) before replying; hang; delayed, dropped or
   corrupted replies). Returns CDC_OK after a clean stop (or when the parent
   died), or a status when the socket could not be bound or the fault
   schedule is invalid (detail in cdc_last_error). At a stop the task being
   computed finishes and its reply is sent, queued requests are dropped
   (dropped_at_exit), an ipc:// socket file is removed, and with parent_pid
   its directory too when empty. counters may be NULL. *stop set to
   CDC_WORKER_STOP_BY_PARENT (the spawning coordinator itself asked, after
   closing its sockets) skips the linger that lets coordinators read the
   GOODBYE: nobody is left to read it.
   Blocks the thread. */
#define CDC_WORKER_STOP_BY_PARENT 2
int cdc__worker_run(const cdc_worker_options_t *options, volatile sig_atomic_t *stop,
                    cdc_worker_counters_t *counters);

#endif
