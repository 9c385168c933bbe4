/* worker_main.c - cdcgemm-worker: command line and signals around the serving loop. */
#include "cdcgemm.h"
#include "discovery.h"
#include "faults.h"
#include "keys.h"
#include "log.h"
#include "number.h"
#include "protocol.h"
#include "worker.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

static volatile sig_atomic_t stop_requested, reload_requested;
static int insecure; /* --insecure */
static int announce; /* --announce */
static cdc_discovery_where_t announce_where; /* --announce-port, --announce-interface */

static long signal_parent; /* --parent-pid, read by on_signal */

/* A stop from the spawning coordinator comes after it closed its sockets:
   no GOODBYE can be read, so the worker need not linger for one. */
static void on_signal(int signo, siginfo_t *info, void *context)
{
    (void) signo;
    (void) context;
    int by_parent = signal_parent > 0 && info && info->si_code == SI_USER &&
                    (long) info->si_pid == signal_parent;
    stop_requested = by_parent ? CDC_WORKER_STOP_BY_PARENT : 1;
}

static void on_hangup(int signo)
{
    (void) signo;
    reload_requested = 1;
}

/* The options bounding what it holds, and its store. */
static void usage_limits(FILE *out)
{
    fprintf(out,
            "  --max-memory BYTES  bound on the cached weight shards, counting what they\n"
            "                      really cost (allocator rounding, cache records and\n"
            "                      index included); the least recently used are evicted\n"
            "                      beyond it. Suffixes K, M, G (powers of 1024) are\n"
            "                      accepted. Default $CDCGEMM_WORKER_MAX_MEMORY, else 1G.\n"
            "  --max-entries N     bound on the number of cached matrices. Default 65536.\n"
            "  --max-peer-memory BYTES\n"
            "                      bound on what one coordinator's weights may take of\n"
            "                      --max-memory (peers are told apart by CURVE key;\n"
            "                      without CURVE they share one scope); a peer at its\n"
            "                      bound evicts its own least recently used weights.\n"
            "                      Default: all of --max-memory.\n"
            "  --max-task-memory BYTES\n"
            "                      bound on one task's working set: the operands it\n"
            "                      carries, its result and a conv's im2col matrix. A\n"
            "                      task over it gets an ERROR naming it. Default 512M\n"
            "                      (VGG-16's largest layer shard needs 154 MB).\n"
            "  --max-peer-tasks N  bound on the WEIGHTS and tasks one coordinator may\n"
            "                      have queued or running here; beyond it, ERROR.\n"
            "                      Default 64.\n"
            "  --store DIR         keep every weight matrix received in DIR too (created\n"
            "                      if missing): a worker restarted on this device loads\n"
            "                      them from its disk when a coordinator asks, instead\n"
            "                      of receiving them again. Default $CDCGEMM_WORKER_STORE\n"
            "                      (its subdirectory worker-N with --index N), else none.\n"
            "  --store-max BYTES   bound on the store's files; the oldest are removed\n"
            "                      beyond it. Default: --max-memory.\n");
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cdcgemm-worker --bind ENDPOINT [--max-memory BYTES] [--max-entries N]\n"
            "                      [--max-peer-memory BYTES] [--max-task-memory BYTES]\n"
            "                      [--max-peer-tasks N] [--store DIR [--store-max BYTES]]\n"
            "                      [--threads N] [--faults SPEC] [--index N]\n"
            "                      [--incarnation N] [--parent-pid PID] [--log LEVEL]\n"
            "                      [--curve-secret FILE --curve-allow DIR | --insecure]\n"
            "                      [--announce [--announce-port N] [--announce-interface IF]]\n"
            "       cdcgemm-worker --version | --help\n"
            "\n"
            "Serve coded GEMM shard tasks for the cdcgemm coordinator over ZeroMQ.\n"
            "\n"
            "  --bind ENDPOINT     ZeroMQ endpoint to bind, e.g. tcp://*:7001 or\n"
            "                      ipc:///tmp/cdcgemm-w0 (required)\n");
    usage_limits(out);
    fprintf(out,
            "  --threads N         OpenBLAS threads for this worker (1..256). Default 1:\n"
            "                      several workers sharing a machine must not\n"
            "                      oversubscribe its cores.\n"
            "  --faults SPEC       fault-injection schedule (the CDCGEMM_FAULTS grammar,\n"
            "                      docs/faults.md) applied by this worker as real\n"
            "                      behaviour: crash, hang, delay, drop, corrupt, slow,\n"
            "                      link. Default: none.\n"
            "  --index N           this worker's index in the coordinator's worker list\n"
            "                      (0..63): which wN rules apply. Default 0.\n"
            "  --incarnation N     this is the N-th respawn of its slot (the library\n"
            "                      passes it): crash and hang rules, which fire once\n"
            "                      per slot, do not fire again. Default 0.\n"
            "  --parent-pid PID    exit when the process PID is no longer this worker's\n"
            "                      parent (its coordinator died); checked every 100 ms.\n"
            "                      The library passes it to the workers it spawns.\n"
            "  --curve-secret FILE this worker's secret certificate (cdcgemm-keygen's\n"
            "                      PATH_secret): the socket becomes a CURVE server;\n"
            "                      needs --curve-allow\n"
            "  --curve-allow DIR   directory of the public certificates of the\n"
            "                      coordinators this worker serves; any other key\n"
            "                      gets nothing. Re-read on SIGHUP.\n"
            "  --insecure          allow a plaintext tcp bind to a non-loopback address\n"
            "                      (refused otherwise: anyone who reaches the port could\n"
            "                      use the worker); warns on every start\n"
            "  --log LEVEL         error, warn, info or debug (stderr). Default info;\n"
            "                      the counters are printed at exit from info up.\n"
            "  --version           print the library and wire protocol versions and exit\n"
            "  --help              print this help and exit\n"
            "\n"
            "Conv tasks whose padding is not smaller than the dilated kernel span are\n"
            "refused (the extra output is all padding). Replies to a coordinator that\n"
            "does not read are dropped beyond --max-peer-tasks + 64 queued (counted\n"
            "as 'replies dropped'); connections that do not finish the handshake in\n"
            "2 s are closed. docs/security.md lists every limit.\n"
            "\n"
            "SIGTERM or SIGINT stops the worker cleanly: it says goodbye to its\n"
            "coordinators (they take it out of their plans without counting a death),\n"
            "the task being computed finishes, queued tasks are dropped (counted as\n"
            "'dropped at exit'), an ipc:// socket file is removed. It prints its\n"
            "counters to stderr on exit (at --log info and above). docs/security.md\n"
            "tells how to set up CURVE.\n");
}

