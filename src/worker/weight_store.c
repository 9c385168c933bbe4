/* weight_store.c - the worker's weight matrices on its device's disk (weight_store.h). */
#define _DEFAULT_SOURCE /* madvise */
#include "weight_store.h"

#include "error.h"
#include "grow.h"
#include "hash.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STORE_MAGIC UINT64_C(0x3154535257434443) /* "CDCWRST1" little-endian */
#define STORE_SUFFIX ".cdcw"
#define STORE_NAME_MAX 64 /* 16 + 1 + 16 hex digits, the suffix, a temporary's pid */

/* A file's first CDC_WEIGHT_STORE_HEADER bytes, in the device's own byte
   order (the files never leave it). */
typedef struct {
    uint64_t magic;
    uint64_t scope, content;
    int64_t rows, k;
    uint64_t checksum; /* cdc__hash_bytes of the floats, seeded by the shape */
    uint64_t reserved[2];
} store_header_t;

_Static_assert(sizeof(store_header_t) == CDC_WEIGHT_STORE_HEADER, "store header size");

typedef struct {
    cdc_weight_key_t key;
    uint64_t bytes; /* the file's size */
    int64_t age;    /* its modification time (ns), which saving sets later
                       than every other file's: the order files were made */
} store_file_t;

struct cdc_weight_store {
    int dir_fd;
    store_file_t *files; /* oldest first */
    size_t count, capacity;
    uint64_t max_bytes;
    int64_t next_age;
    cdc_weight_store_stats_t stats;
};

/* A mapped file a cache entry holds. */
typedef struct {
    void *map;
    size_t size;
} store_mapping_t;

static void file_name(cdc_weight_key_t key, char *out, size_t size)
{
    snprintf(out, size, "%016" PRIx64 "-%016" PRIx64 STORE_SUFFIX, key.scope, key.content);
}

/* The key a store file's name gives, or 0 when it is not one. */
static int name_key(const char *name, cdc_weight_key_t *key)
{
    char check[STORE_NAME_MAX];
    if (strlen(name) != 33 + strlen(STORE_SUFFIX) ||
        sscanf(name, "%16" SCNx64 "-%16" SCNx64, &key->scope, &key->content) != 2)
        return 0;
    file_name(*key, check, sizeof check);
    return strcmp(check, name) == 0;
}

static uint64_t data_checksum(const float *data, int64_t rows, int64_t k)
{
    size_t bytes = (size_t) rows * (size_t) k * sizeof(float);
    return cdc__hash_bytes(data, bytes, cdc__hash_mix((uint64_t) rows, (uint64_t) k));
}

static long find(const cdc_weight_store_t *self, cdc_weight_key_t key)
{
    for (size_t i = 0; i < self->count; i++)
        if (self->files[i].key.content == key.content && self->files[i].key.scope == key.scope)
            return (long) i;
    return -1;
}

/* Forget file i and remove it from disk. */
static void remove_file(cdc_weight_store_t *self, size_t i)
{
    char name[STORE_NAME_MAX];
    file_name(self->files[i].key, name, sizeof name);
    if (unlinkat(self->dir_fd, name, 0) != 0 && errno != ENOENT)
        CDC_LOG_WARNF("weight store: cannot remove %s: %s", name, strerror(errno));
    self->stats.bytes -= self->files[i].bytes;
    memmove(&self->files[i], &self->files[i + 1], (self->count - i - 1) * sizeof *self->files);
    self->count--;
}

static int append(cdc_weight_store_t *self, cdc_weight_key_t key, uint64_t bytes, int64_t age)
{
    store_file_t *files = cdc__grow(self->files, &self->capacity, self->count, sizeof *files, 64);
    if (!files)
        return cdc__fail(CDC_ENOMEM, "weight store index");
    self->files = files;
    self->files[self->count++] = (store_file_t){key, bytes, age};
    self->stats.bytes += bytes;
    return CDC_OK;
}

/* Remove the oldest files until `more` bytes fit within max_bytes. */
static void make_room(cdc_weight_store_t *self, uint64_t more)
{
    while (self->count > 0 && self->stats.bytes + more > self->max_bytes) {
        remove_file(self, 0);
        self->stats.evicted++;
    }
}

static int by_age(const void *a, const void *b)
{
    int64_t x = ((const store_file_t *) a)->age, y = ((const store_file_t *) b)->age;
    return (x > y) - (x < y);
}

