/* svc/sync: the reader-writer lock, one word at the home (readers in bits
 * 0-31, registered writers above) driven by EXTOLL's fetch-compare-and-add,
 * plus the queue lock on the same object's tail word for writers. A
 * reader adds itself iff no writer is registered (FCAA, compare =
 * NV_SYNC_RW_READERS); a writer holds the queue lock, registers, and
 * sleeps until the last reader leaves and wakes it. Readers that find a
 * writer registered queue on the same lock, so they come in FIFO order
 * with writers: a writer is never starved by readers, nor readers by
 * writers. */
#include "svc/sync/sync_int.h"

#include <stdlib.h>

netvm_status_t netvm_rwlock_create(netvm_ctx_t *ctx, const char *name, netvm_rwlock_t **out)
{
    if (!out)
        return NETVM_ERR_INVAL;
    *out = NULL;
    if (!ctx)
        return NETVM_ERR_INVAL;
    netvm_rwlock_t *rw = calloc(1, sizeof *rw);
    if (!rw)
        return NETVM_ERR_NOMEM;
    netvm_status_t s = nv_sync_create(ctx, name, NV_SYNC_RWLOCK, 0, NULL, 0, &rw->h);
    if (s != NETVM_OK) {
        free(rw);
        return s;
    }
    *out = rw;
    return NETVM_OK;
}

NV_SYNC_OPEN_CLOSE(netvm_rwlock, NV_SYNC_RWLOCK, netvm_rwlock_open, netvm_rwlock_close)

netvm_status_t netvm_rwlock_rdlock(netvm_rwlock_t *rw)
{
    netvm_status_t s = nv_sync_enter(rw ? &rw->h : NULL, NV_SYNC_RWLOCK);
    if (s != NETVM_OK)
        return s;
    uint64_t old;
    s = nv_sync_atomic(&rw->h, NV_SYNC_W_RW, NETVM_AOP_FCAA, 1, NV_SYNC_RW_READERS, &old);
    if (s != NETVM_OK || old <= NV_SYNC_RW_READERS)
        return s;
    /* a writer is registered: queue behind it; holding the queue lock, no
     * writer is registered any more */
    if ((s = nv_sync_mcs_acquire(&rw->h)) != NETVM_OK)
        return s;
    s = nv_sync_atomic(&rw->h, NV_SYNC_W_RW, NETVM_AOP_ADD, 1, 0, NULL);
    netvm_status_t r = nv_sync_mcs_release(&rw->h);
    return s != NETVM_OK ? s : r;
}

netvm_status_t netvm_rwlock_rdunlock(netvm_rwlock_t *rw)
{
    netvm_status_t s = nv_sync_enter(rw ? &rw->h : NULL, NV_SYNC_RWLOCK);
    if (s != NETVM_OK)
        return s;
    uint64_t old;
    s = nv_sync_atomic(&rw->h, NV_SYNC_W_RW, NETVM_AOP_FADD, (uint64_t)-1, 0, &old);
    if (s != NETVM_OK)
        return s;
    if ((old & NV_SYNC_RW_READERS) == 0) {
        nv_sync_atomic(&rw->h, NV_SYNC_W_RW, NETVM_AOP_ADD, 1, 0, NULL);
        return NETVM_ERR_STATE;   /* no reader held it */
    }
    if ((old & NV_SYNC_RW_READERS) == 1 && old > NV_SYNC_RW_READERS) {
        /* the last reader out lets the registered writer in */
        uint64_t w = 0;
        if ((s = netvm_get(rw->h.ctx, &w, rw->h.rseg, NV_SYNC_W_WRITER, 8, 0)) != NETVM_OK)
            return s;
        return nv_sync_send_wake(rw->h.st, w, NETVM_OK);
    }
    return NETVM_OK;
}

netvm_status_t netvm_rwlock_wrlock(netvm_rwlock_t *rw)
{
    netvm_status_t s = nv_sync_enter(rw ? &rw->h : NULL, NV_SYNC_RWLOCK);
    if (s != NETVM_OK)
        return s;
    if ((s = nv_sync_mcs_acquire(&rw->h)) != NETVM_OK)
        return s;
    unsigned slot;
    uint64_t ref, old;
    if ((s = nv_sync_node_get(rw->h.st, &slot, &ref)) != NETVM_OK)
        goto fail;
    /* published before registering: a reader that sees the registration
     * finds whom to wake */
    if ((s = netvm_put_imm(rw->h.ctx, rw->h.rseg, NV_SYNC_W_WRITER, ref, 0)) == NETVM_OK &&
        (s = nv_sync_atomic(&rw->h, NV_SYNC_W_RW, NETVM_AOP_FADD, NV_SYNC_RW_WRITER, 0, &old)) == NETVM_OK &&
        (old & NV_SYNC_RW_READERS))
        s = nv_sync_sleep(&rw->h, slot, NULL, rw->h.home, nv_sync_watch_home, NULL);
    nv_sync_node_put(rw->h.st, slot);
    if (s == NETVM_OK)
        return NETVM_OK;
fail:
    nv_sync_mcs_release(&rw->h);
    return s;
}

netvm_status_t netvm_rwlock_wrunlock(netvm_rwlock_t *rw)
{
    netvm_status_t s = nv_sync_enter(rw ? &rw->h : NULL, NV_SYNC_RWLOCK);
    if (s != NETVM_OK)
        return s;
    if (!atomic_load(&rw->h.held))
        return NETVM_ERR_STATE;
    s = nv_sync_atomic(&rw->h, NV_SYNC_W_RW, NETVM_AOP_ADD, (uint64_t)-NV_SYNC_RW_WRITER, 0, NULL);
    netvm_status_t r = nv_sync_mcs_release(&rw->h);
    return s != NETVM_OK ? s : r;
}
