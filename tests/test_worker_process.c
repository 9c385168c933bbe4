/* test_worker_process.c - cdcgemm-worker as a process: strict command line, SIGTERM, ipc cleanup. */
#include "cdcgemm.h"
#include "local_workers.h"
#include "protocol.h"
#include "testutil.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

static char worker_bin[PATH_MAX];

/* cdcgemm-worker with args (after the program name), stderr into err_path. */
static pid_t spawn_worker(const char *const *args, const char *err_path)
{
    cdc_test_worker_t w = {.bin = worker_bin, .args = args, .stderr_path = err_path};
    return cdc_test_worker_run(&w);
}

/* Wait up to limit_s for pid: its wait status, or -1 (then it is killed). */
static int wait_exit(pid_t pid, double limit_s)
{
    int status = cdc_test_worker_wait(pid, limit_s);
    if (status < 0)
        cdc_test_worker_kill(pid);
    return status;
}

/* ---- command line ------------------------------------------------------- */

/* strtoull/strtol take leading blanks, signs and stop at junk: " -5" was
   2^64 - 5 bytes (issue 9, finding 8). */
static const struct {
    const char *option, *value;
} bad_arguments[] = {
    {"--max-memory", " -5"}, {"--max-memory", "-5"},  {"--max-memory", "+5"},
    {"--max-memory", " 5"},  {"--max-memory", "5 "},  {"--max-memory", "0x10"},
    {"--max-memory", "5KB"}, {"--max-memory", "\t1G"}, {"--max-entries", " 3"},
    {"--max-entries", "+3"}, {"--threads", " 2"},     {"--threads", "+2"},
    {"--index", " 1"},       {"--index", "+1"},       {"--parent-pid", " 1"},
    {"--parent-pid", "+1"},  {"--max-task-memory", "0"}, {"--max-task-memory", " 1M"},
    {"--max-task-memory", "-1"}, {"--max-peer-memory", "0"}, {"--max-peer-memory", "1T"},
    {"--max-peer-tasks", "0"}, {"--max-peer-tasks", "+2"}, {"--max-peer-tasks", "2000000"},
    {"--store-max", "0"}, {"--store-max", "-1"},
};

START_TEST(test_bad_number_exits_2)
{
    char dir[64], endpoint[96], err_path[96], text[4096];
    cdc_test_temp_dir(dir, sizeof dir, "cdc-wproc");
    snprintf(endpoint, sizeof endpoint, "ipc://%s/w", dir);
    snprintf(err_path, sizeof err_path, "%s/err", dir);
    const char *argv[] = {"--bind", endpoint, bad_arguments[_i].option,
                          bad_arguments[_i].value, "--log", "error", NULL};
    int status = wait_exit(spawn_worker(argv, err_path), 5.0);
    cdc_test_read_text(err_path, text, sizeof text);
    cdc_test_temp_dir_remove(dir);
    ck_assert_msg(status >= 0, "%s '%s' accepted: the worker served", bad_arguments[_i].option,
                  bad_arguments[_i].value);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 2);
    ck_assert_msg(strstr(text, bad_arguments[_i].option), "message '%s'", text);
}
END_TEST

/* A store directory that cannot be made: the worker exits at start and
   names it, rather than serve without the store it was told to keep. */
START_TEST(test_bad_store_named)
{
    char dir[64], endpoint[96], err_path[96], store[128], text[4096];
    cdc_test_temp_dir(dir, sizeof dir, "cdc-wproc");
    snprintf(endpoint, sizeof endpoint, "ipc://%s/w", dir);
    snprintf(err_path, sizeof err_path, "%s/err", dir);
    snprintf(store, sizeof store, "%s/missing/store", dir);
    const char *argv[] = {"--bind", endpoint, "--store", store, "--log", "error", NULL};
    int status = wait_exit(spawn_worker(argv, err_path), 5.0);
    cdc_test_read_text(err_path, text, sizeof text);
    cdc_test_temp_dir_remove(dir);
    ck_assert_msg(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d",
                  status);
    ck_assert_msg(strstr(text, store), "message '%s'", text);
}
END_TEST

