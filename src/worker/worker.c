/* worker.c - the worker daemon's main loop: always answers, applies faults to replies.
 *
 * Two threads. This one owns the transport server: it answers PING at once,
 * hands WEIGHTS and tasks in order to the compute thread (compute.c), and
 * takes the compute thread's replies back, applying this worker's fault
 * schedule to each RESULT: corrupted, dropped, crash, or served by the
 * emulated device (device.h: one task at a time, so a slow or delayed task
 * holds back the ones behind it) and sent when the device is done with it.
 * With a link fault, the WEIGHTS the compute thread cached occupy the
 * device for their transfer too, and barrier PONGs wait behind them.
 * A reply whose request the coordinator CANCELled is not sent: a held one
 * leaves the device queue and frees the device. A hang fault stops this
 * loop from reading or answering anything for a while. Each RESULT's work
 * (flops, and its compute time with what a slow fault adds) is counted here
 * for the PONG status, by the thread that answers heartbeats. No zmq here:
 * the server (transport/server.h) owns the socket. */
#include "worker.h"

#include "admission.h"
#include "announce.h"
#include "blas_backend.h"
#include "clock.h"
#include "compute.h"
#include "device.h"
#include "error.h"
#include "faults.h"
#include "log.h"
#include "peer_tasks.h"
#include "server.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Replies queued per connection beyond one per admitted request: PONGs and
   ERRORs of a peer that is slow to read (the send high-water mark). */
#define CDC_WORKER_REPLY_ROOM 64
/* How long a stopping worker keeps its connections after its GOODBYE. */
#define GOODBYE_GRACE_MS 100.0

/* The main loop's state. */
typedef struct {
    const cdc_worker_options_t *options;
    cdc_server_t *server;
    cdc_announcer_t *announcer; /* --announce: beacons while serving */
    cdc_worker_compute_t *compute;
    cdc_peer_tasks_t *peer_tasks; /* requests each peer has with compute */
    size_t max_task_memory;
    cdc_fault_state_t faults;
    int has_faults;
    int carries_weights; /* a link or disk rule: WEIGHTS (over the link), loads
                            from the store (off its disk) and barrier PONGs
                            on the emulated device too                      */
    double hang_until; /* < 0: not hung; INFINITY: hung for ever */
    cdc_device_t device;   /* with faults: the emulated device's held replies */
    uint64_t cancels_seen; /* the server's CANCEL count at the last sweep */
    int device_pushed;     /* replies queued on the device since that sweep */
    cdc_worker_counters_t counters;
} loop_t;

/* ---- requests ----------------------------------------------------------- */

static void answer_ping(loop_t *loop, const cdc_request_t *request)
{
    cdc_msg_header_t pong;
    cdc__msg_header_init(&pong, CDC_MSG_PONG);
    pong.request_id = cdc__request_msg(request)->header.request_id;
    loop->counters.pings++;
    cdc_payload_t *payload = cdc__worker_compute_status_payload(
        loop->compute, cdc__device_queued(&loop->device)); /* held by the emulated device */
    cdc_reply_t *reply = NULL;
    if (payload && cdc__server_reply_new(loop->server, request, &pong, &payload, &reply) == CDC_OK)
        cdc__server_send(loop->server, &reply);
}

/* ERROR (code, text) to a valid request this worker will not run, sent
   now. Counted by the caller. */
static void refuse(loop_t *loop, const cdc_request_t *request, int code, const char *text)
{
    cdc_reply_t *reply = NULL;
    CDC_LOG_INFOF("worker %d: %s", loop->options->index, text);
    int rc = cdc__server_error_new(loop->server, request, code, text, &reply);
    if (rc == CDC_OK)
        cdc__server_send(loop->server, &reply);
    else if (rc == CDC_ETIMEDOUT)
        loop->counters.over_budget++; /* the peer is not reading */
}

/* The last failure's text without its status's own ("out of memory: "):
   the ERROR's code travels beside it, and a limit is not a lack of memory. */
