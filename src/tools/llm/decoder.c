/* decoder.c - the Llama decoder's forward pass (decoder.h), after llama2.c's
 * run.c, batched over the prompt's tokens. */
#include "decoder.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One weight matrix product, out x in: a cdcgemm FC layer, or (the
   reference) the matrix itself, multiplied here in double. */
typedef struct {
    cdc_layer_t *layer;
    const float *w; /* the reference's matrix (stacked ones owned)            */
    float *owned;
    int64_t out, in;
} linear_t;

enum { QKV, WO, GATE_UP, W2, MATRICES };

struct llm_decoder {
    const llm_checkpoint_t *ck;
    llm_config_t c;
    const llm_weights_t *w;
    int head_size, kv_dim, max_batch;
    linear_t *linears;  /* layers x MATRICES                                  */
    linear_t classifier;
    float *key_cache, *value_cache; /* layers x seq_len x kv_dim              */
    float *x, *xb, *xb2, *qkv, *gate_up, *hb, *att; /* max_batch rows each */
};

/* The matrix of rows parts stacked (each rows[i] x in, from part[i] in
   ck's map): a cdcgemm layer borrows the parts where they lie in the map
   (never copied whole; the library gives the map's pages back after
   reading them), the reference stacks a copy. */
static int linear_new(cdc_context_t *context, int parts, const float *const *part,
                      const int64_t *rows, int64_t in, linear_t *l, char *err, size_t err_size)
{
    memset(l, 0, sizeof *l);
    l->in = in;
    cdc_weight_part_t borrowed[CDC_MAX_WEIGHT_PARTS];
    for (int i = 0; i < parts; i++) {
        l->out += rows[i];
        borrowed[i] = (cdc_weight_part_t){part[i], rows[i]};
    }
    if (context) {
        int rc = cdc_fc_new_borrowed(context, in, borrowed, parts, CDC_BORROW_FILE_MAPPED, NULL,
                                     NULL, &l->layer);
        return rc == CDC_OK ? 0
                            : llm_fail(err, err_size, "cdc_fc_new_borrowed (%lld x %lld): %s: %s",
                                       (long long) l->out, (long long) in, cdc_err_name(rc),
                                       cdc_last_error());
    }
    l->w = part[0];
    if (parts == 1)
        return 0;
    l->owned = malloc((size_t) (l->out * in) * sizeof(float));
    if (!l->owned)
        return llm_fail(err, err_size, "out of memory for a %lld x %lld matrix",
                        (long long) l->out, (long long) in);
    float *at = l->owned;
    for (int i = 0; i < parts; i++) {
        memcpy(at, part[i], (size_t) (rows[i] * in) * sizeof(float));
        at += rows[i] * in;
    }
    l->w = l->owned;
    return 0;
}

static void linear_free(linear_t *l)
{
    cdc_layer_destroy(&l->layer);
    free(l->owned);
    memset(l, 0, sizeof *l);
}

/* y (batch x out) = x (batch x in) times the matrix transposed. */
static int linear_forward(const linear_t *l, int batch, const float *x, float *y, char *err,
                          size_t err_size)
{
    if (l->layer) {
        int rc = cdc_fc_forward(l->layer, batch, x, y);
        return rc == CDC_OK ? 0
                            : llm_fail(err, err_size,
                                       "cdc_fc_forward (%lld x %lld, batch %d): %s: %s",
                                       (long long) l->out, (long long) l->in, batch,
                                       cdc_err_name(rc), cdc_last_error());
    }
    for (int b = 0; b < batch; b++)
        for (int64_t o = 0; o < l->out; o++) {
            double sum = 0.0;
            for (int64_t i = 0; i < l->in; i++)
                sum += (double) l->w[o * l->in + i] * x[(int64_t) b * l->in + i];
            y[(int64_t) b * l->out + o] = (float) sum;
        }
    return 0;
}