START_TEST(test_good_numbers_accepted)
{
    char dir[64], endpoint[96], err_path[96], socket_path[96];
    cdc_test_temp_dir(dir, sizeof dir, "cdc-wproc");
    snprintf(endpoint, sizeof endpoint, "ipc://%s/w", dir);
    snprintf(err_path, sizeof err_path, "%s/err", dir);
    snprintf(socket_path, sizeof socket_path, "%s/w", dir);
    const char *argv[] = {"--bind",          endpoint, "--max-memory",      "64M",
                          "--max-entries",   "100",    "--max-peer-memory", "16M",
                          "--max-task-memory", "256M", "--max-peer-tasks",  "8",
                          "--threads",       "1",      "--index",           "3",
                          "--log",           "error",  NULL};
    pid_t pid = spawn_worker(argv, err_path);
    cdc_test_worker_wait_bound(pid, endpoint, 5.0);
    struct stat st;
    ck_assert_int_eq(stat(socket_path, &st), 0);
    kill(pid, SIGTERM);
    int status = wait_exit(pid, 5.0);
    ck_assert(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cdc_test_temp_dir_remove(dir);
}
END_TEST

/* ---- SIGTERM ------------------------------------------------------------ */

static void send_frames(void *socket, const cdc_msg_header_t *h, const void *payload,
                        size_t size, int frames)
{
    uint8_t packed[CDC_PROTO_HEADER_SIZE];
    cdc__msg_header_pack(h, packed);
    zmq_send(socket, packed, sizeof packed, frames > 1 ? ZMQ_SNDMORE : 0);
    for (int i = 1; i < frames; i++) {
        /* The first payload in protocol chunks (version 2), the rest empty. */
        size_t left = i == 1 ? size : 0, at = 0;
        do {
            size_t chunk = left < CDC_PROTO_CHUNK_BYTES ? left : CDC_PROTO_CHUNK_BYTES;
            left -= chunk;
            zmq_send(socket, i == 1 ? (const char *) payload + at : NULL, chunk,
                     i + 1 < frames || left ? ZMQ_SNDMORE : 0);
            at += chunk;
        } while (left);
    }
}

/* The next reply's header within timeout_ms (type 0: none). */
static cdc_msg_header_t recv_header(void *socket, long timeout_ms)
{
    cdc_msg_header_t h;
    memset(&h, 0, sizeof h);
    zmq_pollitem_t item = {socket, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, timeout_ms) != 1)
        return h;
    zmq_msg_t part;
    zmq_msg_init(&part);
    zmq_msg_recv(&part, socket, 0);
    cdc__msg_header_unpack(zmq_msg_data(&part), zmq_msg_size(&part), &h);
    while (zmq_msg_more(&part)) {
        zmq_msg_close(&part);
        zmq_msg_init(&part);
        zmq_msg_recv(&part, socket, 0);
    }
    zmq_msg_close(&part);
    return h;
}

/* A d x d x d GEMM on the cached matrix under key 1, as request id. */
static void send_task(void *socket, uint64_t id, int64_t d)
{
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_TASK_GEMM);
    h.request_id = id;
    h.rows = h.k = h.cols = d;
    h.a_key = h.bt_key = 1;
    send_frames(socket, &h, NULL, 0, 3);
}

/* SIGTERM finishes the task being computed and drops the queue (issue 9,
   finding 10: 23 queued tasks all ran after SIGTERM). */