static void usage_announce(FILE *out)
{
    fprintf(out,
            "\n"
            "Discovery (docs/deploy.md):\n"
            "  --announce          broadcast this worker's endpoint and CURVE public key\n"
            "                      every 500 ms (CZMQ zbeacon, UDP) so coordinators with\n"
            "                      CDCGEMM_WORKERS=discover find it; needs CURVE and a\n"
            "                      tcp://HOST:PORT bind\n"
            "  --announce-port N   UDP port of the beacons (default 47474)\n"
            "  --announce-interface IF  the network interface to announce on (default:\n"
            "                      CZMQ's choice, the first broadcast interface)\n");
}

/* BYTES[K|M|G] into *out: 0, -1 when it is no such number, -2 when it is
   more than a size_t holds (4 GiB - 1 on a 32-bit worker). */
static int parse_bytes(const char *text, size_t *out)
{
    char *end = NULL;
    errno = 0;
    /* A digit first: strtoull takes blanks and a sign (" -5" is 2^64 - 5). */
    if (!isdigit((unsigned char) text[0]))
        return -1;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0 || end == text)
        return -1;
    unsigned long long scale = 1;
    if (*end == 'K' || *end == 'k')
        scale = 1ULL << 10;
    else if (*end == 'M' || *end == 'm')
        scale = 1ULL << 20;
    else if (*end == 'G' || *end == 'g')
        scale = 1ULL << 30;
    if (scale != 1)
        end++;
    if (*end != '\0' || value == 0)
        return -1;
    if (value > (unsigned long long) SIZE_MAX / scale)
        return -2;
    *out = (size_t) (value * scale);
    return 0;
}

