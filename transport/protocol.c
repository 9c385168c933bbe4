/* protocol.c - packing, unpacking and strict validation of wire messages. */
#include "protocol.h"

#include "error.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* Byte offsets of the header fields (little-endian, no padding). */
enum {
    OFF_MAGIC = 0,
    OFF_VERSION = 4,
    OFF_TYPE = 6,
    OFF_REQUEST = 8,
    OFF_SHARD = 16,
    OFF_DTYPE = 20,
    OFF_ROWS = 24,
    OFF_K = 32,
    OFF_COLS = 40,
    OFF_A_KEY = 48,
    OFF_BT_KEY = 56,
    OFF_BATCH = 64,
    OFF_GEOMETRY = 72, /* 11 x int64: channels h w kh kw sh sw ph pw dh dw */
    OFF_ERROR = 160,
    OFF_RESERVED = 164,
    OFF_LEAD_ROWS = 168, /* version 3 */
    OFF_PART_ROWS = 176,
    OFF_ROW_OFFSET = 184
};

/* A largest payload is a whole number of chunks, so CDC_PROTO_MAX_FRAMES is
   exact. */
_Static_assert(CDC_PROTO_MAX_FLOATS * 4 % (int64_t) CDC_PROTO_CHUNK_BYTES == 0,
               "the largest payload is a whole number of chunks");

static void put_u(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t) (v >> (8 * i));
}

static uint64_t get_u(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t) p[i] << (8 * i);
    return v;
}

/* The geometry fields in wire order, so pack and unpack cannot disagree. */
static int64_t *geometry_field(cdc_conv_geometry_t *g, int i)
{
    int64_t *fields[11] = {&g->channels, &g->h,        &g->w,        &g->kernel_h,
                           &g->kernel_w, &g->stride_h, &g->stride_w, &g->pad_h,
                           &g->pad_w,    &g->dilation_h, &g->dilation_w};
    return fields[i];
}

static int type_has_matrix(int type)
{
    return type == CDC_MSG_TASK_GEMM || type == CDC_MSG_TASK_CONV ||
           type == CDC_MSG_WEIGHTS || type == CDC_MSG_RESULT || type == CDC_MSG_STORED;
}

void cdc__msg_header_init(cdc_msg_header_t *header, cdc_msg_type_t type)
{
    memset(header, 0, sizeof *header);
    header->magic = CDC_PROTO_MAGIC;
    header->version = CDC_PROTO_VERSION;
    header->type = (uint16_t) type;
    header->dtype = type_has_matrix(type) ? CDC_PROTO_DTYPE_F32 : 0;
}

static uint64_t floats_bytes(int64_t a, int64_t b)
{
    return (uint64_t) a * (uint64_t) b * sizeof(float);
}

/* An operand's bytes when it is carried inline (key 0), else 0. */
static uint64_t inline_operand(uint64_t key, int64_t rows, int64_t k)
{
    return key == 0 ? floats_bytes(rows, k) : 0;
}

void cdc__task_memory_of_header(const cdc_msg_header_t *h, cdc_task_memory_t *memory)
{
    *memory = (cdc_task_memory_t){0, 0, 0, 0, 0};
    if (h->type != CDC_MSG_TASK_GEMM && h->type != CDC_MSG_TASK_CONV)
        return;
    int is_conv = h->type == CDC_MSG_TASK_CONV;
    memory->inline_bytes = inline_operand(h->a_key, h->rows, h->k);
    if (is_conv)
        memory->inline_bytes += floats_bytes(h->batch, h->geometry.channels * h->geometry.h *
                                                           h->geometry.w);
    else
        memory->inline_bytes += inline_operand(h->bt_key, h->cols, h->k);
    memory->result_bytes = floats_bytes(h->rows, h->cols);
    memory->im2col_bytes = is_conv ? floats_bytes(h->k, h->cols) : 0;
    memory->total = memory->inline_bytes + memory->result_bytes + memory->im2col_bytes;
}

