/* keys.h - CURVE certificates (CZMQ zcert files) and protected-mode endpoint rules.
 *
 * Plain C (no zmq or czmq types), so the coordinator, the worker daemon and
 * cdcgemm-keygen use them without including zmq. A certificate pair is what
 * CZMQ's zcert_save writes: PATH holds the public key (and metadata), PATH_secret
 * both keys. The functions are thread-safe (no shared state). */
#ifndef CDC_KEYS_H_INCLUDED
#define CDC_KEYS_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#define CDC_CURVE_KEY_BYTES 32
#define CDC_CURVE_KEY_TEXT 41 /* Z85 text of a key plus its terminating NUL */
#define CDC_CURVE_ENDPOINT_MAX 256

/* One certificate as loaded: the public key, the secret key when the file
   held one (has_secret), and its "endpoint" metadata ("" when absent).
   Tagged, so a header that only passes it by pointer can name it without
   including this one (tests/support/harness.h). */
typedef struct cdc_curve_cert {
    uint8_t public_key[CDC_CURVE_KEY_BYTES];
    uint8_t secret_key[CDC_CURVE_KEY_BYTES];
    char public_txt[CDC_CURVE_KEY_TEXT];
    int has_secret;
    char endpoint[CDC_CURVE_ENDPOINT_MAX];
} cdc_curve_cert_t;

/* Write a new certificate pair: path (public, mode 0644) and path_secret
   (mode 0600). endpoint (may be NULL or "") is stored as the metadata
   "endpoint" (for a worker's certificate, so a coordinator's directory of
   worker certificates can name which endpoint each one is for). Refuses to
   overwrite existing files. The public key text goes to public_txt when it is
   not NULL. Returns CDC_OK, CDC_EINVAL (files exist, endpoint too long) or
   CDC_ETRANSPORT (I/O), with the detail in cdc_last_error(). */
int cdc__curve_keygen(const char *path, const char *endpoint,
                      char public_txt[CDC_CURVE_KEY_TEXT]);

/* Load a secret certificate (a PATH_secret file) into *cert. Returns CDC_OK,
   or CDC_ECONFIG when the file is missing, unreadable, not a certificate or
   holds no secret key (detail in cdc_last_error(), naming the file). */
int cdc__curve_load_secret(const char *path, cdc_curve_cert_t *cert);

/* Load a public certificate into *cert (a secret certificate also works; its
   secret key is ignored). Returns CDC_OK or CDC_ECONFIG as above. */
int cdc__curve_load_public(const char *path, cdc_curve_cert_t *cert);

/* The worker certificate for endpoint, from path: a certificate file (used
   for every endpoint), or a directory of certificates of which the one whose
   "endpoint" metadata equals endpoint is taken (files ending in _secret are
   skipped). Returns CDC_OK or CDC_ECONFIG (none found, unreadable). */
int cdc__curve_server_cert(const char *path, const char *endpoint, cdc_curve_cert_t *cert);

/* Trusted worker keys held in memory, for discovery: path (a certificate
   file or a directory of them, as cdc__curve_server_cert) is read once, and
   again when its modification or change time or inode differs, looked at at
   most once per CDC_TRUST_RECHECK_MS: a beacon with an unknown key costs a
   binary search, never a directory scan (a flood of random keys made the
   heartbeat thread scan the directory per beacon). A library installs no
   signal handler in the user's program, so this is the coordinator's reload
   (the worker's is SIGHUP). A directory's times change when a file is added,
   removed or renamed into it, not when one is edited in place. Not
   thread-safe: one thread per cache. */
#define CDC_TRUST_RECHECK_MS 1000

typedef struct cdc_trust cdc_trust_t;

/* Read path into a new cache. CDC_OK, CDC_ENOMEM, or CDC_ECONFIG naming path
   (missing, unreadable). Caller owns *trust_p (cdc__trust_destroy). */
int cdc__trust_new(const char *path, cdc_trust_t **trust_p);

/* Accepts NULL and *NULL; nulls *trust_p. */
void cdc__trust_destroy(cdc_trust_t **trust_p);

/* The trusted certificate holding public_txt (Z85) into *cert (its public
   key; no endpoint, no secret). now_ms: a monotonic clock, for the recheck.
   CDC_OK, or CDC_ECONFIG (no such key, or path unreadable at the last look:
   then nothing is trusted until it reads again). */
int cdc__trust_find(cdc_trust_t *self, const char *public_txt, int64_t now_ms,
                    cdc_curve_cert_t *cert);

/* How many times path was read (the first read counts): for tests. */
int cdc__trust_reads(const cdc_trust_t *self);

/* Whether path names a directory (1), something else that exists (0), or
   nothing readable (-1). */
int cdc__curve_path_is_dir(const char *path);

/* Whether a connect to endpoint needs protection: tcp:// to a host that is
   not loopback (127.0.0.0/8, ::1, localhost); any other name is resolved by
   libzmq, so it may be anyone ('lo' included: a host name when connecting).
   ipc:// and inproc:// do not. */
int cdc__endpoint_needs_curve(const char *endpoint);

/* The same for a bind, where libzmq reads a name as an interface first:
   'lo' is then loopback too; '*' and 0.0.0.0 (every interface) need it. */
int cdc__bind_needs_curve(const char *endpoint);

/* Wipe a certificate's secret key from memory. */
void cdc__curve_cert_clear(cdc_curve_cert_t *cert);

#endif