/* A count in 1..SIZE_MAX/2 (strict decimal). */
static int parse_count(const char *text, size_t *out)
{
    long value;
    long hi = (unsigned long) LONG_MAX < SIZE_MAX / 2 ? LONG_MAX : (long) (SIZE_MAX / 2);
    if (cdc__parse_long(text, 1, hi, &value) != 0)
        return -1;
    *out = (size_t) value;
    return 0;
}

/* --log LEVEL: the process-wide level; -1 for an unknown name. */
static int set_log_level(const char *name)
{
    cdc_log_level_t level;
    if (cdc__log_level_parse(name, &level) != 0)
        return -1;
    cdc__log_level = (int) level;
    return 0;
}

/* Why a byte count for what (an option, a variable) was refused. */
static void bytes_error(const char *what, const char *value, int rc)
{
    if (rc == -2)
        fprintf(stderr, "cdcgemm-worker: %s '%s': more than this worker can address "
                        "(at most %zu bytes with its %d-bit size_t)\n",
                what, value, (size_t) SIZE_MAX, (int) (8 * sizeof(size_t)));
    else
        fprintf(stderr, "cdcgemm-worker: %s '%s': expected bytes > 0 with an optional K, "
                        "M or G suffix\n", what, value);
}

/* The options bounding what the worker holds (docs/security.md): 1 when
   arg is one of them and value was taken, 0 when arg is none of them, 2
   after a message on stderr. */
static int parse_limit(const char *arg, const char *value, cdc_worker_options_t *options)
{
    static const char *const bytes[] = {"--max-memory", "--max-peer-memory",
                                        "--max-task-memory", "--store-max"};
    size_t *const targets[] = {&options->max_memory, &options->max_peer_memory,
                               &options->max_task_memory, &options->store_max};
    long number;
    if (!value)
        return 0;
    for (int i = 0; i < 4; i++) {
        if (strcmp(arg, bytes[i]) != 0)
            continue;
        int rc = parse_bytes(value, targets[i]);
        if (rc == 0)
            return 1;
        bytes_error(arg, value, rc);
        return 2;
    }
    if (strcmp(arg, "--max-entries") == 0) {
        if (parse_count(value, &options->max_entries) == 0)
            return 1;
        fprintf(stderr, "cdcgemm-worker: --max-entries '%s': expected a count > 0\n", value);
        return 2;
    }
    if (strcmp(arg, "--max-peer-tasks") == 0) {
        if (cdc__parse_long(value, 1, 1 << 20, &number) == 0) {
            options->max_peer_tasks = (size_t) number;
            return 1;
        }
        fprintf(stderr, "cdcgemm-worker: --max-peer-tasks '%s': expected 1..%d\n", value,
                1 << 20);
        return 2;
    }
    return 0;
}

/* --announce, --announce-port N, --announce-interface IF: the arguments
   taken (0: arg is none of them), or -1 after a message on stderr. */
static int parse_announce(const char *arg, const char *value)
{
    long port;
    if (strcmp(arg, "--announce") == 0) {
        announce = 1;
        return 1;
    }
    if (strcmp(arg, "--announce-interface") == 0 && value) {
        announce_where.interface = value;
        return 2;
    }
    if (strcmp(arg, "--announce-port") != 0 || !value)
        return 0;
    if (cdc__parse_long(value, 1, 65535, &port) != 0) {
        fprintf(stderr, "cdcgemm-worker: --announce-port '%s': expected 1..65535\n", value);
        return -1;
    }
    announce_where.udp_port = (int) port;
    return 2;
}

/* Take the --announce arguments out of argv (so parse_args sees the rest):
   0, or 2 after a message on stderr. */
