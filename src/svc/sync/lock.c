/* svc/sync: the queue lock (MCS). The tail word lives at the home; each
 * acquirer swaps its node ref into it. A predecessor learns its successor
 * by a link message into its own node, and hands the lock over with one
 * wake message: nobody waits on the network. A holder (or waiter) that
 * dies breaks the lock: the waiter behind it sees its predecessor gone,
 * sets the home's broken word and swaps NV_SYNC_BROKEN into the tail, so
 * every waiter and every later acquire fails with NETVM_ERR_PEER. */
#include "svc/sync/sync_int.h"

#include <stdlib.h>

static void break_lock(struct nv_sync_handle *h)
{
    netvm_put_imm(h->ctx, h->rseg, NV_SYNC_W_BROKEN, 1, 0);
    nv_sync_atomic(h, NV_SYNC_W_TAIL, NETVM_AOP_SWAP, NV_SYNC_BROKEN, 0, NULL);
}

static netvm_status_t watch_broken(struct nv_sync_handle *h, void *arg)
{
    (void)arg;
    if (nv_sync_alive(h->st, h->home) != NETVM_OK)
        return NETVM_ERR_PEER;
    uint64_t b = 0;
    netvm_status_t s = netvm_get(h->ctx, &b, h->rseg, NV_SYNC_W_BROKEN, 8, 0);
    if (s != NETVM_OK)
        return s;
    return b ? NETVM_ERR_PEER : NETVM_OK;
}

/* a waiter depends on its predecessor: if it died, the lock is lost */
static netvm_status_t watch_pred(struct nv_sync_handle *h, void *arg)
{
    if (nv_sync_alive(h->st, nv_sync_ref_peer(*(uint64_t *)arg)) != NETVM_OK)
        return NETVM_ERR_PEER;
    return watch_broken(h, NULL);
}

netvm_status_t nv_sync_mcs_acquire(struct nv_sync_handle *h)
{
    unsigned slot;
    uint64_t ref, pred;
    netvm_status_t s = nv_sync_node_get(h->st, &slot, &ref);
    if (s != NETVM_OK)
        return s;
    /* Where the home's words are not mapped (tcp), the home swaps and
     * links for us (home.c, NV_SYNC_OP_MCS_ENQ): one round trip, no link
     * message of ours. Mapped, the swap is a CPU atomic. */
    int at_home = !netvm_rseg_is_mapped(h->rseg) && h->home != h->st->me;
    s = at_home ? nv_sync_home_call(h, NV_SYNC_OP_MCS_ENQ, ref, 0, &pred, 1)
                : nv_sync_atomic(h, NV_SYNC_W_TAIL, NETVM_AOP_SWAP, ref, 0, &pred);
    if (s != NETVM_OK)
        goto fail;
    if (pred == NV_SYNC_BROKEN) {
        /* put the mark back (the home did already); anyone who swapped
         * behind us meanwhile sees the broken word */
        if (!at_home)
            nv_sync_atomic(h, NV_SYNC_W_TAIL, NETVM_AOP_SWAP, NV_SYNC_BROKEN, 0, NULL);
        s = NETVM_ERR_PEER;
        goto fail;
    }
    if (pred) {
        s = at_home ? NETVM_OK : nv_sync_send_link(h->st, pred, ref);
        if (s == NETVM_OK)
            s = nv_sync_sleep(h, slot, NULL, nv_sync_ref_peer(pred), watch_pred, &pred);
        if (s != NETVM_OK) {
            if (s == NETVM_ERR_PEER)
                break_lock(h);
            goto fail;
        }
    }
    atomic_store_explicit(&h->held, slot + 1, memory_order_release);
    return NETVM_OK;
fail:
    nv_sync_node_put(h->st, slot);
    return s;
}

/* The compare-swap of a release that did not wait for it (release_async).
 * arg: the state's uid << 16 | the node's slot. A request the teardown
 * fails completes after the state is gone: then nothing is left to do. */
static void release_done(netvm_ctx_t *ctx, netvm_status_t status, void *arg)
{
    (void)ctx;
    uintptr_t a = (uintptr_t)arg;
    struct nv_sync_state *st = nv_sync_live_enter((uint64_t)a >> 16);
    if (!st)
        return;
    struct nv_sync_node *n = &st->nodes[a & 0xffff];
    if (status == NETVM_OK && n->rel_old != n->rel_ref && n->rel_old != NV_SYNC_BROKEN)
        /* a successor swapped itself in: its link hands the lock over */
        nv_sync_rel_end(st, n, NV_SYNC_REL_CAS);
    else
        /* freed at the home (or broken: nobody links behind a broken
         * mark); or the home is gone, and its waiters see that
         * themselves. A link that came already has sent its wake; none
         * can come any more. */
        nv_sync_rel_end(st, n, NV_SYNC_REL_CAS | NV_SYNC_REL_LINK);
    nv_sync_live_leave();
}

