/* svc/sync: the counting semaphore. Its word at the home holds K - count
 * (K = 2^62), so "take a unit if one is free" is one EXTOLL
 * fetch-compare-and-add (add 1 iff word <= K - 1), and a post is one
 * fetch-and-add of -1. Bit 63 says waiters queue at the home: it makes
 * the fast path fail (newcomers queue behind them, FIFO) and makes a post
 * kick the home, which hands the unit to the oldest waiter. */
#include "svc/sync/sync_int.h"

#include <stdlib.h>

netvm_status_t netvm_sem_create(netvm_ctx_t *ctx, const char *name, uint64_t initial, netvm_sem_t **out)
{
    if (!out)
        return NETVM_ERR_INVAL;
    *out = NULL;
    if (!ctx || initial >= NV_SYNC_SEM_K)
        return NETVM_ERR_INVAL;
    netvm_sem_t *m = calloc(1, sizeof *m);
    if (!m)
        return NETVM_ERR_NOMEM;
    netvm_status_t s = nv_sync_create(ctx, name, NV_SYNC_SEM, 1, NULL, 0, &m->h);
    if (s != NETVM_OK) {
        free(m);
        return s;
    }
    /* nobody has opened it yet: the home's own word */
    __atomic_store_n((uint64_t *)((char *)netvm_seg_addr(m->h.seg) + NV_SYNC_W_SEM), NV_SYNC_SEM_K - initial,
                     __ATOMIC_RELEASE);
    *out = m;
    return NETVM_OK;
}

NV_SYNC_OPEN_CLOSE(netvm_sem, NV_SYNC_SEM, netvm_sem_open, netvm_sem_close)

static netvm_status_t try_take(netvm_sem_t *m, int *got)
{
    uint64_t old;
    netvm_status_t s = nv_sync_atomic(&m->h, NV_SYNC_W_SEM, NETVM_AOP_FCAA, 1, NV_SYNC_SEM_K - 1, &old);
    *got = s == NETVM_OK && old <= NV_SYNC_SEM_K - 1;
    return s;
}

netvm_status_t netvm_sem_trywait(netvm_sem_t *m)
{
    netvm_status_t s = nv_sync_enter(m ? &m->h : NULL, NV_SYNC_SEM);
    int got;
    if (s != NETVM_OK || (s = try_take(m, &got)) != NETVM_OK)
        return s;
    return got ? NETVM_OK : NETVM_ERR_AGAIN;
}

netvm_status_t netvm_sem_wait(netvm_sem_t *m)
{
    netvm_status_t s = nv_sync_enter(m ? &m->h : NULL, NV_SYNC_SEM);
    int got;
    if (s != NETVM_OK || (s = try_take(m, &got)) != NETVM_OK || got)
        return s;
    unsigned slot;
    uint64_t ref, granted = 0;
    if ((s = nv_sync_node_get(m->h.st, &slot, &ref)) != NETVM_OK)
        return s;
    s = nv_sync_home_call(&m->h, NV_SYNC_OP_SEM_WAIT, ref, 0, &granted, 1);
    if (s == NETVM_OK && !granted)
        s = nv_sync_sleep(&m->h, slot, NULL, m->h.home, nv_sync_watch_home, NULL);
    nv_sync_node_put(m->h.st, slot);
    return s;
}

netvm_status_t netvm_sem_post(netvm_sem_t *m)
{
    netvm_status_t s = nv_sync_enter(m ? &m->h : NULL, NV_SYNC_SEM);
    if (s != NETVM_OK)
        return s;
    uint64_t old;
    if ((s = nv_sync_atomic(&m->h, NV_SYNC_W_SEM, NETVM_AOP_FADD, (uint64_t)-1, 0, &old)) != NETVM_OK)
        return s;
    if ((old & ~NV_SYNC_SEM_QUEUED) == 0) {
        /* the count would pass K: refuse, do not wrap */
        nv_sync_atomic(&m->h, NV_SYNC_W_SEM, NETVM_AOP_ADD, 1, 0, NULL);
        return NETVM_ERR_INVAL;
    }
    if (old & NV_SYNC_SEM_QUEUED)
        return nv_sync_home_send(&m->h, NV_SYNC_OP_SEM_KICK, 0, 0);
    return NETVM_OK;
}

netvm_status_t netvm_sem_value(netvm_sem_t *m, uint64_t *value)
{
    netvm_status_t s = nv_sync_enter(m ? &m->h : NULL, NV_SYNC_SEM);
    if (s != NETVM_OK || !value)
        return s != NETVM_OK ? s : NETVM_ERR_INVAL;
    uint64_t w;
    if ((s = netvm_get(m->h.ctx, &w, m->h.rseg, NV_SYNC_W_SEM, 8, 0)) != NETVM_OK)
        return s;
    w &= ~NV_SYNC_SEM_QUEUED;
    *value = w < NV_SYNC_SEM_K ? NV_SYNC_SEM_K - w : 0;
    return NETVM_OK;
}