static int take_announce_args(int *argc, char **argv)
{
    int kept = 1;
    for (int i = 1; i < *argc; i++) {
        int used = parse_announce(argv[i], i + 1 < *argc ? argv[i + 1] : NULL);
        if (used < 0)
            return 2;
        if (used == 0)
            argv[kept++] = argv[i];
        else
            i += used - 1;
    }
    *argc = kept;
    argv[kept] = NULL;
    return 0;
}

/* The options naming an endpoint, a file or a directory: whether arg is
   one of them (its value taken). */
static int parse_path(const char *arg, const char *value, cdc_worker_options_t *options)
{
    static const char *const names[] = {"--bind", "--curve-secret", "--curve-allow", "--store"};
    const char **const targets[] = {&options->bind, &options->curve_secret,
                                    &options->curve_allow, &options->store};
    for (int i = 0; value && i < 4; i++)
        if (strcmp(arg, names[i]) == 0) {
            *targets[i] = value;
            return 1;
        }
    return 0;
}

/* The command line into *options: 0, -1 after --help or --version (exit 0),
   or 2 after a message on stderr (exit 2). */
static int parse_args(int argc, char **argv, cdc_worker_options_t *options)
{
    long number;
    int limit;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            usage_announce(stdout);
            return -1;
        }
        if (strcmp(arg, "--version") == 0) {
            /* The code serving tasks is linked in: cdc_version() is its version. */
            printf("cdcgemm-worker %s (library %s, protocol %d)\n", CDC_VERSION_STRING,
                   cdc_version(), CDC_PROTO_VERSION);
            return -1;
        }
        if (strcmp(arg, "--insecure") == 0) {
            insecure = 1;
            continue; /* takes no value */
        }
        if (parse_path(arg, value, options)) {
            /* taken */
        } else if ((limit = parse_limit(arg, value, options)) != 0) {
            if (limit == 2)
                return 2;
        } else if (strcmp(arg, "--threads") == 0 && value) {
            if (cdc__parse_long(value, 1, 256, &number) != 0) {
                fprintf(stderr, "cdcgemm-worker: --threads '%s': expected 1..256\n", value);
                return 2;
            }
            options->threads = (int) number;
        } else if (strcmp(arg, "--faults") == 0 && value) {
            cdc_fault_plan_t plan;
            if (cdc__fault_plan_parse(value, &plan) != CDC_OK) {
                fprintf(stderr, "cdcgemm-worker: --faults: %s\n", cdc_last_error());
                return 2;
            }
            options->faults = value;
        } else if (strcmp(arg, "--index") == 0 && value) {
            if (cdc__parse_long(value, 0, CDC_MAX_WORKERS - 1, &number) != 0) {
                fprintf(stderr, "cdcgemm-worker: --index '%s': expected 0..%d\n", value,
                        CDC_MAX_WORKERS - 1);
                return 2;
            }
            options->index = (int) number;
        } else if (strcmp(arg, "--incarnation") == 0 && value) {
            if (cdc__parse_long(value, 0, INT_MAX, &number) != 0) {
                fprintf(stderr, "cdcgemm-worker: --incarnation '%s': expected 0..%d\n", value,
                        INT_MAX);
                return 2;
            }
            options->incarnation = (int) number;
        } else if (strcmp(arg, "--log") == 0 && value) {
            if (set_log_level(value) != 0) {
                fprintf(stderr, "cdcgemm-worker: --log '%s': expected error, warn, info "
                                "or debug\n", value);
                return 2;
            }
        } else if (strcmp(arg, "--parent-pid") == 0 && value) {
            if (cdc__parse_long(value, 1, LONG_MAX, &number) != 0) {
                fprintf(stderr, "cdcgemm-worker: --parent-pid '%s': expected a pid\n", value);
                return 2;
            }
            options->parent_pid = number;
        } else {
            fprintf(stderr, "cdcgemm-worker: unknown or incomplete argument '%s'\n", arg);
            usage(stderr);
            return 2;
        }
        i++;
    }
    return 0;
}

/* CURVE needs both options and readable files; a plaintext tcp bind to a
   non-loopback address needs --insecure (protected mode). 0, or the exit
   status after a message on stderr. */