START_TEST(test_sigterm_drops_queue)
{
    enum { QUEUED = 20 };
    const int64_t d = 1600; /* 8 GFLOP a task: a few hundred ms on one thread */
    char dir[64], endpoint[96], err_path[96], socket_path[96], text[4096];
    cdc_test_temp_dir(dir, sizeof dir, "cdc-wproc");
    snprintf(endpoint, sizeof endpoint, "ipc://%s/w", dir);
    snprintf(err_path, sizeof err_path, "%s/err", dir);
    snprintf(socket_path, sizeof socket_path, "%s/w", dir);
    const char *argv[] = {"--bind", endpoint, "--threads", "1", "--log", "info", NULL};
    pid_t pid = spawn_worker(argv, err_path);
    void *zmq = zmq_ctx_new(), *socket = cdc_test_dealer(zmq, endpoint, NULL, NULL);
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_PING);
    h.request_id = 1;
    send_frames(socket, &h, NULL, 0, 1);
    ck_assert_uint_eq(recv_header(socket, 5000).type, CDC_MSG_PONG);

    size_t floats = (size_t) (d * d);
    float *w = cdc_test_alloc(floats * sizeof(float));
    cdc_test_rng_t rng;
    cdc_test_rng_seed(&rng, 9);
    cdc_test_fill_uniform(&rng, w, floats);
    cdc__msg_header_init(&h, CDC_MSG_WEIGHTS);
    h.request_id = 2;
    h.a_key = 1;
    h.rows = h.k = d;
    send_frames(socket, &h, w, floats * sizeof(float), 2);
    send_task(socket, 3, d); /* warms up; then one task alone, timed */
    ck_assert_uint_eq(recv_header(socket, 20000).type, CDC_MSG_RESULT);
    double started = cdc_test_now_s();
    send_task(socket, 4, d);
    ck_assert_uint_eq(recv_header(socket, 20000).type, CDC_MSG_RESULT);
    double task_s = cdc_test_now_s() - started;

    for (int i = 0; i < QUEUED; i++)
        send_task(socket, 100 + (uint64_t) i, d);
    cdc_test_sleep_ms(100); /* the first of them is computing */
    double termed = cdc_test_now_s();
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    int status = wait_exit(pid, 3.0 * task_s + 10.0);
    double took = cdc_test_now_s() - termed;
    cdc_test_read_text(err_path, text, sizeof text);
    ck_assert_msg(status >= 0, "still running %.3f s after SIGTERM (a task takes %.3f s)",
                  took, task_s);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The task running at SIGTERM, with room for a loaded machine; running
       the queue too takes QUEUED tasks' time. */
    ck_assert_msg(took < 3.0 * task_s + 1.5, "exit %.3f s after SIGTERM, a task takes %.3f s",
                  took, task_s);
    unsigned long long tasks = cdc_test_counter(text, ", tasks "),
                       dropped = cdc_test_counter(text, "dropped at exit ");
    ck_assert_uint_eq(tasks - 2 + dropped, QUEUED); /* each queued task ran or was dropped */
    ck_assert_msg(dropped >= QUEUED / 2, "only %llu of %d dropped (%.3f s a task): %s",
                  dropped, QUEUED, task_s, text);
    struct stat st;
    ck_assert_int_eq(stat(socket_path, &st), -1); /* the socket file went with it */
    free(w);
    zmq_close(socket);
    zmq_ctx_term(zmq);
    cdc_test_temp_dir_remove(dir);
}
END_TEST

/* A message of another wire protocol version gets ERROR naming both
   versions; SIGTERM sends GOODBYE to every coordinator connection. */
START_TEST(test_version_refused_and_goodbye)
{
    char dir[64], endpoint[96], err_path[96], text[2048];
    cdc_test_temp_dir(dir, sizeof dir, "cdc-wproc");
    snprintf(endpoint, sizeof endpoint, "ipc://%s/w", dir);
    snprintf(err_path, sizeof err_path, "%s/err", dir);
    const char *argv[] = {"--bind", endpoint, "--log", "warn", NULL};
    pid_t pid = spawn_worker(argv, err_path);
    void *zmq = zmq_ctx_new(), *socket = cdc_test_dealer(zmq, endpoint, NULL, NULL);
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_PING);
    h.request_id = 1;
    send_frames(socket, &h, NULL, 0, 1);
    ck_assert_uint_eq(recv_header(socket, 5000).type, CDC_MSG_PONG);

    h.version = CDC_PROTO_VERSION + 97;
    h.request_id = 2;
    send_frames(socket, &h, NULL, 0, 1);
    zmq_pollitem_t item = {socket, 0, ZMQ_POLLIN, 0};
    ck_assert_int_eq(zmq_poll(&item, 1, 5000), 1);
    uint8_t packed[CDC_PROTO_HEADER_SIZE];
    ck_assert_int_eq(zmq_recv(socket, packed, sizeof packed, 0), CDC_PROTO_HEADER_SIZE);
    cdc_msg_header_t reply;
    cdc__msg_header_unpack(packed, sizeof packed, &reply);
    ck_assert_uint_eq(reply.type, CDC_MSG_ERROR);
    ck_assert_uint_eq(reply.version, CDC_PROTO_VERSION); /* in its own version */
    int n = zmq_recv(socket, text, sizeof text - 1, 0);
    ck_assert_int_ge(n, 0);
    text[n] = '\0';
    char theirs[16], ours[16];
    snprintf(theirs, sizeof theirs, "%d", CDC_PROTO_VERSION + 97);
    snprintf(ours, sizeof ours, "%d", CDC_PROTO_VERSION);
    ck_assert_msg(strstr(text, theirs) && strstr(text, ours), "ERROR text: '%s'", text);

    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    ck_assert_uint_eq(recv_header(socket, 5000).type, CDC_MSG_GOODBYE);
    int status = wait_exit(pid, 10.0);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    zmq_close(socket);
    zmq_ctx_term(zmq);
    cdc_test_temp_dir_remove(dir);
}
END_TEST

/* A worker that stops on purpose is taken out of the coordinator's plan at
   once, without a death and without a local fallback; its successor on the
   same endpoint rejoins. */
