/* test_discovery.c - what a discovering coordinator does with beacons, at unit level.
 *
 * The trusted keys it admits by are held in memory (cdc_trust_t, keys.h): a
 * beacon with an unknown key is a lookup, never a read of the certificate
 * directory (a flood of random keys made the heartbeat thread scan it per
 * beacon); the directory is read again when it changes, looked at at most
 * once a second. The beacon handling itself (one endpoint per key, never-live
 * entries, the per-pass bound) needs a broadcast network: tests/netns/
 * discovery.sh runs it over one. */
#include "cdcgemm.h"
#include "keys.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

/* A certificate pair dir/name (+ _secret); its public key into *cert. */
static void keygen(const char *name, cdc_curve_cert_t *cert)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert_int_eq(cdc__curve_keygen(path, NULL, NULL), CDC_OK);
    ck_assert_int_eq(cdc__curve_load_public(path, cert), CDC_OK);
}

/* A Z85 key no certificate holds. */
static void random_key(cdc_test_rng_t *rng, char key[CDC_CURVE_KEY_TEXT])
{
    static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                   ".-:+=^!/*?&<>()[]{}@%$#";
    for (int i = 0; i < CDC_CURVE_KEY_TEXT - 1; i++)
        key[i] = alphabet[cdc_test_rng_next(rng) % (sizeof alphabet - 1)];
    key[CDC_CURVE_KEY_TEXT - 1] = '\0';
}

/* 20,000 unknown keys (a flood's worth of beacons) read the directory not
   once more; the trusted ones are found with their public key. */
START_TEST(test_trust_lookup_reads_once)
{
    cdc_test_temp_dir(dir, sizeof dir, "cdc-discovery");
    char trusted[96];
    snprintf(trusted, sizeof trusted, "%s/workers", dir);
    ck_assert_int_eq(mkdir(trusted, 0700), 0);
    cdc_curve_cert_t a, b, found;
    keygen("workers/a", &a);
    keygen("workers/b", &b);
    cdc_trust_t *trust = NULL;
    ck_assert_int_eq(cdc__trust_new(trusted, &trust), CDC_OK);
    ck_assert_int_eq(cdc__trust_reads(trust), 1);
    ck_assert_int_eq(cdc__trust_find(trust, a.public_txt, 1000, &found), CDC_OK);
    ck_assert_int_eq(memcmp(found.public_key, a.public_key, CDC_CURVE_KEY_BYTES), 0);
    ck_assert_int_eq(found.has_secret, 0);
    ck_assert_int_eq(cdc__trust_find(trust, b.public_txt, 1000, &found), CDC_OK);
    ck_assert_int_eq(memcmp(found.public_key, b.public_key, CDC_CURVE_KEY_BYTES), 0);
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 24);
    double start = cdc_test_now_s();
    for (int i = 0; i < 20000; i++) {
        char key[CDC_CURVE_KEY_TEXT];
        random_key(&rng, key);
        ck_assert_int_eq(cdc__trust_find(trust, key, 1000 + i / 10, &found), CDC_ECONFIG);
    }
    double took = cdc_test_now_s() - start;
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "holds key"));
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), trusted));
    /* Looked at twice in those 2 s of clock (stat), read no more. */
    ck_assert_int_eq(cdc__trust_reads(trust), 1);
    fprintf(stderr, "20000 unknown keys: %.1f ms, %.2f us each\n", took * 1e3, took * 1e6 / 2e4);
    ck_assert_msg(took < 0.5, "20000 lookups took %.3f s", took);
    cdc__trust_destroy(&trust);
    ck_assert_ptr_null(trust);
    cdc__trust_destroy(&trust); /* accepts *NULL */
    cdc__trust_destroy(NULL);
    cdc_test_temp_dir_remove(dir);
}
END_TEST

/* A certificate copied into the directory is trusted within a second of
   the clock (the directory's times changed), not before; a removed one is
   not trusted any more; a directory gone trusts nothing. */