static int check_security(const cdc_worker_options_t *options)
{
    if ((options->curve_secret != NULL) != (options->curve_allow != NULL)) {
        fprintf(stderr, "cdcgemm-worker: --curve-secret and --curve-allow go together "
                        "(docs/security.md)\n");
        return 2;
    }
    if (options->curve_secret) {
        cdc_curve_cert_t cert;
        if (cdc__curve_load_secret(options->curve_secret, &cert) != CDC_OK) {
            fprintf(stderr, "cdcgemm-worker: --curve-secret: %s\n", cdc_last_error());
            return 2;
        }
        cdc__curve_cert_clear(&cert);
        if (cdc__curve_path_is_dir(options->curve_allow) != 1) {
            fprintf(stderr, "cdcgemm-worker: --curve-allow '%s': not a directory\n",
                    options->curve_allow);
            return 2;
        }
        if (insecure)
            fprintf(stderr, "cdcgemm-worker: --insecure has no effect with CURVE\n");
        return 0;
    }
    if (!cdc__bind_needs_curve(options->bind))
        return 0;
    if (!insecure) {
        fprintf(stderr,
                "cdcgemm-worker: refusing to bind %s: a plaintext tcp endpoint that is not "
                "loopback lets anyone who reaches it use this worker. Give --curve-secret "
                "FILE --curve-allow DIR (docs/security.md), or --insecure to accept that.\n",
                options->bind);
        return 2;
    }
    fprintf(stderr, "cdcgemm-worker: WARNING: --insecure: serving %s without "
                    "authentication or encryption; anyone who reaches it can use this "
                    "worker\n", options->bind);
    return 0;
}

/* libzmq cannot cap connections (libzmq issue 2877): at a soft limit of
   1024, or 256 under a strict ulimit, a few hundred idle connections use up
   the descriptors and libzmq's I/O thread spins on failing accepts, starving
   the coordinator's PINGs (issue 9). The hard limit is as far as we may go. */
static void raise_descriptor_limit(void)
{
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0)
        return;
    unsigned long long before = (unsigned long long) limit.rlim_cur;
    if (limit.rlim_cur != limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        /* "unlimited" is refused above the kernel's fs.nr_open: its default. */
        if (setrlimit(RLIMIT_NOFILE, &limit) != 0 && limit.rlim_max == RLIM_INFINITY) {
            limit.rlim_cur = (rlim_t) 1 << 20;
            setrlimit(RLIMIT_NOFILE, &limit);
        }
    }
    getrlimit(RLIMIT_NOFILE, &limit); /* what holds now */
    CDC_LOG_INFOF("cdcgemm-worker: descriptor limit (RLIMIT_NOFILE) %llu, was %llu",
                  (unsigned long long) limit.rlim_cur, before);
}

/* glibc raises its mmap threshold (up to 32 MiB) each time an mmapped block
   is freed, after which libzmq's 4 MiB frames come from the heap and what
   they held stays resident once freed: 30 connections that each stopped
   one byte short of a 4 MiB frame left +62 MiB after they closed (issue
   24). Setting the threshold, to glibc's own default, turns that off: a
   frame >= 128 KiB is its own mapping, gone when libzmq frees it, which is
   also what cdc__alloc_footprint assumes. */
static void pin_mmap_threshold(void)
{
    if (mallopt(M_MMAP_THRESHOLD, 128 << 10) != 1)
        CDC_LOG_WARNF("cdcgemm-worker: mallopt(M_MMAP_THRESHOLD) refused");
}

static void print_counters(int index, const cdc_worker_counters_t *counters)
{
    fprintf(stderr,
            "cdcgemm-worker %d: stopped (messages %llu, tasks %llu, weights %llu, "
            "misses %llu, loaded from the store %llu, invalid %llu, evictions %llu, "
            "pings %llu, delayed %llu, "
            "dropped %llu, corrupted %llu, hangs %llu, cancelled %llu, over budget %llu, "
            "replies dropped %llu, refused %llu, dropped at exit %llu)\n",
            index, (unsigned long long) counters->messages,
            (unsigned long long) counters->tasks,
            (unsigned long long) counters->weights_cached,
            (unsigned long long) counters->misses,
            (unsigned long long) counters->stored_loaded, (unsigned long long) counters->invalid,
            (unsigned long long) counters->evictions, (unsigned long long) counters->pings,
            (unsigned long long) counters->delayed, (unsigned long long) counters->dropped,
            (unsigned long long) counters->corrupted, (unsigned long long) counters->hangs,
            (unsigned long long) counters->cancelled, (unsigned long long) counters->over_budget,
            (unsigned long long) counters->replies_dropped,
            (unsigned long long) counters->refused,
            (unsigned long long) counters->dropped_at_exit);
}

