/* Imported segments: the initiator's cached descriptor of a peer's segment.
 * The link validates it against the target's table on every access, so a
 * revoked segment fails at once; once seen revoked it stays failed. */
#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

static netvm_status_t do_import(netvm_ctx_t *ctx, int rank, const char *name, uint32_t slot,
                                uint64_t key, netvm_rseg_t **out)
{
    if (!ctx || !out)
        return NETVM_ERR_INVAL;
    if (rank < 0 || rank >= ctx->size)
        return NETVM_ERR_RANK;
    if (atomic_load(&ctx->peers[rank].dead))
        return NETVM_ERR_PEER;
    struct netvm_rseg *r = calloc(1, sizeof *r);
    if (!r)
        return NETVM_ERR_NOMEM;
    r->ctx = ctx;
    r->link = nv_link_to(ctx, rank);
    netvm_status_t st;
    if (r->link->ops->caps & NV_LINK_CAP_ASYNC) {
        struct netvm_req *q;
        st = nv_reserve_req(ctx, rank, NULL, &q);
        if (st == NETVM_OK)
            st = nv_finish_req(ctx, q, r->link->ops->import(r->link, rank, name, slot, key, &r->d, q,
                                                               nv_req_id(q)));
    } else {
        st = r->link->ops->import(r->link, rank, name, slot, key, &r->d, NULL, 0);
    }
    if (st != NETVM_OK) {
        free(r);
        return st;
    }
    r->next = ctx->rsegs;
    if (ctx->rsegs)
        ctx->rsegs->prev = r;
    ctx->rsegs = r;
    *out = r;
    return NETVM_OK;
}

netvm_status_t netvm_import(netvm_ctx_t *ctx, int rank, const char *name, netvm_rseg_t **out)
{
    if (!name || !*name)
        return NETVM_ERR_INVAL;
    return do_import(ctx, rank, name, 0, 0, out);
}

netvm_status_t netvm_import_handle(netvm_ctx_t *ctx, const netvm_seg_handle_t *h, netvm_rseg_t **out)
{
    if (!h)
        return NETVM_ERR_INVAL;
    return do_import(ctx, h->rank, NULL, h->slot, h->key, out);
}

netvm_status_t netvm_release(netvm_rseg_t *r)
{
    if (!r)
        return NETVM_ERR_INVAL;
    netvm_ctx_t *ctx = r->ctx;
    /* requests on it may still be in flight; they complete by themselves,
     * except those that will match its remote tripwires: wait for them */
    if (r->rtrip_cap) {
        nv_progress_wait_idle(ctx, r->d.rank);
        nv_rtrip_release(r);
    }
    r->link->ops->release(r->link, &r->d);
    if (r->prev)
        r->prev->next = r->next;
    else
        ctx->rsegs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    free(r);
    return NETVM_OK;
}

size_t   netvm_rseg_len(const netvm_rseg_t *r)       { return r ? r->d.len : 0; }
unsigned netvm_rseg_rights(const netvm_rseg_t *r)    { return r ? r->d.rights : 0; }
int      netvm_rseg_is_mapped(const netvm_rseg_t *r) { return r && (r->d.flags & NV_RDESC_MAPPED); }
