/* supervisor.c - respawn dead local workers, kill and replace hung ones, give up crash loops. */
#include "supervisor.h"

#include "clock.h"
#include "error.h"
#include "log.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
#include <time.h>

#define PASS_MS 20
#define BACKOFF_MIN_MS 20
#define BACKOFF_MAX_MS 2000
#define BACKOFF_RESET_MS 10000 /* an incarnation that lived this long starts over */
#define LOOP_DEATHS 5          /* more deaths than this ...                        */
#define LOOP_WINDOW_MS 10000   /* ... within this window: a crash loop, given up   */
#define HANG_KILL_MS 400       /* silent this long after the heartbeats lost it: hung */
#define START_GRACE_MS 5000    /* never live this long after a start: hung too    */
#define STALL_MS 200           /* a pass this late: we were not watching          */
#define ANNOUNCE_MS 1000       /* a respawn is announced once bound, or this late */

typedef struct {
    int64_t deaths[LOOP_DEATHS + 1]; /* the latest death times, a ring */
    int death_count;                 /* deaths recorded (ring position)  */
    int64_t respawn_at;              /* > 0: a respawn is due then       */
    int64_t spawned_at, silent_since; /* silent_since 0: live, or unknown */
    int64_t backoff_ms;
    int ever_live;                   /* this incarnation answered once   */
    int announce;                    /* its new endpoint not told yet    */
    int incarnation, given_up;
} slot_t;

struct cdc_supervisor {
    pid_t owner;          /* the process whose thread it is: a forked child's
                             copy has no thread to join                   */
    cdc_local_workers_t *workers;
    cdc_live_fn live;
    cdc_moved_fn moved;
    void *arg;
    pthread_t thread;
    pthread_mutex_t lock; /* stop and the counters */
    pthread_cond_t wake;
    int stop;
    uint64_t respawns, given_up;
    int64_t last_pass;
    slot_t slots[CDC_MAX_WORKERS]; /* the thread's own */
};

static int64_t now_ms(void)
{
    return (int64_t) cdc__clock_ms();
}

/* Deaths of the slot within the crash-loop window, this one included. */
static int recent_deaths(const slot_t *slot, int64_t now)
{
    int recent = 0;
    for (int k = 0; k < LOOP_DEATHS + 1 && k < slot->death_count; k++)
        recent += now - slot->deaths[k] <= LOOP_WINDOW_MS;
    return recent;
}

/* Slot i's process is gone: schedule its respawn, or give it up. */
static void slot_died(cdc_supervisor_t *self, int i, int status, int64_t now)
{
    slot_t *slot = &self->slots[i];
    slot->deaths[slot->death_count++ % (LOOP_DEATHS + 1)] = now;
    int recent = recent_deaths(slot, now);
    if (recent > LOOP_DEATHS) {
        slot->given_up = 1;
        pthread_mutex_lock(&self->lock);
        self->given_up++;
        pthread_mutex_unlock(&self->lock);
        CDC_LOG_WARNF("local worker %d: %d deaths within %d s, a crash loop: not respawned "
                      "again (respawns_given_up)", i, recent, LOOP_WINDOW_MS / 1000);
        return;
    }
    if (slot->backoff_ms == 0 || now - slot->spawned_at >= BACKOFF_RESET_MS)
        slot->backoff_ms = BACKOFF_MIN_MS;
    else if (slot->backoff_ms * 2 <= BACKOFF_MAX_MS)
        slot->backoff_ms *= 2;
    else
        slot->backoff_ms = BACKOFF_MAX_MS;
    slot->respawn_at = now + slot->backoff_ms;
    CDC_LOG_INFOF("local worker %d %s %d: respawned in %lld ms", i,
                  status >= 0 && WIFSIGNALED(status) ? "killed by signal" : "exited with",
                  status < 0 ? -1 : WIFSIGNALED(status) ? WTERMSIG(status)
                                                        : WEXITSTATUS(status),
                  (long long) slot->backoff_ms);
}

static void slot_respawn(cdc_supervisor_t *self, int i, int64_t now)
{
    slot_t *slot = &self->slots[i];
    slot->respawn_at = 0;
    if (cdc__local_workers_respawn(self->workers, i, slot->incarnation + 1) != CDC_OK) {
        CDC_LOG_WARNF("local worker %d: respawn failed: %s", i, cdc_last_error());
        slot_died(self, i, -1, now); /* counts toward the crash loop: bounded */
        return;
    }
    slot->incarnation++;
    slot->spawned_at = now;
    slot->silent_since = 0;
    slot->ever_live = 0;
    slot->announce = 1;
    pthread_mutex_lock(&self->lock);
    self->respawns++;
    pthread_mutex_unlock(&self->lock);
}

/* A running worker the heartbeats do not hear: kill it once it has been
   silent too long (it is then reaped and respawned like a dead one). */