static const char *detail(int status)
{
    const char *text = cdc_last_error(), *name = cdc_strerror(status);
    size_t len = strlen(name);
    return strncmp(text, name, len) == 0 && strncmp(text + len, ": ", 2) == 0 ? text + len + 2
                                                                              : text;
}

/* WEIGHTS or a task to the compute thread, unless a limit refuses it (then
   answered with ERROR here, nothing queued). Takes the request over. */
static void submit(loop_t *loop, cdc_request_t *request)
{
    int rc = cdc__worker_admit(cdc__request_msg(request), loop->max_task_memory);
    if (rc == CDC_OK)
        rc = cdc__peer_tasks_acquire(loop->peer_tasks, cdc__request_peer(request));
    if (rc != CDC_OK) {
        char context[64];
        snprintf(context, sizeof context, "%s refused",
                 cdc__msg_type_name(cdc__request_msg(request)->header.type));
        cdc__fail_within(rc, context); /* "TASK_CONV refused: <the limit>" */
        if (rc == CDC_EDIM)
            loop->counters.invalid++; /* geometry no coordinator sends */
        else
            loop->counters.refused++;
        refuse(loop, request, rc, detail(rc));
        cdc__request_destroy(&request);
        return;
    }
    cdc_peer_identity_t peer = *cdc__request_peer(request);
    if (cdc__worker_compute_submit(loop->compute, request) != CDC_OK) {
        CDC_LOG_WARNF("worker: %s", cdc_last_error());
        cdc__peer_tasks_release(loop->peer_tasks, &peer); /* it was destroyed */
    }
}

/* A valid request: PING answered here; WEIGHTS and tasks to the compute
   thread; anything else refused. Takes the request over. */
static void handle_request(loop_t *loop, cdc_request_t *request)
{
    int type = cdc__request_msg(request)->header.type;
    switch (type) {
    case CDC_MSG_PING:
        if (cdc__request_msg(request)->header.shard == CDC_PING_BARRIER) {
            submit(loop, request); /* answered by the compute thread, in line */
            return;
        }
        answer_ping(loop, request);
        break;
    case CDC_MSG_WEIGHTS:
    case CDC_MSG_STORED:
    case CDC_MSG_TASK_GEMM:
    case CDC_MSG_TASK_CONV:
        submit(loop, request);
        return; /* submitted, or refused and destroyed */
    default: {
        char text[128];
        snprintf(text, sizeof text, "a worker does not accept %s messages",
                 cdc__msg_type_name(type));
        loop->counters.invalid++;
        CDC_LOG_INFOF("worker: invalid message: %s", text);
        cdc__server_reject(loop->server, request, CDC_EPROTO, text);
        break;
    }
    }
    cdc__request_destroy(&request);
}

static void sweep_cancelled(loop_t *loop);

/* Every message waiting on the socket, unless a hang fault starts. A CANCEL
   read on the way takes effect on the device before the next request is
   handled (so a task that follows it does not queue behind what it
   cancels). */
static void read_requests(loop_t *loop, volatile sig_atomic_t *stop)
{
    while (loop->hang_until < 0 && !*stop) {
        cdc_request_t *request = NULL;
        int rc = cdc__server_recv(loop->server, &request);
        sweep_cancelled(loop);
        if (rc == CDC_ETIMEDOUT)
            return;
        if (rc == CDC_EPROTO) {
            loop->counters.invalid++; /* answered with ERROR by the server */
            CDC_LOG_INFOF("worker: invalid message: %s", cdc_last_error());
        } else if (rc == CDC_OK) {
            handle_request(loop, request);
        } else {
            CDC_LOG_WARNF("worker: %s", cdc_last_error());
            return;
        }
    }
}

/* ---- replies and faults ------------------------------------------------- */

/* Send every reply the emulated device is done with; returns ms until the
   next one is due (or `cap` when none is sooner). */
static long flush_due(loop_t *loop, long cap)
{
    double now = cdc__clock_ms();
    void *item;
    while (cdc__device_pop_due(&loop->device, now, &item))
        if (item) {
            cdc_reply_t *reply = item;
            cdc__server_send(loop->server, &reply);
        }
    double next = cdc__device_next_due(&loop->device);
    if (next > now + (double) cap)
        return cap;
    long wait = (long) ceil(next - now);
    return wait < 0 ? 0 : wait;
}