void cdc__msg_header_pack(const cdc_msg_header_t *header, uint8_t *out)
{
    cdc_conv_geometry_t g = header->geometry;
    put_u(out + OFF_MAGIC, header->magic, 4);
    put_u(out + OFF_VERSION, header->version, 2);
    put_u(out + OFF_TYPE, header->type, 2);
    put_u(out + OFF_REQUEST, header->request_id, 8);
    put_u(out + OFF_SHARD, (uint32_t) header->shard, 4);
    put_u(out + OFF_DTYPE, header->dtype, 4);
    put_u(out + OFF_ROWS, (uint64_t) header->rows, 8);
    put_u(out + OFF_K, (uint64_t) header->k, 8);
    put_u(out + OFF_COLS, (uint64_t) header->cols, 8);
    put_u(out + OFF_A_KEY, header->a_key, 8);
    put_u(out + OFF_BT_KEY, header->bt_key, 8);
    put_u(out + OFF_BATCH, (uint64_t) header->batch, 8);
    for (int i = 0; i < 11; i++)
        put_u(out + OFF_GEOMETRY + 8 * i, (uint64_t) *geometry_field(&g, i), 8);
    put_u(out + OFF_ERROR, (uint32_t) header->error_code, 4);
    put_u(out + OFF_RESERVED, 0, 4);
    put_u(out + OFF_LEAD_ROWS, (uint64_t) header->lead_rows, 8);
    put_u(out + OFF_PART_ROWS, (uint64_t) header->part_rows, 8);
    put_u(out + OFF_ROW_OFFSET, (uint64_t) header->row_offset, 8);
}

int cdc__msg_header_unpack(const void *data, size_t size, cdc_msg_header_t *header)
{
    if (!data || size != CDC_PROTO_HEADER_SIZE)
        return cdc__fail(CDC_EPROTO, "header frame is %zu bytes, expected %d", size,
                         CDC_PROTO_HEADER_SIZE);
    const uint8_t *p = data;
    memset(header, 0, sizeof *header);
    header->magic = (uint32_t) get_u(p + OFF_MAGIC, 4);
    header->version = (uint16_t) get_u(p + OFF_VERSION, 2);
    header->type = (uint16_t) get_u(p + OFF_TYPE, 2);
    header->request_id = get_u(p + OFF_REQUEST, 8);
    header->shard = (int32_t) (uint32_t) get_u(p + OFF_SHARD, 4);
    header->dtype = (uint32_t) get_u(p + OFF_DTYPE, 4);
    header->rows = (int64_t) get_u(p + OFF_ROWS, 8);
    header->k = (int64_t) get_u(p + OFF_K, 8);
    header->cols = (int64_t) get_u(p + OFF_COLS, 8);
    header->a_key = get_u(p + OFF_A_KEY, 8);
    header->bt_key = get_u(p + OFF_BT_KEY, 8);
    header->batch = (int64_t) get_u(p + OFF_BATCH, 8);
    for (int i = 0; i < 11; i++)
        *geometry_field(&header->geometry, i) = (int64_t) get_u(p + OFF_GEOMETRY + 8 * i, 8);
    header->error_code = (int32_t) (uint32_t) get_u(p + OFF_ERROR, 4);
    header->lead_rows = (int64_t) get_u(p + OFF_LEAD_ROWS, 8);
    header->part_rows = (int64_t) get_u(p + OFF_PART_ROWS, 8);
    header->row_offset = (int64_t) get_u(p + OFF_ROW_OFFSET, 8);
    return CDC_OK;
}

int cdc__msg_payload_count(cdc_msg_type_t type)
{
    switch (type) {
    case CDC_MSG_TASK_GEMM:
    case CDC_MSG_TASK_CONV:
        return 2;
    case CDC_MSG_WEIGHTS:
    case CDC_MSG_RESULT:
    case CDC_MSG_ERROR:
    case CDC_MSG_PONG: /* its status text (status.h) */
        return 1;
    case CDC_MSG_MISS:
    case CDC_MSG_PING:
    case CDC_MSG_CANCEL:
    case CDC_MSG_GOODBYE:
    case CDC_MSG_STORED:
        return 0;
    }
    return -1;
}

int cdc__msg_payload_frames(uint64_t size)
{
    if (size == 0)
        return 1; /* an empty payload (a cached operand) is one empty frame */
    uint64_t frames = (size - 1) / CDC_PROTO_CHUNK_BYTES + 1;
    return frames > INT_MAX ? INT_MAX : (int) frames;
}

void cdc__msg_payload_gather(const cdc_msg_payload_t *payload, void *out)
{
    uint8_t *at = out;
    for (int i = 0; i < payload->count; i++) {
        if (payload->frames[i].size)
            memcpy(at, payload->frames[i].data, payload->frames[i].size);
        at += payload->frames[i].size;
    }
}

