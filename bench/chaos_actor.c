/* chaos_actor.c - carry out a --chaos schedule on worker processes from a
   thread of the bench (chaos_actor.h). Never signals a pid <= 1 or the
   bench itself; a SIGCONT goes only to the process it stopped, and only while
   that process still serves its worker (a respawned slot has a new pid). */
#include "chaos_actor.h"

#include "bench_util.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_STOPPED 256
#define TICK_MS 5

typedef struct {
    int worker;
    pid_t pid;
    double due_ms;
} stopped_t;

struct cdc_chaos_actor {
    cdc_chaos_schedule_t schedule;
    cdc_chaos_targets_t targets;
    double start_ms;
    const atomic_int *request;
    atomic_int stop;
    pthread_t thread;
    cdc_chaos_event_t *events; /* grown on the actor's thread; read after the join */
    int count, capacity;
    stopped_t stopped[MAX_STOPPED];
    int stopped_count;
};

static int signal_ok(pid_t pid)
{
    return pid > 1 && pid != getpid();
}

static void record(cdc_chaos_actor_t *a, double t_ms, const char *action, int worker, pid_t pid)
{
    if (a->count >= CDC_CHAOS_MAX_EVENTS)
        return;
    if (a->count == a->capacity) {
        int capacity = a->capacity ? 2 * a->capacity : 64;
        cdc_chaos_event_t *grown = realloc(a->events, sizeof *grown * (size_t) capacity);
        if (!grown)
            return;
        a->events = grown;
        a->capacity = capacity;
    }
    cdc_chaos_event_t *e = &a->events[a->count++];
    e->t_ms = t_ms;
    e->request = atomic_load(a->request);
    snprintf(e->action, sizeof e->action, "%s", action);
    e->worker = worker;
    e->pid = (long) pid;
}

static void act(cdc_chaos_actor_t *a, const cdc_chaos_rule_t *rule, int worker, double now)
{
    pid_t pid = a->targets.pid(a->targets.arg, worker);
    if (!signal_ok(pid))
        return; /* nobody serves it now (dead, being respawned) */
    switch (rule->action) {
    case CDC_CHAOS_KILL:
        if (kill(pid, SIGKILL) == 0)
            record(a, now, "kill", worker, pid);
        break;
    case CDC_CHAOS_STOP:
        if (a->stopped_count < MAX_STOPPED && kill(pid, SIGSTOP) == 0) {
            a->stopped[a->stopped_count++] = (stopped_t){worker, pid, now + rule->for_ms};
            record(a, now, "stop", worker, pid);
        }
        break;
    case CDC_CHAOS_RESTART:
        if (a->targets.restart) {
            record(a, now, "restart", worker, pid);
            if (a->targets.restart(a->targets.arg, worker) <= 0)
                fprintf(stderr, "cdcgemm-bench: chaos: restarting w%d failed\n", worker);
        }
        break;
    }
}

/* One firing: its target(s) looked up now. */
static void fire(cdc_chaos_actor_t *a, const cdc_chaos_firing_t *f, double now)
{
    const cdc_chaos_rule_t *rule = &a->schedule.spec.rules[f->rule];
    if (rule->target == CDC_CHAOS_TARGET_ONE) {
        act(a, rule, rule->index, now);
    } else if (rule->target == CDC_CHAOS_TARGET_ALL) {
        for (int w = 0; w < a->targets.workers; w++)
            act(a, rule, w, now);
    } else {
        int live[CDC_CHAOS_MAX_WORKERS], count = 0;
        for (int w = 0; w < a->targets.workers && w < CDC_CHAOS_MAX_WORKERS; w++)
            if (signal_ok(a->targets.pid(a->targets.arg, w)))
                live[count++] = w;
        int pick = cdc_chaos_pick(&a->schedule, f->rule, count);
        if (pick >= 0)
            act(a, rule, live[pick], now);
    }
}

/* SIGCONT the stopped processes that are due (all of them when all is set),
   each only while it still serves its worker. */
static void resume(cdc_chaos_actor_t *a, double now, int all)
{
    for (int i = 0; i < a->stopped_count;) {
        stopped_t *s = &a->stopped[i];
        if (!all && s->due_ms > now) {
            i++;
            continue;
        }
        if (signal_ok(s->pid) && a->targets.pid(a->targets.arg, s->worker) == s->pid &&
            kill(s->pid, SIGCONT) == 0)
            record(a, now, "cont", s->worker, s->pid);
        *s = a->stopped[--a->stopped_count];
    }
}

static void *actor_main(void *arg)
{
    cdc_chaos_actor_t *a = arg;
    while (!atomic_load(&a->stop)) {
        double now = cdc_bench_now_ms() - a->start_ms;
        resume(a, now, 0);
        cdc_chaos_firing_t f;
        while (!atomic_load(&a->stop) && a->count < CDC_CHAOS_MAX_EVENTS &&
               cdc_chaos_next(&a->schedule, now, &f))
            fire(a, &f, now);
        cdc_test_sleep_ms(TICK_MS);
    }
    resume(a, cdc_bench_now_ms() - a->start_ms, 1);
    return NULL;
}

int cdc_chaos_actor_start(const cdc_chaos_spec_t *spec, const cdc_chaos_targets_t *targets,
                          double start_ms, const atomic_int *request,
                          cdc_chaos_actor_t **actor)
{
    cdc_chaos_actor_t *a = cdc_bench_xmalloc(sizeof *a);
    memset(a, 0, sizeof *a);
    cdc_chaos_schedule_init(&a->schedule, spec);
    a->targets = *targets;
    a->start_ms = start_ms;
    a->request = request;
    atomic_init(&a->stop, 0);
    if (pthread_create(&a->thread, NULL, actor_main, a) != 0) {
        free(a->events);
        free(a);
        return 1;
    }
    *actor = a;
    return 0;
}

void cdc_chaos_actor_stop(cdc_chaos_actor_t *a, cdc_chaos_event_t **events, int *count)
{
    *events = NULL;
    *count = 0;
    if (!a)
        return;
    atomic_store(&a->stop, 1);
    pthread_join(a->thread, NULL);
    *events = a->events;
    *count = a->count;
    free(a);
}
