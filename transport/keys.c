/* keys.c - CURVE certificates through CZMQ's zcert, and the protected-mode endpoint rule.
 *
 * Only zcert and zconfig are used here (no zsys logging, no zdir): both run
 * inside the coordinator, which with LD_PRELOAD is the user's program, and
 * CZMQ's zsys_init (which its logging and zdir call) would install SIGINT and
 * SIGTERM handlers there. Directories are read with opendir. And zconfig
 * prints its syntax errors to stdout, which the library never writes to, so a
 * file is only handed to zcert_load once it reads as what zcert_save writes
 * (cert_text_ok). */
#include "keys.h"

#include "error.h"

#include <ctype.h>
#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <strings.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* CZMQ builds PATH_secret in a 256-byte buffer (zcert_load, zcert_save). */
#define ZCERT_PATH_MAX (256 - sizeof "_secret")

static int all_zero(const uint8_t *bytes, size_t size)
{
    uint8_t any = 0;
    for (size_t i = 0; i < size; i++)
        any |= bytes[i];
    return any == 0;
}

static void cert_copy(zcert_t *zc, int with_secret, cdc_curve_cert_t *cert)
{
    memset(cert, 0, sizeof *cert);
    memcpy(cert->public_key, zcert_public_key(zc), CDC_CURVE_KEY_BYTES);
    snprintf(cert->public_txt, sizeof cert->public_txt, "%s", zcert_public_txt(zc));
    if (with_secret && !all_zero(zcert_secret_key(zc), CDC_CURVE_KEY_BYTES)) {
        memcpy(cert->secret_key, zcert_secret_key(zc), CDC_CURVE_KEY_BYTES);
        cert->has_secret = 1;
    }
    const char *endpoint = zcert_meta(zc, "endpoint");
    if (endpoint)
        snprintf(cert->endpoint, sizeof cert->endpoint, "%s", endpoint);
}

int cdc__curve_path_is_dir(const char *path)
{
    struct stat st;
    if (!path || stat(path, &st) != 0)
        return -1;
    return S_ISDIR(st.st_mode) ? 1 : 0;
}

#define CERT_TEXT_MAX 16384

/* One line of zcert_save's ZPL subset: blank, a comment, or NAME at a
   4-space indent (at most one level deeper than the previous line) with an
   optional = "VALUE" or = TOKEN. */
static int cert_line_ok(const char *line, size_t len, int *level)
{
    size_t i = 0;
    while (i < len && line[i] == ' ')
        i++;
    if (i == len || line[i] == '#')
        return 1;
    if (i % 4 != 0 || (int) (i / 4) > *level + 1)
        return 0;
    *level = (int) (i / 4);
    size_t name = i;
    while (i < len && (isalnum((unsigned char) line[i]) || strchr("_.$@+-", line[i])))
        i++;
    if (i == name)
        return 0;
    if (i == len)
        return 1;
    if (len - i < 4 || strncmp(line + i, " = ", 3) != 0)
        return 0;
    i += 3;
    if (line[i] == '"') {
        const char *close = memchr(line + i + 1, '"', len - i - 1);
        if (!close)
            return 0;
        i = (size_t) (close - line) + 1;
    } else {
        while (i < len && (isalnum((unsigned char) line[i]) || strchr("_.:/@+-", line[i])))
            i++;
    }
    while (i < len && line[i] == ' ')
        i++;
    return i == len;
}

/* Whether path holds text zconfig reads without complaint, with a key. */
static int cert_text_ok(const char *path)
{
    FILE *file = fopen(path, "r");
    if (!file)
        return 0;
    char *text = malloc(CERT_TEXT_MAX + 1);
    size_t size = text ? fread(text, 1, CERT_TEXT_MAX + 1, file) : 0;
    fclose(file);
    int ok = text && size <= CERT_TEXT_MAX && memchr(text, '\0', size) == NULL;
    int level = -1;
    for (size_t at = 0; ok && at < size;) {
        const char *end = memchr(text + at, '\n', size - at);
        size_t len = end ? (size_t) (end - (text + at)) : size - at;
        ok = cert_line_ok(text + at, len, &level);
        at += len + 1;
    }
    if (ok) {
        text[size] = '\0';
        ok = strstr(text, "public-key = \"") != NULL;
    }
    free(text);
    return ok;
}

/* zcert_load(path) reads path_secret first when it exists, else path; both
   are screened first (cert_text_ok). */
static zcert_t *screened_load(const char *path)
{
    char secret[ZCERT_PATH_MAX + sizeof "_secret"];
    snprintf(secret, sizeof secret, "%s_secret", path);
    struct stat st;
    if (stat(secret, &st) == 0 && !cert_text_ok(secret))
        return NULL;
    if (!cert_text_ok(path))
        return NULL;
    return zcert_load(path);
}

