/* attacker.h - hostile peers for `cdcgemm-bench hostile`: what a device on the
 * same network could send a worker or a coordinator.
 *
 * Each attack speaks raw ZeroMQ (or raw TCP) on purpose: it is not a
 * cdcgemm client and must not be limited by what the library would send. */
#ifndef CDC_BENCH_ATTACKER_H_INCLUDED
#define CDC_BENCH_ATTACKER_H_INCLUDED

#include "keys.h"

#include <stddef.h>
#include <stdint.h>

/* A DEALER on its own zmq context, connected to endpoint. With `as` it is a
   CURVE client of `server` using as's keys; without (NULL) plaintext. */
typedef struct cdc_attacker cdc_attacker_t;

/* NULL on failure (message on stderr). */
cdc_attacker_t *cdc_attacker_new(const char *endpoint, const cdc_curve_cert_t *server,
                                 const cdc_curve_cert_t *as);
void cdc_attacker_destroy(cdc_attacker_t **attacker_p);

/* Replies this attacker has received so far (drained without blocking). */
long cdc_attacker_replies(cdc_attacker_t *attacker);

/* Wait up to timeout_ms for one reply; returns its type (cdc_msg_type_t) and
   copies an ERROR's text into text (size bytes), or 0 when none came. */
int cdc_attacker_wait_reply(cdc_attacker_t *attacker, long timeout_ms, char *text,
                            size_t size);

/* frames frames of frame_bytes each, every one marked "more": a multipart
   message that is never finished. Returns the frames libzmq accepted. */
long cdc_attack_unfinished_multipart(cdc_attacker_t *attacker, int frames, size_t frame_bytes);

/* count random messages (1-4 frames of random bytes, some with a valid
   header magic and version), seeded. Returns those libzmq accepted. */
long cdc_attack_random_messages(cdc_attacker_t *attacker, long count, uint64_t seed);

/* The 236-byte TASK_CONV of issue 9: a 1x1 image, a 1x1 kernel, padding
   1000, 16 filter rows; a 256 MB result were it computed. 0 when sent. */
int cdc_attack_padding_conv(cdc_attacker_t *attacker, uint64_t request_id);

/* count WEIGHTS of 16 floats under distinct keys (from first_key), then a
   PING; returns 0 once its PONG came back within timeout_ms. */
int cdc_attack_weights_flood(cdc_attacker_t *attacker, long count, uint64_t first_key,
                             long timeout_ms);

/* Raw TCP to host:port: a ZMTP 3.0 greeting that asks for CURVE, then
   frames frames of frame_bytes marked "more" (no handshake at all). Returns
   the bytes the worker accepted before closing the connection (or all of
   them), -1 when it could not connect. */
long cdc_attack_raw_frames(const char *host, int port, int frames, size_t frame_bytes);

/* A fake worker on endpoint (plaintext; the process's own loop, for a child
   process): answers PINGs, never computes, and pushes flood unsolicited
   RESULTs of result_bytes each to every coordinator connection it has seen,
   for at most seconds. Returns the process exit status. */
int cdc_fake_worker_main(const char *endpoint, long flood, size_t result_bytes, long seconds);

#endif