/* List dir's store files, oldest first; remove temporaries a process that
   died while writing left behind. */
static int list_files(cdc_weight_store_t *self, const char *dir)
{
    int fd = dup(self->dir_fd);
    DIR *listing = fd >= 0 ? fdopendir(fd) : NULL;
    if (!listing) {
        if (fd >= 0)
            close(fd);
        return cdc__fail(CDC_EINVAL, "--store '%s': %s", dir, strerror(errno));
    }
    int rc = CDC_OK;
    for (struct dirent *entry; rc == CDC_OK && (entry = readdir(listing));) {
        cdc_weight_key_t key;
        struct stat st;
        size_t len = strlen(entry->d_name);
        if (len > 4 && strcmp(entry->d_name + len - 4, ".tmp") == 0)
            unlinkat(self->dir_fd, entry->d_name, 0);
        else if (name_key(entry->d_name, &key) &&
                 fstatat(self->dir_fd, entry->d_name, &st, 0) == 0 && S_ISREG(st.st_mode))
            rc = append(self, key, (uint64_t) st.st_size,
                        (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);
    }
    closedir(listing);
    if (rc != CDC_OK)
        return rc;
    if (self->count > 1) /* files is NULL while empty */
        qsort(self->files, self->count, sizeof *self->files, by_age);
    self->next_age = self->count ? self->files[self->count - 1].age + 1 : 0;
    make_room(self, 0);
    return CDC_OK;
}

int cdc__weight_store_open(const char *dir, uint64_t max_bytes, cdc_weight_store_t **store_p)
{
    *store_p = NULL;
    if (!dir || !dir[0] || max_bytes == 0)
        return cdc__fail(CDC_EINVAL, "weight store: a directory and a size > 0 are needed");
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return cdc__fail(CDC_EINVAL, "--store '%s': cannot create it: %s", dir, strerror(errno));
    cdc_weight_store_t *self = calloc(1, sizeof *self);
    if (!self)
        return cdc__fail(CDC_ENOMEM, "weight store");
    self->max_bytes = max_bytes;
    self->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = self->dir_fd < 0 ? cdc__fail(CDC_EINVAL, "--store '%s': %s", dir, strerror(errno))
                              : list_files(self, dir);
    if (rc != CDC_OK) {
        cdc__weight_store_close(&self);
        return rc;
    }
    *store_p = self;
    return CDC_OK;
}

void cdc__weight_store_close(cdc_weight_store_t **store_p)
{
    if (!store_p || !*store_p)
        return;
    if ((*store_p)->dir_fd >= 0)
        close((*store_p)->dir_fd);
    free((*store_p)->files);
    free(*store_p);
    *store_p = NULL;
}

int cdc__weight_store_has(const cdc_weight_store_t *self, cdc_weight_key_t key)
{
    return find(self, key) >= 0;
}

/* Write size bytes, however many calls it takes. */
static int write_all(int fd, const void *data, size_t size)
{
    const char *at = data;
    while (size > 0) {
        ssize_t n = write(fd, at, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        at += n;
        size -= (size_t) n;
    }
    return 0;
}

/* Write header and floats to a temporary file dated age (ns: the
   filesystem's own times are coarser than the writes), then give it its
   name. */
static int write_file(cdc_weight_store_t *self, const char *name, const store_header_t *header,
                      const float *data, size_t bytes, int64_t age)
{
    struct timespec times[2] = {{0, UTIME_OMIT},
                                {(time_t) (age / 1000000000), (long) (age % 1000000000)}};
    char temporary[STORE_NAME_MAX + 16];
    snprintf(temporary, sizeof temporary, "%s.%ld.tmp", name, (long) getpid());
    int fd = openat(self->dir_fd, temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int failed = write_all(fd, header, sizeof *header) != 0 || write_all(fd, data, bytes) != 0 ||
                 futimens(fd, times) != 0;
    failed |= close(fd) != 0;
    if (!failed && renameat(self->dir_fd, temporary, self->dir_fd, name) == 0)
        return 0;
    int saved = errno;
    unlinkat(self->dir_fd, temporary, 0);
    errno = saved;
    return -1;
}

int cdc__weight_store_save(cdc_weight_store_t *self, cdc_weight_key_t key, int64_t rows,
                           int64_t k, const float *data)
{
    size_t bytes = (size_t) rows * (size_t) k * sizeof(float);
    uint64_t file_bytes = CDC_WEIGHT_STORE_HEADER + (uint64_t) bytes;
    if (find(self, key) >= 0 || file_bytes > self->max_bytes)
        return CDC_OK;
    char name[STORE_NAME_MAX];
    file_name(key, name, sizeof name);
    store_header_t header = {STORE_MAGIC, key.scope, key.content, rows, k,
                             data_checksum(data, rows, k), {0, 0}};
    make_room(self, file_bytes);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t age = (int64_t) now.tv_sec * 1000000000 + now.tv_nsec;
    age = age > self->next_age ? age : self->next_age;
    if (write_file(self, name, &header, data, bytes, age) != 0) {
        self->stats.failed++;
        int rc = cdc__fail(CDC_EINVAL, "weight store: cannot write %s: %s", name,
                           strerror(errno));
        CDC_LOG_WARNF("%s (served from memory only)", cdc_last_error());
        return rc;
    }
    self->stats.saved++;
    self->next_age = age + 1;
    return append(self, key, file_bytes, age);
}

static void release_mapping(void *owner)
{
    store_mapping_t *mapping = owner;
    munmap(mapping->map, mapping->size);
    free(mapping);
}

/* Whether the mapped file holds key's rows x k floats, whole and unchanged. */
static int file_valid(const store_header_t *header, size_t size, cdc_weight_key_t key,
                      int64_t rows, int64_t k)
{
    size_t bytes = (size_t) rows * (size_t) k * sizeof(float);
    if (size != CDC_WEIGHT_STORE_HEADER + bytes || header->magic != STORE_MAGIC ||
        header->scope != key.scope || header->content != key.content || header->rows != rows ||
        header->k != k)
        return 0;
    const float *data = (const float *) ((const char *) header + CDC_WEIGHT_STORE_HEADER);
    return data_checksum(data, rows, k) == header->checksum;
}

int cdc__weight_store_load(cdc_weight_store_t *self, cdc_weight_key_t key, int64_t rows,
                           int64_t k, cdc_weight_value_t *value)
{
    *value = (cdc_weight_value_t){rows, k, NULL, 0, NULL, NULL};
    long i = find(self, key);
    if (i < 0)
        return CDC_OK;
    char name[STORE_NAME_MAX];
    file_name(key, name, sizeof name);
    int fd = openat(self->dir_fd, name, O_RDONLY | O_CLOEXEC);
    struct stat st;
    void *map = NULL;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size >= CDC_WEIGHT_STORE_HEADER) {
        map = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            close(fd);
            return cdc__fail(CDC_ENOMEM, "weight store: cannot map %s: %s", name,
                             strerror(errno));
        }
    }
    if (fd >= 0)
        close(fd);
    if (map) {
        madvise(map, (size_t) st.st_size, MADV_SEQUENTIAL);
        if (!file_valid(map, (size_t) st.st_size, key, rows, k)) {
            munmap(map, (size_t) st.st_size);
            map = NULL;
        }
    }
    if (!map) {
        CDC_LOG_WARNF("weight store: %s is damaged or not %lld x %lld: removed", name,
                      (long long) rows, (long long) k);
        remove_file(self, (size_t) i);
        self->stats.damaged++;
        return CDC_OK;
    }
    store_mapping_t *mapping = malloc(sizeof *mapping);
    if (!mapping) {
        munmap(map, (size_t) st.st_size);
        return cdc__fail(CDC_ENOMEM, "weight store mapping");
    }
    *mapping = (store_mapping_t){map, (size_t) st.st_size};
    size_t page = (size_t) sysconf(_SC_PAGESIZE);
    value->data = (const float *) ((const char *) map + CDC_WEIGHT_STORE_HEADER);
    value->alloc_bytes = (mapping->size + page - 1) / page * page + sizeof *mapping;
    value->owner = mapping;
    value->release = release_mapping;
    self->stats.loaded++;
    self->stats.bytes_read += (uint64_t) st.st_size - CDC_WEIGHT_STORE_HEADER;
    return CDC_OK;
}

void cdc__weight_store_stats(const cdc_weight_store_t *self, cdc_weight_store_stats_t *stats)
{
    *stats = self->stats;
    stats->count = self->count;
}
