/* local_workers.c - spawn, watch over and stop the local cdcgemm-worker processes. */
#define _GNU_SOURCE /* dladdr */
#include "local_workers.h"

#include "clock.h"
#include "error.h"
#include "log.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define WORKER_NAME "cdcgemm-worker"
#define BIND_WAIT_MS 5000
#define STOP_WAIT_MS 1000
#define IPC_PATH_MAX 107
#define INCARNATION_ROOM 11 /* ".2147483647": the longest suffix a respawn adds */

#ifndef CDC_LIBDIR_TO_BINDIR
#error "CDC_LIBDIR_TO_BINDIR (libdir to bindir, from GNUInstallDirs) must be defined"
#endif

struct cdc_local_workers {
    int count;
    pid_t pids[CDC_MAX_WORKERS];
    pthread_mutex_t lock; /* pids, incarnations, endpoints: the supervisor
                             replaces them while others read */
    int incarnations[CDC_MAX_WORKERS]; /* slot i's current one: ipc://DIR/wI.K */
    char dir[PATH_MAX];
    char endpoints[CDC_LOCAL_ENDPOINTS_MAX]; /* the current ones */
    int registered; /* in the atexit list */
    pid_t owner;    /* the process that spawned them: only it stops them */
    void (*before_stop)(void *arg); /* at exit, before the workers stop */
    void *before_stop_arg;
    /* What a respawn needs to start a worker again as it was started. */
    char binary[PATH_MAX];
    char faults[CDC_CONFIG_STR];
    cdc_log_level_t log_level;
    int threads;
};

/* Every live set, so an exiting process stops workers it never destroyed. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static cdc_local_workers_t *registry[64];
static pthread_once_t atexit_once = PTHREAD_ONCE_INIT;
static const char anchor; /* an address inside this library, for dladdr */

static int executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

static int try_candidate(const char *dir, const char *suffix, char *path, size_t size)
{
    int len = snprintf(path, size, "%s%s/" WORKER_NAME, dir, suffix);
    return len > 0 && (size_t) len < size && executable(path);
}

/* The directory of the object holding this code: libcdcgemm.so, or the
   executable it is linked into statically. Empty when unknown. */
static void own_directory(char *dir, size_t size)
{
    char self[PATH_MAX] = "";
    Dl_info info;
    if (!(dladdr(&anchor, &info) && info.dli_fname && strchr(info.dli_fname, '/') &&
          realpath(info.dli_fname, self))) {
        ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
        self[len > 0 ? len : 0] = '\0';
    }
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    else
        self[0] = '\0';
    snprintf(dir, size, "%s", self);
}

static int find_on_path(char *path, size_t size)
{
    const char *search = getenv("PATH");
    while (search && *search) {
        const char *colon = strchr(search, ':');
        size_t len = colon ? (size_t) (colon - search) : strlen(search);
        char dir[PATH_MAX];
        if (len > 0 && len < sizeof dir) {
            memcpy(dir, search, len);
            dir[len] = '\0';
            if (try_candidate(dir, "", path, size))
                return 1;
        }
        search += len + (colon ? 1 : 0);
    }
    return 0;
}

int cdc__worker_binary_find(char *path, size_t size)
{
    const char *env = getenv("CDCGEMM_WORKER_BIN");
    if (env && *env) {
        if (!executable(env))
            return cdc__fail(CDC_ECONFIG, "CDCGEMM_WORKER_BIN='%s': not an executable file",
                             env);
        if (strlen(env) >= size)
            return cdc__fail(CDC_ECONFIG, "CDCGEMM_WORKER_BIN: path too long");
        memcpy(path, env, strlen(env) + 1);
        return CDC_OK;
    }
    /* Next to this object (the build tree, or a program linked statically and
       installed beside the worker), then where the install layout puts the
       worker relative to the library's directory (CDC_LIBDIR_TO_BINDIR is
       derived from GNUInstallDirs when configuring, e.g. "../../bin" from
       lib/x86_64-linux-gnu), then $PATH. */
    char self[PATH_MAX];
    own_directory(self, sizeof self);
    if (*self && (try_candidate(self, "", path, size) ||
                  try_candidate(self, "/" CDC_LIBDIR_TO_BINDIR, path, size)))
        return CDC_OK;
    if (find_on_path(path, size))
        return CDC_OK;
    return cdc__fail(CDC_ECONFIG,
                     WORKER_NAME " not found (looked next to %s, in %s/" CDC_LIBDIR_TO_BINDIR
                     " and on PATH); set CDCGEMM_WORKER_BIN, or CDCGEMM_WORKERS to "
                     "running workers, or CDCGEMM_IN_PROCESS=1",
                     *self ? self : "this program", *self ? self : ".");
}

