/* client_call.c - one call: tasks placed on workers, sent, their results
 * collected until they suffice, the rest cancelled.
 *
 * A call (client_call_t) tracks each task as IDLE (not sent, or given up),
 * PENDING (sent, no answer yet) or DONE (result copied), with pending and
 * done counting the last two; it waits only while pending > 0. Requests get
 * growing ids, so a reply with an older id is a late answer to an earlier
 * call and is dropped, never mistaken for this call's. A call begins with
 * the restore pass (client_restore.c), under the call lock it holds
 * throughout.
 *
 * Profile: an observer (cdc__client_observe) hears every heartbeat PONG (the
 * round trip of the latest PING and the worker's status: busy_us, flops,
 * memory; client_heartbeat.c) and, at the end of each call, each worker's
 * completed tasks (elapsed, flops, bytes; call_observe here): the
 * coordinator's live profile of its workers (src/coordinator/profile/profile.h) is
 * made of these. */
#include "client_internal.h"

#include "clock.h"
#include "error.h"
#include "log.h"
#include "placement.h"
#include "slots.h"
#include "wire.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#define MAX_MISS_RETRIES 2
#define LIVENESS_SLICE_MS 5       /* a waiting call re-reads liveness this often */

typedef enum { TASK_IDLE, TASK_PENDING, TASK_DONE } task_state_t;

/* A task's operands' wire keys (0: sent inline), computed once per call. */
typedef struct {
    uint64_t a, bt;
} task_keys_t;

static task_keys_t task_keys(const cdc_shard_task_t *task, int needed)
{
    task_keys_t keys = {0, 0};
    uint32_t sample[CDC_OPERAND_SAMPLE];
    /* A whole operand's key names no shard (task.h a_whole). */
    if (task->a_key)
        keys.a = cdc__client_wire_key(task->a_key, task->a_whole ? -1 : task->shard,
                                      task->a_whole ? 0 : needed, task->a_rows, task->k,
                                      cdc__operand_sample_of(task->a, task->a_source,
                                                             task->a_rows, task->k, sample));
    if (task->kind == CDC_TASK_GEMM && task->bt_key) {
        cdc__operand_sample(task->bt, task->cols, task->k, sample);
        keys.bt = cdc__client_wire_key(task->bt_key, task->bt_whole ? -1 : task->shard,
                                       task->bt_whole ? 0 : needed, task->cols, task->k,
                                       sample);
    }
    return keys;
}

/* A task's header: its sizes, and its operands' keys where they are cached. */
static void task_header(const cdc_shard_task_t *task, task_keys_t keys, uint64_t request_id,
                        cdc_msg_header_t *h)
{
    int is_conv = task->kind == CDC_TASK_CONV;
    cdc__msg_header_init(h, is_conv ? CDC_MSG_TASK_CONV : CDC_MSG_TASK_GEMM);
    h->request_id = request_id;
    h->shard = task->shard;
    h->rows = task->a_rows;
    h->k = task->k;
    h->cols = task->cols;
    if (cdc_task_parts(task) > 1) { /* streamed: the lead rows first, then parts */
        h->lead_rows = task->lead_rows;
        h->part_rows = task->part_rows;
    }
    h->a_key = keys.a;
    if (is_conv) {
        h->batch = task->batch;
        h->geometry = *task->geometry;
    } else {
        h->bt_key = keys.bt;
    }
}

/* Whether worker w said (in its PONGs) that it refuses a task of h's working
   set: then the task is not sent, an erasure like a dead worker's, rather
   than answered with an ERROR a round trip later (a 32-bit device, or one
   started with a small --max-task-memory). Logged once per worker. */
static int task_over_limit(cdc_client_t *self, int w, const cdc_msg_header_t *h)
{
    cdc_task_memory_t memory;
    cdc__task_memory_of_header(h, &memory);
    pthread_mutex_lock(&self->state_lock);
    const heartbeat_peer_t *peer = &self->peers[w];
    uint64_t limit = peer->has_status ? peer->status.max_task_memory : 0;
    pthread_mutex_unlock(&self->state_lock);
    if (limit == 0 || memory.total <= limit)
        return 0;
    if (!(self->task_memory_warned & (UINT64_C(1) << w))) {
        self->task_memory_warned |= UINT64_C(1) << w;
        CDC_LOG_WARNF("worker %d (%s): shard %d needs %llu bytes, over its --max-task-memory "
                      "%llu: not sent (an erasure; oversized_skipped counts them)",
                      w, self->endpoints[w], (int) h->shard,
                      (unsigned long long) memory.total, (unsigned long long) limit);
    }
    self->counters.oversized_skipped++;
    return 1;
}

/* Send the task whose header is h to worker w: its cached operands' weights
   first where w lacks them, then the message with the inline ones. */
