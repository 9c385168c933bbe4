/* checkpoint.c - the llama2.c checkpoint format, read by mmap and written
 * with seeded weights (checkpoint.h). */
#define _FILE_OFFSET_BITS 64
#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { HEADER_INTS = 7 };

int llm_fail(char *err, size_t size, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(err, size, format, args);
    va_end(args);
    return -1;
}

int llm_head_size(const llm_config_t *c)
{
    return c->dim / c->n_heads;
}

int llm_kv_dim(const llm_config_t *c)
{
    return c->n_kv_heads * llm_head_size(c);
}

int llm_config_check(const llm_config_t *c, char *err, size_t err_size)
{
    const struct {
        const char *name;
        int value, max;
    } fields[] = {{"dim", c->dim, LLM_MAX_DIM},
                  {"hidden_dim", c->hidden_dim, 4 * LLM_MAX_DIM},
                  {"n_layers", c->n_layers, LLM_MAX_LAYERS},
                  {"n_heads", c->n_heads, LLM_MAX_DIM},
                  {"n_kv_heads", c->n_kv_heads, LLM_MAX_DIM},
                  {"vocab_size", c->vocab_size, LLM_MAX_VOCAB},
                  {"seq_len", c->seq_len, LLM_MAX_SEQ}};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        if (fields[i].value < 1 || fields[i].value > fields[i].max)
            return llm_fail(err, err_size, "%s = %d, expected 1..%d", fields[i].name,
                            fields[i].value, fields[i].max);
    if (c->dim % c->n_heads != 0 || llm_head_size(c) % 2 != 0)
        return llm_fail(err, err_size, "dim %d is not n_heads %d times an even head size",
                        c->dim, c->n_heads);
    if (c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads != 0)
        return llm_fail(err, err_size, "n_kv_heads %d does not divide n_heads %d",
                        c->n_kv_heads, c->n_heads);
    return 0;
}

/* The tensors after the header, in file order (checkpoint.h): their
   floats, and how llm_checkpoint_write draws them (center + uniform in
   +-scale). The classifier has none when it is the token embedding. */
enum {
    T_EMBEDDING, T_RMS_ATT, T_WQ, T_WK, T_WV, T_WO, T_RMS_FFN, T_W1, T_W2, T_W3,
    T_RMS_FINAL, T_ROPE, T_CLASSIFIER, TENSORS
};

typedef struct {
    int64_t floats;
    float center, scale;
} tensor_t;

static void tensors_of(const llm_config_t *c, tensor_t t[TENSORS])
{
    int64_t D = c->dim, H = c->hidden_dim, L = c->n_layers, V = c->vocab_size;
    int64_t KV = llm_kv_dim(c);
    float in_d = (float) (1.0 / sqrt((double) D)), in_h = (float) (1.0 / sqrt((double) H));
    t[T_EMBEDDING] = (tensor_t){V * D, 0.0f, 1.0f};
    t[T_RMS_ATT] = (tensor_t){L * D, 1.0f, 0.1f};
    t[T_WQ] = (tensor_t){L * D * D, 0.0f, in_d};
    t[T_WK] = (tensor_t){L * KV * D, 0.0f, in_d};
    t[T_WV] = (tensor_t){L * KV * D, 0.0f, in_d};
    t[T_WO] = (tensor_t){L * D * D, 0.0f, in_d};
    t[T_RMS_FFN] = (tensor_t){L * D, 1.0f, 0.1f};
    t[T_W1] = (tensor_t){L * H * D, 0.0f, in_d};
    t[T_W2] = (tensor_t){L * D * H, 0.0f, in_h};
    t[T_W3] = (tensor_t){L * H * D, 0.0f, in_d};
    t[T_RMS_FINAL] = (tensor_t){D, 1.0f, 0.1f};
    t[T_ROPE] = (tensor_t){(int64_t) c->seq_len * llm_head_size(c), 0.0f, 0.0f}; /* legacy */
    t[T_CLASSIFIER] = (tensor_t){c->shared_classifier ? 0 : V * D, 0.0f, in_d};
}

/* The floats after the header. */
static int64_t model_floats(const llm_config_t *c)
{
    tensor_t t[TENSORS];
    tensors_of(c, t);
    int64_t floats = 0;
    for (int i = 0; i < TENSORS; i++)
        floats += t[i].floats;
    return floats;
}

int64_t llm_weight_bytes(const llm_config_t *c)
{
    tensor_t t[TENSORS];
    tensors_of(c, t);
    int64_t floats = t[T_WQ].floats + t[T_WK].floats + t[T_WV].floats + t[T_WO].floats +
                     t[T_W1].floats + t[T_W2].floats + t[T_W3].floats +
                     (int64_t) c->vocab_size * c->dim; /* the classifier, shared or not */
    return floats * (int64_t) sizeof(float);
}