static void slot_check_silent(cdc_supervisor_t *self, int i, int live, int64_t now)
{
    slot_t *slot = &self->slots[i];
    if (live) {
        slot->ever_live = 1;
        slot->silent_since = 0;
        return;
    }
    if (slot->silent_since == 0)
        slot->silent_since = now;
    int64_t silent = slot->ever_live ? now - slot->silent_since : now - slot->spawned_at;
    if (silent <= (slot->ever_live ? HANG_KILL_MS : START_GRACE_MS))
        return;
    CDC_LOG_WARNF("local worker %d silent for %lld ms (hung or stopped): killed, to be "
                  "respawned", i, (long long) silent);
    cdc__local_workers_kill(self->workers, i);
    slot->silent_since = now; /* not again before it is reaped */
}

/* A respawned slot's new endpoint, told once the process listens there (a
   connection is then made at once rather than at libzmq's next retry). */
static void slot_announce(cdc_supervisor_t *self, int i, int64_t now)
{
    slot_t *slot = &self->slots[i];
    if (!cdc__local_workers_bound(self->workers, i) && now - slot->spawned_at < ANNOUNCE_MS)
        return;
    slot->announce = 0;
    char endpoint[PATH_MAX + 32];
    if (self->moved &&
        cdc__local_workers_endpoint(self->workers, i, endpoint, sizeof endpoint) == CDC_OK)
        self->moved(self->arg, i, endpoint);
}

static void supervise_pass(cdc_supervisor_t *self)
{
    int64_t now = now_ms();
    uint64_t live = 0;
    int heard = self->live && self->live(self->arg, &live) >= 0;
    int stalled = now - self->last_pass > STALL_MS;
    self->last_pass = now;
    int count = cdc__local_workers_count(self->workers);
    for (int i = 0; i < count; i++) {
        slot_t *slot = &self->slots[i];
        if (slot->given_up)
            continue;
        if (slot->respawn_at > 0) {
            if (now >= slot->respawn_at)
                slot_respawn(self, i, now);
            continue;
        }
        int status;
        if (cdc__local_workers_reap(self->workers, i, &status)) {
            slot->announce = 0; /* its successor is announced instead */
            slot_died(self, i, status, now);
            continue;
        }
        if (slot->announce)
            slot_announce(self, i, now);
        if (stalled && slot->silent_since)
            slot->silent_since = now; /* silence we did not watch is not counted */
        if (heard)
            slot_check_silent(self, i, (live >> i) & 1, now);
    }
}

static void *supervisor_main(void *arg)
{
    cdc_supervisor_t *self = arg;
    pthread_mutex_lock(&self->lock);
    while (!self->stop) {
        pthread_mutex_unlock(&self->lock);
        supervise_pass(self);
        pthread_mutex_lock(&self->lock);
        if (self->stop)
            break;
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += PASS_MS * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&self->wake, &self->lock, &until);
    }
    pthread_mutex_unlock(&self->lock);
    return NULL;
}

/* A condition variable on the monotonic clock: wall-clock jumps do not
   stretch or skip the passes. */
static int wake_init(pthread_cond_t *wake)
{
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0)
        return -1;
    int rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(wake, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

int cdc__supervisor_start(cdc_local_workers_t *workers, cdc_live_fn live, cdc_moved_fn moved,
                          void *arg, cdc_supervisor_t **self_p)
{
    cdc_supervisor_t *self = calloc(1, sizeof *self);
    if (!self)
        return cdc__fail(CDC_ENOMEM, "supervisor");
    self->owner = getpid();
    self->workers = workers;
    self->live = live;
    self->moved = moved;
    self->arg = arg;
    self->last_pass = now_ms();
    for (int i = 0; i < CDC_MAX_WORKERS; i++)
        self->slots[i].spawned_at = self->last_pass;
    if (pthread_mutex_init(&self->lock, NULL) != 0) {
        free(self);
        return cdc__fail(CDC_ENOMEM, "supervisor: mutex");
    }
    if (wake_init(&self->wake) != 0) {
        pthread_mutex_destroy(&self->lock);
        free(self);
        return cdc__fail(CDC_ENOMEM, "supervisor: condition variable");
    }
    int err = pthread_create(&self->thread, NULL, supervisor_main, self);
    if (err != 0) {
        pthread_cond_destroy(&self->wake);
        pthread_mutex_destroy(&self->lock);
        free(self);
        return cdc__fail(CDC_ENOMEM, "supervisor: thread: error %d", err);
    }
    *self_p = self;
    return CDC_OK;
}

void cdc__supervisor_stop(cdc_supervisor_t **self_p, uint64_t *respawns, uint64_t *given_up)
{
    if (!self_p || !*self_p)
        return;
    cdc_supervisor_t *self = *self_p;
    *self_p = NULL;
    if (getpid() != self->owner)
        return; /* a forked child's copy: the parent's thread, not ours */
    pthread_mutex_lock(&self->lock);
    self->stop = 1;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->lock);
    pthread_join(self->thread, NULL);
    if (respawns)
        *respawns = self->respawns;
    if (given_up)
        *given_up = self->given_up;
    pthread_cond_destroy(&self->wake);
    pthread_mutex_destroy(&self->lock);
    free(self);
}

void cdc__supervisor_counters(cdc_supervisor_t *self, uint64_t *respawns, uint64_t *given_up)
{
    pthread_mutex_lock(&self->lock);
    *respawns = self->respawns;
    *given_up = self->given_up;
    pthread_mutex_unlock(&self->lock);
}