static int held_cancelled(void *item, void *ctx)
{
    loop_t *loop = ctx;
    /* A RESULT only: a barrier PONG's request id is a token, not a call. */
    return cdc__reply_header(item)->type == CDC_MSG_RESULT &&
           cdc__server_reply_cancelled(loop->server, item);
}

static void drop_cancelled(void *item, void *ctx)
{
    loop_t *loop = ctx;
    cdc_reply_t *reply = item;
    loop->counters.cancelled++; /* computed, held, and nobody wants it */
    cdc__reply_destroy(&reply);
}

/* Held replies whose request was cancelled leave the device queue (one not
   started is removed, one in service frees the device now). Only when a
   CANCEL came in or a reply was queued since the last sweep. */
static void sweep_cancelled(loop_t *loop)
{
    cdc_server_counters_t server;
    cdc__server_counters(loop->server, &server);
    if (server.cancels == loop->cancels_seen && !loop->device_pushed)
        return;
    loop->cancels_seen = server.cancels;
    loop->device_pushed = 0;
    cdc__device_cancel(&loop->device, cdc__clock_ms(), held_cancelled, drop_cancelled, loop);
}

static void corrupt(cdc_payload_t *payload, uint64_t at)
{
    size_t count = cdc__payload_size(payload) / sizeof(float);
    float *data = cdc__payload_data(payload), value;
    size_t i = (size_t) (at % count);
    memcpy(&value, data + i, sizeof value);
    value += 1.0f + fabsf(value); /* changes any finite value by >= 1 */
    memcpy(data + i, &value, sizeof value);
}

/* The fault decision's hang: the main loop stops for hang_ms (0: for
   ever). Returns when the task's emulated service may start (-1: never). */
static double start_hang(loop_t *loop, const cdc_fault_decision_t *d, double now)
{
    loop->counters.hangs++;
    loop->hang_until = d->hang_ms == 0 ? INFINITY : now + d->hang_ms;
    CDC_LOG_INFOF("worker %d: hang fault for %.0f ms", loop->options->index, d->hang_ms);
    return d->hang_ms == 0 ? -1.0 : loop->hang_until;
}

/* This task's fault decision applied to its RESULT, which is taken: queued
   on the emulated device (its service: the real compute plus what slow,
   delay and link's transfer add; link's latency added to its departure
   only), destroyed (hung for ever), or kept as a device slot with nothing
   to send (drop: the device did the work, the reply is lost). May not
   return (crash). Returns the compute time a slow fault added. */
static double emulate(loop_t *loop, cdc_worker_reply_t *out, double now)
{
    cdc_payload_t *payload = cdc__reply_payload(out->reply);
    cdc_fault_decision_t d;
    if (out->part > 0) /* a streamed task's later part: its task's faults were decided */
        cdc__fault_part(&loop->faults, out->compute_ms, out->flops, out->bytes_read,
                        cdc__payload_size(payload),
                        &d);
    else
        cdc__fault_next(&loop->faults, out->compute_ms, out->flops, out->bytes_read,
                        (size_t) out->bytes_in,
                        cdc__payload_size(payload), &d);
    if (d.crash) {
        fprintf(stderr, "cdcgemm-worker %d: crash fault at task %ld: exiting\n",
                loop->options->index, loop->faults.calls - 1);
        _exit(3);
    }
    if (d.slow_onset) /* when the device changed, for the runs that measure re-planning */
        fprintf(stderr, "cdcgemm-worker %d: slow fault of task %ld on: the device is slower\n",
                loop->options->index, loop->faults.calls - 1);
    double ready = out->started_ms;
    if (d.hang_ms >= 0 && (ready = start_hang(loop, &d, now)) < 0) {
        cdc__reply_destroy(&out->reply); /* hung for ever: this reply never leaves */
        return d.slow_ms;
    }
    if (d.drop) {
        loop->counters.dropped++;
        cdc__reply_destroy(&out->reply);
    } else if (d.corrupt) {
        corrupt(payload, d.corrupt_at);
        loop->counters.corrupted++;
    }
    if (d.delay_ms > 0)
        loop->counters.delayed++;
    if (cdc__device_push(&loop->device, ready, out->compute_ms + d.delay_ms - d.latency_ms,
                         d.latency_ms, out->reply) != CDC_OK)
        return d.slow_ms; /* out of memory: sent now (or, dropped, not at all) */
    out->reply = NULL;
    loop->device_pushed = 1;
    return d.slow_ms;
}

