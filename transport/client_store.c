/* client_store.c - workers that keep their shards on their own disk.
 *
 * A worker started with --store (src/worker/weight_store.h) writes every
 * shard it receives to its device's disk, and its PONGs report how many it
 * holds (status.h, stored). When a new process of it appears (a respawn, a
 * reboot, or a coordinator that starts again), each shard its slots need
 * is first asked of it with a STORED message, a header of 192 bytes: it
 * loads the shard from its disk, or answers MISS with request id 0, and
 * only then is the shard sent. The barrier PING behind them acknowledges
 * both alike (client_restore.c), so a repair costs the device's disk
 * instead of its link. */
#include "client_internal.h"

#include "slots.h"
#include "wire.h"

void cdc__client_store_new_process(cdc_client_t *self, int w, uint64_t stored)
{
    self->store_asked[w] = stored > 0;
    self->store_lack_count[w] = 0;
}

int cdc__client_store_ask(const cdc_client_t *self, int w, uint64_t key)
{
    if (!self->store_asked[w])
        return 0;
    for (int i = 0; i < self->store_lack_count[w]; i++)
        if (self->store_lacks[w][i] == key)
            return 0;
    return 1;
}

int cdc__client_store_send(cdc_client_t *self, int w, const cdc_slot_weight_t *weight)
{
    cdc_msg_header_t h;
    cdc__msg_header_init(&h, CDC_MSG_STORED);
    h.a_key = weight->key;
    h.rows = weight->rows;
    h.k = weight->k;
    int rc = cdc__wire_send(self->workers[w].socket, NULL, &h, NULL, 0, ZMQ_DONTWAIT);
    if (rc == CDC_OK)
        self->counters.stored_asked++;
    return rc;
}

void cdc__client_store_lacks(cdc_client_t *self, int w, uint64_t key, int asked)
{
    if (self->store_asked[w]) {
        self->counters.stored_missing += asked != 0;
        if (self->store_lack_count[w] == CDC_CLIENT_STORE_LACKS)
            self->store_asked[w] = 0; /* its store holds little of this: stop asking */
        else
            self->store_lacks[w][self->store_lack_count[w]++] = key;
    }
    cdc__slots_forget(self->slots, w, key);
}
