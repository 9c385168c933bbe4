/* testutil.c - deterministic random data, error norms, files, suite runner. */
#include "testutil.h"

#include "keys.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

double cdc_test_rel_error(const float *got, const double *want, size_t count)
{
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < count; i++) {
        double d = (double) got[i] - want[i];
        diff += d * d;
        norm += want[i] * want[i];
    }
    if (norm == 0.0)
        return diff == 0.0 ? 0.0 : INFINITY;
    return sqrt(diff / norm);
}

double cdc_test_rel_error_ff(const float *got, const float *want, size_t count)
{
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < count; i++) {
        double d = (double) got[i] - (double) want[i];
        diff += d * d;
        norm += (double) want[i] * want[i];
    }
    if (norm == 0.0)
        return diff == 0.0 ? 0.0 : INFINITY;
    return sqrt(diff / norm);
}

void *cdc_test_alloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    ck_assert_msg(p != NULL, "out of memory allocating %zu bytes", bytes);
    return p;
}

void cdc_test_temp_file(char *template_path)
{
    int fd = mkstemp(template_path);
    ck_assert_msg(fd >= 0, "mkstemp %s: %s", template_path, strerror(errno));
    close(fd);
}

void cdc_test_temp_dir(char *dir, size_t size, const char *name)
{
    ck_assert_msg(cdc_test_dir_make(dir, size, name) == 0, "mkdtemp /tmp/%s: %s", name,
                  strerror(errno));
}

void cdc_test_temp_dir_remove(const char *dir)
{
    ck_assert_msg(cdc_test_dir_remove(dir) == 0, "removing %s: %s", dir, strerror(errno));
}

pid_t cdc_test_worker_run(const cdc_test_worker_t *w)
{
    char error[512];
    pid_t pid = cdc_test_worker_spawn(w, error, sizeof error);
    ck_assert_msg(pid > 0, "%s", error);
    return pid;
}

pid_t cdc_test_worker_start(const cdc_test_worker_t *w)
{
    pid_t pid = cdc_test_worker_run(w);
    int bound = cdc_test_worker_wait_bound(pid, w->endpoint, 5.0);
    ck_assert_msg(bound == 0, "worker %s %s", w->endpoint,
                  bound > 0 ? "exited before binding" : "did not bind within 5 s");
    return pid;
}

pid_t cdc_test_worker_start_in(const char *dir, const char *name, int port, int curve,
                               const cdc_test_worker_t *w, char *endpoint, size_t size)
{
    char secret[256], allow[256], log[256];
    snprintf(secret, sizeof secret, "%s/%s_secret", dir, name);
    snprintf(allow, sizeof allow, "%s/allow", dir);
    snprintf(log, sizeof log, "%s/%s.log", dir, name);
    if (port > 0)
        snprintf(endpoint, size, "tcp://127.0.0.1:%d", port);
    else
        snprintf(endpoint, size, "ipc://%s/%s", dir, name);
    cdc_test_worker_t options = {0};
    if (w)
        options = *w;
    options.endpoint = endpoint;
    options.stderr_path = log;
    if (curve) {
        options.curve_secret = secret;
        options.curve_allow = allow;
    }
    return cdc_test_worker_start(&options);
}

void *cdc_test_dealer(void *zmq, const char *endpoint, const cdc_curve_cert_t *client,
                      const uint8_t *server_key)
{
    void *socket = zmq_socket(zmq, ZMQ_DEALER);
    ck_assert_ptr_nonnull(socket);
    int linger = 0;
    zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof linger);
    if (client) {
        ck_assert_int_eq(zmq_setsockopt(socket, ZMQ_CURVE_SERVERKEY, server_key, 32), 0);
        ck_assert_int_eq(zmq_setsockopt(socket, ZMQ_CURVE_PUBLICKEY, client->public_key, 32),
                         0);
        ck_assert_int_eq(zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, client->secret_key, 32),
                         0);
    }
    ck_assert_int_eq(zmq_connect(socket, endpoint), 0);
    return socket;
}

unsigned long long cdc_test_counter(const char *text, const char *name)
{
    const char *at = strstr(text, name);
    ck_assert_msg(at != NULL, "no '%s' in '%s'", name, text);
    unsigned long long value = 0;
    ck_assert_int_eq(sscanf(at + strlen(name), "%llu", &value), 1);
    return value;
}

void cdc_test_read_text(const char *path, char *text, size_t size)
{
    text[0] = '\0';
    FILE *file = fopen(path, "r");
    ck_assert_msg(file != NULL, "%s: %s", path, strerror(errno));
    size_t got = fread(text, 1, size - 1, file);
    fclose(file);
    text[got] = '\0';
}

void cdc_test_env_refused(const char *var, const char *bad, const char *good,
                          cdc_config_t *config)
{
    setenv(var, bad, 1);
    int rc = cdc_config_from_env(config);
    char error[1024];
    snprintf(error, sizeof error, "%s", cdc_last_error());
    int named = strstr(error, var) != NULL;
    setenv(var, good, 1);
    int taken = cdc_config_from_env(config);
    unsetenv(var);
    ck_assert_msg(rc == CDC_ECONFIG && named, "%s=%s: %s (%s)", var, bad, cdc_err_name(rc),
                  error);
    ck_assert_msg(taken == CDC_OK, "%s=%s: %s (%s)", var, good, cdc_err_name(taken),
                  cdc_last_error());
}

int cdc_test_run_suite(Suite *suite)
{
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
