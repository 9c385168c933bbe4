/* tokenizer.h - llama2.c's tokenizer (tokenizer.bin): text to token ids and
 * back, as its run.c does, so a real checkpoint's prompt can be text.
 *
 * The file: an int32 max_token_length, then for each of the model's V
 * tokens a float32 score, an int32 length and that many bytes (no NUL).
 * Ids 0, 1 and 2 are <unk>, BOS and EOS; ids 3..258 the raw bytes
 * 0x00..0xFF (their pieces "<0x00>".."<0xFF>"), the byte fallback for text
 * no token spells. Encoding (SentencePiece's BPE as llama2.c runs it): BOS,
 * a space before non-empty text (the dummy prefix), each UTF-8 character's
 * token or its bytes', then, while any adjacent pair spells a token, the
 * pair whose token scores highest merges (the first such pair on a tie). */
#ifndef LLM_TOKENIZER_H_INCLUDED
#define LLM_TOKENIZER_H_INCLUDED

#include <stddef.h>

typedef struct llm_tokenizer llm_tokenizer_t;

/* Read path for a model of vocab tokens. 0, or -1 with why in err (the
   file, and what in it is wrong: truncated, a length out of range, more
   tokens than the model's). */
int llm_tokenizer_open(const char *path, int vocab, llm_tokenizer_t **tok_p, char *err,
                       size_t err_size);

/* Accepts NULL and *NULL; nulls *tok_p. */
void llm_tokenizer_close(llm_tokenizer_t **tok_p);

/* text's ids (BOS first) into ids[0..max-1]; *count how many. 0, or -1
   with why in err (more than max ids after merging, out of memory). */
int llm_tokenizer_encode(const llm_tokenizer_t *tok, const char *text, int *ids, int max,
                         int *count, char *err, size_t err_size);

/* The text of token id after token prev: its piece, without the leading
   space of the first word after BOS, a byte token as that byte; *len its
   bytes (a byte token may be a NUL). "" for an id out of range. */
const char *llm_tokenizer_piece(const llm_tokenizer_t *tok, int prev, int id, size_t *len);

#endif
