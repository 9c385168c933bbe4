/* checkpoint.h - Llama-architecture models in the llama2.c checkpoint format.
 *
 * The file: a header of 7 int32 (dim, hidden_dim, n_layers, n_heads,
 * n_kv_heads, vocab_size, seq_len; a negative vocab_size means the
 * classifier is stored apart from the token embedding), then float32
 * tensors in this order: token embedding (vocab x dim), the attention
 * RMSNorm weights (layers x dim), wq (layers x dim x dim), wk and wv
 * (layers x kv_dim x dim), wo (layers x dim x dim), the FFN RMSNorm weights
 * (layers x dim), w1 (layers x hidden x dim), w2 (layers x dim x hidden), w3
 * (layers x hidden x dim), the final RMSNorm weights (dim), two legacy RoPE
 * tables (seq_len x head_size / 2 each, skipped: the frequencies are
 * computed), and the classifier (vocab x dim) when apart. Every matrix is
 * out x in, row-major: y = W x, as nn.Linear keeps it. Little-endian.
 *
 * Read by mmap: the tensors are views into the file, never copied here. */
#ifndef LLM_CHECKPOINT_H_INCLUDED
#define LLM_CHECKPOINT_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    int shared_classifier; /* the classifier is the token embedding          */
} llm_config_t;

typedef struct {
    const float *token_embedding; /* vocab x dim                          */
    const float *rms_att;         /* layers x dim                         */
    const float *wq, *wk, *wv;    /* layers x (dim | kv_dim | kv_dim) x dim */
    const float *wo;              /* layers x dim x dim                   */
    const float *rms_ffn;         /* layers x dim                         */
    const float *w1, *w2, *w3;    /* layers x hidden x dim, dim x hidden, hidden x dim */
    const float *rms_final;       /* dim                                  */
    const float *classifier;      /* vocab x dim                          */
} llm_weights_t;

typedef struct {
    llm_config_t config;
    llm_weights_t weights;
    void *map;
    size_t size;
} llm_checkpoint_t;

/* The largest of each dimension this program accepts: every product of
   them stays far inside 64 bits. */
#define LLM_MAX_DIM 65536
#define LLM_MAX_LAYERS 1024
#define LLM_MAX_VOCAB (1 << 22)
#define LLM_MAX_SEQ (1 << 20)

/* Format a reason into err (err_size bytes); returns -1, the tool's failure. */
int llm_fail(char *err, size_t err_size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* head_size (dim / n_heads) and kv_dim (n_kv_heads x head_size). */
int llm_head_size(const llm_config_t *c);
int llm_kv_dim(const llm_config_t *c);

/* Bytes of the matrices whose products go through cdcgemm: q, k, v, o,
   w1, w2, w3 of every layer and the classifier (the embedding's rows are
   read here, one per token). */
int64_t llm_weight_bytes(const llm_config_t *c);

/* Whether c describes a model this program runs: every dimension in range,
   heads dividing dim into an even head size, kv heads dividing heads.
   0, or -1 with the reason in err. */
int llm_config_check(const llm_config_t *c, char *err, size_t err_size);

/* Map path and point the weights into it. 0, or -1 with the reason in err
   (the file, the header's field, or the size found against the size the
   header implies). */
int llm_checkpoint_open(const char *path, llm_checkpoint_t *ck, char *err, size_t err_size);

void llm_checkpoint_close(llm_checkpoint_t *ck);

/* Write a checkpoint of config c with weights drawn from seed (the same
   seed, the same file, on every machine): matrices uniform in
   +-1/sqrt(in), the embedding in +-1, RMSNorm weights near 1. For tests and
   benchmarks: no weights are downloaded. 0, or -1 with the reason in err. */
int llm_checkpoint_write(const char *path, const llm_config_t *c, uint64_t seed, char *err,
                         size_t err_size);

#endif