const char *cdc__msg_type_name(int type)
{
    static const char *const names[] = {"UNKNOWN", "TASK_GEMM", "TASK_CONV", "WEIGHTS",
                                        "RESULT",  "ERROR",     "MISS",      "PING",
                                        "PONG",    "CANCEL",    "GOODBYE",   "STORED"};
    return type >= 1 && type <= 11 ? names[type] : names[0];
}

static int check_dim(const char *type, const char *name, int64_t value)
{
    if (value < 1 || value > CDC_PROTO_MAX_DIM)
        return cdc__fail(CDC_EPROTO, "%s: %s = %lld outside [1, %lld]", type, name,
                         (long long) value, (long long) CDC_PROTO_MAX_DIM);
    return CDC_OK;
}

/* a x b floats (both already within CDC_PROTO_MAX_DIM, so no overflow) must stay
   under CDC_PROTO_MAX_FLOATS; *floats gets the product. */
static int check_product(const char *type, const char *what, int64_t a, int64_t b,
                         int64_t *floats)
{
    if (a > CDC_PROTO_MAX_FLOATS / b)
        return cdc__fail(CDC_EPROTO, "%s: %s = %lld x %lld floats exceeds %lld", type, what,
                         (long long) a, (long long) b, (long long) CDC_PROTO_MAX_FLOATS);
    *floats = a * b;
    return CDC_OK;
}

typedef cdc_msg_payload_spec_t payload_spec_t;
typedef cdc_msg_shape_t layout_t;

static void layout_add(layout_t *l, const char *name, uint64_t key, int64_t floats)
{
    l->p[l->count++] = (payload_spec_t){name, (uint64_t) floats * sizeof(float), key, 0};
}

static int validate_gemm(const cdc_msg_header_t *h, layout_t *l)
{
    const char *t = "TASK_GEMM";
    int64_t a_floats = 0, bt_floats = 0, result_floats = 0;
    int rc;
    if ((rc = check_dim(t, "rows", h->rows)) || (rc = check_dim(t, "k", h->k)) ||
        (rc = check_dim(t, "cols", h->cols)) ||
        (rc = check_product(t, "a", h->rows, h->k, &a_floats)) ||
        (rc = check_product(t, "bt", h->cols, h->k, &bt_floats)) ||
        (rc = check_product(t, "result", h->rows, h->cols, &result_floats)))
        return rc;
    layout_add(l, "a", h->a_key, a_floats);
    layout_add(l, "bt", h->bt_key, bt_floats);
    return CDC_OK;
}

static int validate_conv(const cdc_msg_header_t *h, layout_t *l)
{
    const char *t = "TASK_CONV";
    cdc_conv_geometry_t g = h->geometry;
    int64_t a_floats = 0, result_floats = 0, image = 0, input_floats = 0, kernel = 0;
    int rc;
    if ((rc = check_dim(t, "rows", h->rows)) || (rc = check_dim(t, "k", h->k)) ||
        (rc = check_dim(t, "cols", h->cols)) || (rc = check_dim(t, "batch", h->batch)) ||
        (rc = check_dim(t, "channels", g.channels)) || (rc = check_dim(t, "h", g.h)) ||
        (rc = check_dim(t, "w", g.w)) || (rc = check_dim(t, "kernel_h", g.kernel_h)) ||
        (rc = check_dim(t, "kernel_w", g.kernel_w)) ||
        (rc = check_dim(t, "stride_h", g.stride_h)) ||
        (rc = check_dim(t, "stride_w", g.stride_w)) ||
        (rc = check_dim(t, "dilation_h", g.dilation_h)) ||
        (rc = check_dim(t, "dilation_w", g.dilation_w)))
        return rc;
    if (g.pad_h < 0 || g.pad_h > CDC_PROTO_MAX_DIM || g.pad_w < 0 ||
        g.pad_w > CDC_PROTO_MAX_DIM)
        return cdc__fail(CDC_EPROTO, "%s: padding %lld x %lld out of range", t,
                         (long long) g.pad_h, (long long) g.pad_w);
    if (cdc__conv_geometry_finish(&g) != CDC_OK)
        return cdc__fail(CDC_EPROTO, "%s: invalid conv geometry (%s)", t, cdc_last_error());
    if ((rc = check_product(t, "image", g.h, g.w, &image)) ||
        (rc = check_product(t, "image", image, g.channels, &image)) ||
        (rc = check_product(t, "input", image, h->batch, &input_floats)) ||
        (rc = check_product(t, "kernel", g.kernel_h, g.kernel_w, &kernel)) ||
        (rc = check_product(t, "kernel", kernel, g.channels, &kernel)))
        return rc;
    if (kernel != h->k)
        return cdc__fail(CDC_EPROTO, "%s: k = %lld but channels x kh x kw = %lld", t,
                         (long long) h->k, (long long) kernel);
    int64_t spatial = 0, cols = 0;
    if ((rc = check_product(t, "output", g.out_h, g.out_w, &spatial)) ||
        (rc = check_product(t, "output", spatial, h->batch, &cols)))
        return rc;
    if (cols != h->cols)
        return cdc__fail(CDC_EPROTO, "%s: cols = %lld but batch x out_h x out_w = %lld", t,
                         (long long) h->cols, (long long) cols);
    /* The worker's im2col buffer is k x cols; bound it like any matrix. */
    int64_t unfolded = 0;
    if ((rc = check_product(t, "im2col", h->k, h->cols, &unfolded)) ||
        (rc = check_product(t, "a", h->rows, h->k, &a_floats)) ||
        (rc = check_product(t, "result", h->rows, h->cols, &result_floats)))
        return rc;
    if (h->bt_key != 0)
        return cdc__fail(CDC_EPROTO, "%s: bt_key must be 0", t);
    layout_add(l, "a", h->a_key, a_floats);
    layout_add(l, "input", 0, input_floats);
    return CDC_OK;
}

