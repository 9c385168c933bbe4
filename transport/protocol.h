/* protocol.h - the cdcgemm wire protocol: header layout, message types, validation.
 *
 * Plain C (no zmq types): a message is a list of frames (pointer + size) however
 * it travelled. Frame 0 is a fixed-size little-endian header; payloads follow in
 * their own frames. docs/protocol.md describes every field and rule. */
#ifndef CDC_PROTOCOL_H_INCLUDED
#define CDC_PROTOCOL_H_INCLUDED

#include "cdcgemm.h"
#include "geometry.h"
#include "task.h"

#include <stddef.h>
#include <stdint.h>

#define CDC_PROTO_MAGIC 0x47434443u /* "CDCG" as little-endian bytes */
#define CDC_PROTO_VERSION 3
#define CDC_PROTO_HEADER_SIZE 192
#define CDC_PROTO_DTYPE_F32 1
/* Bounds checked before anything is allocated from a header. */
#define CDC_PROTO_MAX_DIM (INT64_C(1) << 24)    /* any single dimension     */
#define CDC_PROTO_MAX_FLOATS (INT64_C(1) << 28) /* any one matrix: 1 GiB    */
#define CDC_PROTO_MAX_TEXT 1024                 /* ERROR text bytes         */
/* A payload of S bytes travels as max(1, ceil(S / CDC_PROTO_CHUNK_BYTES))
   consecutive frames, each but the last exactly CDC_PROTO_CHUNK_BYTES: no
   frame is larger, so ZMQ_MAXMSGSIZE (what libzmq allocates for a frame
   before anything checks it) stays a few MB on both sides. */
#define CDC_PROTO_CHUNK_BYTES ((size_t) 4 << 20)
#define CDC_PROTO_MAX_PAYLOADS 2 /* payloads of any one message type */
/* Frames of the largest payload (CDC_PROTO_MAX_FLOATS floats) and of the
   largest message: the header and two such payloads. */
#define CDC_PROTO_MAX_PAYLOAD_FRAMES                                                       \
    ((int) (CDC_PROTO_MAX_FLOATS * 4 / (int64_t) CDC_PROTO_CHUNK_BYTES))
#define CDC_PROTO_MAX_FRAMES (1 + CDC_PROTO_MAX_PAYLOADS * CDC_PROTO_MAX_PAYLOAD_FRAMES)

typedef enum {
    CDC_MSG_TASK_GEMM = 1, /* result = a · btᵀ; frames: header, a, bt      */
    CDC_MSG_TASK_CONV = 2, /* result = a · im2col(input); header, a, input */
    CDC_MSG_WEIGHTS = 3,   /* cache a matrix under a_key; header, payload  */
    CDC_MSG_RESULT = 4,    /* rows x cols result; header, payload          */
    CDC_MSG_ERROR = 5,     /* error_code + text; header, text              */
    CDC_MSG_MISS = 6,      /* worker lacks the matrix a_key; header        */
    CDC_MSG_PING = 7,      /* heartbeat request; header                    */
    CDC_MSG_PONG = 8,      /* heartbeat answer; header, status text        */
    CDC_MSG_CANCEL = 9,    /* forget request_id (every shard); header      */
    CDC_MSG_GOODBYE = 10,  /* worker leaving on purpose (SIGTERM); header  */
    CDC_MSG_STORED = 11    /* take the matrix a_key (rows x k) from your
                              store (--store) into the cache, or answer
                              MISS (request_id 0); header. Sent only to a
                              worker whose status reports stored files     */
} cdc_msg_type_t;

/* The decoded header. Fields a type does not use are zero on the wire. */
/* PING.shard: a barrier. The worker answers it once every request sent
   before it on the same connection has been handled (WEIGHTS cached, tasks
   run), in line behind them on its compute thread, instead of at once: the
   coordinator's acknowledgement that a returning worker holds its weights.
   A worker that does not know it answers at once (a weaker ack). */
#define CDC_PING_BARRIER 1

typedef struct {
    uint32_t magic;
    uint16_t version;
    uint16_t type;       /* cdc_msg_type_t                                  */
    uint64_t request_id; /* echoed in RESULT/ERROR/MISS/PONG                */
    int32_t shard;       /* shard index the task/result belongs to          */
    uint32_t dtype;      /* CDC_PROTO_DTYPE_F32 for messages with matrices  */
    int64_t rows, k, cols;
    uint64_t a_key;      /* TASK: cached a (0 = inline); WEIGHTS/MISS/STORED:
                            key                                             */
    uint64_t bt_key;     /* TASK_GEMM: cached bt (0 = inline)               */
    int64_t batch;       /* TASK_CONV                                       */
    cdc_conv_geometry_t geometry; /* TASK_CONV (out_h/out_w not sent)       */
    int32_t error_code;  /* ERROR: a CDC_* status                           */
    /* Since version 3: streamed results (the rotated parity layout). */
    int64_t lead_rows;   /* TASK: > 0, send the result's first lead_rows rows
                            as soon as they are computed, then the rest in
                            parts of part_rows rows, each computed only if
                            the request is not CANCELled by then; 0: one
                            RESULT                                         */
    int64_t part_rows;   /* TASK: with lead_rows < rows, in [1, rows]; else 0 */
    int64_t row_offset;  /* RESULT: the first row of the task's result this
                            one carries (0 for a whole result)             */
} cdc_msg_header_t;

/* One received or to-be-sent frame. */
typedef struct {
    const void *data;
    size_t size;
} cdc_frame_t;

/* One payload of a validated message: count consecutive frames starting at
   frames (its chunks, see CDC_PROTO_CHUNK_BYTES), size bytes in all. A view:
   frames points into the array given to cdc__msg_decode, which must live as
   long as the message; the bytes may be unaligned (read them with memcpy or
   cdc__msg_payload_gather). count is 0 only for a payload taken away. */
