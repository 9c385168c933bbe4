/* harness.c - clock, random numbers, directories, ports, memory and worker
   processes for the suites and the bench (harness.h). */
#define _XOPEN_SOURCE 700 /* nftw */
#include "harness.h"

#include "cdcgemm.h"
#include "keys.h"
#include "local_workers.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* ---- clock ------------------------------------------------------------------ */

double cdc_test_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

void cdc_test_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- random numbers ------------------------------------------------------------ */

void cdc_test_rng_seed(cdc_test_rng_t *rng, uint64_t seed)
{
    rng->state = seed ? seed : 0x9E3779B97F4A7C15ull;
}

uint64_t cdc_test_rng_next(cdc_test_rng_t *rng)
{
    uint64_t x = rng->state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng->state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

double cdc_test_rng_uniform(cdc_test_rng_t *rng, double lo, double hi)
{
    double unit = (double) (cdc_test_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
    return lo + (hi - lo) * unit;
}

int64_t cdc_test_rng_int(cdc_test_rng_t *rng, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t) (hi - lo) + 1;
    return lo + (int64_t) (cdc_test_rng_next(rng) % span);
}

double cdc_test_rng_normal(cdc_test_rng_t *rng)
{
    double u1 = cdc_test_rng_uniform(rng, 0.0, 1.0);
    double u2 = cdc_test_rng_uniform(rng, 0.0, 1.0);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}

void cdc_test_fill_uniform(cdc_test_rng_t *rng, float *x, size_t count)
{
    for (size_t i = 0; i < count; i++)
        x[i] = (float) cdc_test_rng_uniform(rng, -1.0, 1.0);
}

/* ---- files, keys, ports, memory ---------------------------------------------------- */

int cdc_test_dir_make(char *dir, size_t size, const char *name)
{
    if ((size_t) snprintf(dir, size, "/tmp/%s-XXXXXX", name) >= size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkdtemp(dir) ? 0 : -1;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st;
    (void) flag;
    (void) ftw;
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

int cdc_test_dir_remove(const char *dir)
{
    /* Gone already, or going: a worker removes its socket file at exit and
       the last one out its directory (--parent-pid). */
    if (nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0 || errno == ENOENT)
        return 0;
    return -1;
}

int cdc_test_keygen(const char *dir, const char *name, const char *endpoint,
                    cdc_curve_cert_t *cert)
{
    char path[512], secret[520];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(secret, sizeof secret, "%s_secret", path);
    int rc = cdc__curve_keygen(path, endpoint, NULL);
    return rc != CDC_OK ? rc : cdc__curve_load_secret(secret, cert);
}

int cdc_test_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = 0};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *) &address, sizeof address) == 0 &&
        getsockname(fd, (struct sockaddr *) &address, &size) == 0)
        port = ntohs(address.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* A "Name: N kB" field of /proc/PID/status; -1 when unknown. */
static long status_kib(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", (long) pid);
    FILE *file = fopen(path, "r");
    long kib = -1;
    size_t len = strlen(field);
    while (file && fgets(line, sizeof line, file))
        if (strncmp(line, field, len) == 0 && line[len] == ':' &&
            sscanf(line + len + 1, "%ld", &kib) == 1)
            break;
    if (file)
        fclose(file);
    return kib;
}

long cdc_test_rss_kib(pid_t pid)
{
    return status_kib(pid, "VmRSS");
}

long cdc_test_peak_rss_kib(pid_t pid)
{
    return status_kib(pid, "VmHWM");
}

/* ---- worker processes ------------------------------------------------------------- */

enum { ARGS_MAX = 64 };

/* The worker's argv (bin first) from w; the count, or -1 when there are too
   many. numbers: room for the formatted numbers. */
static int worker_argv(const cdc_test_worker_t *w, const char *bin, const char **argv,
                       char numbers[3][32])
{
    int n = 0;
    argv[n++] = bin;
    if (w->endpoint) {
        argv[n++] = "--bind";
        argv[n++] = w->endpoint;
    }
    const struct {
        long value;
        const char *option;
    } counts[] = {{w->index, "--index"}, {w->threads, "--threads"},
                  {w->parent ? (long) getpid() : 0, "--parent-pid"}};
    for (int i = 0; i < 3; i++)
        if (counts[i].value > 0) {
            snprintf(numbers[i], sizeof numbers[i], "%ld", counts[i].value);
            argv[n++] = counts[i].option;
            argv[n++] = numbers[i];
        }
    const struct {
        const char *value, *option;
    } texts[] = {{w->log, "--log"},
                 {w->faults, "--faults"},
                 {w->curve_secret, "--curve-secret"},
                 {w->curve_allow, "--curve-allow"}};
    for (int i = 0; i < 4; i++)
        if (texts[i].value) {
            argv[n++] = texts[i].option;
            argv[n++] = texts[i].value;
        }
    for (int i = 0; w->args && w->args[i]; i++) {
        if (n + 1 >= ARGS_MAX)
            return -1;
        argv[n++] = w->args[i];
    }
    argv[n] = NULL;
    return n;
}

/* sh -c 'PREFIX; exec BIN ARG...' into command (arguments single-quoted). */
static int shell_command(const char *prefix, const char *bin, const char *const *argv,
                         char *command, size_t size)
{
    size_t used = (size_t) snprintf(command, size, "%s; exec '%s'", prefix, bin);
    for (int i = 1; argv[i] && used < size; i++)
        used += (size_t) snprintf(command + used, size - used, " '%s'", argv[i]);
    return used < size ? 0 : -1;
}

pid_t cdc_test_worker_spawn(const cdc_test_worker_t *w, char *error, size_t size)
{
    char found[4096], numbers[3][32], command[8192];
    const char *bin = w->bin, *argv[ARGS_MAX];
    if (!bin) {
        if (cdc__worker_binary_find(found, sizeof found) != CDC_OK) {
            if (error)
                snprintf(error, size, "%s", cdc_last_error());
            return -1;
        }
        bin = found;
    }
    int argc = worker_argv(w, bin, argv, numbers);
    const char *sh[] = {"sh", "-c", command, NULL};
    if (argc < 0 ||
        (w->shell_prefix && shell_command(w->shell_prefix, bin, argv, command, sizeof command))) {
        if (error)
            snprintf(error, size, "%s: too many arguments", bin);
        return -1;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (w->stderr_path)
        posix_spawn_file_actions_addopen(&actions, 2, w->stderr_path,
                                         O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = 0;
    char *const *envp = w->envp ? w->envp : environ;
    int rc = w->shell_prefix
                 ? posix_spawn(&pid, "/bin/sh", &actions, NULL, (char **) sh, envp)
                 : posix_spawn(&pid, bin, &actions, NULL, (char **) argv, envp);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        if (error)
            snprintf(error, size, "posix_spawn %s: %s", bin, strerror(rc));
        return -1;
    }
    return pid;
}

/* Whether 127.0.0.1:port accepts a connection. */
static int port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t) port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = fd >= 0 && connect(fd, (struct sockaddr *) &address, sizeof address) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

static int endpoint_bound(const char *endpoint)
{
    struct stat st;
    if (strncmp(endpoint, "ipc://", 6) == 0)
        return stat(endpoint + 6, &st) == 0;
    const char *colon = strrchr(endpoint, ':');
    return colon && port_open(atoi(colon + 1));
}

int cdc_test_worker_wait_bound(pid_t pid, const char *endpoint, double limit_s)
{
    double deadline = cdc_test_now_s() + limit_s;
    while (!endpoint_bound(endpoint)) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return 1;
        if (cdc_test_now_s() > deadline)
            return -1;
        cdc_test_sleep_ms(2);
    }
    return 0;
}