static int send_task(cdc_client_t *self, int w, const cdc_shard_task_t *task,
                     const cdc_msg_header_t *h)
{
    cdc_frame_t payloads[2] = {{NULL, 0}, {NULL, 0}};
    int rc;
    if (h->a_key) {
        cdc_slot_weight_t a = {h->a_key, task->a_rows, task->k, task->a, task->a_hold, 0,
                               task->a_source};
        if ((rc = cdc__client_ensure_weights(self, w, &a)))
            return rc;
    } else {
        payloads[0] = (cdc_frame_t){task->a, (size_t) task->a_rows * (size_t) task->k * 4};
    }
    if (task->kind == CDC_TASK_CONV) {
        const cdc_conv_geometry_t *g = task->geometry;
        payloads[1] = (cdc_frame_t){
            task->input, (size_t) task->batch * (size_t) (g->channels * g->h * g->w) * 4};
    } else if (h->bt_key) {
        cdc_slot_weight_t bt = {h->bt_key, task->cols, task->k, task->bt, task->bt_hold, 0, NULL};
        if ((rc = cdc__client_ensure_weights(self, w, &bt)))
            return rc;
    } else {
        payloads[1] = (cdc_frame_t){task->bt, (size_t) task->cols * (size_t) task->k * 4};
    }
    rc = cdc__wire_send(self->workers[w].socket, NULL, h, payloads, 2, ZMQ_DONTWAIT);
    if (rc != CDC_OK)
        return rc;
    self->counters.tasks_sent++;
    self->counters.bytes_out += payloads[0].size + payloads[1].size;
    return CDC_OK;
}

/* One call in flight: its tasks, where each went and what came back. */
typedef struct {
    cdc_shard_task_t *tasks;
    int count, n, needed;    /* n: the code's data shards (keys, shard < n);
                                needed: the results that suffice          */
    const cdc_call_goal_t *goal; /* streamed tasks: what suffices instead  */
    uint64_t request_id;
    double started_ms;       /* response times for the report             */
    int64_t deadline;        /* ms: timeout_ms after the call began       */
    int64_t wait_deadline;   /* ms: wait_ms after needed results, or -1   */
    int wait_ms, timeout_ms;
    task_state_t state[64];
    task_keys_t keys[64];    /* task t's wire keys                         */
    int worker_of[64];       /* placement: the worker task t went to       */
    int retries[64];         /* MISS re-sends of task t                    */
    uint64_t bytes_out[64];  /* payload bytes its dispatch sent (weights in) */
    uint64_t epoch[64];      /* its worker's weights_epoch once it was sent */
    int pending, done;
    int on_demand;           /* tasks sent only when wanted (task.h)       */
    double data_in_ms;       /* when the latest data result came (from the
                                call's start)                              */
    uint64_t refused;        /* workers an on-demand task could not go to  */
    uint64_t cover_mask;     /* data shards some task covers               */
    uint64_t covered;        /* those with a result in                     */
    uint64_t *arrived;       /* bit t: tasks[t].result came back whole     */
} client_call_t;

static void call_begin(cdc_client_t *self, client_call_t *call, cdc_shard_task_t *tasks,
                       int count, int n, int needed, const cdc_call_goal_t *goal,
                       int wait_ms, int timeout_ms, uint64_t *arrived)
{
    memset(call, 0, sizeof *call);
    int64_t started = (int64_t) cdc__clock_ms();
    call->started_ms = cdc__clock_ms();
    call->deadline = started + timeout_ms;
    call->wait_deadline = -1;
    call->wait_ms = wait_ms;
    call->timeout_ms = timeout_ms;
    call->request_id = ++self->next_request;
    call->tasks = tasks;
    call->count = count;
    call->n = n;
    call->needed = needed;
    call->goal = goal;
    call->arrived = arrived;
    for (int t = 0; t < count; t++) {
        tasks[t].parts_in = 0;
        tasks[t].released = 0;
        call->on_demand += tasks[t].on_demand != 0;
        call->keys[t] = task_keys(&tasks[t], n);
        if (tasks[t].cover >= 0 && tasks[t].cover < 64)
            call->cover_mask |= UINT64_C(1) << tasks[t].cover;
    }
}

/* Slots (placement.h): shard s on its slot's home when it is live and holds
   slot s's weights; else on another ready worker (a spare, or the slot's
   previous home after the homes moved); else an erasure while the
   background restores the home, unless the call could not be decoded
   without it. The homes are read once here: cdc__client_set_homes waits for
   the call lock, so a call in flight keeps its map. */