/* Stop (SIGTERM, bounded wait, SIGKILL), reap, remove the directory. Safe to
   call twice: reaped pids are zeroed. Used from atexit too, so it only uses
   async-tolerant calls and never frees. */
static void workers_stop(cdc_local_workers_t *self)
{
    if (getpid() != self->owner)
        return; /* a forked child exiting must not stop its parent's workers */
    for (int i = 0; i < self->count; i++)
        if (self->pids[i] > 0) {
            kill(self->pids[i], SIGCONT); /* a stopped worker cannot act on SIGTERM */
            kill(self->pids[i], SIGTERM);
        }
    int64_t deadline = (int64_t) cdc__clock_ms() + STOP_WAIT_MS;
    for (;;) {
        int running = 0;
        for (int i = 0; i < self->count; i++) {
            if (self->pids[i] <= 0)
                continue;
            pid_t got = waitpid(self->pids[i], NULL, WNOHANG);
            if (got == self->pids[i] || (got < 0 && errno == ECHILD))
                self->pids[i] = 0; /* ECHILD: SIGCHLD ignored, reaped by the kernel */
            else
                running++;
        }
        if (running == 0 || (int64_t) cdc__clock_ms() >= deadline)
            break;
        cdc__sleep_ms(5);
    }
    for (int i = 0; i < self->count; i++)
        if (self->pids[i] > 0) {
            kill(self->pids[i], SIGKILL);
            while (waitpid(self->pids[i], NULL, 0) < 0 && errno == EINTR)
                ;
            self->pids[i] = 0;
        }
    if (self->dir[0]) {
        DIR *dir = opendir(self->dir);
        if (dir) {
            struct dirent *entry;
            while ((entry = readdir(dir))) {
                if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
                    continue;
                char file[PATH_MAX + 256];
                snprintf(file, sizeof file, "%s/%s", self->dir, entry->d_name);
                unlink(file);
            }
            closedir(dir);
        }
        rmdir(self->dir);
        self->dir[0] = '\0';
    }
}

static void stop_all_at_exit(void)
{
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < sizeof registry / sizeof *registry; i++)
        if (registry[i]) {
            if (registry[i]->before_stop) /* no respawn while stopping */
                registry[i]->before_stop(registry[i]->before_stop_arg);
            workers_stop(registry[i]);
        }
    pthread_mutex_unlock(&registry_lock);
}

static void register_atexit(void)
{
    atexit(stop_all_at_exit);
}

static void registry_set(cdc_local_workers_t *self, int add)
{
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < sizeof registry / sizeof *registry; i++) {
        if (add && !registry[i]) {
            registry[i] = self;
            self->registered = 1;
            break;
        }
        if (!add && registry[i] == self) {
            registry[i] = NULL;
            self->registered = 0;
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
}

/* glibc's malloc backs its heap and large blocks with transparent huge
   pages (glibc >= 2.35; an unknown tunable is ignored). A respawned worker
   receives its slot's weights into fresh memory: on the project's VM every
   4 KiB page fault cost about 13 us, 220 ms for AlexNet's 68.5 MB slot,
   against 12-20 ms on huge pages (docs/workers.md, "Respawn"). */
#define HUGE_PAGES_TUNABLE "GLIBC_TUNABLES=glibc.malloc.hugetlb=1"

/* The workers' environment: ours, without LD_PRELOAD (a preloaded
   libcdcgemm must not turn a worker into a coordinator), with OpenBLAS
   held to the worker's thread count from the moment it loads, and malloc
   on huge pages unless the host set GLIBC_TUNABLES itself. */
static char **child_environment(int threads, char *threads_var, size_t size)
{
    size_t count = 0;
    while (environ[count])
        count++;
    char **env = calloc(count + 3, sizeof *env);
    if (!env)
        return NULL;
    size_t kept = 0;
    int tunables = 0;
    for (size_t i = 0; i < count; i++) {
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0 &&
            strncmp(environ[i], "OPENBLAS_NUM_THREADS=", 21) != 0)
            env[kept++] = environ[i];
        tunables |= strncmp(environ[i], "GLIBC_TUNABLES=", 15) == 0;
    }
    snprintf(threads_var, size, "OPENBLAS_NUM_THREADS=%d", threads);
    env[kept++] = threads_var;
    if (!tunables)
        env[kept++] = (char *) HUGE_PAGES_TUNABLE;
    env[kept] = NULL;
    return env;
}

