/* tokenizer.c - llama2.c's tokenizer (tokenizer.h). */
#include "tokenizer.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    TOKEN_BOS = 1,
    BYTE_TOKENS = 3,          /* ids 3..258: the bytes 0x00..0xFF          */
    MAX_TOKEN_LENGTH = 1024   /* a longer piece is a corrupt file           */
};

typedef struct {
    const char *str;
    int id;
} token_index_t;

struct llm_tokenizer {
    int vocab, max_length;
    char **piece;
    int *length;
    float *score;
    token_index_t *sorted; /* the pieces in strcmp order, for lookups */
    unsigned char byte_piece[256][2];
};

static int by_string(const void *a, const void *b)
{
    return strcmp(((const token_index_t *) a)->str, ((const token_index_t *) b)->str);
}

/* The id whose piece is str, or -1. A piece holding a NUL (a corrupt
   file's) is never found: lookups go by C string, as llama2.c's do. */
static int lookup(const llm_tokenizer_t *tok, const char *str)
{
    token_index_t key = {str, 0};
    const token_index_t *hit =
        bsearch(&key, tok->sorted, (size_t) tok->vocab, sizeof key, by_string);
    return hit ? hit->id : -1;
}

static int fail(char *err, size_t err_size, const char *path, const char *what, long long at)
{
    snprintf(err, err_size, "tokenizer %s: %s (token %lld)", path, what, at);
    return -1;
}

/* Every token's score, length and piece from f into tok. */
static int read_pieces(FILE *f, const char *path, llm_tokenizer_t *tok, char *err,
                       size_t err_size)
{
    for (int i = 0; i < tok->vocab; i++) {
        int32_t len;
        if (fread(&tok->score[i], sizeof(float), 1, f) != 1 || fread(&len, sizeof len, 1, f) != 1)
            return fail(err, err_size, path, "truncated: fewer tokens than the model's vocab",
                        i);
        if (len < 0 || len > tok->max_length)
            return fail(err, err_size, path, "a length out of 0..max_token_length", i);
        tok->piece[i] = malloc((size_t) len + 1);
        if (!tok->piece[i])
            return fail(err, err_size, path, "out of memory", i);
        if (fread(tok->piece[i], 1, (size_t) len, f) != (size_t) len)
            return fail(err, err_size, path, "truncated inside a piece", i);
        tok->piece[i][len] = '\0';
        tok->length[i] = len;
        tok->sorted[i] = (token_index_t){tok->piece[i], i};
    }
    if (fgetc(f) != EOF)
        return fail(err, err_size, path, "more tokens than the model's vocab", tok->vocab);
    return 0;
}

int llm_tokenizer_open(const char *path, int vocab, llm_tokenizer_t **tok_p, char *err,
                       size_t err_size)
{
    *tok_p = NULL;
    llm_tokenizer_t *tok = calloc(1, sizeof *tok);
    FILE *f = fopen(path, "rb");
    int rc = -1;
    if (!f) {
        snprintf(err, err_size, "tokenizer %s: %s", path, strerror(errno));
    } else if (!tok || vocab < BYTE_TOKENS + 256) {
        snprintf(err, err_size, "tokenizer %s: %s", path,
                 tok ? "the model's vocab is smaller than the 259 ids the tokenizer reserves"
                     : "out of memory");
    } else if (fread(&tok->max_length, sizeof tok->max_length, 1, f) != 1 ||
               tok->max_length < 1 || tok->max_length > MAX_TOKEN_LENGTH) {
        snprintf(err, err_size, "tokenizer %s: max_token_length missing or out of 1..%d", path,
                 MAX_TOKEN_LENGTH);
    } else {
        tok->vocab = vocab;
        tok->piece = calloc((size_t) vocab, sizeof *tok->piece);
        tok->length = calloc((size_t) vocab, sizeof *tok->length);
        tok->score = calloc((size_t) vocab, sizeof *tok->score);
        tok->sorted = calloc((size_t) vocab, sizeof *tok->sorted);
        if (!tok->piece || !tok->length || !tok->score || !tok->sorted)
            snprintf(err, err_size, "tokenizer %s: out of memory", path);
        else
            rc = read_pieces(f, path, tok, err, err_size);
    }
    if (f)
        fclose(f);
    if (rc != 0) {
        llm_tokenizer_close(&tok);
        return -1;
    }
    qsort(tok->sorted, (size_t) vocab, sizeof *tok->sorted, by_string);
    for (int b = 0; b < 256; b++)
        tok->byte_piece[b][0] = (unsigned char) b;
    *tok_p = tok;
    return 0;
}

