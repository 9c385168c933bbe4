/* decoder.h - a Llama-architecture decoder whose weight matrix products go
 * through cdcgemm (checkpoint.h for the model).
 *
 * The coordinator (this process) computes the RMSNorms, rotary embeddings,
 * grouped-query attention over its KV cache, SwiGLU's gating and the
 * sampling; every product with a weight matrix is a cdcgemm FC layer whose
 * weights the workers cache: per layer q, k and v stacked into one layer,
 * the output projection, w1 and w3 (gate and up) stacked into one, w2; then
 * the classifier. So a layer costs 4 calls and a token 4 x layers + 1. The
 * prompt's tokens go through each layer as one batched call per matrix (a
 * GEMM with as many columns as tokens); each generated token is a batch-1
 * call (a matrix-vector product).
 *
 * The same decoder runs on a reference instead (llm_decoder_new with a NULL
 * context): the products computed here in double, for checking. */
#ifndef LLM_DECODER_H_INCLUDED
#define LLM_DECODER_H_INCLUDED

#include "cdcgemm.h"
#include "checkpoint.h"

typedef struct llm_decoder llm_decoder_t;

/* A decoder of ck's model (ck must outlive it) taking at most max_batch
   tokens a call; context NULL: the reference. 0, or -1 with the reason in
   err (a cdcgemm error names what failed). */
int llm_decoder_new(const llm_checkpoint_t *ck, cdc_context_t *context, int max_batch,
                    llm_decoder_t **decoder_p, char *err, size_t err_size);

void llm_decoder_destroy(llm_decoder_t **decoder_p);

/* Send the workers their weights before the prompt: one matrix-vector
   product of zeros through each matrix. A matrix's blocks are sized for the
   shape of its first call, and kept for a call of another shape until that
   shape has had more of its calls (the library's plan): shipped by the
   prompt (P columns), they were re-sized and staged again for the token
   steps, 406 MB of the 110M model over the first minute, each slot one
   erasure short meanwhile. 0, or -1 with the reason. */
int llm_decoder_ship(llm_decoder_t *d, char *err, size_t err_size);

/* Run count tokens (at most max_batch) at positions pos .. pos + count - 1
   (their keys and values into the cache; pos + count <= seq_len) and write
   the last one's logits (vocab_size floats). 0, or -1 with the reason. */
int llm_decoder_forward(llm_decoder_t *d, const int *tokens, int count, int pos, float *logits,
                        char *err, size_t err_size);

#endif