static const char *log_name(cdc_log_level_t level)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    return level >= CDC_LOG_ERROR && level <= CDC_LOG_DEBUG ? names[level] : "warn";
}

/* Wait until every worker's socket file exists; fail if one exits first. */
static int wait_bound(cdc_local_workers_t *self)
{
    int64_t deadline = (int64_t) cdc__clock_ms() + BIND_WAIT_MS;
    for (;;) {
        int bound = 0;
        for (int i = 0; i < self->count; i++) {
            bound += cdc__local_workers_bound(self, i);
            int status;
            if (waitpid(self->pids[i], &status, WNOHANG) == self->pids[i]) {
                self->pids[i] = 0;
                return cdc__fail(CDC_ECONFIG, "local worker %d exited at start-up (%s %d)",
                                 i, WIFEXITED(status) ? "status" : "signal",
                                 WIFEXITED(status) ? WEXITSTATUS(status)
                                                   : WTERMSIG(status));
            }
        }
        if (bound == self->count)
            return CDC_OK;
        if ((int64_t) cdc__clock_ms() >= deadline)
            return cdc__fail(CDC_ETIMEDOUT, "local workers did not bind within %d ms",
                             BIND_WAIT_MS);
        cdc__sleep_ms(2);
    }
}

/* The w<N>.<K> socket files in dir (and the w<N> of older versions), then
   dir itself (fails unless empty). */
static void stale_remove(const char *path)
{
    DIR *dir = opendir(path);
    if (!dir)
        return;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        char file[2 * PATH_MAX];
        struct stat st;
        snprintf(file, sizeof file, "%s/%s", path, entry->d_name);
        if (entry->d_name[0] == 'w' && strspn(entry->d_name + 1, "0123456789") > 0 &&
            lstat(file, &st) == 0 && S_ISSOCK(st.st_mode))
            unlink(file);
    }
    closedir(dir);
    rmdir(path);
}

/* Directories of coordinators that died together with their workers (both
   SIGKILLed: no worker was left to clean up, docs/workers.md): ours
   (cdcgemm-PID-XXXXXX, this user's) whose PID no longer exists. A live
   owner's, or one named another way, is never touched. */
static void stale_sweep(const char *tmp)
{
    DIR *dir = opendir(tmp);
    if (!dir)
        return;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        long pid = 0;
        int end = 0;
        if (sscanf(entry->d_name, "cdcgemm-%ld-%*6[A-Za-z0-9]%n", &pid, &end) != 1 ||
            end == 0 || entry->d_name[end] != '\0' || pid <= 0 || pid > INT_MAX ||
            pid == (long) getpid())
            continue;
        if (kill((pid_t) pid, 0) == 0 || errno != ESRCH)
            continue; /* alive (or not ours to ask about) */
        char path[PATH_MAX + 256];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", tmp, entry->d_name);
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid())
            stale_remove(path);
    }
    closedir(dir);
}