/* Load one certificate file, with errors naming it. */
static zcert_t *load_file(const char *path)
{
    struct stat st;
    if (!path || !*path)
        return (void) cdc__fail(CDC_ECONFIG, "no certificate file given"), NULL;
    if (strlen(path) > ZCERT_PATH_MAX)
        return (void) cdc__fail(CDC_ECONFIG, "certificate path '%s' is longer than %zu bytes",
                                path, ZCERT_PATH_MAX), NULL;
    if (stat(path, &st) != 0)
        return (void) cdc__fail(CDC_ECONFIG, "certificate '%s': %s", path, strerror(errno)),
               NULL;
    if (!S_ISREG(st.st_mode))
        return (void) cdc__fail(CDC_ECONFIG, "certificate '%s' is not a regular file", path),
               NULL;
    zcert_t *zc = screened_load(path);
    if (!zc)
        cdc__fail(CDC_ECONFIG, "'%s' is not a CURVE certificate (cdcgemm-keygen writes them)",
                  path);
    return zc;
}

int cdc__curve_load_secret(const char *path, cdc_curve_cert_t *cert)
{
    zcert_t *zc = load_file(path);
    if (!zc)
        return CDC_ECONFIG;
    cert_copy(zc, 1, cert);
    zcert_destroy(&zc);
    if (!cert->has_secret)
        return cdc__fail(CDC_ECONFIG,
                         "certificate '%s' holds no secret key (give the PATH_secret file)",
                         path);
    return CDC_OK;
}

int cdc__curve_load_public(const char *path, cdc_curve_cert_t *cert)
{
    zcert_t *zc = load_file(path);
    if (!zc)
        return CDC_ECONFIG;
    cert_copy(zc, 0, cert);
    zcert_destroy(&zc);
    return CDC_OK;
}

static int has_suffix(const char *name, const char *suffix)
{
    size_t n = strlen(name), s = strlen(suffix);
    return n >= s && strcmp(name + n - s, suffix) == 0;
}


/* Each public certificate of dir (a regular file, not hidden, not *_secret,
   that loads) to visit(zc, ctx), until it returns nonzero: 1 (stop: found)
   or a status, which is returned; CDC_OK once every one was visited. */
static int certs_in_dir(const char *dir, int (*visit)(zcert_t *zc, void *ctx), void *ctx)
{
    DIR *d = opendir(dir);
    if (!d)
        return cdc__fail(CDC_ECONFIG, "certificate directory '%s': %s", dir, strerror(errno));
    int rc = CDC_OK;
    struct dirent *entry;
    while (rc == CDC_OK && (entry = readdir(d)) != NULL) {
        if (entry->d_name[0] == '.' || has_suffix(entry->d_name, "_secret"))
            continue;
        char path[ZCERT_PATH_MAX + 1];
        if ((size_t) snprintf(path, sizeof path, "%s/%s", dir, entry->d_name) >= sizeof path)
            continue;
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        zcert_t *zc = screened_load(path);
        if (zc)
            rc = visit(zc, ctx);
        zcert_destroy(&zc);
    }
    closedir(d);
    return rc;
}

/* A search by "endpoint" metadata (an endpoint list names its workers). */
typedef struct {
    const char *endpoint;
    cdc_curve_cert_t *cert;
    int certs; /* looked at */
} cert_search_t;

static int cert_search_visit(zcert_t *zc, void *ctx)
{
    cert_search_t *search = ctx;
    search->certs++;
    const char *field = zcert_meta(zc, "endpoint");
    if (!field || strcmp(field, search->endpoint) != 0)
        return CDC_OK;
    cert_copy(zc, 0, search->cert);
    return 1;
}

/* The certificate in dir that names endpoint. */
static int server_cert_in_dir(const char *dir, const char *endpoint, cdc_curve_cert_t *cert)
{
    cert_search_t search = {endpoint, cert, 0};
    int rc = certs_in_dir(dir, cert_search_visit, &search);
    if (rc == 1)
        return CDC_OK;
    if (rc != CDC_OK)
        return rc;
    return cdc__fail(CDC_ECONFIG,
                     "no certificate in '%s' names endpoint '%s' (of %d certificates; "
                     "cdcgemm-keygen --endpoint %s writes one)",
                     dir, endpoint, search.certs, endpoint);
}