/* Point every tensor into the floats after the header. */
static void point_weights(const llm_config_t *c, const float *at, llm_weights_t *w)
{
    tensor_t t[TENSORS];
    tensors_of(c, t);
    const float *start[TENSORS];
    for (int i = 0; i < TENSORS; i++) {
        start[i] = at;
        at += t[i].floats;
    }
    *w = (llm_weights_t){.token_embedding = start[T_EMBEDDING], .rms_att = start[T_RMS_ATT],
                         .wq = start[T_WQ], .wk = start[T_WK], .wv = start[T_WV],
                         .wo = start[T_WO], .rms_ffn = start[T_RMS_FFN], .w1 = start[T_W1],
                         .w2 = start[T_W2], .w3 = start[T_W3], .rms_final = start[T_RMS_FINAL],
                         .classifier = c->shared_classifier ? start[T_EMBEDDING]
                                                            : start[T_CLASSIFIER]};
}

static void config_from_header(const int32_t *h, llm_config_t *c)
{
    c->dim = h[0];
    c->hidden_dim = h[1];
    c->n_layers = h[2];
    c->n_heads = h[3];
    c->n_kv_heads = h[4];
    c->shared_classifier = h[5] > 0;
    c->vocab_size = h[5] > 0 ? h[5] : h[5] == INT32_MIN ? 0 : -h[5];
    c->seq_len = h[6];
}

int llm_checkpoint_open(const char *path, llm_checkpoint_t *ck, char *err, size_t err_size)
{
    memset(ck, 0, sizeof *ck);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return llm_fail(err, err_size, "%s: %s", path, strerror(errno));
    struct stat st;
    int32_t header[HEADER_INTS];
    if (fstat(fd, &st) != 0 || read(fd, header, sizeof header) != (ssize_t) sizeof header) {
        close(fd);
        return llm_fail(err, err_size, "%s: no checkpoint header (7 int32)", path);
    }
    config_from_header(header, &ck->config);
    if (llm_config_check(&ck->config, err, err_size) != 0) {
        char reason[200];
        snprintf(reason, sizeof reason, "%s", err);
        close(fd);
        return llm_fail(err, err_size, "%s: header: %s", path, reason);
    }
    int64_t want = (int64_t) sizeof header + model_floats(&ck->config) * (int64_t) sizeof(float);
    int too_big = (uint64_t) want > (uint64_t) SIZE_MAX; /* a 32-bit machine */
    if ((int64_t) st.st_size != want || too_big) {
        close(fd);
        return llm_fail(err, err_size, "%s: %lld bytes, the header implies %lld%s", path,
                        (long long) st.st_size, (long long) want,
                        too_big ? " (more than this machine can map)" : "");
    }
    ck->size = (size_t) want;
    ck->map = mmap(NULL, ck->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (ck->map == MAP_FAILED) {
        ck->map = NULL;
        return llm_fail(err, err_size, "%s: mmap: %s", path, strerror(errno));
    }
    point_weights(&ck->config, (const float *) ((const char *) ck->map + sizeof header),
                  &ck->weights);
    return 0;
}

void llm_checkpoint_close(llm_checkpoint_t *ck)
{
    if (ck->map)
        munmap(ck->map, ck->size);
    memset(ck, 0, sizeof *ck);
}

/* ---- writing -------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* count floats: center + uniform in +-scale, written through a buffer. */
static int write_tensor(FILE *f, uint64_t *rng, int64_t count, float center, float scale)
{
    float buffer[4096];
    while (count > 0) {
        int64_t chunk = count < 4096 ? count : 4096;
        for (int64_t i = 0; i < chunk; i++) {
            double u = (double) (splitmix(rng) >> 11) / (double) (UINT64_C(1) << 53);
            buffer[i] = center + scale * (float) (2.0 * u - 1.0);
        }
        if (fwrite(buffer, sizeof(float), (size_t) chunk, f) != (size_t) chunk)
            return -1;
        count -= chunk;
    }
    return 0;
}

int llm_checkpoint_write(const char *path, const llm_config_t *c, uint64_t seed, char *err,
                         size_t err_size)
{
    if (llm_config_check(c, err, err_size) != 0)
        return -1;
    FILE *f = fopen(path, "wb");
    if (!f)
        return llm_fail(err, err_size, "%s: %s", path, strerror(errno));
    int32_t header[HEADER_INTS] = {c->dim,        c->hidden_dim,
                                   c->n_layers,   c->n_heads,
                                   c->n_kv_heads, c->shared_classifier ? c->vocab_size
                                                                       : -c->vocab_size,
                                   c->seq_len};
    tensor_t tensors[TENSORS];
    tensors_of(c, tensors);
    uint64_t rng = seed;
    int rc = fwrite(header, sizeof header, 1, f) == 1 ? 0 : -1;
    for (int i = 0; rc == 0 && i < TENSORS; i++)
        rc = write_tensor(f, &rng, tensors[i].floats, tensors[i].center, tensors[i].scale);
    if (fclose(f) != 0)
        rc = -1;
    return rc == 0 ? 0
                   : llm_fail(err, err_size, "%s: write failed: %s", path, strerror(errno));
}