void llm_tokenizer_close(llm_tokenizer_t **tok_p)
{
    llm_tokenizer_t *tok = tok_p ? *tok_p : NULL;
    if (!tok)
        return;
    for (int i = 0; tok->piece && i < tok->vocab; i++)
        free(tok->piece[i]);
    free(tok->piece);
    free(tok->length);
    free(tok->score);
    free(tok->sorted);
    free(tok);
    *tok_p = NULL;
}

/* One id appended, or -1 when max are there. */
static int push(int *ids, int max, int *count, int id)
{
    if (*count >= max)
        return -1;
    ids[(*count)++] = id;
    return 0;
}

/* BOS, the dummy prefix and each character's id (or its bytes'). */
static int first_ids(const llm_tokenizer_t *tok, const char *text, int *ids, int max,
                     int *count)
{
    char buffer[8];
    size_t len = 0;
    int rc = push(ids, max, count, TOKEN_BOS);
    int space = lookup(tok, " ");
    if (rc == 0 && text[0] && space >= 0)
        rc = push(ids, max, count, space);
    for (const char *c = text; rc == 0 && *c; c++) {
        if (((unsigned char) *c & 0xC0) != 0x80)
            len = 0; /* a character's first byte */
        buffer[len++] = *c;
        buffer[len] = '\0';
        if (((unsigned char) c[1] & 0xC0) == 0x80 && len < 4)
            continue; /* the character goes on */
        int id = lookup(tok, buffer);
        if (id >= 0)
            rc = push(ids, max, count, id);
        for (size_t i = 0; id < 0 && rc == 0 && i < len; i++)
            rc = push(ids, max, count, (unsigned char) buffer[i] + BYTE_TOKENS);
        len = 0;
    }
    return rc;
}

/* Merge the best-scoring adjacent pair until none spells a token. */
static int merge_pairs(const llm_tokenizer_t *tok, int *ids, int *count)
{
    char *pair = malloc((size_t) tok->max_length * 2 + 1);
    if (!pair)
        return -1;
    for (;;) {
        float best = 0.0f;
        int best_id = -1, at = -1;
        for (int i = 0; i + 1 < *count; i++) {
            int a = ids[i], b = ids[i + 1];
            memcpy(pair, tok->piece[a], (size_t) tok->length[a]);
            memcpy(pair + tok->length[a], tok->piece[b], (size_t) tok->length[b]);
            pair[tok->length[a] + tok->length[b]] = '\0';
            int id = lookup(tok, pair);
            if (id >= 0 && (at < 0 || tok->score[id] > best)) {
                best = tok->score[id];
                best_id = id;
                at = i;
            }
        }
        if (at < 0)
            break;
        ids[at] = best_id;
        memmove(&ids[at + 1], &ids[at + 2], (size_t) (*count - at - 2) * sizeof *ids);
        (*count)--;
    }
    free(pair);
    return 0;
}

int llm_tokenizer_encode(const llm_tokenizer_t *tok, const char *text, int *ids, int max,
                         int *count, char *err, size_t err_size)
{
    /* Before merging: at most a byte token each, BOS and the prefix. */
    int room = (int) strlen(text) + 2, n = 0;
    int *all = malloc((size_t) room * sizeof *all);
    *count = 0;
    if (!all || first_ids(tok, text, all, room, &n) != 0 || merge_pairs(tok, all, &n) != 0) {
        snprintf(err, err_size, "out of memory encoding the prompt");
        free(all);
        return -1;
    }
    if (n > max) {
        snprintf(err, err_size, "the prompt is %d tokens, more than the %d that fit", n, max);
        free(all);
        return -1;
    }
    memcpy(ids, all, (size_t) n * sizeof *ids);
    *count = n;
    free(all);
    return 0;
}

const char *llm_tokenizer_piece(const llm_tokenizer_t *tok, int prev, int id, size_t *len)
{
    *len = 0;
    if (id < 0 || id >= tok->vocab)
        return "";
    const char *piece = tok->piece[id];
    *len = (size_t) tok->length[id];
    unsigned int byte;
    char end;
    if (prev == TOKEN_BOS && piece[0] == ' ') {
        piece++;
        (*len)--;
    }
    if (*len == 6 && sscanf(piece, "<0x%02X>%c", &byte, &end) == 1 && byte < 256) {
        *len = 1;
        return (const char *) tok->byte_piece[byte];
    }
    return piece;
}