/* A WEIGHTS the compute thread cached (its notice), over the emulated
   link: its transfer occupies the device from when it was taken in, so the
   tasks and barrier PONGs behind it wait; its latency (one way) is
   propagation. Nothing to send: the entry only holds the device. */
static void carry_weights(loop_t *loop, const cdc_worker_reply_t *notice)
{
    double transfer_ms, latency_ms;
    cdc__fault_link(&loop->faults, (size_t) notice->bytes_in, &transfer_ms, &latency_ms);
    if (notice->bytes_stored) { /* read from the device's disk, not its link */
        transfer_ms = cdc__fault_disk_ms(&loop->faults, (size_t) notice->bytes_stored);
        latency_ms = 0.0;
    }
    if (cdc__device_push(&loop->device, notice->started_ms, transfer_ms, latency_ms, NULL) !=
        CDC_OK)
        CDC_LOG_WARNF("worker: %s", cdc_last_error()); /* not emulated, no harm */
}

/* A barrier PONG over the emulated link: it leaves once the device is done
   with everything before it (the WEIGHTS it acknowledges), after its bytes'
   transfer and the PING's and its own latency (2 lat), as a call's reply. */
static void hold_barrier(loop_t *loop, cdc_worker_reply_t *out)
{
    const cdc_payload_t *payload = cdc__reply_payload(out->reply);
    double transfer_ms, latency_ms;
    cdc__fault_link(&loop->faults, payload ? cdc__payload_size(payload) : 0, &transfer_ms,
                    &latency_ms);
    if (cdc__device_push(&loop->device, cdc__clock_ms(), transfer_ms, 2.0 * latency_ms,
                         out->reply) == CDC_OK)
        out->reply = NULL; /* else (out of memory) sent now */
}

/* A reply from the compute thread: sent now (no faults; not a RESULT),
   through the emulated device (faults; with a link, barrier PONGs too), or
   not at all (cancelled). A WEIGHTS notice occupies the link. */
static void handle_reply(loop_t *loop, cdc_worker_reply_t *out)
{
    if (!out->reply) {
        carry_weights(loop, out);
        free(out);
        return;
    }
    const cdc_msg_header_t *h = cdc__reply_header(out->reply);
    int result = h->type == CDC_MSG_RESULT && cdc__reply_payload(out->reply);
    double busy_ms = out->compute_ms; /* computed, whether it is sent or not */
    if (result && loop->has_faults) {
        busy_ms += emulate(loop, out, cdc__clock_ms());
    } else if (result && cdc__server_reply_cancelled(loop->server, out->reply)) {
        loop->counters.cancelled++; /* computed, and nobody wants it now */
        cdc__reply_destroy(&out->reply);
    } else if (loop->carries_weights && h->type == CDC_MSG_PONG && h->shard == CDC_PING_BARRIER) {
        hold_barrier(loop, out);
    }
    if (result)
        cdc__worker_compute_count_work(loop->compute, out->flops, out->bytes_read, busy_ms);
    if (out->reply)
        cdc__server_send(loop->server, &out->reply);
    free(out);
}

/* Replies first: they are what the coordinator waits for. */
static void send_replies(loop_t *loop)
{
    cdc_worker_reply_t *out;
    while (loop->hang_until < 0 && (out = cdc__worker_compute_next(loop->compute)))
        handle_reply(loop, out);
}

/* ---- the loop ----------------------------------------------------------- */

