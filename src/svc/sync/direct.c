/* svc/sync: wakes and links stored straight into a waiter's node on this
 * machine. Each process's wait nodes are memory its peers map
 * (nv_alloc_shared_kept, exported as NV_SYNC_NODES_SEG); a waker that
 * maps the waiter's nodes does what the wake or link message's handler
 * would do there, through its own mapping: one cache line crosses, where
 * a message is a ring record, a dispatch and a handler. A waiter asleep
 * on the node's futex is woken through the same (process-shared) futex;
 * one asleep in core's loop asks for the message as well
 * (NV_SYNC_WANT_MSG).
 *
 * Only job ranks: a connected peer's id may come back for another
 * process. A handler (a home's wakes and links) counts itself in
 * direct_users while it stores: netvm_finalize releases the imports while
 * the progress thread still runs, after quiesce has turned the path off
 * and waited for the handlers inside it. Application threads need no
 * count: none may call into netvm while it finalizes. */
#include "svc/sync/sync_int.h"
#include "core/internal.h"   /* nv_in_handler */

#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>

struct nv_sync_peer_nodes {
    _Atomic int state;                /* 0: not looked at; 1: mapped; 2: not mapped */
    netvm_rseg_t *rseg;
    struct nv_sync_shnode *base;
};
enum { PN_UNKNOWN, PN_MAPPED, PN_NONE };

void nv_sync_nodes_make(struct nv_sync_state *st)
{
    size_t len = NV_SYNC_NODES * sizeof *st->sh;
    void *p = NULL;
    size_t map_len = 0;
    netvm_seg_t *seg = NULL;
    if (nv_alloc_shared_kept(st->ctx, len, NETVM_RWA, NV_SYNC_NODES_SEG, &p, &map_len, &seg) == NETVM_OK) {
        st->sh = p;
        st->sh_map_len = map_len;
        st->sh_seg = seg;
    } else {
        /* no peer stores into them: messages only */
        st->sh = aligned_alloc(64, len);
        if (st->sh)
            memset(st->sh, 0, len);
    }
    int n = netvm_size(st->ctx);
    st->peer_nodes = n > 0 ? calloc((size_t)n, sizeof *st->peer_nodes) : NULL;
    st->npeer_nodes = st->peer_nodes ? n : 0;
}

void nv_sync_nodes_free(struct nv_sync_state *st)
{
    /* the imports went with netvm_finalize (or were never made) */
    free(st->peer_nodes);
    st->peer_nodes = NULL;
    st->npeer_nodes = 0;
    if (st->sh && st->sh_map_len)
        munmap(st->sh, st->sh_map_len);
    else
        free(st->sh);
    st->sh = NULL;
}

void nv_sync_direct_off(struct nv_sync_state *st)
{
    atomic_store(&st->direct_off, 1);
    while (atomic_load(&st->direct_users))
        sched_yield();
}

static int map_peer(struct nv_sync_state *st, struct nv_sync_peer_nodes *pn, int peer)
{
    pthread_mutex_lock(&st->direct_lock);
    int s = atomic_load(&pn->state);
    if (s == PN_UNKNOWN && !atomic_load(&st->direct_off)) {
        netvm_rseg_t *r = NULL;
        s = PN_NONE;
        /* only the shm link maps, and its import reads the peer's table
         * here (elsewhere an import is a round trip, which a stopped peer
         * would hold up for NETVM_TIMEOUT, for nothing). The ref came from
         * the peer's state, which exported its nodes when it was made:
         * not found means it could not. */
        if (nv_sync_on_shm(st, peer) && netvm_import(st->ctx, peer, NV_SYNC_NODES_SEG, &r) == NETVM_OK) {
            struct nv_sync_shnode *base = netvm_ptr(r, 0);
            if (base && netvm_rseg_len(r) >= NV_SYNC_NODES * sizeof *base && (uintptr_t)base % 64 == 0) {
                pn->rseg = r;
                pn->base = base;
                s = PN_MAPPED;
            } else {
                netvm_release(r);
            }
        }
        atomic_store_explicit(&pn->state, s, memory_order_release);
    }
    pthread_mutex_unlock(&st->direct_lock);
    return s;
}

struct nv_sync_shnode *nv_sync_direct_enter(struct nv_sync_state *st, uint64_t ref)
{
    int peer = nv_sync_ref_peer(ref);
    unsigned slot = nv_sync_ref_slot(ref);
    if (peer < 0 || peer >= st->npeer_nodes || slot >= NV_SYNC_NODES)
        return NULL;
    int counted = nv_in_handler;
    if (counted)
        atomic_fetch_add(&st->direct_users, 1);
    if (!atomic_load(&st->direct_off)) {
        struct nv_sync_peer_nodes *pn = &st->peer_nodes[peer];
        int s = atomic_load_explicit(&pn->state, memory_order_acquire);
        if (s == PN_UNKNOWN)
            s = map_peer(st, pn, peer);
        if (s == PN_MAPPED)
            return &pn->base[slot];
    }
    if (counted)
        atomic_fetch_sub(&st->direct_users, 1);
    return NULL;
}

void nv_sync_direct_leave(struct nv_sync_state *st)
{
    if (nv_in_handler)
        atomic_fetch_sub(&st->direct_users, 1);
}