typedef struct {
    const cdc_frame_t *frames;
    int count;
    size_t size;
} cdc_msg_payload_t;

/* A validated message: the header and its payloads (not copied). */
typedef struct {
    cdc_msg_header_t header;
    cdc_msg_payload_t payload[CDC_PROTO_MAX_PAYLOADS];
    int payload_count;
} cdc_msg_t;

/* The memory a worker holds for a task while it runs, in bytes (its
   admission, src/worker/admission.h; the coordinator's check before sending,
   transport/client_call.c). 64-bit on every host: each matrix is at most
   1 GiB (CDC_PROTO_MAX_FLOATS), but their sum can pass 4 GiB, which a 32-bit
   worker's size_t would wrap (issue 28). */
typedef struct {
    uint64_t inline_bytes; /* operands carried in the message (not cached keys) */
    uint64_t copy_bytes;   /* of those, copies of frames not float-aligned
                              (known where the message is received)        */
    uint64_t result_bytes; /* rows x cols floats                                 */
    uint64_t im2col_bytes; /* TASK_CONV: the k x cols unfolded input             */
    uint64_t total;
} cdc_task_memory_t;

/* The working set of a TASK_GEMM or TASK_CONV whose header is h, all but
   copy_bytes (0 here; zero for other types). Pure arithmetic on the header:
   the least the task will need on any worker. */
void cdc__task_memory_of_header(const cdc_msg_header_t *h, cdc_task_memory_t *memory);

/* Zero *header and set magic, version, type and (for matrix types) dtype. */
void cdc__msg_header_init(cdc_msg_header_t *header, cdc_msg_type_t type);

/* Serialise *header into out (CDC_PROTO_HEADER_SIZE bytes). Never fails. */
void cdc__msg_header_pack(const cdc_msg_header_t *header, uint8_t *out);

/* Deserialise without validating anything but the size. CDC_EPROTO when size
   is not CDC_PROTO_HEADER_SIZE. */
int cdc__msg_header_unpack(const void *data, size_t size, cdc_msg_header_t *header);

/* Payloads a message of this type carries (0, 1 or 2); -1 if unknown. */
int cdc__msg_payload_count(cdc_msg_type_t type);

/* Frames a payload of size bytes travels in: max(1, ceil(size / chunk)),
   INT_MAX when more. 64-bit: a header's sizes are counted before anything
   checks that they fit a 32-bit size_t. */
int cdc__msg_payload_frames(uint64_t size);

/* Copy the payload's bytes, chunk after chunk, into out (payload->size
   bytes). Thread-safe. */
void cdc__msg_payload_gather(const cdc_msg_payload_t *payload, void *out);

/* Validate frames[0..count-1] as one message and fill *msg, whose payload
   views point into frames (keep the array alive as long as *msg). Returns
   CDC_OK, or CDC_EPROTO with the reason in cdc_last_error(): more than
   CDC_PROTO_MAX_FRAMES frames, header size, magic, version, unknown type,
   dtype, dimensions out of [1, CDC_PROTO_MAX_DIM] or products over
   CDC_PROTO_MAX_FLOATS, invalid conv geometry, then the frame layout the
   header's numbers imply: the frame count (each payload's chunks) and every
   chunk's exact size. Checks only arithmetic on the header and the frame
   sizes; allocates nothing. Thread-safe. */
int cdc__msg_decode(const cdc_frame_t *frames, int count, cdc_msg_t *msg);

/* What one payload must be, worked out from the header alone. */
typedef struct {
    const char *name; /* "a", "bt", "input", "weights", "result", "text" */
    uint64_t bytes;   /* exact size (text: the most it may have)          */
    uint64_t key;     /* nonzero: a cached operand, one empty frame       */
    int text;         /* ERROR/PONG text: one frame of at most bytes      */
} cdc_msg_payload_spec_t;

/* The frames a message must have, from its header alone: what lets a
   receiver check each frame as it arrives (wire.c) instead of after
   collecting them all. */
typedef struct {
    cdc_msg_header_t header;
    cdc_msg_payload_spec_t p[CDC_PROTO_MAX_PAYLOADS];
    int count;  /* payloads                                          */
    int frames; /* frames in all, the header included (at most
                   CDC_PROTO_MAX_FRAMES)                             */
} cdc_msg_shape_t;

/* Validate a header frame (everything cdc__msg_decode checks that does not
   need the later frames) and fill *shape. CDC_OK, or CDC_EPROTO with the
   reason cdc__msg_decode would give. Thread-safe. */
int cdc__msg_shape(const cdc_frame_t *header, cdc_msg_shape_t *shape);

/* Frame number index (1: the first after the header) of size bytes against
   *shape: CDC_EPROTO when the header implies fewer frames, or when the
   size is not the chunk's exact size (a cached operand's frame empty, text
   within its limit; so an empty frame where the protocol never sends one
   is refused). Thread-safe. */
int cdc__msg_shape_frame(const cdc_msg_shape_t *shape, int index, size_t size);

/* The shard task a validated TASK_GEMM or TASK_CONV header describes, over a
   (rows x k), second (bt, or the conv input) and result (rows x cols), as
   the worker runs it. For a conv task geometry is the header's geometry
   finished by cdc__conv_geometry_finish (pointed to, not copied). */
cdc_shard_task_t cdc__msg_task(const cdc_msg_header_t *header, const float *a,
                               const float *second, const cdc_conv_geometry_t *geometry,
                               float *result);

/* Short name of a message type ("TASK_GEMM"); "UNKNOWN" otherwise. */
const char *cdc__msg_type_name(int type);

#endif