/* A set with its private endpoint directory made, nothing spawned yet. */
static int workers_alloc(cdc_local_workers_t **self_p)
{
    cdc_local_workers_t *self = calloc(1, sizeof *self);
    if (!self)
        return cdc__fail(CDC_ENOMEM, "local workers");
    self->owner = getpid();
    if (pthread_mutex_init(&self->lock, NULL) != 0) {
        free(self);
        return cdc__fail(CDC_ENOMEM, "local workers: mutex");
    }
    const char *tmp = getenv("TMPDIR");
    tmp = tmp && *tmp ? tmp : "/tmp";
    stale_sweep(tmp);
    /* The owner's pid in the name lets a later coordinator remove it. */
    snprintf(self->dir, sizeof self->dir, "%s/cdcgemm-%ld-XXXXXX", tmp, (long) getpid());
    if (!mkdtemp(self->dir)) {
        int rc = cdc__fail(CDC_ECONFIG, "local workers: mkdtemp %s: %s", self->dir,
                           strerror(errno));
        pthread_mutex_destroy(&self->lock);
        free(self);
        return rc;
    }
    *self_p = self;
    return CDC_OK;
}

/* Default signal dispositions and an empty mask whatever the host set up,
   and a process group of their own so a terminal's Ctrl-C reaches only the
   coordinator (which then stops them). */
static int spawn_attr_init(posix_spawnattr_t *attr)
{
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGPIPE);
    if (posix_spawnattr_init(attr) != 0)
        return cdc__fail(CDC_ENOMEM, "local workers: posix_spawnattr_init");
    posix_spawnattr_setsigmask(attr, &none);
    posix_spawnattr_setsigdefault(attr, &defaults);
    posix_spawnattr_setpgroup(attr, 0);
    posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                       POSIX_SPAWN_SETPGROUP);
    return CDC_OK;
}

/* Slot i's endpoint for an incarnation: ipc://DIR/wI.K, K = 0 at the first
   start, one more at each respawn, so a new process never listens where an
   old one did. An ipc path must fit a sockaddr_un (107 bytes). */
static int endpoint_format(const cdc_local_workers_t *self, int i, int incarnation,
                           char *endpoint, size_t size)
{
    int len = snprintf(endpoint, size, "ipc://%s/w%d.%d", self->dir, i, incarnation);
    if (len < 0 || (size_t) len >= size || len - 6 > IPC_PATH_MAX)
        return cdc__fail(CDC_ECONFIG, "local workers: endpoint '%s' too long (TMPDIR)",
                         endpoint);
    return CDC_OK;
}

/* self->endpoints from the slots' current incarnations. The caller holds
   self->lock, or no other thread runs yet. */
static void endpoints_rebuild(cdc_local_workers_t *self, int count)
{
    size_t used = 0;
    self->endpoints[0] = '\0';
    for (int i = 0; i < count; i++) {
        char endpoint[PATH_MAX + 32];
        if (endpoint_format(self, i, self->incarnations[i], endpoint, sizeof endpoint) !=
            CDC_OK)
            continue; /* checked before it was spawned */
        int len = snprintf(self->endpoints + used, sizeof self->endpoints - used, "%s%s",
                           i ? "," : "", endpoint);
        if (len < 0 || (size_t) len >= sizeof self->endpoints - used)
            break; /* cannot happen: room for 64 of the longest */
        used += (size_t) len;
    }
}

/* At start-up: whether slot i's endpoint fits a sockaddr_un whatever its
   incarnation becomes (room for the longest suffix), so that a respawn never
   fails on the path's length. */
static int endpoint_check(const cdc_local_workers_t *self, int i)
{
    char endpoint[PATH_MAX + 32];
    int rc = endpoint_format(self, i, 0, endpoint, sizeof endpoint);
    size_t len = strlen(endpoint) + INCARNATION_ROOM - 2; /* ".0" is in already */
    if (rc == CDC_OK && len - 6 > IPC_PATH_MAX)
        rc = cdc__fail(CDC_ECONFIG, "local workers: endpoint '%s' too long (TMPDIR)",
                       endpoint);
    return rc;
}