/* The payloads of the types other than tasks (ERROR's and PONG's text has
   a limit, not a size). */
static int validate_other(const cdc_msg_header_t *h, const char *t, layout_t *l)
{
    int64_t floats = 0;
    int rc = CDC_OK;
    switch ((cdc_msg_type_t) h->type) {
    case CDC_MSG_WEIGHTS:
        if (h->a_key == 0)
            return cdc__fail(CDC_EPROTO, "WEIGHTS: key must be nonzero");
        if (!(rc = check_dim(t, "rows", h->rows)) && !(rc = check_dim(t, "k", h->k)) &&
            !(rc = check_product(t, "weights", h->rows, h->k, &floats)))
            layout_add(l, "weights", 0, floats);
        return rc;
    case CDC_MSG_RESULT:
        if (!(rc = check_dim(t, "rows", h->rows)) && !(rc = check_dim(t, "cols", h->cols)) &&
            !(rc = check_product(t, "result", h->rows, h->cols, &floats)))
            layout_add(l, "result", 0, floats);
        return rc;
    case CDC_MSG_ERROR:
    case CDC_MSG_PONG: /* its status text (status.h) */
        l->p[l->count++] = (payload_spec_t){"text", CDC_PROTO_MAX_TEXT, 0, 1};
        return CDC_OK;
    case CDC_MSG_MISS:
        if (h->a_key == 0)
            return cdc__fail(CDC_EPROTO, "MISS: key must be nonzero");
        return CDC_OK;
    case CDC_MSG_STORED: /* the matrix it names; no payload */
        if (h->a_key == 0)
            return cdc__fail(CDC_EPROTO, "STORED: key must be nonzero");
        if (!(rc = check_dim(t, "rows", h->rows)) && !(rc = check_dim(t, "k", h->k)))
            rc = check_product(t, "weights", h->rows, h->k, &floats);
        return rc;
    default: /* PING, CANCEL, GOODBYE: the header alone */
        return CDC_OK;
    }
}

/* Frames a payload must take: cached operands and text travel in one. */
static int spec_frames(const payload_spec_t *s)
{
    return s->key || s->text ? 1 : cdc__msg_payload_frames(s->bytes);
}

/* Chunk j of the n frames of one payload, of size bytes: a cached operand's
   frame empty, text within its limit, every chunk of its exact size. */
static int check_chunk(const char *t, const payload_spec_t *s, int j, int n, size_t size)
{
    if (s->key && size != 0)
        return cdc__fail(CDC_EPROTO, "%s: %s has key %016llx and a %zu-byte payload", t,
                         s->name, (unsigned long long) s->key, size);
    if (s->text && size > s->bytes)
        return cdc__fail(CDC_EPROTO, "%s: %s is %zu bytes, limit %llu", t, s->name, size,
                         (unsigned long long) s->bytes);
    if (s->key || s->text)
        return CDC_OK;
    uint64_t want = j + 1 < n ? CDC_PROTO_CHUNK_BYTES
                              : s->bytes - (uint64_t) (n - 1) * CDC_PROTO_CHUNK_BYTES;
    if ((uint64_t) size == want)
        return CDC_OK;
    if (n == 1)
        return cdc__fail(CDC_EPROTO, "%s: %s frame is %zu bytes, expected %llu", t, s->name,
                         size, (unsigned long long) want);
    return cdc__fail(CDC_EPROTO, "%s: %s chunk %d of %d is %zu bytes, expected %llu", t,
                     s->name, j + 1, n, size, (unsigned long long) want);
}