static void call_place(cdc_client_t *self, client_call_t *call)
{
    uint64_t live, ready[CDC_MAX_WORKERS];
    int shards[64], placed[64], worker_of[64], count = 0;
    cdc__client_live(self, &live);
    cdc__slots_ready(self->slots, ready);
    for (int t = 0; t < call->count; t++) {
        call->worker_of[t] = -1; /* an on-demand task: placed when released */
        if (!call->tasks[t].on_demand) {
            placed[count] = t;
            shards[count++] = call->tasks[t].shard;
        }
    }
    cdc__placement_slots(shards, count, self->count, self->slots->home_of_slot, live, ready,
                         count > call->needed ? count - call->needed : 0, worker_of);
    cdc__slots_placed(self->slots, shards, worker_of, count);
    for (int i = 0; i < count; i++)
        call->worker_of[placed[i]] = worker_of[i];
}

/* Remember the weights each slot used (slots.h), so a worker that returns
   empty can be sent them between calls. */
static void call_note_weights(cdc_client_t *self, const client_call_t *call)
{
    for (int t = 0; t < call->count; t++) {
        const cdc_shard_task_t *task = &call->tasks[t];
        if (task->on_demand)
            continue; /* no slot of the plan: sent where a worker is free */
        int served_by = call->state[t] != TASK_IDLE ? call->worker_of[t] : -1;
        if (call->keys[t].a) {
            cdc_slot_weight_t weight = {call->keys[t].a, task->a_rows, task->k, task->a,
                                        task->a_hold, 0, task->a_source};
            cdc__slots_note(self->slots, task->shard, &weight, served_by);
        }
        if (call->keys[t].bt) {
            cdc_slot_weight_t weight = {call->keys[t].bt, task->cols, task->k, task->bt,
                                        task->bt_hold, 0, NULL};
            cdc__slots_note(self->slots, task->shard, &weight, served_by);
        }
    }
}

/* Shard s of the call went to (or came back from) worker w: the record
   cdc__client_last_call reads. */
static void call_note_worker(int *worker_of_shard, int s, int w)
{
    if (s >= 0 && s < 64)
        worker_of_shard[s] = w;
}

/* Send task t to worker w (live): PENDING once sent. */
static void call_send(cdc_client_t *self, client_call_t *call, int t, int w)
{
    cdc_msg_header_t h;
    task_header(&call->tasks[t], call->keys[t], call->request_id, &h);
    if (task_over_limit(self, w, &h))
        return;
    uint64_t before = self->counters.bytes_out;
    int sent = send_task(self, w, &call->tasks[t], &h);
    call->bytes_out[t] = self->counters.bytes_out - before;
    call->epoch[t] = self->weights_epoch[w];
    if (sent == CDC_OK) {
        call->state[t] = TASK_PENDING;
        call->tasks[t].dispatched = 1;
        call->tasks[t].sent_ms = cdc__clock_ms() - call->started_ms;
        call->pending++;
        call_note_worker(self->last_sent_to, call->tasks[t].shard, w);
    } else {
        self->counters.send_failures++;
        if (sent != CDC_ETIMEDOUT)
            CDC_LOG_WARNF("shard %d not sent: %s", call->tasks[t].shard, cdc_last_error());
    }
}

/* Send every placed task whose worker is live now; a planned worker that is
   not live gets nothing (its shard is an erasure). On-demand tasks wait
   (call_release). */
static void call_dispatch(cdc_client_t *self, client_call_t *call)
{
    uint64_t live_mask;
    cdc__client_live(self, &live_mask);
    for (int s = 0; s < 64; s++)
        self->last_sent_to[s] = self->last_answered_by[s] = -1;
    for (int t = 0; t < call->count; t++) {
        int w = call->worker_of[t];
        call->state[t] = TASK_IDLE;
        call->tasks[t].dispatched = 0;
        call->tasks[t].sent_ms = 0.0;
        if (call->tasks[t].on_demand)
            continue;
        if (w < 0 || !(live_mask & (UINT64_C(1) << w))) {
            self->counters.dead_skipped++;
            continue;
        }
        call_send(self, call, t, w);
    }
    call_note_weights(self, call);
}

/* Data still due: pending data shards; of streamed tasks, pending lead
   rows (their parts after the lead are parity). */
static int call_data_pending(const client_call_t *call)
{
    int pending = 0;
    for (int t = 0; t < call->count; t++)
        if (call->state[t] == TASK_PENDING)
            pending += call->goal ? !(call->tasks[t].parts_in & 1)
                                  : call->tasks[t].shard < call->n;
    return pending;
}

/* Whether the results in suffice: needed of them, or the goal's say. */
static int call_enough(const client_call_t *call)
{
    return call->goal ? call->goal->enough(call->goal->ctx, call->tasks, call->count)
                      : call->done >= call->needed;
}

/* Whether the call stops waiting at now: every covered data shard is in
   (first copy wins under replication); or the results in suffice and
   either no data is pending or wait_ms have passed since; or the deadline
   has passed (counted as a timeout). */
