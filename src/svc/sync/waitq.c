/* svc/sync: wait queues and monitors. The queues live at the home; a
 * waiter queues itself (a round trip, answered at once) and then sleeps
 * on a node of its own until the home's wake message comes. A monitor's
 * wait queues before it releases the monitor's lock, which is what makes
 * a wake-up impossible to lose. */
#include "svc/sync/sync_int.h"

#include <stdlib.h>

static netvm_status_t create_q(netvm_ctx_t *ctx, const char *name, int kind, unsigned nq,
                               struct nv_sync_handle *h)
{
    return nv_sync_create(ctx, name, kind, nq, NULL, 0, h);
}

netvm_status_t netvm_waitq_create(netvm_ctx_t *ctx, const char *name, netvm_waitq_t **out)
{
    if (!out)
        return NETVM_ERR_INVAL;
    *out = NULL;
    if (!ctx)
        return NETVM_ERR_INVAL;
    netvm_waitq_t *w = calloc(1, sizeof *w);
    if (!w)
        return NETVM_ERR_NOMEM;
    netvm_status_t s = create_q(ctx, name, NV_SYNC_WAITQ, 1, &w->h);
    if (s != NETVM_OK) {
        free(w);
        return s;
    }
    *out = w;
    return NETVM_OK;
}

NV_SYNC_OPEN_CLOSE(netvm_waitq, NV_SYNC_WAITQ, netvm_waitq_open, netvm_waitq_close)

/* queue on cond (the monitor's lock, if any, is released in between) and sleep */
static netvm_status_t queue_and_sleep(struct nv_sync_handle *h, unsigned cond, int release_lock)
{
    unsigned slot;
    uint64_t ref;
    netvm_status_t s = nv_sync_node_get(h->st, &slot, &ref);
    if (s != NETVM_OK)
        return s;
    s = nv_sync_home_call(h, NV_SYNC_OP_WQ_WAIT, ref, cond, NULL, 0);
    if (release_lock) {
        netvm_status_t r = nv_sync_mcs_release(h);
        if (s == NETVM_OK)
            s = r;
    }
    if (s == NETVM_OK)
        s = nv_sync_sleep(h, slot, NULL, h->home, nv_sync_watch_home, NULL);
    nv_sync_node_put(h->st, slot);
    return s;
}

static netvm_status_t wake(struct nv_sync_handle *h, unsigned op, unsigned cond, unsigned *woken)
{
    uint64_t n = 0;
    netvm_status_t s = nv_sync_home_call(h, op, 0, cond, &n, 1);
    if (woken)
        *woken = s == NETVM_OK ? (unsigned)n : 0;
    return s;
}

netvm_status_t netvm_waitq_wait(netvm_waitq_t *w)
{
    netvm_status_t s = nv_sync_enter(w ? &w->h : NULL, NV_SYNC_WAITQ);
    return s != NETVM_OK ? s : queue_and_sleep(&w->h, 0, 0);
}

netvm_status_t netvm_waitq_signal(netvm_waitq_t *w, unsigned *woken)
{
    netvm_status_t s = nv_sync_enter(w ? &w->h : NULL, NV_SYNC_WAITQ);
    return s != NETVM_OK ? s : wake(&w->h, NV_SYNC_OP_WQ_SIGNAL, 0, woken);
}

netvm_status_t netvm_waitq_broadcast(netvm_waitq_t *w, unsigned *woken)
{
    netvm_status_t s = nv_sync_enter(w ? &w->h : NULL, NV_SYNC_WAITQ);
    return s != NETVM_OK ? s : wake(&w->h, NV_SYNC_OP_WQ_BROADCAST, 0, woken);
}

/* --- monitor ------------------------------------------------------------------ */

netvm_status_t netvm_monitor_create(netvm_ctx_t *ctx, const char *name, unsigned ncond, netvm_monitor_t **out)
{
    if (!out)
        return NETVM_ERR_INVAL;
    *out = NULL;
    if (!ctx || ncond == 0 || ncond > 64)
        return NETVM_ERR_INVAL;
    netvm_monitor_t *m = calloc(1, sizeof *m);
    if (!m)
        return NETVM_ERR_NOMEM;
    netvm_status_t s = create_q(ctx, name, NV_SYNC_MONITOR, ncond, &m->h);
    if (s != NETVM_OK) {
        free(m);
        return s;
    }
    *out = m;
    return NETVM_OK;
}

NV_SYNC_OPEN_CLOSE(netvm_monitor, NV_SYNC_MONITOR, netvm_monitor_open, netvm_monitor_close)

netvm_status_t netvm_monitor_enter(netvm_monitor_t *m)
{
    netvm_status_t s = nv_sync_enter(m ? &m->h : NULL, NV_SYNC_MONITOR);
    return s != NETVM_OK ? s : nv_sync_mcs_acquire(&m->h);
}

netvm_status_t netvm_monitor_exit(netvm_monitor_t *m)
{
    netvm_status_t s = nv_sync_enter(m ? &m->h : NULL, NV_SYNC_MONITOR);
    return s != NETVM_OK ? s : nv_sync_mcs_release(&m->h);
}

netvm_status_t netvm_monitor_wait(netvm_monitor_t *m, unsigned cond)
{
    netvm_status_t s = nv_sync_enter(m ? &m->h : NULL, NV_SYNC_MONITOR);
    if (s != NETVM_OK)
        return s;
    if (!atomic_load(&m->h.held))
        return NETVM_ERR_STATE;
    if (cond >= 64)
        return NETVM_ERR_INVAL;
    s = queue_and_sleep(&m->h, cond, 1);
    if (s == NETVM_ERR_INVAL || s == NETVM_ERR_STATE)
        return s;
    /* re-enter whatever woke us: the caller expects to hold the monitor */
    netvm_status_t r = nv_sync_mcs_acquire(&m->h);
    return s != NETVM_OK ? s : r;
}

netvm_status_t netvm_monitor_signal(netvm_monitor_t *m, unsigned cond, unsigned *woken)
{
    netvm_status_t s = nv_sync_enter(m ? &m->h : NULL, NV_SYNC_MONITOR);
    return s != NETVM_OK ? s : wake(&m->h, NV_SYNC_OP_WQ_SIGNAL, cond, woken);
}

netvm_status_t netvm_monitor_broadcast(netvm_monitor_t *m, unsigned cond, unsigned *woken)
{
    netvm_status_t s = nv_sync_enter(m ? &m->h : NULL, NV_SYNC_MONITOR);
    return s != NETVM_OK ? s : wake(&m->h, NV_SYNC_OP_WQ_BROADCAST, cond, woken);
}