/* The n frames of one payload, each checked by check_chunk. */
static int check_chunks(const char *t, const payload_spec_t *s, const cdc_frame_t *frames,
                        int n)
{
    for (int j = 0; j < n; j++) {
        int rc = check_chunk(t, s, j, n, frames[j].size);
        if (rc != CDC_OK)
            return rc;
    }
    return CDC_OK;
}

/* "header, a: 1, bt: 3": the frames each part of the layout takes. */
static void layout_detail(const layout_t *l, char *detail, size_t size)
{
    size_t used = (size_t) snprintf(detail, size, "header");
    for (int i = 0; i < l->count && used < size; i++) {
        int wrote = snprintf(detail + used, size - used, ", %s: %d", l->p[i].name,
                             spec_frames(&l->p[i]));
        used += wrote > 0 ? (size_t) wrote : 0;
    }
}

/* The frames after the header against the layout: first their count (each
   payload's chunks), then every chunk's size; fills msg's payload views. */
static int check_layout(const char *t, const layout_t *l, const cdc_frame_t *frames,
                        int count, cdc_msg_t *msg)
{
    if (count != l->frames) {
        char detail[128];
        layout_detail(l, detail, sizeof detail);
        return cdc__fail(CDC_EPROTO, "%s: %d frames, expected %d (%s)", t, count, l->frames,
                         detail);
    }
    int at = 1;
    for (int i = 0; i < l->count; i++) {
        int n = spec_frames(&l->p[i]);
        int rc = check_chunks(t, &l->p[i], frames + at, n);
        if (rc != CDC_OK)
            return rc;
        size_t size = 0;
        for (int j = 0; j < n; j++)
            size += frames[at + j].size;
        msg->payload[i] = (cdc_msg_payload_t){frames + at, n, size};
        at += n;
    }
    msg->payload_count = l->count;
    return CDC_OK;
}

/* The header frame alone: size, magic, version, type, dtype, shard. */
static int check_header(const cdc_frame_t *frame, cdc_msg_header_t *h)
{
    int rc = cdc__msg_header_unpack(frame->data, frame->size, h);
    if (rc != CDC_OK)
        return rc;
    if (h->magic != CDC_PROTO_MAGIC)
        return cdc__fail(CDC_EPROTO, "bad magic %08x, expected %08x", (unsigned) h->magic,
                         (unsigned) CDC_PROTO_MAGIC);
    if (h->version != CDC_PROTO_VERSION)
        return cdc__fail(CDC_EPROTO, "protocol version %u, this build speaks %d",
                         (unsigned) h->version, CDC_PROTO_VERSION);
    if (cdc__msg_payload_count((cdc_msg_type_t) h->type) < 0)
        return cdc__fail(CDC_EPROTO, "unknown message type %u", (unsigned) h->type);
    const char *t = cdc__msg_type_name(h->type);
    if (type_has_matrix(h->type) && h->dtype != CDC_PROTO_DTYPE_F32)
        return cdc__fail(CDC_EPROTO, "%s: dtype %u, only float32 (%d) is supported", t,
                         (unsigned) h->dtype, CDC_PROTO_DTYPE_F32);
    if (h->shard < 0 || h->shard >= 64)
        return cdc__fail(CDC_EPROTO, "%s: shard %d outside [0, 63]", t, (int) h->shard);
    return CDC_OK;
}

/* A task's streaming (lead_rows, part_rows) and a RESULT's row_offset: in
   range, and zero where a type has none; a task streams in at most 32
   parts (task.h). */