int cdc__curve_server_cert(const char *path, const char *endpoint, cdc_curve_cert_t *cert)
{
    int is_dir = cdc__curve_path_is_dir(path);
    if (is_dir < 0)
        return cdc__fail(CDC_ECONFIG, "worker certificate '%s': %s", path ? path : "(null)",
                         strerror(errno));
    if (is_dir)
        return server_cert_in_dir(path, endpoint, cert);
    return cdc__curve_load_public(path, cert);
}

/* ---- trusted keys in memory (discovery) ---------------------------------------- */

typedef struct {
    char txt[CDC_CURVE_KEY_TEXT];
    uint8_t key[CDC_CURVE_KEY_BYTES];
} trust_key_t;

struct cdc_trust {
    char *path;
    trust_key_t *keys; /* sorted by txt */
    int count, capacity;
    struct stat seen;  /* path's stat at the last read */
    int64_t checked_ms;
    int reads;
    int readable;      /* the last look at path succeeded */
};

static int trust_key_cmp(const void *a, const void *b)
{
    return strcmp(((const trust_key_t *) a)->txt, ((const trust_key_t *) b)->txt);
}

static int trust_add(cdc_trust_t *self, zcert_t *zc)
{
    if (self->count == self->capacity) {
        int capacity = self->capacity ? 2 * self->capacity : 16;
        trust_key_t *keys = realloc(self->keys, (size_t) capacity * sizeof *keys);
        if (!keys)
            return cdc__fail(CDC_ENOMEM, "trusted keys of '%s'", self->path);
        self->keys = keys;
        self->capacity = capacity;
    }
    trust_key_t *entry = &self->keys[self->count++];
    snprintf(entry->txt, sizeof entry->txt, "%s", zcert_public_txt(zc));
    memcpy(entry->key, zcert_public_key(zc), CDC_CURVE_KEY_BYTES);
    return CDC_OK;
}

static int trust_add_visit(zcert_t *zc, void *self)
{
    return trust_add(self, zc);
}

/* Read path again (st: its stat now); on failure nothing is trusted. */
static int trust_read(cdc_trust_t *self, const struct stat *st)
{
    self->count = 0;
    self->reads++;
    self->seen = *st;
    int rc;
    if (S_ISDIR(st->st_mode)) {
        rc = certs_in_dir(self->path, trust_add_visit, self);
    } else {
        zcert_t *zc = load_file(self->path);
        rc = zc ? trust_add(self, zc) : CDC_ECONFIG;
        zcert_destroy(&zc);
    }
    if (rc != CDC_OK)
        self->count = 0;
    qsort(self->keys, (size_t) self->count, sizeof *self->keys, trust_key_cmp);
    self->readable = rc == CDC_OK;
    return rc;
}