int cdc_test_worker_wait(pid_t pid, double limit_s)
{
    double deadline = cdc_test_now_s() + limit_s;
    int status = 0;
    for (;;) {
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid)
            return status;
        if (done < 0 && errno != EINTR)
            return -1;
        if (cdc_test_now_s() > deadline)
            return -1;
        cdc_test_sleep_ms(2);
    }
}

int cdc_test_worker_stop(pid_t pid, double limit_s)
{
    kill(pid, SIGCONT); /* a stopped worker cannot act on SIGTERM */
    kill(pid, SIGTERM);
    int status = cdc_test_worker_wait(pid, limit_s);
    if (status >= 0)
        return status;
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return status;
}

void cdc_test_worker_kill(pid_t pid)
{
    kill(pid, SIGCONT);
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

/* The first size - 1 bytes of /proc/PID/NAME, NUL-terminated: the count
   read, or -1. */
static long proc_read(const char *pid, const char *name, char *buffer, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%s/%s", pid, name);
    FILE *file = fopen(path, "r");
    if (!file)
        return -1;
    size_t got = fread(buffer, 1, size - 1, file);
    fclose(file);
    buffer[got] = '\0';
    return (long) got;
}

/* Whether /proc/PID is a live child of this process whose argv names
   cdcgemm-worker and holds --index INDEX. */
static int worker_child_is(const char *pid, const char *index)
{
    char buffer[4096];
    if (proc_read(pid, "stat", buffer, sizeof buffer) < 0)
        return 0;
    const char *after = strrchr(buffer, ')'); /* the name may hold spaces */
    char state = 0;
    long ppid = 0;
    if (!after || sscanf(after + 1, " %c %ld", &state, &ppid) != 2 ||
        ppid != (long) getpid() || state == 'Z')
        return 0;
    long got = proc_read(pid, "cmdline", buffer, sizeof buffer);
    if (got <= 0 || !strstr(buffer, "cdcgemm-worker"))
        return 0;
    for (long at = 0; at < got; at += (long) strlen(buffer + at) + 1)
        if (strcmp(buffer + at, "--index") == 0 && at + 8 < got &&
            strcmp(buffer + at + 8, index) == 0)
            return 1;
    return 0;
}

pid_t cdc_test_worker_child(int index)
{
    char wanted[24];
    snprintf(wanted, sizeof wanted, "%d", index);
    DIR *proc = opendir("/proc");
    pid_t found = -1;
    struct dirent *entry;
    while (proc && found < 0 && (entry = readdir(proc)) != NULL)
        if (entry->d_name[0] >= '1' && entry->d_name[0] <= '9' &&
            worker_child_is(entry->d_name, wanted))
            found = (pid_t) atol(entry->d_name);
    if (proc)
        closedir(proc);
    return found;
}