static int layer_linears(llm_decoder_t *d, cdc_context_t *context, int l, char *err,
                         size_t err_size)
{
    const llm_weights_t *w = d->w;
    int64_t D = d->c.dim, H = d->c.hidden_dim, KV = d->kv_dim;
    linear_t *at = d->linears + (size_t) l * MATRICES;
    const float *qkv[3] = {w->wq + l * D * D, w->wk + l * KV * D, w->wv + l * KV * D};
    const int64_t qkv_rows[3] = {D, KV, KV};
    const float *wo[1] = {w->wo + l * D * D};
    const float *gate_up[2] = {w->w1 + l * H * D, w->w3 + l * H * D};
    const int64_t gate_up_rows[2] = {H, H};
    const float *w2[1] = {w->w2 + l * D * H};
    if (linear_new(context, 3, qkv, qkv_rows, D, &at[QKV], err, err_size) != 0 ||
        linear_new(context, 1, wo, &D, D, &at[WO], err, err_size) != 0 ||
        linear_new(context, 2, gate_up, gate_up_rows, D, &at[GATE_UP], err,
                   err_size) != 0 ||
        linear_new(context, 1, w2, &D, H, &at[W2], err, err_size) != 0)
        return -1;
    return 0;
}

int llm_decoder_new(const llm_checkpoint_t *ck, cdc_context_t *context, int max_batch,
                    llm_decoder_t **decoder_p, char *err, size_t err_size)
{
    *decoder_p = NULL;
    llm_decoder_t *d = calloc(1, sizeof *d);
    if (!d)
        return llm_fail(err, err_size, "out of memory");
    d->ck = ck;
    d->c = ck->config;
    d->w = &ck->weights;
    d->head_size = llm_head_size(&d->c);
    d->kv_dim = llm_kv_dim(&d->c);
    d->max_batch = max_batch;
    int64_t L = d->c.n_layers, S = d->c.seq_len, D = d->c.dim, H = d->c.hidden_dim;
    size_t cache = (size_t) (L * S * d->kv_dim), rows = (size_t) max_batch;
    d->linears = calloc((size_t) L * MATRICES, sizeof *d->linears);
    d->key_cache = calloc(cache, sizeof(float));
    d->value_cache = calloc(cache, sizeof(float));
    d->x = malloc(rows * (size_t) D * sizeof(float));
    d->xb = malloc(rows * (size_t) D * sizeof(float));
    d->xb2 = malloc(rows * (size_t) D * sizeof(float));
    d->qkv = malloc(rows * (size_t) (D + 2 * d->kv_dim) * sizeof(float));
    d->gate_up = malloc(rows * (size_t) (2 * H) * sizeof(float));
    d->hb = malloc(rows * (size_t) H * sizeof(float));
    d->att = malloc((size_t) S * sizeof(float));
    if (!d->linears || !d->key_cache || !d->value_cache || !d->x || !d->xb || !d->xb2 ||
        !d->qkv || !d->gate_up || !d->hb || !d->att) {
        llm_decoder_destroy(&d);
        return llm_fail(err, err_size,
                        "out of memory for the KV cache (%zu floats) and buffers", 2 * cache);
    }
    int rc = 0;
    for (int l = 0; l < d->c.n_layers && rc == 0; l++)
        rc = layer_linears(d, context, l, err, err_size);
    const float *classifier[1] = {ck->weights.classifier};
    const int64_t vocab = d->c.vocab_size;
    if (rc == 0)
        rc = linear_new(context, 1, classifier, &vocab, D, &d->classifier, err, err_size);
    if (rc != 0) {
        llm_decoder_destroy(&d);
        return -1;
    }
    *decoder_p = d;
    return 0;
}

void llm_decoder_destroy(llm_decoder_t **decoder_p)
{
    llm_decoder_t *d = *decoder_p;
    if (!d)
        return;
    for (int64_t i = 0; d->linears && i < (int64_t) d->c.n_layers * MATRICES; i++)
        linear_free(&d->linears[i]);
    linear_free(&d->classifier);
    free(d->linears);
    free(d->key_cache);
    free(d->value_cache);
    free(d->x);
    free(d->xb);
    free(d->xb2);
    free(d->qkv);
    free(d->gate_up);
    free(d->hb);
    free(d->att);
    free(d);
    *decoder_p = NULL;
}

