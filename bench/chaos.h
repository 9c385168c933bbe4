/* chaos.h - the bench's --chaos SPEC: outside chaos on worker processes
   (SIGKILL, SIGSTOP for a while, restart), parsed and scheduled here; pure
   (no clock, no signals: bench/chaos_actor.c acts on the schedule).

   spec   = rule { ";" rule }
   rule   = ACTION "@" TARGET ":" key "=" value { "," key "=" value }
          | "seed=" N
   ACTION = kill | stop | restart
   TARGET = "w" INDEX | random | "*"
   keys   = at=TIME (once) | every=TIME[~TIME] (repeatedly, optional jitter)
          | jitter=TIME | for=TIME (stop: how long until SIGCONT)
   TIME   = decimal number followed by ms or s

   docs/faults.md has the grammar with examples. */
#ifndef CDC_CHAOS_H_INCLUDED
#define CDC_CHAOS_H_INCLUDED

#include "harness.h" /* cdc_test_rng_t: the one generator of the tests and bench */

#include <stddef.h>
#include <stdint.h>

#define CDC_CHAOS_MAX_RULES 16
#define CDC_CHAOS_MAX_WORKERS 64
#define CDC_CHAOS_ERROR_BYTES 256

typedef enum { CDC_CHAOS_KILL, CDC_CHAOS_STOP, CDC_CHAOS_RESTART } cdc_chaos_action_t;

typedef enum {
    CDC_CHAOS_TARGET_ONE,    /* wI                                   */
    CDC_CHAOS_TARGET_RANDOM, /* a seeded choice among live workers   */
    CDC_CHAOS_TARGET_ALL     /* "*"                                  */
} cdc_chaos_target_t;

typedef struct {
    cdc_chaos_action_t action;
    cdc_chaos_target_t target;
    int index;          /* CDC_CHAOS_TARGET_ONE: the worker           */
    int repeat;         /* 0: once at at_ms; 1: every every_ms        */
    double at_ms;       /* once: when, from the start of the run      */
    double every_ms;    /* repeat: the interval                       */
    double jitter_ms;   /* repeat: each interval drawn uniformly in
                           [every - jitter, every + jitter]           */
    double for_ms;      /* stop: SIGCONT this long after the SIGSTOP  */
    char text[96];      /* the rule as written (for messages)         */
} cdc_chaos_rule_t;

typedef struct {
    int count;
    uint64_t seed; /* default 1 */
    cdc_chaos_rule_t rules[CDC_CHAOS_MAX_RULES];
} cdc_chaos_spec_t;

/* Parse spec into *out. 0 on success; otherwise nonzero with a message in
   error (error_size bytes) naming the rule and the part that is wrong. An
   empty spec is an error. */
int cdc_chaos_parse(const char *spec, cdc_chaos_spec_t *out, char *error, size_t error_size);

/* Check the spec against the run: every wI names one of workers, and
   restart only where the bench started the workers itself (can_restart;
   embedded workers are the library's children, which its supervisor
   respawns). 0 when it fits; otherwise nonzero with a message. */
int cdc_chaos_check(const cdc_chaos_spec_t *spec, int workers, int can_restart, char *error,
                    size_t error_size);

/* The schedule: the spec's rules unrolled in time, seeded. */
typedef struct {
    cdc_chaos_spec_t spec;
    double next_ms[CDC_CHAOS_MAX_RULES]; /* < 0: the rule is spent */
    cdc_test_rng_t rng[CDC_CHAOS_MAX_RULES]; /* one stream per rule */
} cdc_chaos_schedule_t;

/* One firing of a rule. */
typedef struct {
    double t_ms; /* from the start of the run */
    int rule;    /* index into spec.rules     */
} cdc_chaos_firing_t;

void cdc_chaos_schedule_init(cdc_chaos_schedule_t *schedule, const cdc_chaos_spec_t *spec);

/* The earliest firing not yet taken, if it is at or before until_ms: fills
   *out, advances that rule and returns 1; else 0 (nothing changes). Ties go
   to the lower rule index. */
int cdc_chaos_next(cdc_chaos_schedule_t *schedule, double until_ms, cdc_chaos_firing_t *out);

/* Time of the earliest firing not yet taken, or < 0 when every rule is spent. */
double cdc_chaos_peek(const cdc_chaos_schedule_t *schedule);

/* A random target for a firing of rule: the position (0 .. live - 1) of the
   live worker to act on, drawn from that rule's stream; -1 when live < 1. */
int cdc_chaos_pick(cdc_chaos_schedule_t *schedule, int rule, int live);

const char *cdc_chaos_action_name(cdc_chaos_action_t action);

#endif
