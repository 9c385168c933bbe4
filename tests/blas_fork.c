/* blas_fork.c - a host that forks after a coded GEMM: parent and child keep working.
 *
 * Linked against OpenBLAS only; run with libcdcgemm LD_PRELOADed and
 * CDCGEMM_MIN_FLOPS=0. Calls cblas_sgemm, forks, and both processes call it
 * again (twice, weights reused) and check the results; the parent waits for
 * the child with a deadline, so a hang fails the test instead of stalling it.
 * Prints "blas_fork: parent=PASS child=PASS" and exits 0 when both pass. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { M = 96, N = 80, K = 64 };

static float a[M * K], b[K * N], c[M * N];
static double want[M * N];

static void fill(unsigned seed)
{
    srand(seed);
    for (int i = 0; i < K * N; i++)
        b[i] = (float) rand() / (float) RAND_MAX - 0.5f;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int p = 0; p < K; p++)
                s += (double) a[i * K + p] * b[p * N + j];
            want[i * N + j] = s;
        }
}

/* One GEMM with fresh B; 0 when C matches the double reference. */
static int gemm_ok(unsigned seed)
{
    fill(seed);
    for (int i = 0; i < M * N; i++)
        c[i] = NAN;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f,
                c, N);
    double diff = 0.0, norm = 0.0;
    for (int i = 0; i < M * N; i++) {
        diff += (c[i] - want[i]) * (c[i] - want[i]);
        norm += want[i] * want[i];
    }
    return sqrt(diff / norm) <= 1e-5 ? 0 : -1;
}

int main(void)
{
    for (int i = 0; i < M * K; i++)
        a[i] = (float) ((i * 7919) % 101) / 101.0f - 0.5f;
    if (gemm_ok(1) != 0) {
        printf("blas_fork: first call wrong\n");
        return 1;
    }
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    if (child == 0) {
        alarm(60); /* a hang in the child kills it, and the parent sees a signal */
        int bad = gemm_ok(2) != 0 || gemm_ok(3) != 0;
        _exit(bad ? 1 : 0);
    }
    int parent_bad = gemm_ok(4) != 0 || gemm_ok(5) != 0;
    int status = 0;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    pid_t done = 0;
    while ((done = waitpid(child, &status, WNOHANG)) == 0) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 90) {
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            printf("blas_fork: child hung\n");
            return 1;
        }
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    int child_bad = done != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    printf("blas_fork: parent=%s child=%s\n", parent_bad ? "FAIL" : "PASS",
           child_bad ? "FAIL" : "PASS");
    return parent_bad || child_bad;
}