static void rmsnorm(float *out, const float *x, const float *weight, int n)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++)
        ss += (double) x[i] * x[i];
    float scale = (float) (1.0 / sqrt(ss / n + 1e-5));
    for (int i = 0; i < n; i++)
        out[i] = weight[i] * (scale * x[i]);
}

/* Rotary embedding of q (dim) and k (kv_dim) at position pos. */
static void rope(const llm_decoder_t *d, float *q, float *k, int pos)
{
    for (int i = 0; i < d->c.dim; i += 2) {
        int head_dim = i % d->head_size;
        float freq = 1.0f / powf(10000.0f, (float) head_dim / (float) d->head_size);
        float angle = (float) pos * freq, fcr = cosf(angle), fci = sinf(angle);
        for (int v = 0; v < (i < d->kv_dim ? 2 : 1); v++) {
            float *vec = v == 0 ? q : k;
            float v0 = vec[i], v1 = vec[i + 1];
            vec[i] = v0 * fcr - v1 * fci;
            vec[i + 1] = v0 * fci + v1 * fcr;
        }
    }
}

/* Grouped-query attention of q (dim) at pos over layer l's cache, into out
   (dim): each head over its kv head's keys and values of positions 0..pos.
   A head's scores and its weighted sum of values are matrix-vector
   products over the cache (rows of kv_dim floats, the head's columns), on
   OpenBLAS: the scalar loops took 33 ms a token at position 1,900 of the
   110M model here, OpenBLAS 18 (the cache's 147 MB read once). */
static void attention(llm_decoder_t *d, int l, int pos, const float *q, float *out)
{
    int hs = d->head_size, kv_mul = d->c.n_heads / d->c.n_kv_heads, kv = d->kv_dim;
    size_t layer = (size_t) l * (size_t) d->c.seq_len * (size_t) kv;
    for (int h = 0; h < d->c.n_heads; h++) {
        size_t head = layer + (size_t) (h / kv_mul) * (size_t) hs;
        cblas_sgemv(CblasRowMajor, CblasNoTrans, pos + 1, hs, 1.0f / sqrtf((float) hs),
                    d->key_cache + head, kv, q + h * hs, 1, 0.0f, d->att, 1);
        float max = -INFINITY;
        for (int t = 0; t <= pos; t++)
            max = d->att[t] > max ? d->att[t] : max;
        float sum = 0.0f;
        for (int t = 0; t <= pos; t++) {
            d->att[t] = expf(d->att[t] - max);
            sum += d->att[t];
        }
        cblas_sgemv(CblasRowMajor, CblasTrans, pos + 1, hs, 1.0f / sum, d->value_cache + head,
                    kv, d->att, 1, 0.0f, out + h * hs, 1);
    }
}

/* Layer l's attention block over count tokens from pos: x += Wo attn(q, K, V). */
static int attention_block(llm_decoder_t *d, int l, int count, int pos, char *err,
                           size_t err_size)
{
    int D = d->c.dim, KV = d->kv_dim, width = D + 2 * KV;
    linear_t *lin = d->linears + (size_t) l * MATRICES;
    for (int b = 0; b < count; b++)
        rmsnorm(d->xb + (size_t) b * D, d->x + (size_t) b * D, d->w->rms_att + (int64_t) l * D, D);
    if (linear_forward(&lin[QKV], count, d->xb, d->qkv, err, err_size) != 0)
        return -1;
    size_t layer = (size_t) l * (size_t) d->c.seq_len * (size_t) KV;
    for (int b = 0; b < count; b++) { /* every token's key and value first */
        float *q = d->qkv + (size_t) b * width, *k = q + D, *v = k + KV;
        rope(d, q, k, pos + b);
        memcpy(d->key_cache + layer + (size_t) (pos + b) * KV, k, (size_t) KV * sizeof(float));
        memcpy(d->value_cache + layer + (size_t) (pos + b) * KV, v, (size_t) KV * sizeof(float));
    }
    for (int b = 0; b < count; b++) /* then each attends to those before it */
        attention(d, l, pos + b, d->qkv + (size_t) b * width, d->xb + (size_t) b * D);
    if (linear_forward(&lin[WO], count, d->xb, d->xb2, err, err_size) != 0)
        return -1;
    for (size_t i = 0; i < (size_t) count * D; i++)
        d->x[i] += d->xb2[i];
    return 0;
}