static int call_settled(cdc_client_t *self, client_call_t *call, int64_t now)
{
    if (!call->goal && call->cover_mask && call->covered == call->cover_mask)
        return 1; /* (a goal may want more: a parity to check with) */
    if (call_enough(call)) {
        if (call_data_pending(call) == 0)
            return 1;
        if (call->wait_deadline < 0)
            call->wait_deadline = now + call->wait_ms;
        if (now >= call->wait_deadline)
            return 1;
    }
    if (now >= call->deadline) {
        self->counters.timeouts++;
        CDC_LOG_INFOF("request %llu: %d of %d results after %d ms; giving up on the rest",
                      (unsigned long long) call->request_id, call->done, call->count,
                      call->timeout_ms);
        for (int t = 0; t < call->count; t++)
            if (call->state[t] == TASK_PENDING)
                CDC_LOG_INFOF("request %llu: task %d (shard %d) on worker %d: parts in 0x%x "
                              "of %d, %d MISS re-sends",
                              (unsigned long long) call->request_id, t, call->tasks[t].shard,
                              call->worker_of[t], (unsigned) call->tasks[t].parts_in,
                              cdc_task_parts(&call->tasks[t]), call->retries[t]);
        return 1;
    }
    return 0;
}

/* ---- parity on demand ------------------------------------------------------ */

/* How long the last data results may lag before their parity goes out:
   this fraction of the time the others took, at least ON_DEMAND_MIN_MS.
   Bands sized to finish together arrive within ~10-20% of each other (the
   model's error, a busy host); a straggler or a dead worker lags more. */
#define ON_DEMAND_PATIENCE 0.5
#define ON_DEMAND_MIN_MS 2.0
/* A worker whose data task lagged is expected to lag again (a slow device,
   a busy link): the next calls with a task on it send their on-demand
   tasks as soon as a worker is free instead of waiting out the patience.
   It is believed this many such calls, then tried again. */
#define ON_DEMAND_LAGGING_CALLS 32

/* The worker task t of the call is pending on when it is a data task (not
   on demand), else -1. */
static int pending_data_worker(const client_call_t *call, int t)
{
    const cdc_shard_task_t *task = &call->tasks[t];
    return call->state[t] == TASK_PENDING && !task->on_demand && task->cover >= 0
               ? call->worker_of[t]
               : -1;
}

/* Whether a data task of the call is pending on a worker that lagged in a
   recent call. */
static int call_on_laggard(const cdc_client_t *self, const client_call_t *call)
{
    for (int t = 0; t < call->count; t++) {
        int w = pending_data_worker(call, t);
        if (w >= 0 && self->lagging_calls[w] > 0)
            return 1;
    }
    return 0;
}

/* The data tasks pending now lag: their workers are laggards for a while. */
static void call_note_lagging(cdc_client_t *self, const client_call_t *call)
{
    for (int t = 0; t < call->count; t++) {
        int w = pending_data_worker(call, t);
        if (w >= 0)
            self->lagging_calls[w] = ON_DEMAND_LAGGING_CALLS;
    }
}

/* The worker an on-demand task goes to, among the live ones that did not
   refuse one: of those that took a task of this call (they hold the
   operands its tasks share), the first done with all of them, else the
   least busy; another (a spare) only when none of them is live. -1: none. */
static int release_worker(cdc_client_t *self, const client_call_t *call)
{
    uint64_t live;
    cdc__client_live(self, &live);
    int best = -1, best_busy = 0, best_took = 0;
    double best_done = 0.0;
    for (int w = 0; w < self->count; w++) {
        if (!(live & (UINT64_C(1) << w)) || (call->refused & (UINT64_C(1) << w)))
            continue;
        int busy = 0, took = 0;
        double done = 0.0;
        for (int t = 0; t < call->count; t++) {
            if (call->worker_of[t] != w || !call->tasks[t].dispatched)
                continue;
            took = 1;
            busy += call->state[t] == TASK_PENDING;
            if (call->state[t] == TASK_DONE && call->tasks[t].elapsed_ms > done)
                done = call->tasks[t].elapsed_ms;
        }
        int better = best < 0 || took > best_took ||
                     (took == best_took &&
                      (busy < best_busy || (busy == best_busy && done < best_done)));
        if (better) {
            best = w;
            best_busy = busy;
            best_took = took;
            best_done = done;
        }
    }
    return best;
}

/* Release the on-demand tasks the call now wants (task.h): under
   CDC_ON_DEMAND_FREE, or with a data task pending on a worker that lagged
   recently, all of them once a data task is in (or none is pending);
   under CDC_ON_DEMAND_LATE one per data task lost (given up, never sent),
   and, once no more data tasks are pending than on-demand ones can cover,
   one per pending data task that lags the latest arrival by more than the
   patience (its worker then lags for a while). Returns the on-demand tasks
   released. */
