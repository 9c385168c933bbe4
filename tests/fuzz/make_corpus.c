/* make_corpus.c - writes the fuzz targets' seed corpora (tests/fuzz/corpus/).
 *
 * Usage: fuzz_make_corpus DIR   (DIR/<target>/<seed> for every target)
 *
 * The wire seeds are small valid messages of every type, packed by this
 * build's protocol.c, so run it again whenever the protocol version or
 * header changes (test_fuzz_inputs checks that every committed seed still
 * decodes). The fault and environment seeds are the examples of
 * docs/faults.md and docs/configuration.md. */
#include "fuzz_frames.h"
#include "protocol.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *root;

static void make_dir(const char *target)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, target);
    if (mkdir(root, 0777) != 0 && errno != EEXIST)
        perror(root);
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        perror(path);
}

static void write_seed(const char *target, const char *name, const void *data, size_t size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/%s", root, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* A message in the fuzz_frames.h format: header then payloads of the given
   byte sizes (float ramps). */
static void write_message(const char *target, const char *name, const cdc_msg_header_t *h,
                          const size_t *payloads, int count)
{
    static uint8_t out[1 << 16];
    size_t at = 0;
    memset(out, 0, sizeof out);
    uint8_t packed[CDC_PROTO_HEADER_SIZE];
    cdc__msg_header_pack(h, packed);
    out[at++] = CDC_PROTO_HEADER_SIZE & 0xff;
    out[at++] = CDC_PROTO_HEADER_SIZE >> 8;
    memcpy(out + at, packed, sizeof packed);
    at += sizeof packed;
    for (int i = 0; i < count; i++) {
        out[at++] = (uint8_t) (payloads[i] & 0xff);
        out[at++] = (uint8_t) (payloads[i] >> 8);
        for (size_t f = 0; f < payloads[i] / sizeof(float); f++) {
            float v = (float) f * 0.25f - 1.0f;
            memcpy(out + at, &v, sizeof v);
            at += sizeof v;
        }
        at += payloads[i] % sizeof(float); /* zero bytes: text */
    }
    write_seed(target, name, out, at);
}

static void wire_seeds(const char *target)
{
    cdc_msg_header_t h;
    make_dir(target);

    cdc__msg_header_init(&h, CDC_MSG_TASK_GEMM);
    h.request_id = 7;
    h.shard = 2;
    h.rows = 2, h.k = 3, h.cols = 4;
    write_message(target, "task_gemm", &h, (size_t[]){2 * 3 * 4, 4 * 3 * 4}, 2);
    h.a_key = 0x1234, h.bt_key = 0;
    write_message(target, "task_gemm_cached_a", &h, (size_t[]){0, 4 * 3 * 4}, 2);
    h.a_key = 0, h.rows = 5, h.lead_rows = 3, h.part_rows = 1; /* 3 data rows, 2 parts */
    write_message(target, "task_gemm_streamed", &h, (size_t[]){5 * 3 * 4, 4 * 3 * 4}, 2);
    h.lead_rows = h.part_rows = 0;

    cdc__msg_header_init(&h, CDC_MSG_TASK_CONV);
    h.request_id = 8;
    h.shard = 1;
    h.rows = 2, h.batch = 1;
    h.geometry = (cdc_conv_geometry_t){.channels = 2, .h = 4, .w = 4, .kernel_h = 3,
                                       .kernel_w = 3, .stride_h = 1, .stride_w = 1,
                                       .pad_h = 1, .pad_w = 1, .dilation_h = 1,
                                       .dilation_w = 1};
    h.k = 2 * 3 * 3, h.cols = 4 * 4;
    write_message(target, "task_conv", &h, (size_t[]){2 * 18 * 4, 2 * 16 * 4}, 2);
    h.geometry.stride_h = 2, h.geometry.dilation_w = 2, h.geometry.pad_h = 0;
    h.cols = 1 * 1 * 2; /* out_h (4 - 3) / 2 + 1, out_w (6 - 5) + 1 */
    h.a_key = 0x99;
    write_message(target, "task_conv_strided_cached", &h, (size_t[]){0, 2 * 16 * 4}, 2);

    cdc__msg_header_init(&h, CDC_MSG_WEIGHTS);
    h.a_key = 0xabcdef, h.rows = 3, h.k = 2;
    write_message(target, "weights", &h, (size_t[]){3 * 2 * 4}, 1);

    cdc__msg_header_init(&h, CDC_MSG_RESULT);
    h.request_id = 7, h.shard = 2, h.rows = 2, h.cols = 4;
    write_message(target, "result", &h, (size_t[]){2 * 4 * 4}, 1);
    h.rows = 1, h.row_offset = 3; /* a streamed task's part */
    write_message(target, "result_part", &h, (size_t[]){1 * 4 * 4}, 1);

    cdc__msg_header_init(&h, CDC_MSG_ERROR);
    h.request_id = 7, h.shard = 2, h.error_code = CDC_EPROTO;
    write_message(target, "error", &h, (size_t[]){11}, 1);

    cdc__msg_header_init(&h, CDC_MSG_MISS);
    h.request_id = 7, h.shard = 2, h.a_key = 0x1234;
    write_message(target, "miss", &h, NULL, 0);

    cdc__msg_header_init(&h, CDC_MSG_STORED);
    h.a_key = 0x1234, h.rows = 64, h.k = 32;
    write_message(target, "stored", &h, NULL, 0);

    cdc__msg_header_init(&h, CDC_MSG_PONG);
    h.request_id = 999;
    write_message(target, "pong", &h, (size_t[]){24}, 1); /* its status text */

    static const cdc_msg_type_t bare[] = {CDC_MSG_PING, CDC_MSG_CANCEL, CDC_MSG_GOODBYE};
    static const char *const bare_names[] = {"ping", "cancel", "goodbye"};
    for (int i = 0; i < 3; i++) {
        cdc__msg_header_init(&h, bare[i]);
        h.request_id = 1000 + (uint64_t) i;
        write_message(target, bare_names[i], &h, NULL, 0);
    }
}

static void text_seeds(const char *target, const char *const *texts, int count)
{
    make_dir(target);
    for (int i = 0; i < count; i++) {
        char name[32];
        snprintf(name, sizeof name, "seed%02d", i);
        write_seed(target, name, texts[i], strlen(texts[i]));
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    root = argv[1];
    wire_seeds("fuzz_worker_msg");
    wire_seeds("fuzz_reply");

    static const char *const faults[] = {
        "crash@w1",
        "crash@w1:after=1000",
        "delay@w0:ms=3",
        "delay@*:dist=exp,mean=20,p=0.5",
        "delay@w3:dist=pareto,mean=10",
        "hang@w2:after=5,for=250",
        "drop@*:p=0.1;corrupt@w4:p=0.01",
        "slow@*:gflops=0.2",
        "slow@w0:x=2.5",
        "link@*:mbit=94,lat=0.3",
        "slow@*:gflops=0.2;link@*:mbit=94,lat=0.3;crash@w2:after=50;seed=1",
        "crash@w1:p=0.5",
        "slow@*:x=2,gflops=1",
        "disk@*:mbyte=40;link@*:mbit=94,lat=0.3",
        "disk@w1",
    };
    text_seeds("fuzz_faults", faults, (int) (sizeof faults / sizeof *faults));

    /* One line per variable: NAME=VALUE (fuzz_env.c). */
    static const char *const env[] = {
        "CDCGEMM_WORKERS=tcp://10.0.0.2:7001,tcp://10.0.0.3:7001,ipc:///tmp/w0",
        "CDCGEMM_LOCAL_WORKERS=5\nCDCGEMM_PARITY=1",
        "CDCGEMM_PARITY=2\nCDCGEMM_CODE=chebyshev",
        "CDCGEMM_SPLIT=spatial\nCDCGEMM_REPLAN=keep-parity",
        "CDCGEMM_REPLICATE=1\nCDCGEMM_VERIFY=0\nCDCGEMM_IN_PROCESS=1",
        "CDCGEMM_WAIT_MS=500\nCDCGEMM_TIMEOUT_MS=2000\nCDCGEMM_MIN_FLOPS=1e9",
        "CDCGEMM_FAULTS=crash@w1:after=1000;delay@w0:ms=3",
        "CDCGEMM_STATS=/tmp/stats.json\nCDCGEMM_LOG=debug",
        "CDCGEMM_PARTIY=2",
        "CDCGEMM_LOCAL_WORKERS= 5\nCDCGEMM_TIMEOUT_MS=+20",
        "CDCGEMM_WORKER_STORE=/var/lib/cdcgemm/store\nCDCGEMM_WORKER_MAX_MEMORY=256M",
    };
    text_seeds("fuzz_env", env, (int) (sizeof env / sizeof *env));
    return 0;
}
