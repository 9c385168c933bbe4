/* test_weight_store.c - the worker's weight store on disk: round trip across
   processes' lifetimes (close and reopen), scopes apart, damaged and
   truncated files refused and removed, unfinished writes cleaned, the byte
   bound (oldest out), a bad directory named. */
#include "testutil.h"
#include "weight_store.h"

#include "cdcgemm.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ROWS 96
#define K 50
#define MATRIX_BYTES ((uint64_t) ROWS * K * sizeof(float))
#define FILE_BYTES (MATRIX_BYTES + CDC_WEIGHT_STORE_HEADER)

static char dir[256];

static void setup(void)
{
    cdc_test_temp_dir(dir, sizeof dir, "cdc-store");
}

static void teardown(void)
{
    cdc_test_temp_dir_remove(dir);
}

static float *matrix(float seed)
{
    float *m = cdc_test_alloc(MATRIX_BYTES);
    for (int i = 0; i < ROWS * K; i++)
        m[i] = seed + (float) i * 0.25f;
    return m;
}

static cdc_weight_store_t *open_store(uint64_t max_bytes)
{
    cdc_weight_store_t *store = NULL;
    int rc = cdc__weight_store_open(dir, max_bytes, &store);
    ck_assert_msg(rc == CDC_OK, "%s", cdc_last_error());
    return store;
}

/* Load key and compare with expected (NULL: expect none); release it. */
static void expect_load(cdc_weight_store_t *store, cdc_weight_key_t key, const float *expected)
{
    cdc_weight_value_t value;
    ck_assert_int_eq(cdc__weight_store_load(store, key, ROWS, K, &value), CDC_OK);
    if (!expected) {
        ck_assert_ptr_null(value.data);
        return;
    }
    ck_assert_ptr_nonnull(value.data);
    ck_assert_int_eq(memcmp(value.data, expected, MATRIX_BYTES), 0);
    ck_assert_uint_ge(value.alloc_bytes, FILE_BYTES);
    value.release(value.owner);
}

/* The path of key's file. */
static void path_of(cdc_weight_key_t key, char *out, size_t size)
{
    snprintf(out, size, "%s/%016llx-%016llx.cdcw", dir, (unsigned long long) key.scope,
             (unsigned long long) key.content);
}

static int file_count(void)
{
    DIR *listing = opendir(dir);
    ck_assert_ptr_nonnull(listing);
    int count = 0;
    for (struct dirent *e; (e = readdir(listing));)
        count += e->d_name[0] != '.';
    closedir(listing);
    return count;
}

/* Saved by one process, loaded by the next: the same floats; another scope
   or shape gets nothing. */
START_TEST(test_round_trip_across_reopen)
{
    float *a = matrix(1.0f), *b = matrix(-3.0f);
    cdc_weight_key_t ka = {0x1111, 0}, kb = {0x2222, 77};
    cdc_weight_store_t *store = open_store(UINT64_C(1) << 30);
    ck_assert_int_eq(cdc__weight_store_save(store, ka, ROWS, K, a), CDC_OK);
    ck_assert_int_eq(cdc__weight_store_save(store, kb, ROWS, K, b), CDC_OK);
    ck_assert_int_eq(cdc__weight_store_save(store, ka, ROWS, K, b), CDC_OK); /* held: kept */
    cdc_weight_store_stats_t stats;
    cdc__weight_store_stats(store, &stats);
    ck_assert_uint_eq(stats.count, 2);
    ck_assert_uint_eq(stats.saved, 2);
    ck_assert_uint_eq(stats.bytes, 2 * FILE_BYTES);
    cdc__weight_store_close(&store);
    ck_assert_ptr_null(store);

    store = open_store(UINT64_C(1) << 30);
    cdc__weight_store_stats(store, &stats);
    ck_assert_uint_eq(stats.count, 2);
    ck_assert(cdc__weight_store_has(store, ka));
    expect_load(store, ka, a);
    expect_load(store, kb, b);
    expect_load(store, (cdc_weight_key_t){0x2222, 78}, NULL); /* another peer's scope */
    expect_load(store, (cdc_weight_key_t){0x3333, 0}, NULL);
    cdc_weight_value_t value; /* the right key, another shape: refused and removed */
    ck_assert_int_eq(cdc__weight_store_load(store, ka, ROWS, K + 1, &value), CDC_OK);
    ck_assert_ptr_null(value.data);
    cdc__weight_store_stats(store, &stats);
    ck_assert_uint_eq(stats.loaded, 2);
    ck_assert_uint_eq(stats.bytes_read, 2 * MATRIX_BYTES);
    ck_assert_uint_eq(stats.damaged, 1);
    ck_assert(!cdc__weight_store_has(store, ka));
    cdc__weight_store_close(&store);
    free(a);
    free(b);
}
END_TEST

/* A flipped bit in the floats, a changed header, a cut file: never served,
   removed; the intact one still loads. */