static int call_release(cdc_client_t *self, client_call_t *call, int64_t now)
{
    if (call->on_demand == 0 || call_enough(call))
        return 0;
    int held = 0, released = 0, lost = 0, late = 0, in = 0, mode = CDC_ON_DEMAND_LATE;
    for (int t = 0; t < call->count; t++) {
        const cdc_shard_task_t *task = &call->tasks[t];
        if (task->on_demand) {
            held += !task->released;
            released += task->released;
            mode = task->on_demand;
        } else if (task->cover >= 0) {
            lost += call->state[t] == TASK_IDLE;
            late += call->state[t] == TASK_PENDING;
            in += call->state[t] == TASK_DONE;
        }
    }
    int want;
    if (held == 0)
        return 0;
    if (mode == CDC_ON_DEMAND_LATE && call_on_laggard(self, call))
        mode = CDC_ON_DEMAND_FREE; /* it will lag: why wait for it to */
    if (mode == CDC_ON_DEMAND_FREE) {
        want = in > 0 || late == 0 ? held : 0;
    } else {
        if (lost > held + released)
            return 0; /* more lost than parity covers: computed here */
        double since = (double) now - call->started_ms;
        int lagging = in > 0 && late <= held + released - lost &&
                      since >= call->data_in_ms * (1.0 + ON_DEMAND_PATIENCE) &&
                      since >= call->data_in_ms + ON_DEMAND_MIN_MS;
        if (lagging)
            call_note_lagging(self, call);
        want = lost + (lagging ? late : 0) - released;
    }
    int sent = 0;
    for (int t = 0; t < call->count && sent < want; t++) {
        cdc_shard_task_t *task = &call->tasks[t];
        if (!task->on_demand || task->released)
            continue;
        int w = release_worker(self, call);
        if (w < 0)
            return sent;
        call->worker_of[t] = w;
        call_send(self, call, t, w);
        if (call->state[t] != TASK_PENDING) { /* not taken: another worker, next wake */
            call->refused |= UINT64_C(1) << w;
            call->worker_of[t] = -1;
            return sent;
        }
        task->released = 1;
        sent++;
    }
    return sent;
}

/* A call with on-demand tasks counts down the lagging of the workers it
   sent a data task to (the laggard is tried again after a while). */
static void call_age_laggards(cdc_client_t *self, const client_call_t *call)
{
    if (call->on_demand == 0)
        return;
    for (int t = 0; t < call->count; t++) {
        int w = call->worker_of[t];
        if (!call->tasks[t].on_demand && call->tasks[t].dispatched && w >= 0 &&
            self->lagging_calls[w] > 0)
            self->lagging_calls[w]--;
    }
}

/* When a waiting call next wakes: the nearer deadline, but at least every
   LIVENESS_SLICE_MS, since a worker that died since dispatch will not answer
   and its task is given up at once. */
static int64_t call_next_wake(const client_call_t *call, int64_t now)
{
    int64_t until = call->wait_deadline >= 0 && call->wait_deadline < call->deadline
                        ? call->wait_deadline
                        : call->deadline;
    return until > now + LIVENESS_SLICE_MS ? now + LIVENESS_SLICE_MS : until;
}

/* The task of this call with this shard sent to worker w, or -1. */
static int match_task(const cdc_shard_task_t *tasks, const int *worker_of, int count, int w,
                      int shard)
{
    for (int t = 0; t < count; t++)
        if (tasks[t].shard == shard && worker_of[t] == w)
            return t;
    return -1;
}

/* A reply to a call that is over (or a task given up): dropped; a RESULT
   (a whole result or a streamed part) is a late block too. */
void cdc__client_count_late(cdc_client_t *self, const cdc_msg_header_t *h)
{
    self->counters.late_replies++;
    self->counters.late_blocks += h->type == CDC_MSG_RESULT;
}

/* The pending task a reply from worker w answers, or -1 when it answers
   none (counted: late when meant for an earlier call or a task given up,
   invalid when it names a request or shard never sent). */
static int call_match_reply(cdc_client_t *self, const client_call_t *call, int w,
                            const cdc_msg_header_t *h)
{
    if (h->request_id != call->request_id) {
        /* An earlier call's answer (request ids only grow from
           first_request), or one that names a request never made: invalid. */
        if (h->request_id > self->first_request && h->request_id < call->request_id)
            cdc__client_count_late(self, h);
        else
            self->counters.invalid_replies++;
        return -1;
    }
    int t = match_task(call->tasks, call->worker_of, call->count, w, h->shard);
    if (t < 0 || call->state[t] != TASK_PENDING) {
        /* A shard this worker was not sent is invalid; one given up on (its
           worker was marked dead) is late. */
        if (t < 0)
            self->counters.invalid_replies++;
        else
            cdc__client_count_late(self, h);
        return -1;
    }
    return t;
}

