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
    uint64_t max_task_memory; /* its --max-task-memory: a task whose working
                               set (protocol.h) is over it gets an ERROR, so
                               the coordinator does not send it (0: not
                               reported, an older worker)                    */
} cdc_status_report_t;

/* The text for *status into out (size bytes, NUL-terminated); returns its
   length (without the NUL), at most size - 1. */
size_t cdc__status_format(const cdc_status_report_t *status, char *out, size_t size);

/* Parse text (size bytes, not NUL-terminated) into *status (keys absent
   stay 0). CDC_OK, or CDC_EPROTO naming the first malformed line (no "=",
   a key outside [a-z0-9_], a value that is not a decimal u64). */
int cdc__status_parse(const void *text, size_t size, cdc_status_report_t *status);

#endif
