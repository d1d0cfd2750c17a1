/* Put, get and atomics. Core checks bounds and rights against the cached
 * descriptor before any byte moves (the link re-checks that the target still
 * publishes it); what the link cannot do natively, core emulates here, in one
 * place, with active messages the target executes. */
#include "core/internal.h"
#include "util/time.h"
#include "wire/am.h"

#include <string.h>

static inline netvm_status_t check(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, size_t len,
                                   unsigned need, unsigned flags)
{
    if (!ctx || !r || r->ctx != ctx || (flags & ~(unsigned)NETVM_F_UNORDERED))
        return NETVM_ERR_INVAL;
    if (!nv_range_ok(off, len, r->d.len))
        return NETVM_ERR_BOUNDS;
    if ((r->d.rights & need) != need)
        return NETVM_ERR_RIGHTS;
    return NETVM_OK;
}

netvm_status_t netvm_put(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off,
                         const void *src, size_t len, unsigned flags)
{
    netvm_status_t st = check(ctx, dst, off, len, NETVM_WRITE, flags);
    if (st != NETVM_OK || len == 0)
        return st;
    if (!src)
        return NETVM_ERR_INVAL;
    return dst->link->ops->put(dst->link, &dst->d, off, src, len);
}

netvm_status_t netvm_get(netvm_ctx_t *ctx, void *dst, netvm_rseg_t *src, size_t off,
                         size_t len, unsigned flags)
{
    netvm_status_t st = check(ctx, src, off, len, NETVM_READ, flags);
    if (st != NETVM_OK || len == 0)
        return st;
    if (!dst)
        return NETVM_ERR_INVAL;
    return src->link->ops->get(src->link, &src->d, off, dst, len);
}

netvm_status_t netvm_put_imm(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off,
                             uint64_t value, unsigned flags)
{
    if (off & 7)
        return NETVM_ERR_INVAL;
    return netvm_put(ctx, dst, off, &value, sizeof value, flags);
}

/* Puts and gets on the links of today complete before they return, so the
 * nonblocking forms complete at once; the shape is there for links that
 * pipeline. */
netvm_status_t netvm_put_nb(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off,
                            const void *src, size_t len, unsigned flags, netvm_req_t **req)
{
    if (!req)
        return NETVM_ERR_INVAL;
    *req = NULL;
    return netvm_put(ctx, dst, off, src, len, flags);
}

netvm_status_t netvm_get_nb(netvm_ctx_t *ctx, void *dst, netvm_rseg_t *src, size_t off,
                            size_t len, unsigned flags, netvm_req_t **req)
{
    if (!req)
        return NETVM_ERR_INVAL;
    *req = NULL;
    return netvm_get(ctx, dst, src, off, len, flags);
}

/* Wait for a free request and a credit towards rank. */
static netvm_status_t reserve(netvm_ctx_t *ctx, int rank, uint64_t *result, struct netvm_req **out)
{
    struct nv_peer *p = &ctx->peers[rank];
    for (;;) {
        if (atomic_load(&p->dead))
            return NETVM_ERR_PEER;
        if (atomic_load_explicit(&p->outstanding, memory_order_acquire) < ctx->credits) {
            struct netvm_req *r = nv_req_alloc(ctx, rank, result);
            if (r) {
                *out = r;
                return NETVM_OK;
            }
        }
        /* complete the oldest request to this peer to free a credit */
        for (uint32_t i = 0; i < ctx->nreqs; i++) {
            struct netvm_req *r = &ctx->reqs[i];
            if (atomic_load(&r->state) == NV_REQ_PENDING && r->rank == rank) {
                nv_progress_wait_req(ctx, r);
                break;
            }
        }
        p->link->ops->poll(p->link);
    }
}

netvm_status_t netvm_atomic_nb(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off,
                               netvm_atomic_op_t op, uint64_t operand, uint64_t compare,
                               uint64_t *result, netvm_req_t **reqp)
{
    if (!reqp)
        return NETVM_ERR_INVAL;
    *reqp = NULL;
    netvm_status_t st = check(ctx, r, off, 8, NETVM_ATOMIC, 0);
    if (st != NETVM_OK)
        return st;
    if ((unsigned)op >= NETVM_AOP_COUNT || ((r->d.addr + off) & 7))
        return NETVM_ERR_INVAL;
    if (r->d.flags & NV_RDESC_ATOMIC) {
        uint64_t old;
        st = r->link->ops->atomic(r->link, &r->d, off, op, operand, compare, &old);
        if (st == NETVM_OK && result)
            *result = old;
        return st;
    }
    struct netvm_req *q;
    st = reserve(ctx, r->d.rank, result, &q);
    if (st != NETVM_OK)
        return st;
    struct nv_am m = { .kind = NV_AM_ATOMIC, .op = (uint8_t)op, .src_rank = ctx->rank,
                       .req_id = nv_req_id(q), .slot = r->d.slot, .key = r->d.key,
                       .off = off, .operand = operand, .compare = compare };
    uint8_t buf[NV_AM_SIZE];
    nv_am_encode(&m, buf);
    st = r->link->ops->am_send(r->link, r->d.rank, buf, 0);
    if (st != NETVM_OK) {
        nv_req_complete(q, st, 0);
        nv_req_free(q);
        return st;
    }
    *reqp = q;
    return NETVM_OK;
}

netvm_status_t netvm_atomic(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, netvm_atomic_op_t op,
                            uint64_t operand, uint64_t compare, uint64_t *result)
{
    netvm_req_t *q;
    netvm_status_t st = netvm_atomic_nb(ctx, r, off, op, operand, compare, result, &q);
    if (st != NETVM_OK || !q)
        return st;
    return netvm_wait(&q);
}

static netvm_status_t drain(netvm_ctx_t *ctx, int rank)
{
    if (!ctx)
        return NETVM_ERR_INVAL;
    if (rank >= ctx->size)
        return NETVM_ERR_RANK;
    nv_progress_wait_idle(ctx, rank);
    int lo = rank < 0 ? 0 : rank, hi = rank < 0 ? ctx->size : rank + 1;
    netvm_status_t st = NETVM_OK;
    for (int p = lo; p < hi; p++) {
        netvm_status_t s = ctx->peers[p].link->ops->flush(ctx->peers[p].link, p);
        if (s != NETVM_OK && st == NETVM_OK)
            st = s;
        if (rank >= 0 && atomic_load(&ctx->peers[p].dead))
            st = NETVM_ERR_PEER;
    }
    return st;
}

/* Every operation is visible at the target once it completes, so ordering
 * and remote completion are the same wait today: for the requests a target
 * executes. */
netvm_status_t netvm_fence(netvm_ctx_t *ctx, int rank) { return drain(ctx, rank); }
netvm_status_t netvm_flush(netvm_ctx_t *ctx, int rank) { return drain(ctx, rank); }