/* The part of task t a RESULT carries (its first row and rows, task.h), or
   -1 when it is none of them or came already. */
static int result_part(const cdc_shard_task_t *task, const cdc_msg_header_t *h)
{
    if (h->cols != task->cols)
        return -1;
    for (int p = 0; p < cdc_task_parts(task); p++) {
        int64_t first;
        cdc_shard_task_t piece = cdc__task_part(task, p, &first);
        if (h->row_offset == first && h->rows == piece.a_rows)
            return task->parts_in & (UINT32_C(1) << p) ? -1 : p;
    }
    return -1;
}

/* A RESULT for task t, of part p: copied into its place. The task is done
   once every part is in; its time is its first part's (the data). */
static void call_take_result(cdc_client_t *self, client_call_t *call, int t, int p,
                             const cdc_msg_t *msg)
{
    cdc_shard_task_t *task = &call->tasks[t];
    int64_t first;
    cdc_shard_task_t piece = cdc__task_part(task, p, &first);
    cdc__msg_payload_gather(&msg->payload[0], piece.result); /* the one copy, chunk by chunk */
    self->counters.results++;
    self->counters.bytes_in += msg->payload[0].size;
    if (!task->parts_in) {
        task->elapsed_ms = cdc__clock_ms() - call->started_ms;
        call_note_worker(self->last_answered_by, task->shard, call->worker_of[t]);
    }
    task->parts_in |= UINT32_C(1) << p;
    if (task->parts_in != (UINT32_C(1) << cdc_task_parts(task)) - 1)
        return; /* more parts to come */
    call->state[t] = TASK_DONE;
    if (!task->on_demand && task->cover >= 0)
        call->data_in_ms = task->elapsed_ms;
    if (task->cover >= 0 && task->cover < 64)
        call->covered |= UINT64_C(1) << task->cover;
    *call->arrived |= UINT64_C(1) << t;
    call->done++;
    call->pending--;
}

/* Apply worker w's reply to pending task t: a result of the right shape is
   taken; a MISS re-sends the weights and the task (the worker restarted or
   evicted them), at most MAX_MISS_RETRIES times; anything else means this
   result will not come. */
static void call_apply_reply(cdc_client_t *self, client_call_t *call, int t, int w,
                             const cdc_msg_t *msg)
{
    const cdc_msg_header_t *h = &msg->header;
    int part = h->type == CDC_MSG_RESULT ? result_part(&call->tasks[t], h) : -1;
    if (part >= 0) {
        call_take_result(self, call, t, part, msg);
        return;
    }
    if (h->type == CDC_MSG_MISS && call->retries[t] < MAX_MISS_RETRIES) {
        self->counters.misses++;
        call->retries[t]++;
        cdc__client_store_lacks(self, w, h->a_key, 0); /* sent, not asked for, again */
        cdc_msg_header_t again;
        task_header(&call->tasks[t], call->keys[t], call->request_id, &again);
        if (send_task(self, w, &call->tasks[t], &again) != CDC_OK) {
            call->state[t] = TASK_IDLE;
            call->pending--;
        }
        return;
    }
    if (h->type == CDC_MSG_ERROR) {
        self->counters.error_replies++;
        CDC_LOG_WARNF("worker %d: shard %d failed: %s: %.*s", w, h->shard,
                      cdc_err_name(h->error_code), (int) msg->payload[0].size,
                      (const char *) msg->payload[0].frames[0].data); /* one frame */
    } else {
        self->counters.invalid_replies++; /* e.g. a wrong shape */
    }
    call->state[t] = TASK_IDLE;
    call->pending--;
}

/* Read every message waiting on worker w's data socket into the call. */
static void call_receive(cdc_client_t *self, client_call_t *call, int w)
{
    cdc_wire_msg_t wire;
    while (cdc__wire_recv(self->workers[w].socket, &wire, ZMQ_DONTWAIT) == CDC_OK) {
        cdc_msg_t msg;
        if (cdc__wire_decode(&wire, 0, &msg) != CDC_OK) {
            self->counters.invalid_replies++;
            CDC_LOG_WARNF("worker %d: invalid reply: %s", w, cdc_last_error());
        } else if (msg.header.type == CDC_MSG_PONG) {
            /* an ack of cdc__client_send_data_ping */
            cdc__slots_acked(self->slots, w, msg.header.request_id);
        } else if (msg.header.type == CDC_MSG_MISS && msg.header.request_id == 0) {
            cdc__client_store_lacks(self, w, msg.header.a_key, 1); /* a STORED's answer */
        } else if (msg.header.type != CDC_MSG_GOODBYE) {
            /* (A GOODBYE reaches the heartbeat thread too, which acts on it.) */
            int t = call_match_reply(self, call, w, &msg.header);
            if (t >= 0)
                call_apply_reply(self, call, t, w, &msg);
        }
        cdc__wire_msg_close(&wire);
    }
    cdc__wire_msg_close(&wire);
}