START_TEST(test_damaged_files_removed)
{
    float *a = matrix(2.0f);
    cdc_weight_key_t keys[4] = {{1, 0}, {2, 0}, {3, 0}, {4, 0}};
    cdc_weight_store_t *store = open_store(UINT64_C(1) << 30);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(cdc__weight_store_save(store, keys[i], ROWS, K, a), CDC_OK);
    cdc__weight_store_close(&store);
    char path[512];
    unsigned char byte;
    path_of(keys[0], path, sizeof path); /* one bit of one float */
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pread(fd, &byte, 1, CDC_WEIGHT_STORE_HEADER + 1000), 1);
    byte ^= 0x10;
    ck_assert_int_eq(pwrite(fd, &byte, 1, CDC_WEIGHT_STORE_HEADER + 1000), 1);
    close(fd);
    path_of(keys[1], path, sizeof path); /* the shape in the header */
    fd = open(path, O_RDWR);
    int64_t rows = ROWS + 1;
    ck_assert_int_eq(pwrite(fd, &rows, sizeof rows, 24), (ssize_t) sizeof rows);
    close(fd);
    path_of(keys[2], path, sizeof path); /* cut short */
    ck_assert_int_eq(truncate(path, (off_t) FILE_BYTES - 4), 0);

    store = open_store(UINT64_C(1) << 30);
    for (int i = 0; i < 3; i++)
        expect_load(store, keys[i], NULL);
    expect_load(store, keys[3], a);
    cdc_weight_store_stats_t stats;
    cdc__weight_store_stats(store, &stats);
    ck_assert_uint_eq(stats.damaged, 3);
    ck_assert_uint_eq(stats.count, 1);
    ck_assert_int_eq(file_count(), 1);
    cdc__weight_store_close(&store);
    free(a);
}
END_TEST

/* A temporary left by a process killed while writing is removed at open;
   files that are not the store's are left alone. */
START_TEST(test_unfinished_write_cleaned)
{
    char path[512];
    snprintf(path, sizeof path, "%s/0000000000000000-0000000000000009.cdcw.123.tmp", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("half", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    cdc_weight_store_t *store = open_store(UINT64_C(1) << 30);
    cdc_weight_store_stats_t stats;
    cdc__weight_store_stats(store, &stats);
    ck_assert_uint_eq(stats.count, 0);
    ck_assert_int_eq(file_count(), 1); /* notes.txt */
    cdc__weight_store_close(&store);
}
END_TEST

/* Within max_bytes the oldest go first, across a reopen too (by age); a
   matrix larger than the bound is not stored. */
START_TEST(test_bound_evicts_oldest)
{
    float *a = matrix(5.0f);
    cdc_weight_store_t *store = open_store(3 * FILE_BYTES);
    for (uint64_t key = 1; key <= 5; key++)
        ck_assert_int_eq(cdc__weight_store_save(store, (cdc_weight_key_t){key, 0}, ROWS, K, a),
                         CDC_OK);
    cdc_weight_store_stats_t stats;
    cdc__weight_store_stats(store, &stats);
    ck_assert_uint_eq(stats.count, 3);
    ck_assert_uint_eq(stats.evicted, 2);
    ck_assert(!cdc__weight_store_has(store, (cdc_weight_key_t){1, 0}));
    ck_assert(!cdc__weight_store_has(store, (cdc_weight_key_t){2, 0}));
    ck_assert(cdc__weight_store_has(store, (cdc_weight_key_t){5, 0}));
    cdc__weight_store_close(&store);
    ck_assert_int_eq(file_count(), 3);

    store = open_store(2 * FILE_BYTES); /* a smaller bound: the oldest of the three out */
    ck_assert(!cdc__weight_store_has(store, (cdc_weight_key_t){3, 0}));
    ck_assert(cdc__weight_store_has(store, (cdc_weight_key_t){4, 0}));
    ck_assert(cdc__weight_store_has(store, (cdc_weight_key_t){5, 0}));
    ck_assert_int_eq(file_count(), 2);
    cdc__weight_store_close(&store);

    store = open_store(FILE_BYTES - 1); /* nothing fits */
    ck_assert_int_eq(cdc__weight_store_save(store, (cdc_weight_key_t){9, 0}, ROWS, K, a), CDC_OK);
    ck_assert(!cdc__weight_store_has(store, (cdc_weight_key_t){9, 0}));
    cdc__weight_store_close(&store);
    free(a);
}
END_TEST

/* A directory that cannot be made is named; no size is refused. */
START_TEST(test_bad_directory_named)
{
    cdc_weight_store_t *store = NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/missing/store", dir);
    ck_assert_int_eq(cdc__weight_store_open(path, 1 << 20, &store), CDC_EINVAL);
    ck_assert_ptr_null(store);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), path));
    snprintf(path, sizeof path, "%s/file", dir);
    FILE *f = fopen(path, "w");
    fclose(f);
    ck_assert_int_eq(cdc__weight_store_open(path, 1 << 20, &store), CDC_EINVAL);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), path));
    ck_assert_int_eq(cdc__weight_store_open(dir, 0, &store), CDC_EINVAL);
    ck_assert_ptr_null(store);
    cdc__weight_store_close(&store); /* NULL accepted */
    cdc__weight_store_close(NULL);
}
END_TEST

static Suite *store_suite(void)
{
    Suite *suite = suite_create("weight_store");
    TCase *tcase = tcase_create("store");
    tcase_add_checked_fixture(tcase, setup, teardown);
    tcase_add_test(tcase, test_round_trip_across_reopen);
    tcase_add_test(tcase, test_damaged_files_removed);
    tcase_add_test(tcase, test_unfinished_write_cleaned);
    tcase_add_test(tcase, test_bound_evicts_oldest);
    tcase_add_test(tcase, test_bad_directory_named);
    suite_add_tcase(suite, tcase);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(store_suite());
}