/* The arguments of worker i's incarnation (0: first start). */
static void worker_argv(const cdc_local_workers_t *self, char *endpoint, char args[][24],
                        int incarnation, char **argv)
{
    int argc = 0;
    argv[argc++] = WORKER_NAME;
    argv[argc++] = "--bind";
    argv[argc++] = endpoint;
    argv[argc++] = "--threads";
    argv[argc++] = args[0];
    argv[argc++] = "--index";
    argv[argc++] = args[1];
    argv[argc++] = "--parent-pid";
    argv[argc++] = args[2];
    argv[argc++] = "--log";
    argv[argc++] = (char *) log_name(self->log_level);
    if (self->faults[0]) {
        argv[argc++] = "--faults";
        argv[argc++] = (char *) self->faults;
    }
    if (incarnation > 0) { /* one-shot fault rules fired in an earlier one */
        argv[argc++] = "--incarnation";
        argv[argc++] = args[3];
    }
    argv[argc] = NULL;
}

/* Start worker i on its endpoint; incarnation > 0 for a respawn. The
   environment is built anew each time: the host's may have changed. */
static int worker_spawn(cdc_local_workers_t *self, int i, int incarnation)
{
    char endpoint[PATH_MAX + 32], args[4][24], threads_var[64], *argv[20];
    int rc = endpoint_format(self, i, incarnation, endpoint, sizeof endpoint);
    if (rc != CDC_OK)
        return rc;
    snprintf(args[0], sizeof args[0], "%d", self->threads);
    snprintf(args[1], sizeof args[1], "%d", i);
    snprintf(args[2], sizeof args[2], "%ld", (long) self->owner);
    snprintf(args[3], sizeof args[3], "%d", incarnation);
    worker_argv(self, endpoint, args, incarnation, argv);
    posix_spawnattr_t attr;
    rc = spawn_attr_init(&attr);
    if (rc != CDC_OK)
        return rc;
    char **env = child_environment(self->threads, threads_var, sizeof threads_var);
    if (!env) {
        posix_spawnattr_destroy(&attr);
        return cdc__fail(CDC_ENOMEM, "local workers: environment");
    }
    pid_t pid = 0;
    int err = posix_spawn(&pid, self->binary, NULL, &attr, argv, env);
    posix_spawnattr_destroy(&attr);
    free(env);
    if (err != 0)
        return cdc__fail(CDC_ECONFIG, "local workers: posix_spawn %s: %s", self->binary,
                         strerror(err));
    pthread_mutex_lock(&self->lock);
    self->pids[i] = pid;
    self->incarnations[i] = incarnation;
    endpoints_rebuild(self, self->count > i ? self->count : i + 1);
    pthread_mutex_unlock(&self->lock);
    return CDC_OK;
}

int cdc__local_workers_new(int count, const char *faults, cdc_log_level_t log_level,
                           cdc_local_workers_t **self_p)
{
    if (count < 1 || count > CDC_MAX_WORKERS || !self_p)
        return cdc__fail(CDC_EINVAL, "local workers: count = %d, expected 1..%d", count,
                         CDC_MAX_WORKERS);
    char binary[PATH_MAX];
    int rc = cdc__worker_binary_find(binary, sizeof binary);
    if (rc != CDC_OK)
        return rc;
    if (faults && strlen(faults) >= CDC_CONFIG_STR)
        return cdc__fail(CDC_EINVAL, "local workers: faults longer than %d bytes",
                         CDC_CONFIG_STR - 1);
    cdc_local_workers_t *self = NULL;
    if ((rc = workers_alloc(&self)) != CDC_OK)
        return rc;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    self->threads = cores > count ? (int) (cores / count) : 1; /* never oversubscribe */
    memcpy(self->binary, binary, sizeof binary);
    snprintf(self->faults, sizeof self->faults, "%s", faults ? faults : "");
    self->log_level = log_level;
    for (int i = 0; i < count; i++) {
        if ((rc = endpoint_check(self, i)) != CDC_OK || (rc = worker_spawn(self, i, 0)) != CDC_OK)
            goto fail;
        self->count = i + 1;
    }
    pthread_once(&atexit_once, register_atexit);
    registry_set(self, 1);
    if ((rc = wait_bound(self)) != CDC_OK)
        goto fail;
    CDC_LOG_INFOF("spawned %d local workers (%s, %d OpenBLAS thread%s each) in %s", count,
                  binary, self->threads, self->threads == 1 ? "" : "s", self->dir);
    *self_p = self;
    return CDC_OK;

fail:
    cdc__local_workers_destroy(&self);
    return rc;
}