static int check_stream(const cdc_msg_header_t *h, const char *t)
{
    int task = h->type == CDC_MSG_TASK_GEMM || h->type == CDC_MSG_TASK_CONV;
    int64_t lead = task ? h->lead_rows : 0, part = task ? h->part_rows : 0;
    if (!task && (h->lead_rows || h->part_rows))
        return cdc__fail(CDC_EPROTO, "%s: lead_rows/part_rows must be 0", t);
    if (h->row_offset != 0 && h->type != CDC_MSG_RESULT)
        return cdc__fail(CDC_EPROTO, "%s: row_offset must be 0", t);
    if (h->row_offset < 0 || h->row_offset >= CDC_PROTO_MAX_DIM)
        return cdc__fail(CDC_EPROTO, "%s: row_offset = %lld outside [0, %lld)", t,
                         (long long) h->row_offset, (long long) CDC_PROTO_MAX_DIM);
    if (lead < 0 || lead > h->rows)
        return cdc__fail(CDC_EPROTO, "%s: lead_rows = %lld outside [0, rows = %lld]", t,
                         (long long) lead, (long long) h->rows);
    int streams = lead > 0 && lead < h->rows;
    if (!streams && part != 0)
        return cdc__fail(CDC_EPROTO, "%s: part_rows = %lld without rows after lead_rows", t,
                         (long long) part);
    if (streams && (part < 1 || part > h->rows || (h->rows - lead + part - 1) / part > 31))
        return cdc__fail(CDC_EPROTO, "%s: part_rows = %lld: %lld rows after the lead in "
                         "1..31 parts", t, (long long) part, (long long) (h->rows - lead));
    return CDC_OK;
}

int cdc__msg_shape(const cdc_frame_t *header, cdc_msg_shape_t *shape)
{
    memset(shape, 0, sizeof *shape);
    cdc_msg_header_t *h = &shape->header;
    int rc = check_header(header, h);
    if (rc != CDC_OK)
        return rc;
    const char *t = cdc__msg_type_name(h->type);
    if (h->type == CDC_MSG_TASK_GEMM)
        rc = validate_gemm(h, shape);
    else if (h->type == CDC_MSG_TASK_CONV)
        rc = validate_conv(h, shape);
    else
        rc = validate_other(h, t, shape);
    if (rc == CDC_OK)
        rc = check_stream(h, t);
    shape->frames = 1;
    for (int i = 0; i < shape->count; i++)
        shape->frames += spec_frames(&shape->p[i]);
    return rc;
}

int cdc__msg_shape_frame(const cdc_msg_shape_t *shape, int index, size_t size)
{
    const char *t = cdc__msg_type_name(shape->header.type);
    if (index < 1 || index >= shape->frames) {
        char detail[128];
        layout_detail(shape, detail, sizeof detail);
        return cdc__fail(CDC_EPROTO, "%s: frame %d is past the %d frames its header implies (%s)",
                         t, index + 1, shape->frames, detail);
    }
    int at = 1;
    for (int i = 0; i < shape->count; i++) {
        int n = spec_frames(&shape->p[i]);
        if (index < at + n)
            return check_chunk(t, &shape->p[i], index - at, n, size);
        at += n;
    }
    return CDC_OK; /* not reached: index < shape->frames */
}

int cdc__msg_decode(const cdc_frame_t *frames, int count, cdc_msg_t *msg)
{
    if (!frames || !msg || count < 1)
        return cdc__fail(CDC_EPROTO, "empty message (%d frames)", count);
    memset(msg, 0, sizeof *msg);
    if (count > CDC_PROTO_MAX_FRAMES)
        return cdc__fail(CDC_EPROTO, "message has %d frames, at most %d", count,
                         CDC_PROTO_MAX_FRAMES);
    layout_t layout;
    int rc = cdc__msg_shape(&frames[0], &layout);
    msg->header = layout.header;
    if (rc == CDC_OK)
        rc = check_layout(cdc__msg_type_name(layout.header.type), &layout, frames, count, msg);
    if (rc != CDC_OK)
        msg->payload_count = 0;
    return rc;
}

cdc_shard_task_t cdc__msg_task(const cdc_msg_header_t *header, const float *a,
                               const float *second, const cdc_conv_geometry_t *geometry,
                               float *result)
{
    int is_conv = header->type == CDC_MSG_TASK_CONV;
    return (cdc_shard_task_t){
        .kind = is_conv ? CDC_TASK_CONV : CDC_TASK_GEMM,
        .shard = header->shard,
        .a = a,
        .a_rows = header->rows,
        .k = header->k,
        .bt = is_conv ? NULL : second,
        .geometry = is_conv ? geometry : NULL,
        .batch = header->batch,
        .input = is_conv ? second : NULL,
        .cols = header->cols,
        .result = result,
        .lead_rows = header->lead_rows,
        .part_rows = header->part_rows,
    };
}