/* Layer l's feed-forward block: x += W2 (silu(W1 xb) * W3 xb). */
static int ffn_block(llm_decoder_t *d, int l, int count, char *err, size_t err_size)
{
    int D = d->c.dim, H = d->c.hidden_dim;
    linear_t *lin = d->linears + (size_t) l * MATRICES;
    for (int b = 0; b < count; b++)
        rmsnorm(d->xb + (size_t) b * D, d->x + (size_t) b * D, d->w->rms_ffn + (int64_t) l * D, D);
    if (linear_forward(&lin[GATE_UP], count, d->xb, d->gate_up, err, err_size) != 0)
        return -1;
    for (int b = 0; b < count; b++) {
        const float *gate = d->gate_up + (size_t) b * 2 * H, *up = gate + H;
        float *hb = d->hb + (size_t) b * H;
        for (int i = 0; i < H; i++)
            hb[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
    }
    if (linear_forward(&lin[W2], count, d->hb, d->xb, err, err_size) != 0)
        return -1;
    for (size_t i = 0; i < (size_t) count * D; i++)
        d->x[i] += d->xb[i];
    return 0;
}

int llm_decoder_ship(llm_decoder_t *d, char *err, size_t err_size)
{
    int64_t widest_in = d->c.hidden_dim > d->c.dim ? d->c.hidden_dim : d->c.dim;
    int64_t widest_out = d->classifier.out;
    for (int64_t i = 0; i < (int64_t) d->c.n_layers * MATRICES; i++)
        widest_out = d->linears[i].out > widest_out ? d->linears[i].out : widest_out;
    float *zeros = calloc((size_t) widest_in, sizeof(float));
    float *sink = malloc((size_t) widest_out * sizeof(float));
    int rc = zeros && sink ? 0 : llm_fail(err, err_size, "out of memory");
    for (int64_t i = 0; rc == 0 && i < (int64_t) d->c.n_layers * MATRICES; i++)
        if (d->linears[i].layer)
            rc = linear_forward(&d->linears[i], 1, zeros, sink, err, err_size);
    if (rc == 0 && d->classifier.layer)
        rc = linear_forward(&d->classifier, 1, zeros, sink, err, err_size);
    free(zeros);
    free(sink);
    return rc;
}

int llm_decoder_forward(llm_decoder_t *d, const int *tokens, int count, int pos, float *logits,
                        char *err, size_t err_size)
{
    int D = d->c.dim;
    if (count < 1 || count > d->max_batch || pos < 0 || pos + count > d->c.seq_len)
        return llm_fail(err, err_size, "%d tokens at position %d: at most %d a call, %d in all",
                        count, pos, d->max_batch, d->c.seq_len);
    for (int b = 0; b < count; b++) {
        if (tokens[b] < 0 || tokens[b] >= d->c.vocab_size)
            return llm_fail(err, err_size, "token %d outside the vocabulary (%d)", tokens[b],
                            d->c.vocab_size);
        memcpy(d->x + (size_t) b * D, d->w->token_embedding + (int64_t) tokens[b] * D,
               (size_t) D * sizeof(float));
    }
    for (int l = 0; l < d->c.n_layers; l++)
        if (attention_block(d, l, count, pos, err, err_size) != 0 ||
            ffn_block(d, l, count, err, err_size) != 0)
            return -1;
    rmsnorm(d->xb, d->x + (size_t) (count - 1) * D, d->w->rms_final, D);
    return linear_forward(&d->classifier, 1, d->xb, logits, err, err_size);
}