const char *cdc__local_workers_endpoints(cdc_local_workers_t *self, char *out, size_t size)
{
    if (size == 0)
        return out;
    out[0] = '\0';
    if (self) {
        pthread_mutex_lock(&self->lock);
        snprintf(out, size, "%s", self->endpoints);
        pthread_mutex_unlock(&self->lock);
    }
    return out;
}

int cdc__local_workers_endpoint(cdc_local_workers_t *self, int i, char *out, size_t size)
{
    if (!self || i < 0 || i >= self->count)
        return cdc__fail(CDC_EINVAL, "local workers: no slot %d", i);
    pthread_mutex_lock(&self->lock);
    int incarnation = self->incarnations[i];
    pthread_mutex_unlock(&self->lock);
    return endpoint_format(self, i, incarnation, out, size);
}

int cdc__local_workers_bound(cdc_local_workers_t *self, int i)
{
    char endpoint[PATH_MAX + 32];
    struct stat st;
    return cdc__local_workers_endpoint(self, i, endpoint, sizeof endpoint) == CDC_OK &&
           stat(endpoint + 6, &st) == 0 && S_ISSOCK(st.st_mode);
}

const char *cdc__local_workers_dir(const cdc_local_workers_t *self)
{
    return self ? self->dir : "";
}

pid_t cdc__local_workers_pid(cdc_local_workers_t *self, int i)
{
    if (!self || i < 0 || i >= self->count)
        return 0;
    pthread_mutex_lock(&self->lock);
    pid_t pid = self->pids[i];
    pthread_mutex_unlock(&self->lock);
    return pid;
}

int cdc__local_workers_count(const cdc_local_workers_t *self)
{
    return self ? self->count : 0;
}

int cdc__local_workers_reap(cdc_local_workers_t *self, int i, int *status)
{
    pthread_mutex_lock(&self->lock);
    pid_t pid = self->pids[i];
    int gone = pid <= 0;
    *status = -1;
    if (!gone) {
        /* This pid only: the host's other children are not ours to reap. */
        pid_t got = waitpid(pid, status, WNOHANG);
        gone = got == pid || (got < 0 && errno == ECHILD); /* ECHILD: SIGCHLD ignored */
        if (gone) {
            self->pids[i] = 0;
            /* A killed worker leaves its socket file; its path is never
               used again (the next incarnation binds wI.K+1). */
            char endpoint[PATH_MAX + 32];
            if (endpoint_format(self, i, self->incarnations[i], endpoint, sizeof endpoint) ==
                CDC_OK)
                unlink(endpoint + 6);
        }
    }
    pthread_mutex_unlock(&self->lock);
    return gone;
}

void cdc__local_workers_kill(cdc_local_workers_t *self, int i)
{
    pthread_mutex_lock(&self->lock);
    if (self->pids[i] > 0) { /* not reaped yet, so the pid is still this worker's */
        kill(self->pids[i], SIGCONT); /* harmless if running; a stopped one dies at once */
        kill(self->pids[i], SIGKILL);
    }
    pthread_mutex_unlock(&self->lock);
}

int cdc__local_workers_respawn(cdc_local_workers_t *self, int i, int incarnation)
{
    return worker_spawn(self, i, incarnation);
}

void cdc__local_workers_before_stop(cdc_local_workers_t *self, void (*fn)(void *arg),
                                   void *arg)
{
    pthread_mutex_lock(&registry_lock); /* stop_all_at_exit reads them */
    self->before_stop = fn;
    self->before_stop_arg = arg;
    pthread_mutex_unlock(&registry_lock);
}

void cdc__local_workers_destroy(cdc_local_workers_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cdc_local_workers_t *self = *self_p;
    if (self->registered)
        registry_set(self, 0);
    workers_stop(self);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}