START_TEST(test_trust_reloads_on_change)
{
    cdc_test_temp_dir(dir, sizeof dir, "cdc-discovery");
    char trusted[96], path[160];
    snprintf(trusted, sizeof trusted, "%s/workers", dir);
    ck_assert_int_eq(mkdir(trusted, 0700), 0);
    cdc_curve_cert_t a, late, found;
    keygen("workers/a", &a);
    cdc_trust_t *trust = NULL;
    ck_assert_int_eq(cdc__trust_new(trusted, &trust), CDC_OK);
    ck_assert_int_eq(cdc__trust_find(trust, a.public_txt, 5000, &found), CDC_OK);
    keygen("workers/late", &late);
    /* Looked at, at most once per CDC_TRUST_RECHECK_MS: not yet. */
    ck_assert_int_eq(cdc__trust_find(trust, late.public_txt, 5000 + CDC_TRUST_RECHECK_MS - 1,
                                     &found), CDC_ECONFIG);
    ck_assert_int_eq(cdc__trust_reads(trust), 1);
    ck_assert_int_eq(cdc__trust_find(trust, late.public_txt, 5000 + CDC_TRUST_RECHECK_MS,
                                     &found), CDC_OK);
    ck_assert_int_eq(memcmp(found.public_key, late.public_key, CDC_CURVE_KEY_BYTES), 0);
    ck_assert_int_eq(cdc__trust_reads(trust), 2);
    /* Unchanged: looked at again, not read. */
    ck_assert_int_eq(cdc__trust_find(trust, a.public_txt, 9000, &found), CDC_OK);
    ck_assert_int_eq(cdc__trust_reads(trust), 2);
    snprintf(path, sizeof path, "%s/a", trusted);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(cdc__trust_find(trust, a.public_txt, 11000, &found), CDC_ECONFIG);
    ck_assert_int_eq(cdc__trust_find(trust, late.public_txt, 11000, &found), CDC_OK);
    cdc_test_temp_dir_remove(trusted);
    ck_assert_int_eq(cdc__trust_find(trust, late.public_txt, 13000, &found), CDC_ECONFIG);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), "unreadable"));
    cdc__trust_destroy(&trust);
    cdc_test_temp_dir_remove(dir);
}
END_TEST

/* One certificate file trusts its key only; a missing path is refused at
   creation, naming it. */
START_TEST(test_trust_file_and_missing)
{
    cdc_test_temp_dir(dir, sizeof dir, "cdc-discovery");
    char path[160];
    cdc_curve_cert_t a, b, found;
    keygen("a", &a);
    keygen("b", &b);
    snprintf(path, sizeof path, "%s/a", dir);
    cdc_trust_t *trust = NULL;
    ck_assert_int_eq(cdc__trust_new(path, &trust), CDC_OK);
    ck_assert_int_eq(cdc__trust_find(trust, a.public_txt, 1, &found), CDC_OK);
    ck_assert_int_eq(cdc__trust_find(trust, b.public_txt, 1, &found), CDC_ECONFIG);
    cdc__trust_destroy(&trust);
    snprintf(path, sizeof path, "%s/none", dir);
    ck_assert_int_eq(cdc__trust_new(path, &trust), CDC_ECONFIG);
    ck_assert_ptr_null(trust);
    ck_assert_ptr_nonnull(strstr(cdc_last_error(), path));
    cdc_test_temp_dir_remove(dir);
}
END_TEST

static Suite *discovery_suite(void)
{
    Suite *suite = suite_create("discovery");
    TCase *trust = tcase_create("trust");
    tcase_add_test(trust, test_trust_lookup_reads_once);
    tcase_add_test(trust, test_trust_reloads_on_change);
    tcase_add_test(trust, test_trust_file_and_missing);
    suite_add_tcase(suite, trust);
    return suite;
}

int main(void)
{
    return cdc_test_run_suite(discovery_suite());
}