static int parent_gone(const cdc_worker_options_t *options)
{
    return options->parent_pid > 0 && (long) getppid() != options->parent_pid;
}

/* While hung: read nothing, answer nothing; the socket stays open. Returns
   1 while the hang lasts (after sleeping a slice). */
static int still_hung(loop_t *loop)
{
    if (loop->hang_until < 0)
        return 0;
    double left = loop->hang_until - cdc__clock_ms();
    if (left > 0) {
        cdc__sleep_ms(left < 50 ? left : 50);
        return 1;
    }
    loop->hang_until = -1.0;
    return 0;
}

/* SIGHUP: the allowed coordinators' certificates are read again. */
static void reload_if_asked(loop_t *loop)
{
    volatile sig_atomic_t *reload = loop->options->reload;
    if (!reload || !*reload)
        return;
    *reload = 0;
    if (cdc__server_reload_allowed(loop->server) == CDC_OK)
        CDC_LOG_INFOF("worker %d: allowed certificates re-read from %s", loop->options->index,
                      loop->options->curve_allow ? loop->options->curve_allow : "(none)");
    else
        CDC_LOG_WARNF("worker %d: %s", loop->options->index, cdc_last_error());
}

static int serve(loop_t *loop, volatile sig_atomic_t *stop)
{
    const cdc_worker_options_t *options = loop->options;
    while (!*stop) {
        reload_if_asked(loop);
        if (parent_gone(options)) {
            CDC_LOG_WARNF("worker %d: coordinator %ld is gone; exiting", options->index,
                          options->parent_pid);
            return CDC_OK;
        }
        if (still_hung(loop))
            continue;
        sweep_cancelled(loop);
        long timeout = flush_due(loop, 100);
        int rc = cdc__server_wait(loop->server, timeout);
        if (rc == CDC_ETRANSPORT)
            return rc;
        send_replies(loop);
        read_requests(loop, stop);
    }
    return CDC_OK;
}

static int loop_open(loop_t *loop, const cdc_worker_options_t *options)
{
    memset(loop, 0, sizeof *loop);
    loop->options = options;
    loop->hang_until = -1.0;
    cdc__device_init(&loop->device);
    cdc_fault_plan_t plan;
    int rc = cdc__fault_plan_parse(options->faults ? options->faults : "", &plan);
    if (rc != CDC_OK)
        return rc;
    cdc__fault_state_init(&loop->faults, &plan, options->index);
    loop->has_faults = loop->faults.plan.count > 0; /* rules for this worker */
    cdc__fault_state_set_incarnation(&loop->faults, options->incarnation);
    double unused_ms[2];
    loop->carries_weights = cdc__fault_link(&loop->faults, 0, &unused_ms[0], &unused_ms[1]) ||
                            cdc__fault_disk_ms(&loop->faults, 1) > 0.0;
    if ((rc = cdc__blas_ready()) != CDC_OK)
        return rc;
    cdc__blas_set_threads(options->threads > 0 ? options->threads : 1);
    loop->max_task_memory = cdc__worker_task_memory_limit(options);
    size_t max_peer_tasks = options->max_peer_tasks ? options->max_peer_tasks
                                                    : CDC_WORKER_DEFAULT_PEER_TASKS;
    if ((rc = cdc__peer_tasks_new(max_peer_tasks, &loop->peer_tasks)) != CDC_OK)
        return rc;
    cdc_server_options_t server_options;
    cdc__server_options_init(&server_options);
    server_options.bind = options->bind;
    server_options.curve_secret = options->curve_secret;
    server_options.curve_allow = options->curve_allow;
    /* Every request a peer may have admitted gets one reply; the rest of the
       room is for PONGs and ERRORs. Beyond it the peer is not reading. */
    server_options.send_hwm = (int) (max_peer_tasks < 1 << 20 ? max_peer_tasks : 1 << 20) +
                              CDC_WORKER_REPLY_ROOM;
    if ((rc = cdc__server_new(&server_options, &loop->server)) != CDC_OK)
        return rc;
    /* Once bound, so a coordinator that hears the beacon finds the socket. */
    if (options->announce && (rc = cdc__worker_announce(options->bind, options->curve_secret,
                                                        options->announce,
                                                        &loop->announcer)) != CDC_OK)
        return rc;
    cdc_fault_misreport_t lie;
    cdc__fault_misreport(&loop->faults, &lie);
    return cdc__worker_compute_start(loop->server, options, loop->peer_tasks,
                                     loop->carries_weights, &lie, &loop->compute);
}

