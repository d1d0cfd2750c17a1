/* Rendezvous: every operation first asks its target to pin the buckets it
 * touches, one round trip, as the Firehose paper's baseline does. With
 * unpin, the holds an operation took are given back once it completes;
 * the release must not block (an operation may complete on the progress
 * thread), so it is queued and rides on this peer's next pin request, in
 * the same round trip. rendezvous-keep never gives a hold back: the target
 * counts one per bucket and peer however often it is asked. */
#include "reg/reg_int.h"

#include <stdlib.h>

static struct rdv_peer *rdv_peer_of(struct nv_reg *r, int peer, int create)
{
    uint64_t pa = (uint64_t)(uint32_t)peer;
    struct rdv_peer *rp = (struct rdv_peer *)nv_rmap_find(&r->rdv_peers, pa, 0);
    if (rp || !create)
        return rp;
    rp = calloc(1, sizeof *rp);
    if (!rp)
        return NULL;
    rp->node.a = pa;
    if (nv_rmap_add(&r->rdv_peers, &rp->node) != NETVM_OK) {
        free(rp);
        return NULL;
    }
    return rp;
}

netvm_status_t nv_rdv_acquire(struct nv_reg *r, int peer, const void *seg, uint64_t addr, uint64_t len,
                              struct nv_reg_key *key)
{
    uint64_t bs = r->p.bucket, b0 = nv_reg_bucket_of(r, addr), b1 = nv_reg_bucket_of(r, addr + len - 1);
    if ((b1 - b0) / bs + 1 > NV_REG_SPAN_BUCKETS)
        return NETVM_ERR_INVAL;
    uint64_t rel[NV_REG_SPAN_BUCKETS];
    unsigned nrel = 0;
    pthread_mutex_lock(&r->ilock);
    struct rdv_peer *rp = rdv_peer_of(r, peer, 0);
    while (rp && rp->nrel && nrel < NV_REG_SPAN_BUCKETS)
        rel[nrel++] = rp->rel[--rp->nrel];
    r->misses++;
    r->moves++;
    pthread_mutex_unlock(&r->ilock);
    struct nv_reg_range acq = { b0, b1 - b0 + bs };
    unsigned flags = r->p.kind == NV_REG_RENDEZVOUS_KEEP ? NV_REG_MOVE_KEEP : 0;
    /* a failed move's releases are lost with it: they were for a peer
     * that is gone or refusing, whose pin table forgets the peer */
    struct nv_reg_key k = { 0, 0 };
    netvm_status_t st = r->net.move(r->net.arg, peer, seg, flags, rel, nrel, &acq, 1, r->keyed ? &k : NULL);
    if (key)
        *key = k;   /* keyed: the acquire is one bucket (nv_reg_max_span) */
    return st;
}

void nv_rdv_release(struct nv_reg *r, int peer, uint64_t addr, uint64_t len)
{
    if (r->p.kind == NV_REG_RENDEZVOUS_KEEP)
        return;
    uint64_t bs = r->p.bucket, end = addr + len;
    pthread_mutex_lock(&r->ilock);
    struct rdv_peer *rp = rdv_peer_of(r, peer, 1);
    for (uint64_t b = nv_reg_bucket_of(r, addr); rp && b < end; b += bs) {
        if (rp->nrel == rp->cap) {
            unsigned cap = rp->cap ? rp->cap * 2 : 64;
            uint64_t *v = realloc(rp->rel, cap * sizeof *v);
            if (!v)
                break;   /* the hold stays at the target until the peer leaves */
            rp->rel = v;
            rp->cap = cap;
        }
        rp->rel[rp->nrel++] = b;
    }
    pthread_mutex_unlock(&r->ilock);
}

void nv_rdv_peer_gone(struct nv_reg *r, int peer)
{
    pthread_mutex_lock(&r->ilock);
    struct rdv_peer *rp = rdv_peer_of(r, peer, 0);
    if (rp)
        rp->nrel = 0;
    pthread_mutex_unlock(&r->ilock);
}

void nv_rdv_fini(struct nv_reg *r)
{
    for (size_t i = 0; i < r->rdv_peers.cap; i++)
        for (struct nv_rmap_node *x = r->rdv_peers.v[i], *nx; x; x = nx) {
            nx = x->next;
            free(((struct rdv_peer *)x)->rel);
            free(x);
        }
    nv_rmap_free(&r->rdv_peers);
}
