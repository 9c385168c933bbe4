/* server_internal.h - what server.c and server_socket.c share: the server's
 * state (struct cdc_server, its peers and principals; server.c's head comment
 * says what they are for) and the function that opens its socket. Only those
 * files include it; everyone else has server.h. */
#ifndef CDC_SERVER_INTERNAL_H_INCLUDED
#define CDC_SERVER_INTERNAL_H_INCLUDED

#include "server.h"

#include <czmq.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_PEERS 256
#define MAX_CANCELS 64 /* remembered per peer; an older cancel is forgotten */

/* Who is owed what: see server.c's head comment. */
typedef struct {
    atomic_int refs;
    atomic_size_t in_flight; /* reply bytes built and not yet freed by libzmq */
    uint64_t last_seen;
    char user_id[CDC_PEER_USER_ID_MAX + 1]; /* "" : one connection's own   */
    uint64_t cancelled[MAX_CANCELS]; /* ring, guarded by the server's lock */
    int cancel_count, cancel_next;
} principal_t;

typedef struct {
    atomic_int refs;
    uint64_t connection;
    uint64_t last_seen;
    uint8_t route[256];
    size_t route_size;
    principal_t *principal; /* owned reference */
} peer_t;

struct cdc_server {
    void *context, *router;
    int own_context;  /* context made here (no CURVE), terminated at destroy */
    zactor_t *auth;   /* zauth, with CURVE                                    */
    char *curve_allow;
    principal_t *principals[MAX_PEERS]; /* authenticated, by User-Id */
    int principal_count;
    int wake[2]; /* pipe: cdc__server_wake writes, cdc__server_wait drains */
    size_t peer_budget, copy_below;
    peer_t *peers[MAX_PEERS];
    int peer_count;
    uint64_t clock;
    pthread_mutex_t lock; /* counters and cancel rings */
    cdc_server_counters_t counters;
};

/* The server's context (CURVE: CZMQ's, with zauth) and its ROUTER, bound to
   options->bind with its options and limits (server_socket.c). */
int cdc__server_open_socket(cdc_server_t *self, const cdc_server_options_t *options);

#endif