/* Release without waiting for the home: the compare-swap that frees the
 * tail goes out and the call returns; its answer (release_done) or the
 * link of a successor that came behind (state.c, apply_link) finishes the
 * hand-over, and the second of the two frees the node. The home's later
 * operations from this process come after the compare-swap (one ordered
 * path per peer). Only where the tail is not mapped: there the
 * compare-swap is a CPU atomic and waiting costs nothing.
 * NETVM_ERR_AGAIN: a successor has linked already (*next set), go on as a
 * waiting release. */
static netvm_status_t release_async(struct nv_sync_handle *h, struct nv_sync_node *n, uint64_t ref,
                                    uint64_t *next)
{
    uint64_t seen = 0;
    struct nv_sync_shnode *sh = &h->st->sh[n - h->st->nodes];
    atomic_store(&n->rel, 0);
    n->rel_ref = ref;
    if (!atomic_compare_exchange_strong(&sh->next, &seen, NV_SYNC_RELEASING)) {
        *next = seen;
        return NETVM_ERR_AGAIN;
    }
    netvm_req_t *req = NULL;
    /* from a loop of acquires and releases it rides with the next
     * acquire's request: one exchange with the home per turn, not two */
    netvm_status_t s = nv_svc_atomic_lazy(h->ctx, h->rseg, NV_SYNC_W_TAIL, NETVM_AOP_CSWAP, 0, ref, &n->rel_old,
                                          &req);
    if (s == NETVM_OK)
        s = netvm_req_then(h->ctx, &req, release_done,
                           (void *)(uintptr_t)(h->st->uid << 16 | (uint64_t)(n - h->st->nodes)));
    if (s != NETVM_OK)
        /* the home cannot be reached: nothing is freed there, and a link
         * still to come ends the node */
        nv_sync_rel_end(h->st, n, NV_SYNC_REL_CAS);
    return s;
}

netvm_status_t nv_sync_mcs_release(struct nv_sync_handle *h)
{
    unsigned held = atomic_exchange(&h->held, 0);
    if (!held)
        return NETVM_ERR_STATE;
    unsigned slot = held - 1;
    struct nv_sync_node *n = &h->st->nodes[slot];
    struct nv_sync_shnode *sh = &h->st->sh[slot];
    uint64_t ref = nv_sync_ref(h->st->me, slot, atomic_load(&sh->ticket));
    uint64_t next = atomic_load(&sh->next), old;
    netvm_status_t s = NETVM_OK;
    if (!next && !netvm_rseg_is_mapped(h->rseg)) {
        s = release_async(h, n, ref, &next);
        if (s != NETVM_ERR_AGAIN)
            return s;   /* the node is the hand-over's now */
        s = NETVM_OK;
    }
    if (!next) {
        s = nv_sync_atomic(h, NV_SYNC_W_TAIL, NETVM_AOP_CSWAP, 0, ref, &old);
        if (s != NETVM_OK || old == ref)
            goto out;
        if (old == NV_SYNC_BROKEN) {
            s = NETVM_ERR_PEER;
            goto out;
        }
        /* a successor swapped itself in and is about to link */
        if ((s = nv_sync_sleep(h, slot, &next, nv_sync_ref_peer(old), watch_broken, NULL)) != NETVM_OK)
            goto out;
    }
    s = nv_sync_send_wake(h->st, next, NETVM_OK);
    if (s != NETVM_OK)
        break_lock(h);   /* the successor is gone: the lock cannot move on */
out:
    nv_sync_node_put(h->st, slot);
    return s;
}

netvm_status_t netvm_lock_create(netvm_ctx_t *ctx, const char *name, netvm_lock_t **out)
{
    if (!out)
        return NETVM_ERR_INVAL;
    *out = NULL;
    if (!ctx)
        return NETVM_ERR_INVAL;
    netvm_lock_t *l = calloc(1, sizeof *l);
    if (!l)
        return NETVM_ERR_NOMEM;
    netvm_status_t s = nv_sync_create(ctx, name, NV_SYNC_LOCK, 0, NULL, 0, &l->h);
    if (s != NETVM_OK) {
        free(l);
        return s;
    }
    *out = l;
    return NETVM_OK;
}

NV_SYNC_OPEN_CLOSE(netvm_lock, NV_SYNC_LOCK, netvm_lock_open, netvm_lock_close)

netvm_status_t netvm_lock_acquire(netvm_lock_t *l)
{
    netvm_status_t s = nv_sync_enter(l ? &l->h : NULL, NV_SYNC_LOCK);
    return s != NETVM_OK ? s : nv_sync_mcs_acquire(&l->h);
}

netvm_status_t netvm_lock_release(netvm_lock_t *l)
{
    netvm_status_t s = nv_sync_enter(l ? &l->h : NULL, NV_SYNC_LOCK);
    return s != NETVM_OK ? s : nv_sync_mcs_release(&l->h);
}