START_TEST(test_goodbye_is_not_a_death)
{
    char dir[64], endpoints[256], ep[2][96], err_path[2][96];
    cdc_test_temp_dir(dir, sizeof dir, "cdc-wproc");
    pid_t pids[2];
    for (int i = 0; i < 2; i++) {
        snprintf(ep[i], sizeof ep[i], "ipc://%s/w%d", dir, i);
        snprintf(err_path[i], sizeof err_path[i], "%s/err%d", dir, i);
        const char *argv[] = {"--bind", ep[i], "--log", "warn", NULL};
        pids[i] = spawn_worker(argv, err_path[i]);
    }
    snprintf(endpoints, sizeof endpoints, "%s,%s", ep[0], ep[1]);
    cdc_config_t config;
    cdc_config_init(&config);
    snprintf(config.workers, sizeof config.workers, "%s", endpoints);
    config.parity = 1;
    cdc_context_t *ctx = NULL;
    ck_assert_int_eq(cdc_context_new(&config, &ctx), CDC_OK);
    enum { M = 64, N = 48, K = 32 };
    static float a[M * K], b[K * N], c[M * N];
    for (int i = 0; i < M * K; i++)
        a[i] = (float) (i % 7) - 3.0f;
    for (int i = 0; i < K * N; i++)
        b[i] = (float) (i % 5) - 2.0f;
    ck_assert_int_eq(cdc_sgemm(ctx, CDC_ROW_MAJOR, CDC_NO_TRANS, CDC_NO_TRANS, M, N, K, 1.0f,
                               a, K, b, N, 0.0f, c, N), CDC_OK);
    ck_assert_int_eq(kill(pids[1], SIGTERM), 0);
    ck_assert_int_ge(wait_exit(pids[1], 10.0), 0);
    cdc_stats_t stats;
    double start = cdc_test_now_s();
    do {
        cdc_test_sleep_ms(10);
        cdc_context_stats(ctx, &stats);
    } while (stats.worker_goodbyes == 0 && cdc_test_now_s() - start < 5.0);
    ck_assert_uint_eq(stats.worker_goodbyes, 1);
    uint64_t fallbacks = stats.fallbacks;
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(cdc_sgemm(ctx, CDC_ROW_MAJOR, CDC_NO_TRANS, CDC_NO_TRANS, M, N, K,
                                   1.0f, a, K, b, N, 0.0f, c, N), CDC_OK);
    const char *argv[] = {"--bind", ep[1], "--log", "warn", NULL};
    pids[1] = spawn_worker(argv, err_path[1]); /* the upgraded one */
    start = cdc_test_now_s();
    do {
        cdc_test_sleep_ms(10);
        cdc_context_stats(ctx, &stats);
    } while (stats.worker_rejoins == 0 && cdc_test_now_s() - start < 5.0);
    cdc_context_stats(ctx, &stats);
    ck_assert_uint_eq(stats.worker_deaths, 0);
    ck_assert_uint_eq(stats.worker_rejoins, 1);
    ck_assert_uint_eq(stats.fallbacks, fallbacks);
    cdc_context_destroy(&ctx);
    for (int i = 0; i < 2; i++) {
        kill(pids[i], SIGTERM);
        wait_exit(pids[i], 10.0);
    }
    cdc_test_temp_dir_remove(dir);
}
END_TEST

/* ---- ipc files ---------------------------------------------------------- */

/* A coordinator (a forked child spawning local workers) SIGKILLed: its
   workers notice (--parent-pid), remove their sockets, and the last one out
   the directory (issue 9, finding 9). */
START_TEST(test_sigkilled_coordinator_leaves_no_files)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t coordinator = fork();
    ck_assert_int_ge(coordinator, 0);
    if (coordinator == 0) {
        close(fds[0]);
        cdc_local_workers_t *workers = NULL;
        if (cdc__local_workers_new(3, NULL, CDC_LOG_ERROR, &workers) != CDC_OK)
            _exit(1);
        const char *dir = cdc__local_workers_dir(workers);
        if (write(fds[1], dir, strlen(dir) + 1) < 0)
            _exit(1);
        for (;;)
            pause();
    }
    close(fds[1]);
    char dir[PATH_MAX] = "";
    ssize_t got = read(fds[0], dir, sizeof dir - 1);
    close(fds[0]);
    ck_assert_msg(got > 1, "the coordinator did not start its workers");
    dir[got] = '\0';
    struct stat st;
    ck_assert_int_eq(stat(dir, &st), 0);
    ck_assert_int_eq(kill(coordinator, SIGKILL), 0);
    ck_assert_int_eq(waitpid(coordinator, NULL, 0), coordinator);
    double killed = cdc_test_now_s();
    while (stat(dir, &st) == 0 && cdc_test_now_s() - killed < 3.0)
        cdc_test_sleep_ms(10);
    double took = cdc_test_now_s() - killed;
    int left = stat(dir, &st) == 0;
    if (left) { /* leave nothing behind even when failing */
        char command[PATH_MAX + 16];
        snprintf(command, sizeof command, "ls -la %s >&2", dir);
        ck_assert_int_ge(system(command), 0);
    }
    ck_assert_msg(!left, "%s still there %.3f s after its coordinator was killed", dir, took);
}
END_TEST

