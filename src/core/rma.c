/* Put, get and atomics. Core checks bounds and rights against the cached
 * descriptor before any byte moves (the link re-checks that the target still
 * publishes it); what the link cannot do natively, core emulates here, in one
 * place, with active messages the target executes. Links that answer later
 * (NV_LINK_CAP_ASYNC: tcp) get a request as the token of their operation. */
#include "core/internal.h"
#include "util/time.h"
#include "wire/am.h"

#include <string.h>

/* One link operation moves at most this much; larger ones are split. */
#define MAX_PIECE (1ull << 30)

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

static inline int is_async(const netvm_rseg_t *r)
{
    return (r->link->ops->caps & NV_LINK_CAP_ASYNC) != 0;
}

netvm_status_t nv_reserve_req(netvm_ctx_t *ctx, int rank, uint64_t *result, struct netvm_req **out)
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
        p->link->ops->poll(p->link, rank);
    }
}

netvm_status_t nv_finish_req(netvm_ctx_t *ctx, struct netvm_req *q, netvm_status_t st)
{
    if (st == NV_LINK_PENDING) {
        st = nv_progress_wait_req(ctx, q);
    } else {
        nv_req_complete(q, st, 0);
    }
    nv_req_free(q);
    return st;
}

/* Start an operation on an async link: *reqp is the pending request, or
 * NULL when it finished at once with the returned status. */
static netvm_status_t started(struct netvm_req *q, netvm_status_t st, netvm_req_t **reqp)
{
    if (st == NV_LINK_PENDING) {
        *reqp = q;
        return NETVM_OK;
    }
    nv_req_complete(q, st, 0);
    nv_req_free(q);
    return st;
}

static netvm_status_t put_piece(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, const uint8_t *src,
                                size_t len, int remote)
{
    if (!remote || !is_async(r))
        return r->link->ops->put(r->link, &r->d, off, src, len, remote, NULL, 0);
    struct netvm_req *q;
    netvm_status_t st = nv_reserve_req(ctx, r->d.rank, NULL, &q);
    if (st != NETVM_OK)
        return st;
    return nv_finish_req(ctx, q, r->link->ops->put(r->link, &r->d, off, src, len, 1, q, nv_req_id(q)));
}

/* remote: return at remote completion (netvm_put), else at local completion */
static netvm_status_t do_put(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, const void *src, size_t len,
                             unsigned flags, int remote)
{
    netvm_status_t st = check(ctx, r, off, len, NETVM_WRITE, flags);
    if (st != NETVM_OK || len == 0)
        return st;
    if (!src)
        return NETVM_ERR_INVAL;
    const uint8_t *p = src;
    while (len > MAX_PIECE && st == NETVM_OK) {
        /* every piece but the last completes locally; the last one's remote
         * completion covers them all (one ordered stream per peer) */
        st = put_piece(ctx, r, off, p, MAX_PIECE, 0);
        off += MAX_PIECE;
        p += MAX_PIECE;
        len -= MAX_PIECE;
    }
    return st == NETVM_OK ? put_piece(ctx, r, off, p, len, remote) : st;
}

netvm_status_t netvm_put(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off,
                         const void *src, size_t len, unsigned flags)
{
    return do_put(ctx, dst, off, src, len, flags, 1);
}

/* Local completion is the point where src may be reused: the link has the
 * bytes (in the socket, or at the target). Remote completion: netvm_flush. */
netvm_status_t netvm_put_nb(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off,
                            const void *src, size_t len, unsigned flags, netvm_req_t **req)
{
    if (!req)
        return NETVM_ERR_INVAL;
    *req = NULL;
    return do_put(ctx, dst, off, src, len, flags, 0);
}

netvm_status_t netvm_put_imm(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off,
                             uint64_t value, unsigned flags)
{
    if (off & 7)
        return NETVM_ERR_INVAL;
    return netvm_put(ctx, dst, off, &value, sizeof value, flags);
}