/* Give up at once on tasks whose worker has died since dispatch. */
static void call_drop_dead(cdc_client_t *self, client_call_t *call)
{
    uint64_t now_live;
    cdc__client_live(self, &now_live);
    for (int t = 0; t < call->count && call->pending > 0; t++)
        if (call->state[t] == TASK_PENDING &&
            !(now_live & (UINT64_C(1) << call->worker_of[t]))) {
            call->state[t] = TASK_IDLE;
            call->pending--;
            self->counters.dead_skipped++;
        }
}

/* Wait until a reply may be in or the call's next wake-up; *interrupted is
   set when a signal cut the wait short (nothing was read). */
static int call_poll(cdc_client_t *self, zmq_pollitem_t *items, int64_t timeout_ms,
                     int *interrupted)
{
    *interrupted = 0;
    for (int w = 0; w < self->count; w++)
        items[w] = (zmq_pollitem_t){self->workers[w].socket, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(items, self->count, (long) timeout_ms) >= 0)
        return CDC_OK;
    if (zmq_errno() == EINTR) {
        *interrupted = 1;
        return CDC_OK;
    }
    return cdc__fail(CDC_ETRANSPORT, "poll: %s", zmq_strerror(zmq_errno()));
}

/* The call is over: every live worker still computing (or holding) one of
   its shards gets one CANCEL for the call's request id, which covers every
   shard of it (protocol.md), so a straggler drops work nobody needs instead
   of serving it ahead of the next call's. Best effort: a CANCEL the socket
   cannot take now is not sent (the reply is then late, as before). */
static void call_cancel_pending(cdc_client_t *self, const client_call_t *call)
{
    uint64_t live_mask, cancel_mask = 0;
    cdc__client_live(self, &live_mask);
    for (int t = 0; t < call->count; t++)
        if (call->state[t] == TASK_PENDING && call->worker_of[t] >= 0)
            cancel_mask |= UINT64_C(1) << call->worker_of[t];
    cancel_mask &= live_mask;
    for (int w = 0; w < self->count; w++) {
        if (!(cancel_mask & (UINT64_C(1) << w)))
            continue;
        cdc_msg_header_t h;
        cdc__msg_header_init(&h, CDC_MSG_CANCEL);
        h.request_id = call->request_id;
        if (cdc__wire_send(self->workers[w].socket, NULL, &h, NULL, 0, ZMQ_DONTWAIT) == CDC_OK)
            self->counters.cancels_sent++;
    }
}

/* Task t of the call came back (a streamed one: its lead rows). */
static int task_back(const client_call_t *call, int t)
{
    const cdc_shard_task_t *task = &call->tasks[t];
    return cdc_task_parts(task) > 1 ? (task->parts_in & 1) : call->state[t] == TASK_DONE;
}

/* Workers with a task of the call that may have queued behind weights
   sent to them earlier (their drained_epoch, brought up to date here, is
   behind that task's epoch, and the call began before those weights would
   have arrived over the slowest link waited for). */
static uint64_t call_queued(cdc_client_t *self, const client_call_t *call)
{
    for (int t = 0; t < call->count; t++) {
        int w = call->worker_of[t];
        if (call->tasks[t].dispatched && w >= 0 && task_back(call, t) &&
            call->epoch[t] > self->drained_epoch[w])
            self->drained_epoch[w] = call->epoch[t];
    }
    uint64_t queued = 0;
    for (int t = 0; t < call->count; t++) {
        int w = call->worker_of[t];
        if (call->tasks[t].dispatched && w >= 0 && call->epoch[t] > self->drained_epoch[w] &&
            call->started_ms < self->weights_clear_ms[w])
            queued |= UINT64_C(1) << w;
    }
    return queued;
}

/* The call is over (at ended_ms): per worker whose every task of it came
   back (none re-sent after a MISS, which would blur its bytes), the
   observer learns the last result's time, their flops and bytes (what the
   profile's link estimate needs); per worker with a task still pending (not
   dead, not refused), that the tasks take longer than the call lasted,
   unless weights sent to it before may still have been on its link
   (call_queued: the task queued behind them, a bound would charge
   their transfer to this call's bytes; on WiFi the first FC weights made
   94 Mbit/s links look like 17). A streamed task counts by its lead rows,
   timed by them: its parity parts are rarely wanted. */
