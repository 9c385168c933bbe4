/* test_llm_tokenizer.c - cdcgemm-llm's reading of llama2.c's tokenizer.bin
   (src/tools/llm/tokenizer.c): a small vocabulary written here, text encoded
   as llama2.c's run.c does (BOS, the dummy prefix, characters, the byte
   fallback, merges by score) and decoded back, bad files refused naming
   what is wrong. */
#include "testutil.h"
#include "tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The pieces after the 259 reserved ids, with their scores: merges score
   higher than the characters they join, so "hello" ends as one token. */
static const struct {
    const char *piece;
    float score;
} extra[] = {{" ", 0}, {"h", 0},    {"e", 0},    {"l", 0},    {"o", 0},    {"w", 0},
             {"he", 10}, {"ll", 9}, {"llo", 8}, {" he", 7}, {"hello", 6}, {" hello", 5},
             {"\xc3\xa0", 0}};
enum { EXTRA = sizeof extra / sizeof *extra, VOCAB = 259 + EXTRA, SPACE = 259, LLO = 267,
       SP_HE = 268, SP_HELLO = 270, A_GRAVE = 271 };

static void put(FILE *f, const void *data, size_t size)
{
    ck_assert_uint_eq(fwrite(data, 1, size, f), size);
}

static void put_piece(FILE *f, const char *piece, float score)
{
    int32_t len = (int32_t) strlen(piece);
    put(f, &score, sizeof score);
    put(f, &len, sizeof len);
    put(f, piece, (size_t) len);
}

/* tokens pieces (of VOCAB) into a new file; its path into path. */
static void write_vocab(char *path, int tokens, int32_t max_length)
{
    strcpy(path, "/tmp/cdcgemm-tokenizer-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "wb");
    ck_assert_ptr_nonnull(f);
    put(f, &max_length, sizeof max_length);
    const char *special[3] = {"<unk>", "\n<s>\n", "\n</s>\n"};
    for (int i = 0; i < tokens; i++) {
        char piece[16];
        if (i < 3)
            snprintf(piece, sizeof piece, "%s", special[i]);
        else if (i < 259)
            snprintf(piece, sizeof piece, "<0x%02X>", i - 3);
        put_piece(f, i < 259 ? piece : extra[i - 259].piece, i < 259 ? 0.0f : extra[i - 259].score);
    }
    ck_assert_int_eq(fclose(f), 0);
}

static llm_tokenizer_t *open_ok(const char *path)
{
    llm_tokenizer_t *tok = NULL;
    char err[256] = "";
    ck_assert_msg(llm_tokenizer_open(path, VOCAB, &tok, err, sizeof err) == 0, "%s", err);
    return tok;
}

/* text's ids, checked against want[0..count-1]. */
static void encodes_to(const llm_tokenizer_t *tok, const char *text, const int *want, int count)
{
    int ids[64], n = -1;
    char err[256] = "";
    ck_assert_msg(llm_tokenizer_encode(tok, text, ids, 64, &n, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(n, count);
    for (int i = 0; i < count; i++)
        ck_assert_msg(ids[i] == want[i], "'%s': id %d is %d, expected %d", text, i, ids[i],
                      want[i]);
}

/* The text ids decode to, piece after piece, BOS's own piece left out. */
static void decode(const llm_tokenizer_t *tok, const int *ids, int count, char *out)
{
    size_t at = 0;
    for (int i = 1; i < count; i++) {
        size_t len;
        const char *piece = llm_tokenizer_piece(tok, ids[i - 1], ids[i], &len);
        memcpy(out + at, piece, len);
        at += len;
    }
    out[at] = '\0';
}

START_TEST(test_encode_merges_by_score)
{
    char path[64];
    write_vocab(path, VOCAB, 8);
    llm_tokenizer_t *tok = open_ok(path);
    /* " " h e l l o -> he (10), ll (9), llo (8), " he" (7), " hello" (5). */
    encodes_to(tok, "hello", (const int[]){1, SP_HELLO}, 2);
    /* No token spells "x": its byte, 0x78 + 3 (" he" then). "à" is a token,
       "é" is not: its two bytes. */
    encodes_to(tok, "hex", (const int[]){1, SP_HE, 0x78 + 3}, 3);
    encodes_to(tok, "\xc3\xa0\xc3\xa9", (const int[]){1, SPACE, A_GRAVE, 0xc3 + 3, 0xa9 + 3},
               5);
    encodes_to(tok, "", (const int[]){1}, 1); /* no dummy prefix without text */
    /* Each word the same way, the space between them its prefix. */
    encodes_to(tok, "hello hello", (const int[]){1, SP_HELLO, SP_HELLO}, 3);
    int ids[64], n;
    char err[256] = "", text[128];
    const char *cases[] = {"hello", "hello hex \xc3\xa9\xc3\xa0\n", "lol"};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        ck_assert_int_eq(llm_tokenizer_encode(tok, cases[c], ids, 64, &n, err, sizeof err), 0);
        decode(tok, ids, n, text);
        ck_assert_str_eq(text, cases[c]); /* the dummy prefix's space dropped after BOS */
    }
    ck_assert_int_eq(llm_tokenizer_encode(tok, "hello hello", ids, 2, &n, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "3 tokens, more than the 2"), "%s", err);
    ck_assert_int_eq(llm_tokenizer_encode(tok, "hello hello", ids, 3, &n, err, sizeof err), 0);
    size_t len = 9;
    ck_assert_str_eq(llm_tokenizer_piece(tok, 0, VOCAB, &len), "");
    ck_assert_uint_eq(len, 0);
    ck_assert_str_eq(llm_tokenizer_piece(tok, 0, LLO, &len), "llo");
    llm_tokenizer_close(&tok);
    ck_assert_ptr_null(tok);
    llm_tokenizer_close(NULL);
    unlink(path);
}
END_TEST

/* A file that does not fit the model is refused with what is wrong. */
START_TEST(test_bad_files_refused)
{
    char path[64], err[256];
    llm_tokenizer_t *tok = (llm_tokenizer_t *) 0x1;
    write_vocab(path, VOCAB - 1, 8);
    ck_assert_int_eq(llm_tokenizer_open(path, VOCAB, &tok, err, sizeof err), -1);
    ck_assert_ptr_null(tok);
    ck_assert_msg(strstr(err, "fewer tokens than the model's vocab"), "%s", err);
    ck_assert_int_eq(llm_tokenizer_open(path, VOCAB - 2, &tok, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "more tokens than the model's vocab"), "%s", err);
    unlink(path);
    write_vocab(path, VOCAB, 4); /* "<unk>" is longer */
    ck_assert_int_eq(llm_tokenizer_open(path, VOCAB, &tok, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "length out of 0..max_token_length (token 0)"), "%s", err);
    ck_assert_int_eq(llm_tokenizer_open(path, 100, &tok, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "smaller than the 259 ids"), "%s", err);
    unlink(path);
    ck_assert_int_eq(llm_tokenizer_open(path, VOCAB, &tok, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "No such file"), "%s", err);
}
END_TEST

static Suite *tokenizer_suite(void)
{
    Suite *suite = suite_create("llm_tokenizer");
    TCase *tcase = tcase_create("llm_tokenizer");
    tcase_add_test(tcase, test_encode_merges_by_score);
    tcase_add_test(tcase, test_bad_files_refused);
    suite_add_tcase(suite, tcase);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(tokenizer_suite());
}
