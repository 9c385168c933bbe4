/* external.c - worker processes started by the bench itself (external.h). */
#include "external.h"

#include "bench_util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static void socket_path(const cdc_external_t *x, int i, char *out, size_t size)
{
    snprintf(out, size, "%s/w%d", x->dir, i);
}

/* posix_spawn, never fork (OpenBLAS threads exist in the bench), with
   OPENBLAS_NUM_THREADS set to the worker's share of the cores. */
static pid_t spawn_one(cdc_external_t *x, int i)
{
    char endpoint[300], path[280], incarnation[16], error[512];
    socket_path(x, i, path, sizeof path);
    snprintf(endpoint, sizeof endpoint, "ipc://%s", path);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long share = cores > x->count ? cores / x->count : 1;
    snprintf(incarnation, sizeof incarnation, "%d", x->incarnation[i]);
    const char *args[] = {"--incarnation", incarnation, NULL};
    size_t envc = 0;
    while (environ[envc])
        envc++;
    char **envp = cdc_bench_xmalloc((envc + 2) * sizeof *envp);
    char blas[48];
    snprintf(blas, sizeof blas, "OPENBLAS_NUM_THREADS=%ld", share);
    size_t e = 0;
    for (size_t k = 0; k < envc; k++)
        if (strncmp(environ[k], "OPENBLAS_NUM_THREADS=", 21) != 0 &&
            strncmp(environ[k], "LD_PRELOAD=", 11) != 0)
            envp[e++] = environ[k];
    envp[e++] = blas;
    envp[e] = NULL;
    unlink(path); /* a killed worker leaves its socket file */
    cdc_test_worker_t w = {.bin = x->binary, .endpoint = endpoint, .index = i,
                           .threads = (int) share, .parent = 1, .log = "warn",
                           .faults = x->faults[0] ? x->faults : NULL, .args = args,
                           .envp = envp};
    pid_t pid = cdc_test_worker_spawn(&w, error, sizeof error);
    free(envp);
    if (pid < 0)
        fprintf(stderr, "cdcgemm-bench: %s\n", error);
    return pid;
}

/* Until worker i's socket file exists (it has bound), 5 s at most. */
static int wait_bound(cdc_external_t *x, int i)
{
    char path[280], endpoint[300];
    socket_path(x, i, path, sizeof path);
    snprintf(endpoint, sizeof endpoint, "ipc://%s", path);
    int bound = cdc_test_worker_wait_bound(atomic_load(&x->pids[i]), endpoint, 5.0);
    if (bound > 0) {
        atomic_store(&x->pids[i], 0);
        fprintf(stderr, "cdcgemm-bench: external worker w%d exited before binding\n", i);
    } else if (bound < 0) {
        fprintf(stderr, "cdcgemm-bench: external worker w%d did not bind within 5 s\n", i);
    }
    return bound != 0;
}

int cdc_external_start(cdc_external_t *x, int count, const char *faults)
{
    memset(x, 0, sizeof *x);
    if (count < 1 || count > CDC_MAX_WORKERS) {
        fprintf(stderr, "cdcgemm-bench: --external %d: 1 to %d workers\n", count,
                CDC_MAX_WORKERS);
        return 1;
    }
    x->count = count;
    snprintf(x->faults, sizeof x->faults, "%s", faults ? faults : "");
    cdc_bench_worker_path(x->binary, sizeof x->binary);
    const char *tmp = getenv("TMPDIR");
    snprintf(x->dir, sizeof x->dir, "%s/cdcgemm-bench-%ld-XXXXXX", tmp && *tmp ? tmp : "/tmp",
             (long) getpid());
    if (!mkdtemp(x->dir)) {
        fprintf(stderr, "cdcgemm-bench: mkdtemp %s: %s\n", x->dir, strerror(errno));
        return 1;
    }
    size_t used = 0;
    for (int i = 0; i < count; i++) {
        atomic_store(&x->pids[i], spawn_one(x, i));
        used += (size_t) snprintf(x->endpoints + used, sizeof x->endpoints - used,
                                  "%sipc://%s/w%d", i ? "," : "", x->dir, i);
        if (atomic_load(&x->pids[i]) <= 0 || used >= sizeof x->endpoints) {
            cdc_external_stop(x);
            return 1;
        }
    }
    for (int i = 0; i < count; i++)
        if (wait_bound(x, i)) {
            cdc_external_stop(x);
            return 1;
        }
    return 0;
}

pid_t cdc_external_pid(void *arg, int i)
{
    cdc_external_t *x = arg;
    return i >= 0 && i < x->count ? atomic_load(&x->pids[i]) : 0;
}

pid_t cdc_external_restart(void *arg, int i)
{
    cdc_external_t *x = arg;
    if (i < 0 || i >= x->count)
        return -1;
    pid_t old = atomic_load(&x->pids[i]);
    if (old > 1)
        cdc_test_worker_kill(old);
    atomic_store(&x->pids[i], 0);
    x->incarnation[i]++;
    pid_t pid = spawn_one(x, i);
    atomic_store(&x->pids[i], pid > 0 ? pid : 0);
    return pid > 0 && wait_bound(x, i) == 0 ? pid : -1;
}

void cdc_external_stop(cdc_external_t *x)
{
    for (int i = 0; i < x->count; i++) {
        pid_t pid = atomic_load(&x->pids[i]);
        if (pid > 1) {
            kill(pid, SIGCONT);
            kill(pid, SIGTERM);
        }
    }
    double deadline = cdc_test_now_s() + 1.0; /* all of them: then SIGKILL */
    for (int i = 0; i < x->count; i++) {
        pid_t pid = atomic_load(&x->pids[i]);
        if (pid > 1)
            cdc_test_worker_stop(pid, deadline - cdc_test_now_s());
        atomic_store(&x->pids[i], 0);
    }
    if (x->dir[0])
        cdc_test_dir_remove(x->dir);
}