/* A socket file at path, as a bound and closed listener leaves it. */
static void socket_file(const char *path)
{
    struct sockaddr_un address;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    ck_assert_uint_lt(strlen(path), sizeof address.sun_path);
    memcpy(address.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *) &address, sizeof address), 0);
    close(fd);
}

/* A coordinator SIGKILLed together with its workers leaves its directory;
   the next coordinator to start removes it once its owner pid is gone, and
   never a live owner's. */
START_TEST(test_stale_directory_swept)
{
    char tmp[64], dead_dir[128], live_dir[128], file[160];
    cdc_test_temp_dir(tmp, sizeof tmp, "cdc-wproc");
    setenv("TMPDIR", tmp, 1);
    pid_t dead = fork();
    ck_assert_int_ge(dead, 0);
    if (dead == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(dead, NULL, 0), dead);
    snprintf(dead_dir, sizeof dead_dir, "%s/cdcgemm-%ld-Ab12Cd", tmp, (long) dead);
    snprintf(live_dir, sizeof live_dir, "%s/cdcgemm-%ld-Ef34Gh", tmp, (long) getppid());
    const char *dirs[] = {dead_dir, live_dir};
    for (int d = 0; d < 2; d++) {
        ck_assert_int_eq(mkdir(dirs[d], 0700), 0);
        for (int w = 0; w < 2; w++) {
            snprintf(file, sizeof file, "%s/w%d", dirs[d], w);
            socket_file(file);
        }
    }
    cdc_local_workers_t *workers = NULL;
    ck_assert_int_eq(cdc__local_workers_new(1, NULL, CDC_LOG_ERROR, &workers), CDC_OK);
    struct stat st;
    ck_assert_msg(stat(dead_dir, &st) != 0, "%s not swept", dead_dir);
    ck_assert_int_eq(stat(live_dir, &st), 0); /* its owner runs */
    snprintf(file, sizeof file, "%s/w1", live_dir);
    ck_assert_int_eq(stat(file, &st), 0);
    ck_assert_ptr_nonnull(strstr(cdc__local_workers_dir(workers), "/cdcgemm-"));
    cdc__local_workers_destroy(&workers);
    for (int w = 0; w < 2; w++) {
        snprintf(file, sizeof file, "%s/w%d", live_dir, w);
        unlink(file);
    }
    rmdir(live_dir);
    ck_assert_int_eq(rmdir(tmp), 0); /* nothing else left */
}
END_TEST

static Suite *worker_process_suite(void)
{
    Suite *suite = suite_create("worker_process");
    TCase *command_line = tcase_create("command_line");
    tcase_add_loop_test(command_line, test_bad_number_exits_2, 0,
                        (int) (sizeof bad_arguments / sizeof *bad_arguments));
    tcase_add_test(command_line, test_good_numbers_accepted);
    tcase_add_test(command_line, test_bad_store_named);
    tcase_set_timeout(command_line, 30);
    suite_add_tcase(suite, command_line);
    TCase *stop = tcase_create("stop");
    tcase_add_test(stop, test_sigterm_drops_queue);
    tcase_add_test(stop, test_version_refused_and_goodbye);
    tcase_add_test(stop, test_goodbye_is_not_a_death);
    tcase_set_timeout(stop, 60);
    suite_add_tcase(suite, stop);
    TCase *files = tcase_create("files");
    tcase_add_test(files, test_sigkilled_coordinator_leaves_no_files);
    tcase_add_test(files, test_stale_directory_swept);
    tcase_set_timeout(files, 30);
    suite_add_tcase(suite, files);
    return suite;
}

int main(void)
{
    /* The worker built next to this program (or CDCGEMM_WORKER_BIN). */
    if (cdc__worker_binary_find(worker_bin, sizeof worker_bin) != CDC_OK) {
        fprintf(stderr, "test_worker_process: %s\n", cdc_last_error());
        return 1;
    }
    return cdc_test_run_suite(worker_process_suite());
}
