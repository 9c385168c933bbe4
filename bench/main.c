/* main.c - cdcgemm-bench: the demo (no arguments) and the benchmark commands:
   the driver's here in bench/ (public API only), the micro-benchmarks of
   internals in bench/micro/. */
#include "bench_failover.h"
#include "bench_run.h"
#include "bench_plan.h"
#include "bench_smallcalls.h"
#include "bench_status.h"
#include "demo.h"
#include "micro/bench_accuracy.h"
#include "micro/bench_blas.h"
#include "micro/bench_cache.h"
#include "micro/bench_codes.h"
#include "micro/bench_core.h"
#include "micro/bench_hostile.h"
#include "micro/bench_im2col.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cdcgemm-bench [COMMAND [OPTIONS]] | [--model M | --layer S] [OPTIONS]\n"
            "  (no command)  demo: AlexNet on 5 emulated edge devices (r = 1 over 5 worker\n"
            "                processes), one crashes mid-run, then the same run uncoded;\n"
            "                prints both and writes cdcgemm-demo.png\n"
            "  --model/--layer ...  the benchmark driver, options below\n"
            "  core          encode/decode/im2col costs beside the GEMM (AlexNet, VGG-16)\n"
            "  codes         encode/decode throughput and generator conditioning\n"
            "  accuracy      decode error per n and losses, and the accuracy guard\n"
            "  im2col        im2col throughput beside the GEMM per conv layer\n"
            "  blas          BLAS entry points: local-call overhead, threshold, hash\n"
            "  failover      coded vs uncoded latency on local workers; recovery from a SIGKILL\n"
            "  cache         worker weight cache: 200,000 inserts; a worker's RSS vs --max-memory\n"
            "  hostile       strangers, a misbehaving allowed peer and a fake worker against\n"
            "                real processes: replies, memory, correctness, latency\n"
            "  status        the workers at a glance: alive, round trip, protocol, cache,\n"
            "                memory budget, tasks, load (--json for one JSON object)\n"
            "  plan          a run (the options below) and each layer's plan: split, n, r,\n"
            "                block rows per worker, predicted vs measured latency\n"
            "  smallcalls    a batch-1 call's cost besides its work, step by step, in\n"
            "                process and on local workers (r = 0, 1, 2)\n"
            "  help          this text\n");
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return cdc_bench_demo(argc, argv);
    const char *command = argv[1];
    if (strncmp(command, "--", 2) == 0 && strcmp(command, "--help") != 0)
        return cdc_bench_run(argc, argv);
    if (strcmp(command, "core") == 0)
        return cdc_bench_core(argc - 1, argv + 1);
    if (strcmp(command, "codes") == 0)
        return cdc_bench_codes(argc - 1, argv + 1);
    if (strcmp(command, "accuracy") == 0)
        return cdc_bench_accuracy(argc - 1, argv + 1);
    if (strcmp(command, "im2col") == 0)
        return cdc_bench_im2col(argc - 1, argv + 1);
    if (strcmp(command, "blas") == 0)
        return cdc_bench_blas(argc - 1, argv + 1);
    if (strcmp(command, "failover") == 0)
        return cdc_bench_failover(argc - 1, argv + 1);
    if (strcmp(command, "cache") == 0)
        return cdc_bench_cache(argc - 1, argv + 1);
    if (strcmp(command, "hostile") == 0)
        return cdc_bench_hostile(argc - 1, argv + 1);
    if (strcmp(command, "status") == 0)
        return cdc_bench_status(argc - 1, argv + 1);
    if (strcmp(command, "smallcalls") == 0)
        return cdc_bench_smallcalls(argc - 1, argv + 1);
    if (strcmp(command, "plan") == 0)
        return cdc_bench_plan(argc - 1, argv + 1);
    if (strcmp(command, "demo") == 0)
        return cdc_bench_demo(argc - 1, argv + 1);
    if (strcmp(command, "help") == 0 || strcmp(command, "--help") == 0) {
        usage(stdout);
        cdc_bench_run_usage(stdout);
        return 0;
    }
    fprintf(stderr, "cdcgemm-bench: unknown command '%s'\n", command);
    usage(stderr);
    return 2;
}