static int stat_same(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

int cdc__trust_new(const char *path, cdc_trust_t **trust_p)
{
    *trust_p = NULL;
    struct stat st;
    if (!path || !*path)
        return cdc__fail(CDC_ECONFIG, "no trusted worker certificates given");
    if (stat(path, &st) != 0)
        return cdc__fail(CDC_ECONFIG, "worker certificate '%s': %s", path, strerror(errno));
    cdc_trust_t *self = calloc(1, sizeof *self);
    if (!self || !(self->path = strdup(path))) {
        free(self);
        return cdc__fail(CDC_ENOMEM, "trusted keys");
    }
    int rc = trust_read(self, &st);
    if (rc != CDC_OK) {
        cdc__trust_destroy(&self);
        return rc;
    }
    *trust_p = self;
    return CDC_OK;
}

void cdc__trust_destroy(cdc_trust_t **trust_p)
{
    if (!trust_p || !*trust_p)
        return;
    free((*trust_p)->keys);
    free((*trust_p)->path);
    free(*trust_p);
    *trust_p = NULL;
}

/* At most once per CDC_TRUST_RECHECK_MS: read path again when it changed. */
static void trust_recheck(cdc_trust_t *self, int64_t now_ms)
{
    if (self->checked_ms != 0 && now_ms - self->checked_ms < CDC_TRUST_RECHECK_MS)
        return;
    self->checked_ms = now_ms;
    struct stat st;
    if (stat(self->path, &st) != 0) {
        self->count = 0; /* gone: trust nothing */
        self->readable = 0;
        memset(&self->seen, 0, sizeof self->seen);
        return;
    }
    if (!self->readable || !stat_same(&st, &self->seen))
        trust_read(self, &st);
}

int cdc__trust_find(cdc_trust_t *self, const char *public_txt, int64_t now_ms,
                    cdc_curve_cert_t *cert)
{
    trust_recheck(self, now_ms);
    if (!self->readable)
        return cdc__fail(CDC_ECONFIG, "worker certificates '%s' unreadable at the last look",
                         self->path);
    trust_key_t probe;
    snprintf(probe.txt, sizeof probe.txt, "%s", public_txt);
    const trust_key_t *hit = bsearch(&probe, self->keys, (size_t) self->count,
                                     sizeof *self->keys, trust_key_cmp);
    if (!hit)
        return cdc__fail(CDC_ECONFIG, "no certificate in '%s' holds key %s (of %d certificates)",
                         self->path, public_txt, self->count);
    memset(cert, 0, sizeof *cert);
    memcpy(cert->public_key, hit->key, CDC_CURVE_KEY_BYTES);
    memcpy(cert->public_txt, hit->txt, sizeof cert->public_txt);
    return CDC_OK;
}

int cdc__trust_reads(const cdc_trust_t *self)
{
    return self ? self->reads : 0;
}

static int file_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

int cdc__curve_keygen(const char *path, const char *endpoint, char public_txt[CDC_CURVE_KEY_TEXT])
{
    char secret_path[ZCERT_PATH_MAX + sizeof "_secret"];
    if (!path || !*path || strlen(path) > ZCERT_PATH_MAX)
        return cdc__fail(CDC_EINVAL, "certificate path must be 1..%zu bytes", ZCERT_PATH_MAX);
    if (endpoint && strlen(endpoint) >= CDC_CURVE_ENDPOINT_MAX)
        return cdc__fail(CDC_EINVAL, "endpoint is longer than %d bytes",
                         CDC_CURVE_ENDPOINT_MAX - 1);
    snprintf(secret_path, sizeof secret_path, "%s_secret", path);
    if (file_exists(path) || file_exists(secret_path))
        return cdc__fail(CDC_EINVAL, "'%s' or '%s' exists; not overwritten", path, secret_path);
    zcert_t *zc = zcert_new();
    if (!zc)
        return cdc__fail(CDC_ENOMEM, "zcert_new failed");
    if (endpoint && *endpoint)
        zcert_set_meta(zc, "endpoint", "%s", endpoint);
    /* The secret file must never exist with looser permissions, even briefly. */
    mode_t old_mask = umask(077);
    int rc = zcert_save_secret(zc, secret_path);
    umask(old_mask);
    if (rc == 0)
        rc = zcert_save_public(zc, path);
    if (rc != 0) {
        int err = errno;
        zcert_destroy(&zc);
        unlink(secret_path);
        return cdc__fail(CDC_ETRANSPORT, "writing '%s': %s", path, strerror(err));
    }
    chmod(secret_path, 0600);
    chmod(path, 0644);
    if (public_txt)
        snprintf(public_txt, CDC_CURVE_KEY_TEXT, "%s", zcert_public_txt(zc));
    zcert_destroy(&zc);
    return CDC_OK;
}

/* host of tcp://HOST:PORT (brackets of [v6] stripped) into out. */
static void tcp_host(const char *address, char *out, size_t size)
{
    const char *start = address, *end;
    /* tcp://SOURCE;HOST:PORT: the destination is what matters. */
    const char *semicolon = strchr(address, ';');
    if (semicolon)
        start = semicolon + 1;
    if (*start == '[') {
        start++;
        end = strchr(start, ']');
        if (!end)
            end = start + strlen(start);
    } else {
        end = strrchr(start, ':');
        if (!end)
            end = start + strlen(start);
    }
    size_t len = (size_t) (end - start);
    if (len >= size)
        len = size - 1;
    memcpy(out, start, len);
    out[len] = '\0';
}

int cdc__endpoint_needs_curve(const char *endpoint)
{
    if (!endpoint || strncmp(endpoint, "tcp://", 6) != 0)
        return 0;
    char host[256];
    tcp_host(endpoint + 6, host, sizeof host);
    if (strcmp(host, "localhost") == 0 || strcmp(host, "::1") == 0)
        return 0;
    /* 127.0.0.0/8: "127." then digits and dots only. */
    if (strncmp(host, "127.", 4) == 0 && strspn(host + 4, "0123456789.") == strlen(host + 4))
        return 0;
    return 1;
}

int cdc__bind_needs_curve(const char *endpoint)
{
    if (endpoint && strncmp(endpoint, "tcp://", 6) == 0) {
        char host[256];
        tcp_host(endpoint + 6, host, sizeof host);
        if (strcmp(host, "lo") == 0)
            return 0; /* the loopback interface */
    }
    return cdc__endpoint_needs_curve(endpoint);
}

void cdc__curve_cert_clear(cdc_curve_cert_t *cert)
{
    volatile uint8_t *secret = cert->secret_key;
    for (size_t i = 0; i < sizeof cert->secret_key; i++)
        secret[i] = 0;
    cert->has_secret = 0;
}