netvm_status_t netvm_get_nb(netvm_ctx_t *ctx, void *dst, netvm_rseg_t *src, size_t off,
                            size_t len, unsigned flags, netvm_req_t **req)
{
    if (!req)
        return NETVM_ERR_INVAL;
    *req = NULL;
    netvm_status_t st = check(ctx, src, off, len, NETVM_READ, flags);
    if (st != NETVM_OK || len == 0)
        return st;
    if (!dst)
        return NETVM_ERR_INVAL;
    if (!is_async(src))
        return src->link->ops->get(src->link, &src->d, off, dst, len, NULL, 0);
    uint8_t *p = dst;
    while (len > MAX_PIECE) {
        /* all but the last piece are waited for here */
        netvm_req_t *q;
        st = netvm_get_nb(ctx, p, src, off, MAX_PIECE, flags, &q);
        if (st == NETVM_OK)
            st = netvm_wait(&q);
        if (st != NETVM_OK)
            return st;
        off += MAX_PIECE;
        p += MAX_PIECE;
        len -= MAX_PIECE;
    }
    struct netvm_req *q;
    st = nv_reserve_req(ctx, src->d.rank, NULL, &q);
    if (st != NETVM_OK)
        return st;
    return started(q, src->link->ops->get(src->link, &src->d, off, p, len, q, nv_req_id(q)), req);
}

netvm_status_t netvm_get(netvm_ctx_t *ctx, void *dst, netvm_rseg_t *src, size_t off,
                         size_t len, unsigned flags)
{
    if (src && !is_async(src)) {
        /* the direct path, without a request */
        netvm_status_t st = check(ctx, src, off, len, NETVM_READ, flags);
        if (st != NETVM_OK || len == 0)
            return st;
        return dst ? src->link->ops->get(src->link, &src->d, off, dst, len, NULL, 0) : NETVM_ERR_INVAL;
    }
    netvm_req_t *q;
    netvm_status_t st = netvm_get_nb(ctx, dst, src, off, len, flags, &q);
    if (st != NETVM_OK || !q)
        return st;
    return netvm_wait(&q);
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
    /* the emulation: an active message the target's progress engine runs */
    struct netvm_req *q;
    st = nv_reserve_req(ctx, r->d.rank, result, &q);
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

/* remote: also wait for the links' own remote completion (flush); else only
 * for the requests targets execute (fence: each link keeps issue order) */
static netvm_status_t drain(netvm_ctx_t *ctx, int rank, int remote)
{
    if (!ctx)
        return NETVM_ERR_INVAL;
    if (rank >= ctx->size)
        return NETVM_ERR_RANK;
    nv_progress_wait_idle(ctx, rank);
    int lo = rank < 0 ? 0 : rank, hi = rank < 0 ? ctx->size : rank + 1;
    netvm_status_t st = NETVM_OK;
    for (int p = lo; p < hi; p++) {
        struct nv_link *l = ctx->peers[p].link;
        netvm_status_t s = NETVM_OK;
        if (atomic_load(&ctx->peers[p].dead)) {
            s = rank >= 0 ? NETVM_ERR_PEER : NETVM_OK;
        } else if (!(l->ops->caps & NV_LINK_CAP_ASYNC)) {
            s = l->ops->flush(l, p, NULL, 0);
        } else if (remote) {
            struct netvm_req *q;
            s = nv_reserve_req(ctx, p, NULL, &q);
            if (s == NETVM_OK)
                s = nv_finish_req(ctx, q, l->ops->flush(l, p, q, nv_req_id(q)));
            if (s == NETVM_ERR_PEER && rank < 0)
                s = NETVM_OK;   /* a dead peer does not fail a flush of everyone */
        }
        if (s != NETVM_OK && st == NETVM_OK)
            st = s;
    }
    return st;
}

netvm_status_t netvm_fence(netvm_ctx_t *ctx, int rank) { return drain(ctx, rank, 0); }
netvm_status_t netvm_flush(netvm_ctx_t *ctx, int rank) { return drain(ctx, rank, 1); }