/* The socket file of an ipc:// endpoint we bound (libzmq leaves it), and
   for a spawned worker (parent_pid) its directory, which only the last
   worker out finds empty: a SIGKILLed coordinator leaves nothing behind. */
static void remove_ipc_endpoint(const cdc_worker_options_t *options)
{
    const char *path = options->bind;
    if (strncmp(path, "ipc://", 6) != 0 || path[6] == '@' || path[6] == '\0')
        return; /* not a file ('@': the abstract namespace) */
    path += 6;
    unlink(path);
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (options->parent_pid <= 0 || !slash || slash == path ||
        (size_t) (slash - path) >= sizeof dir)
        return;
    memcpy(dir, path, (size_t) (slash - path));
    dir[slash - path] = '\0';
    rmdir(dir); /* fails (ENOTEMPTY) while other workers' sockets are there */
}

static void destroy_held(void *item, void *ctx)
{
    (void) ctx;
    cdc_reply_t *reply = item;
    cdc__reply_destroy(&reply);
}

static void loop_close(loop_t *loop, int by_parent, cdc_worker_counters_t *counters)
{
    /* Stop: the current task finishes and its reply goes out; the queue is
       dropped (finding 10 of issue 9: 23 queued tasks all ran after SIGTERM). */
    cdc__announcer_destroy(&loop->announcer); /* a stopping worker is not to be found */
    /* Goodbye first: finishing the current task can take longer than the
       coordinator's 300 ms silence verdict, and it must not count a death
       (it decodes the shards this worker will not send). */
    double goodbye_at = cdc__clock_ms();
    if (loop->server)
        cdc__server_goodbye(loop->server);
    cdc__worker_compute_finish(loop->compute);
    if (loop->compute && loop->server) {
        send_replies(loop);
        flush_due(loop, 0); /* what the emulated device is done with goes too */
    }
    cdc__worker_compute_stop(&loop->compute, &loop->counters);
    cdc__device_drain(&loop->device, destroy_held, NULL); /* held replies are not sent */
    cdc__device_release(&loop->device);
    if (loop->server) {
        cdc_server_counters_t server;
        cdc__server_counters(loop->server, &server);
        loop->counters.messages = server.received;
        loop->counters.replies_dropped = server.send_failures;
    }
    cdc__peer_tasks_destroy(&loop->peer_tasks);
    int bound = loop->server != NULL;
    /* Keep the connections open a moment after the GOODBYE: a coordinator's
       DEALER (ZMQ_IMMEDIATE) drops unread messages when its connection
       closes, so closing at once could lose the GOODBYE before its
       heartbeat thread, which wakes on it within a millisecond, reads it. */
    double linger_left = GOODBYE_GRACE_MS - (cdc__clock_ms() - goodbye_at);
    if (bound && linger_left > 0 && !by_parent)
        cdc__sleep_ms((long) linger_left);
    cdc__server_destroy(&loop->server);
    if (bound)
        remove_ipc_endpoint(loop->options);
    if (counters)
        *counters = loop->counters;
}

int cdc__worker_run(const cdc_worker_options_t *options, volatile sig_atomic_t *stop,
                    cdc_worker_counters_t *counters)
{
    loop_t loop;
    int rc = loop_open(&loop, options);
    if (rc == CDC_OK) {
        CDC_LOG_INFOF("worker %d: serving on %s", options->index, options->bind);
        rc = serve(&loop, stop);
    }
    loop_close(&loop, *stop == CDC_WORKER_STOP_BY_PARENT, counters);
    return rc;
}