static void call_observe(cdc_client_t *self, const client_call_t *call, double ended_ms)
{
    uint64_t queued = call_queued(self, call);
    pthread_mutex_lock(&self->state_lock);
    cdc_client_observer_t observer = self->observer;
    pthread_mutex_unlock(&self->state_lock);
    if (!observer.call_done)
        return;
    double elapsed[CDC_MAX_WORKERS] = {0}, flops[CDC_MAX_WORKERS] = {0};
    double streamed[CDC_MAX_WORKERS] = {0}; /* operand bytes their GEMMs read */
    double bytes[CDC_MAX_WORKERS] = {0};
    uint64_t sent = 0, incomplete = 0, cut = 0;
    for (int t = 0; t < call->count; t++) {
        const cdc_shard_task_t *task = &call->tasks[t];
        int w = call->worker_of[t];
        if (!task->dispatched || w < 0 || task->on_demand)
            continue; /* (an on-demand task's time began when it was released) */
        sent |= UINT64_C(1) << w;
        int in_parts = cdc_task_parts(task) > 1, missing = !task_back(call, t);
        if (missing || call->retries[t] > 0)
            incomplete |= UINT64_C(1) << w;
        if (missing && call->state[t] == TASK_PENDING && call->retries[t] == 0)
            cut |= UINT64_C(1) << w;
        double rows = (double) (in_parts ? task->lead_rows : task->a_rows);
        double result_bytes = rows * (double) task->cols * sizeof(float);
        elapsed[w] = task->elapsed_ms > elapsed[w] ? task->elapsed_ms : elapsed[w];
        flops[w] += cdc__gemm_flops(rows, (double) task->cols, (double) task->k);
        streamed[w] += cdc__gemm_streamed_bytes(rows, (double) task->cols, (double) task->k);
        bytes[w] += (double) call->bytes_out[t] + result_bytes;
    }
    for (int w = 0; w < self->count; w++) {
        uint64_t bit = UINT64_C(1) << w;
        if ((sent & ~incomplete) & bit)
            observer.call_done(observer.ctx, w, elapsed[w], flops[w], streamed[w], bytes[w]);
        else if ((cut & ~queued & bit) && observer.call_cut)
            observer.call_cut(observer.ctx, w, ended_ms - call->started_ms, flops[w],
                              streamed[w], bytes[w]);
    }
}

int cdc__client_run(cdc_client_t *self, cdc_shard_task_t *tasks, int count, int n, int needed,
                    int wait_ms, int timeout_ms, uint64_t *arrived)
{
    return cdc__client_run_goal(self, tasks, count, n, needed, NULL, wait_ms, timeout_ms,
                                arrived);
}

int cdc__client_run_goal(cdc_client_t *self, cdc_shard_task_t *tasks, int count, int n,
                         int needed, const cdc_call_goal_t *goal, int wait_ms, int timeout_ms,
                         uint64_t *arrived)
{
    *arrived = 0;
    if (count < 1 || count > 64)
        return count == 0 ? CDC_OK : cdc__fail(CDC_EINVAL, "%d tasks, at most 64", count);
    pthread_mutex_lock(&self->lock);
    if (self->pending)
        cdc__client_discovery_publish(self); /* a worker discovered since the last call */
    cdc__client_discovery_homes(self);       /* none on a discovered entry never live */
    cdc__client_data_moves(self);            /* a respawned worker's new endpoint */
    int shards[64], slotted = 0;
    for (int t = 0; t < count; t++)
        if (!tasks[t].on_demand) /* (not a slot of the plan: no home) */
            shards[slotted++] = tasks[t].shard;
    cdc__slots_call(self->slots, shards, slotted); /* the slots: by shard, not task count */
    cdc__client_restore_pass(self);
    client_call_t call;
    call_begin(self, &call, tasks, count, n, needed, goal, wait_ms, timeout_ms, arrived);
    call_place(self, &call);
    call_dispatch(self, &call);
    call_age_laggards(self, &call);
    int rc = CDC_OK;
    for (;;) {
        int64_t now = (int64_t) cdc__clock_ms();
        call_release(self, &call, now);
        if (call.pending == 0 || call_settled(self, &call, now))
            break;
        zmq_pollitem_t items[CDC_MAX_WORKERS];
        int interrupted;
        rc = call_poll(self, items, call_next_wake(&call, now) - now, &interrupted);
        if (rc != CDC_OK)
            break;
        if (interrupted)
            continue;
        for (int w = 0; w < self->count; w++)
            if (items[w].revents & ZMQ_POLLIN)
                call_receive(self, &call, w);
        call_drop_dead(self, &call);
    }
    double ended_ms = cdc__clock_ms();
    call_cancel_pending(self, &call);
    call_observe(self, &call, ended_ms);
    pthread_mutex_unlock(&self->lock);
    return rc;
}
