/* status.h - what a worker tells about itself in every PONG.
 *
 * Plain C. The PONG's second frame is UTF-8 text, one "key=value" per line
 * (value: decimal, unsigned), at most CDC_PROTO_MAX_TEXT bytes. A reader
 * takes the keys it knows and skips the others, so a newer worker can add
 * keys (busy_us and flops came that way: the coordinator's profile of each
 * worker's speed, src/coordinator/profile/profile.h) without a protocol change. */
#ifndef CDC_STATUS_H_INCLUDED
#define CDC_STATUS_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

/* A task is thin when it does fewer flops than this per operand byte its
   GEMM streams: a matrix-vector product does 0.5, four columns just under
   2. Below 2 a task is bound by memory on any device whose flops per byte
   of bandwidth (its machine balance) is 2 or more, every CPU from a Pi's
   (~3) up; a few columns more are bound by memory on most devices too,
   but counted for the rate they would lower it only for shapes of their
   own kind, which they then predict right. */
#define CDC_STATUS_THIN_INTENSITY 2.0

/* Whether a task of flops that streams bytes_read operand bytes is thin. */
static inline int cdc__status_task_thin(double flops, double bytes_read)
{
    return bytes_read > 0.0 && flops < CDC_STATUS_THIN_INTENSITY * bytes_read;
}

typedef struct {
    uint64_t cache_bytes;   /* weight cache: bytes charged (overhead included) */
    uint64_t cache_entries; /* weight cache: matrices held                     */
    uint64_t max_memory;    /* its --max-memory                                */
    uint64_t tasks;         /* shard tasks computed since it started           */
    uint64_t load;          /* WEIGHTS and tasks queued or running now         */
    uint64_t instance;      /* drawn by the process at start: another value on
                               the same endpoint is another process, whose
                               weight cache is empty (0: not reported)        */
    uint64_t busy_us;       /* microseconds spent computing shard tasks since
                               it started: real compute plus a slow fault's
                               emulated extra, never emulated link time     */
    uint64_t flops;         /* work of those tasks: sum of 2*rows*k*cols     */
    /* Of those, the thin tasks' (CDC_STATUS_THIN_INTENSITY): their busy
       time, work and the operand bytes their GEMMs streamed, (rows +
       cols)*k floats. A thin
       task's time is its memory's, not its arithmetic's, so the
       coordinator measures a device's rate on the others and its streaming
       bandwidth on these (a roofline, profile.h). 0: not reported (an
       older worker: every task counts for the rate). */
    uint64_t thin_busy_us, thin_flops, thin_bytes;
    uint64_t max_task_memory; /* its --max-task-memory: a task whose working
                               set (protocol.h) is over it gets an ERROR, so
                               the coordinator does not send it (0: not
                               reported, an older worker)                    */
    uint64_t stored;        /* matrices in its weight store on disk (--store):
                               a new process with some is asked for them
                               (CDC_MSG_STORED) before they are sent (0: no
                               store, or an older worker)                    */
} cdc_status_report_t;

/* The text for *status into out (size bytes, NUL-terminated); returns its
   length (without the NUL), at most size - 1. */
size_t cdc__status_format(const cdc_status_report_t *status, char *out, size_t size);

/* Parse text (size bytes, not NUL-terminated) into *status (keys absent
   stay 0). CDC_OK, or CDC_EPROTO naming the first malformed line (no "=",
   a key outside [a-z0-9_], a value that is not a decimal u64). */
int cdc__status_parse(const void *text, size_t size, cdc_status_report_t *status);

#endif
