/* test_fuzz_inputs.c - every fuzz seed and every input a fuzzer ever crashed on,
   replayed through the fuzz targets' own code in the ordinary build.
 *
 * The four harnesses of tests/fuzz/ are compiled into this suite under other
 * names (CMakeLists.txt), so a crash a fuzzer found stays a failing test here,
 * under the normal and the sanitizer build, once its input is saved in
 * tests/fuzz/regressions/<target>/. The wire seeds must also still decode:
 * when the protocol changes they fail here until fuzz_make_corpus is run
 * again (docs/fuzzing.md). */
#include "fuzz/fuzz_frames.h"
#include "protocol.h"
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cdc_fuzz_worker_msg_one(const uint8_t *data, size_t size);
int cdc_fuzz_reply_one(const uint8_t *data, size_t size);
int cdc_fuzz_faults_one(const uint8_t *data, size_t size);
int cdc_fuzz_env_one(const uint8_t *data, size_t size);

#define FUZZ_DIR CDC_TEST_DATA_DIR "/../fuzz"

typedef int (*fuzz_one_t)(const uint8_t *data, size_t size);

static const struct {
    const char *name;
    fuzz_one_t one;
} targets[] = {
    {"fuzz_worker_msg", cdc_fuzz_worker_msg_one},
    {"fuzz_reply", cdc_fuzz_reply_one},
    {"fuzz_faults", cdc_fuzz_faults_one},
    {"fuzz_env", cdc_fuzz_env_one},
};

static uint8_t *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long length = ftell(f);
    ck_assert(length >= 0);
    rewind(f);
    uint8_t *data = cdc_test_alloc((size_t) length + 1);
    ck_assert_uint_eq(fread(data, 1, (size_t) length, f), (size_t) length);
    fclose(f);
    *size = (size_t) length;
    return data;
}

/* Call visit on every file of dir (none when dir does not exist); returns
   how many. */
static int each_file(const char *dir, void (*visit)(const char *path, int target), int target)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        if (entry->d_name[0] == '.')
            continue;
        char path[4096 + sizeof entry->d_name + 1];
        snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
        visit(path, target);
        count++;
    }
    closedir(d);
    return count;
}

static void replay(const char *path, int target)
{
    size_t size = 0;
    uint8_t *data = read_file(path, &size);
    targets[target].one(data, size);
    free(data);
}

START_TEST(test_seeds_replay)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/corpus/%s", FUZZ_DIR, targets[_i].name);
    ck_assert_msg(each_file(dir, replay, _i) > 0, "no seeds in %s", dir);
}
END_TEST

START_TEST(test_regressions_replay)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/regressions/%s", FUZZ_DIR, targets[_i].name);
    each_file(dir, replay, _i);
}
END_TEST

/* A wire seed is one valid message of this build's protocol. */
static void decodes(const char *path, int target)
{
    (void) target;
    size_t size = 0;
    uint8_t *data = read_file(path, &size);
    cdc_fuzz_frame_t cut[CDC_FUZZ_MAX_FRAMES];
    int extra = 0;
    int count = cdc_fuzz_split(data, size, cut, CDC_FUZZ_MAX_FRAMES, &extra);
    ck_assert_int_eq(extra, 0);
    cdc_frame_t frames[CDC_FUZZ_MAX_FRAMES];
    for (int i = 0; i < count; i++)
        frames[i] = (cdc_frame_t){cut[i].data, cut[i].size};
    cdc_msg_t msg;
    ck_assert_msg(cdc__msg_decode(frames, count, &msg) == CDC_OK,
                  "%s no longer decodes (%s): run fuzz_make_corpus tests/fuzz/corpus", path,
                  cdc_last_error());
    free(data);
}

START_TEST(test_wire_seeds_decode)
{
    static const char *const wire[] = {"fuzz_worker_msg", "fuzz_reply"};
    for (int i = 0; i < 2; i++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/corpus/%s", FUZZ_DIR, wire[i]);
        ck_assert_int_ge(each_file(dir, decodes, 0), 10); /* every message type */
    }
}
END_TEST

static Suite *fuzz_inputs_suite(void)
{
    Suite *suite = suite_create("fuzz_inputs");
    int n = (int) (sizeof targets / sizeof *targets);
    TCase *seeds = tcase_create("seeds");
    tcase_add_loop_test(seeds, test_seeds_replay, 0, n);
    tcase_add_test(seeds, test_wire_seeds_decode);
    suite_add_tcase(suite, seeds);
    TCase *regressions = tcase_create("regressions");
    tcase_add_loop_test(regressions, test_regressions_replay, 0, n);
    suite_add_tcase(suite, regressions);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(fuzz_inputs_suite());
}
