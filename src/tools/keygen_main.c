/* keygen_main.c - cdcgemm-keygen: write a CURVE certificate pair for a worker or a coordinator. */
#include "cdcgemm.h"
#include "keys.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cdcgemm-keygen [--endpoint ENDPOINT] PATH\n"
            "       cdcgemm-keygen --help\n"
            "\n"
            "Write a new CURVE certificate pair (CZMQ zcert format): PATH holds the\n"
            "public key, PATH_secret both keys (mode 0600; keep it on the machine that\n"
            "uses it). Existing files are never overwritten. Prints the public key.\n"
            "\n"
            "  --endpoint ENDPOINT  store ENDPOINT as the certificate's \"endpoint\"\n"
            "                       metadata: for a worker's certificate, so that a\n"
            "                       coordinator given a directory of worker certificates\n"
            "                       (CDCGEMM_CURVE_SERVER=DIR) knows which endpoint each\n"
            "                       one belongs to. Give it exactly as CDCGEMM_WORKERS\n"
            "                       names the worker, e.g. tcp://10.0.0.7:7001.\n"
            "\n"
            "A worker uses its PATH_secret (cdcgemm-worker --curve-secret) and lists its\n"
            "coordinators' public PATH files in a directory (--curve-allow DIR); a\n"
            "coordinator uses its PATH_secret (CDCGEMM_CURVE_SECRET) and the workers'\n"
            "public files (CDCGEMM_CURVE_SERVER). See docs/security.md.\n");
}

int main(int argc, char **argv)
{
    const char *endpoint = NULL, *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--endpoint") == 0 && i + 1 < argc) {
            endpoint = argv[++i];
        } else if (argv[i][0] != '-' && !path) {
            path = argv[i];
        } else {
            fprintf(stderr, "cdcgemm-keygen: unknown or extra argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    char public_txt[CDC_CURVE_KEY_TEXT];
    int rc = cdc__curve_keygen(path, endpoint, public_txt);
    if (rc != CDC_OK) {
        fprintf(stderr, "cdcgemm-keygen: %s\n", cdc_last_error());
        return 1;
    }
    printf("public key %s\nwrote %s (public) and %s_secret (secret, mode 0600)\n", public_txt,
           path, path);
    return 0;
}
