/* svc/sync: a barrier over any set of peers. Each member tells the home
 * it arrived (a round trip) and sleeps on a node of its own; the last
 * arrival's answer releases it and the home wakes the others with one
 * message each. A member or the home that dies fails everyone's wait:
 * each sleeper looks at all members. */
#include "svc/sync/sync_int.h"

#include <stdlib.h>

netvm_status_t netvm_gbarrier_create(netvm_ctx_t *ctx, const char *name, const int *peers, unsigned n,
                                     netvm_gbarrier_t **out)
{
    if (!out)
        return NETVM_ERR_INVAL;
    *out = NULL;
    if (!ctx || !peers || n == 0 || n > 1u << 20)
        return NETVM_ERR_INVAL;
    for (unsigned i = 0; i < n; i++) {
        if (peers[i] < 0)
            return NETVM_ERR_INVAL;
        for (unsigned j = 0; j < i; j++)
            if (peers[j] == peers[i])
                return NETVM_ERR_INVAL;
    }
    netvm_gbarrier_t *b = calloc(1, sizeof *b);
    if (!b)
        return NETVM_ERR_NOMEM;
    netvm_status_t s = nv_sync_create(ctx, name, NV_SYNC_BARRIER, 1, peers, n, &b->h);
    if (s != NETVM_OK) {
        free(b);
        return s;
    }
    *out = b;
    return NETVM_OK;
}

NV_SYNC_OPEN_CLOSE(netvm_gbarrier, NV_SYNC_BARRIER, netvm_gbarrier_open, netvm_gbarrier_close)

static netvm_status_t watch_members(struct nv_sync_handle *h, void *arg)
{
    (void)arg;
    if (nv_sync_alive(h->st, h->home) != NETVM_OK)
        return NETVM_ERR_PEER;
    for (unsigned i = 0; i < h->nmembers; i++)
        if (nv_sync_alive(h->st, h->members[i]) != NETVM_OK)
            return NETVM_ERR_PEER;
    return NETVM_OK;
}

netvm_status_t netvm_gbarrier_wait(netvm_gbarrier_t *b)
{
    netvm_status_t s = nv_sync_enter(b ? &b->h : NULL, NV_SYNC_BARRIER);
    if (s != NETVM_OK)
        return s;
    unsigned slot;
    uint64_t ref, released = 0;
    if ((s = nv_sync_node_get(b->h.st, &slot, &ref)) != NETVM_OK)
        return s;
    s = nv_sync_home_call(&b->h, NV_SYNC_OP_BAR_ARRIVE, ref, 0, &released, 1);
    if (s == NETVM_OK && !released)
        s = nv_sync_sleep(&b->h, slot, NULL, b->h.home, watch_members, NULL);
    nv_sync_node_put(b->h.st, slot);
    return s;
}