/* CDCGEMM_WORKER_MAX_MEMORY: the default of --max-memory, so that a host's
   workers (the embedded ones the library spawns, too) get one budget without
   a command line each. 0, or 2 after a message naming the variable. */
static int max_memory_from_env(cdc_worker_options_t *options)
{
    const char *value = getenv("CDCGEMM_WORKER_MAX_MEMORY");
    if (!value || !value[0])
        return 0;
    int rc = parse_bytes(value, &options->max_memory);
    if (rc == 0)
        return 0;
    bytes_error("CDCGEMM_WORKER_MAX_MEMORY", value, rc);
    return 2;
}

/* Whether the command line names --index (a worker the library spawned). */
static int has_index(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--index") == 0)
            return 1;
    return 0;
}

/* CDCGEMM_WORKER_STORE: the default of --store. The workers the library
   spawns on one host (--index N) each get their own directory under it, as
   each device has its own disk. 0, or 2 after a message. */
static int store_from_env(cdc_worker_options_t *options, int indexed)
{
    static char path[4096];
    const char *value = getenv("CDCGEMM_WORKER_STORE");
    if (options->store || !value || !value[0])
        return 0;
    if (!indexed) {
        options->store = value;
        return 0;
    }
    if (mkdir(value, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "cdcgemm-worker: CDCGEMM_WORKER_STORE '%s': %s\n", value,
                strerror(errno));
        return 2;
    }
    if (snprintf(path, sizeof path, "%s/worker-%d", value, options->index) >= (int) sizeof path) {
        fprintf(stderr, "cdcgemm-worker: CDCGEMM_WORKER_STORE '%s': too long\n", value);
        return 2;
    }
    options->store = path;
    return 0;
}

int main(int argc, char **argv)
{
    cdc__log_level = CDC_LOG_INFO;
    cdc_worker_options_t options;
    cdc__worker_options_init(&options);
    if (max_memory_from_env(&options) != 0)
        return 2;
    int parsed = take_announce_args(&argc, argv);
    if (parsed == 0)
        parsed = parse_args(argc, argv, &options);
    if (parsed != 0)
        return parsed < 0 ? 0 : parsed;
    if ((parsed = store_from_env(&options, has_index(argc, argv))) != 0)
        return parsed;
    if (!options.bind) {
        fprintf(stderr, "cdcgemm-worker: --bind ENDPOINT is required\n");
        usage(stderr);
        return 2;
    }
    if ((parsed = check_security(&options)) != 0)
        return parsed;
    raise_descriptor_limit();
    pin_mmap_threshold();

    /* No SA_RESTART: the signal must interrupt the server's wait so the loop sees it. */
    struct sigaction action;
    memset(&action, 0, sizeof action);
    signal_parent = options.parent_pid;
    action.sa_sigaction = on_signal;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    if (options.curve_secret) {
        action.sa_flags = 0;
        action.sa_handler = on_hangup;
        sigaction(SIGHUP, &action, NULL);
        options.reload = &reload_requested;
    }

    if (announce)
        options.announce = &announce_where;
    cdc_worker_counters_t counters;
    int rc = cdc__worker_run(&options, &stop_requested, &counters);
    if (rc != CDC_OK) {
        fprintf(stderr, "cdcgemm-worker: %s: %s\n", cdc_strerror(rc), cdc_last_error());
        return 1;
    }
    if (cdc__log_level < CDC_LOG_INFO)
        return 0;
    print_counters(options.index, &counters);
    return 0;
}
