/* Notifications (EXTOLL, NetVM): operations that carry them, the
 * notification put, and counting notifications. Where the link can reach
 * the target's endpoint block (shm) the initiator posts itself; otherwise an
 * active message asks the target's progress engine to. */
#include "core/internal.h"
#include "util/log.h"

netvm_status_t netvm_put_notify(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off, const void *src,
                                size_t len, unsigned flags, uint64_t tag)
{
    return nv_put(ctx, dst, off, src, len, flags, 0, tag, 0);
}

netvm_status_t netvm_get_notify(netvm_ctx_t *ctx, void *dst, netvm_rseg_t *src, size_t off,
                                size_t len, unsigned flags, uint64_t tag)
{
    /* without one of them the caller could never learn the data is there */
    if (!(flags & (NETVM_F_NOTIFY_REQUESTER | NETVM_F_NOTIFY_COMPLETER)))
        return NETVM_ERR_INVAL;
    netvm_req_t *q;
    return nv_get(ctx, dst, src, off, len, flags, tag, &q);
}

netvm_status_t netvm_atomic_notify(netvm_ctx_t *ctx, netvm_rseg_t *rseg, size_t off,
                                   netvm_atomic_op_t op, uint64_t operand, uint64_t compare,
                                   uint64_t *result, unsigned flags, uint64_t tag)
{
    if (result && !(flags & NETVM_F_NOTIFY_REQUESTER))
        return NETVM_ERR_INVAL;   /* the result's arrival would go unreported */
    /* no request back: nobody waits for the operation but its events */
    return nv_atomic(ctx, rseg, off, op, operand, compare, result, flags, tag, NULL);
}

/* A notification put or a counter increment: straight into the target's
 * block, or an active message its progress engine acts on. */
static netvm_status_t deliver(netvm_ctx_t *ctx, int peer, unsigned kind, uint32_t id, uint64_t value)
{
    if (!ctx)
        return NETVM_ERR_INVAL;
    struct nv_peer *p;
    netvm_status_t st = nv_peer_get(ctx, peer, &p);
    if (st != NETVM_OK)
        return st;
    struct nv_link *l = p->lp.link;
    if (atomic_load(&p->dead) || !l) {
        st = NETVM_ERR_PEER;
    } else if ((l->ops->caps.flags & NV_LCAP_NOTIFY) &&
               (st = l->ops->notify(l, &p->lp, kind, id, value)) != NETVM_ERR_UNSUPPORTED) {
        /* delivered (or failed) by the link itself */
    } else {
        struct nv_am_hdr h = { .handler = kind == NV_EP_COUNTER ? NV_AMH_COUNT : NV_AMH_NOTIFY };
        if (kind == NV_EP_COUNTER) {
            h.nargs = 2;
            h.args[0] = id;
            h.args[1] = value;
        } else {
            h.nargs = 1;
            h.args[0] = value;
        }
        st = nv_am_send(ctx, p, &h, NULL, NULL, NV_AMS_NOW);
    }
    nv_peer_put(p);
    return st;
}

netvm_status_t netvm_notify(netvm_ctx_t *ctx, int rank, uint64_t value)
{
    return deliver(ctx, rank, NETVM_EV_NOTIFY, 0, value);
}

netvm_status_t netvm_counter_add(netvm_ctx_t *ctx, int rank, uint32_t counter, uint64_t n)
{
    /* every rank has the same NETVM_COUNTERS; the target checks again */
    if (ctx && counter >= ctx->ncounters)
        return NETVM_ERR_INVAL;
    if (ctx && n == 0)
        return NETVM_OK;
    return deliver(ctx, rank, NV_EP_COUNTER, counter, n);
}

static void deliver_now(netvm_ctx_t *ctx, uint32_t counter, uint64_t n)
{
    struct nv_counter_handler *h = &ctx->handlers[counter];
    if (h->fn) {
        h->fn(ctx, counter, n, h->arg);
    } else {
        netvm_event_t ev = { .type = NETVM_EV_COUNTER, .rank = -1, .id = counter, .value = n };
        if (nv_evfifo_push(&ctx->stash, &ev) != 0)
            nv_error("out of memory for a counter event: %llu increments of counter %u lost",
                     (unsigned long long)n, counter);
    }
}

netvm_status_t netvm_counter_arm(netvm_ctx_t *ctx, uint32_t counter, netvm_counter_fn fn, void *arg)
{
    if (!ctx || counter >= ctx->ncounters)
        return NETVM_ERR_INVAL;
    ctx->handlers[counter].fn = fn;
    ctx->handlers[counter].arg = arg;
    uint64_t n = nv_ep_counter_arm(&ctx->ep, counter);
    if (n)
        deliver_now(ctx, counter, n);
    return NETVM_OK;
}

netvm_status_t netvm_counter_ack(netvm_ctx_t *ctx, uint32_t counter)
{
    if (!ctx || counter >= ctx->ncounters)
        return NETVM_ERR_INVAL;
    uint64_t n = nv_ep_counter_arm(&ctx->ep, counter);
    if (n)
        deliver_now(ctx, counter, n);
    return NETVM_OK;
}
