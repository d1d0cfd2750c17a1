/* Imported segments: the initiator's cached descriptor of a peer's segment.
 * The link validates it against the target's table on every access, so a
 * revoked segment fails at once; once seen revoked it stays failed. An
 * import holds a reference on its peer: the peer's link state (a mapping
 * of its memory) stays until the import is released, even after the peer
 * has left. */
#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

/* Ask the target itself (links that cannot read its table): an active
 * message answered with the segment's descriptor. */
static netvm_status_t import_by_message(netvm_ctx_t *ctx, struct nv_peer *p, const char *name, uint32_t slot,
                                        uint64_t key, struct nv_rdesc *d)
{
    struct netvm_req *q;
    netvm_status_t st = nv_reserve_req(ctx, p, NULL, &q);
    if (st != NETVM_OK)
        return st;
    q->import = d;
    uint64_t a[2] = { slot, key };
    st = nv_am_call(ctx, p, q, NV_AMH_IMPORT, a, name ? 0 : 2, name, name ? strlen(name) : 0, 0);
    st = nv_finish_req(ctx, q, st);
    if (st == NETVM_OK && p->lp.link->ops->import_done)
        st = p->lp.link->ops->import_done(p->lp.link, d);
    return st;
}

static netvm_status_t do_import(netvm_ctx_t *ctx, int peer, const char *name, uint32_t slot,
                                uint64_t key, netvm_rseg_t **out)
{
    if (!ctx || !out)
        return NETVM_ERR_INVAL;
    *out = NULL;
    struct nv_peer *p;
    netvm_status_t st = nv_peer_get(ctx, peer, &p);
    if (st != NETVM_OK)
        return st;
    struct nv_link *l = p->lp.link;
    if (atomic_load(&p->dead) || !l) {
        nv_peer_put(p);
        return NETVM_ERR_PEER;
    }
    int native = (l->ops->caps.flags & NV_LCAP_IMPORT) != 0;
    if (!native && nv_in_handler) {
        nv_peer_put(p);
        return NETVM_ERR_STATE;   /* it would wait for the target */
    }
    struct netvm_rseg *r = calloc(1, sizeof *r);
    if (!r) {
        nv_peer_put(p);
        return NETVM_ERR_NOMEM;
    }
    r->ctx = ctx;
    r->peer = p;
    r->link = l;
    if (native) {
        st = l->ops->import(l, &p->lp, name, slot, key, &r->d);
        r->reg_base = r->d.addr;
    } else {
        memset(&r->d, 0, sizeof r->d);
        r->d.peer = &p->lp;
        st = import_by_message(ctx, p, name, slot, key, &r->d);
        r->d.peer = &p->lp;
        r->reg_base = r->d.addr;   /* the target's address, for registration */
        if (!p->lp.link || !p->lp.link->ops->mr_key)
            r->d.addr = 0;         /* only links with ops->mr_key address the target's memory */
    }
    if (st != NETVM_OK) {
        free(r);
        nv_peer_put(p);
        return st;
    }
    pthread_mutex_lock(&ctx->rseg_lock);
    r->next = ctx->rsegs;
    if (ctx->rsegs)
        ctx->rsegs->prev = r;
    ctx->rsegs = r;
    pthread_mutex_unlock(&ctx->rseg_lock);
    *out = r;
    return NETVM_OK;
}

netvm_status_t netvm_import(netvm_ctx_t *ctx, int peer, const char *name, netvm_rseg_t **out)
{
    if (!name || !*name || strlen(name) > 63)
        return NETVM_ERR_INVAL;
    return do_import(ctx, peer, name, 0, 0, out);
}

netvm_status_t netvm_import_handle(netvm_ctx_t *ctx, const netvm_seg_handle_t *h, netvm_rseg_t **out)
{
    if (!h)
        return NETVM_ERR_INVAL;
    if (ctx && (h->rank < 0 || h->rank >= ctx->size))
        return NETVM_ERR_RANK;
    return do_import(ctx, h->rank, NULL, h->slot, h->key, out);
}

netvm_status_t netvm_import_handle_peer(netvm_ctx_t *ctx, int peer, const netvm_seg_handle_t *h,
                                        netvm_rseg_t **out)
{
    if (!h)
        return NETVM_ERR_INVAL;
    return do_import(ctx, peer, NULL, h->slot, h->key, out);
}

netvm_status_t netvm_release(netvm_rseg_t *r)
{
    if (!r)
        return NETVM_ERR_INVAL;
    netvm_ctx_t *ctx = r->ctx;
    /* requests on it may still be in flight; they complete by themselves,
     * except those that will match its remote tripwires: wait for them */
    if (r->rtrip_cap) {
        nv_progress_wait_idle(ctx, r->peer);
        nv_rtrip_release(r);
    }
    if (r->link->ops->release)
        r->link->ops->release(r->link, &r->d);
    pthread_mutex_lock(&ctx->rseg_lock);
    if (r->prev)
        r->prev->next = r->next;
    else
        ctx->rsegs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    pthread_mutex_unlock(&ctx->rseg_lock);
    nv_peer_put(r->peer);
    free(r);
    return NETVM_OK;
}

size_t   netvm_rseg_len(const netvm_rseg_t *r)       { return r ? r->d.len : 0; }
unsigned netvm_rseg_rights(const netvm_rseg_t *r)    { return r ? r->d.rights : 0; }
int      netvm_rseg_is_mapped(const netvm_rseg_t *r) { return r && (r->d.flags & NV_RDESC_MAPPED); }
int      netvm_rseg_peer(const netvm_rseg_t *r)      { return r ? nv_peer_id(r->peer) : -1; }

void *netvm_ptr(netvm_rseg_t *r, size_t off)
{
    if (!r || !(r->d.flags & NV_RDESC_MAPPED) || off >= r->d.len)
        return NULL;
    return r->d.mapped + off;
}
