/* Put, get and atomics. Core checks bounds and rights against the cached
 * descriptor before any byte moves (the link re-checks that the target still
 * publishes it); what the link cannot do natively, core emulates here, in one
 * place, with active messages the target executes. Links that answer later
 * (without NV_LCAP_SYNC: tcp) get a request as the token of their operation.
 *
 * Every operation may carry notifications (netvm/events.h): the target's
 * (completer, responder) travel with it to the link as a note; this
 * process's own (requester, a get's completer, remote tripwires) are posted
 * here when the operation completes, or, for one that completes later, by
 * whoever completes its detached request. */
#include "core/internal.h"
#include "core/svc.h"
#include "reg/reg.h"
#include "util/log.h"
#include "util/time.h"

#include <string.h>

/* One link operation moves at most this much; larger ones are split. */
#define MAX_PIECE (1ull << 30)

#define OP_FLAGS (NETVM_F_UNORDERED | NETVM_F_NOTIFY_REQUESTER | NETVM_F_NOTIFY_COMPLETER | \
                  NETVM_F_NOTIFY_RESPONDER)

static inline netvm_status_t check(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, size_t len,
                                   unsigned need, unsigned flags)
{
    if (!ctx || !r || r->ctx != ctx || (flags & ~(unsigned)OP_FLAGS))
        return NETVM_ERR_INVAL;
    /* core knows first that a peer left or died (it posts the
     * NETVM_EV_PEER_DOWN): a mapped path's link may learn it later */
    if (atomic_load_explicit(&r->peer->dead, memory_order_acquire))
        return NETVM_ERR_PEER;
    if (!nv_range_ok(off, len, r->d.len))
        return NETVM_ERR_BOUNDS;
    if ((r->d.rights & need) != need)
        return NETVM_ERR_RIGHTS;
    return NETVM_OK;
}

static inline int is_async(const netvm_rseg_t *r)
{
    return (r->link->ops->caps.flags & NV_LCAP_SYNC) == 0;
}

static int order_kept(void *arg)
{
    struct nv_peer *p = arg;
    return !atomic_load_explicit(&p->ord_inflight, memory_order_acquire) || atomic_load(&p->dead);
}

/* On shm the initiator executes puts and mapped atomics itself, while
 * atomics on memory it cannot map and signals go to the target's progress
 * engine: a direct access issued after one of those waits until it is
 * done, else it could land first (a put after a put-with-signal beating
 * the signal to its word). Only mixed sequences pay; NETVM_F_UNORDERED
 * opts out. */
netvm_status_t nv_rma_keep_order(netvm_ctx_t *ctx, struct nv_peer *p, unsigned flags)
{
    if ((flags & NETVM_F_UNORDERED) || order_kept(p))
        return NETVM_OK;
    if (nv_in_handler)
        return NETVM_ERR_AGAIN;
    netvm_status_t st = nv_progress_wait(ctx, order_kept, p, ctx->timeout_ms, 1);
    return st == NETVM_OK && atomic_load(&p->dead) ? NETVM_ERR_PEER : st;
}

struct credit_wait { netvm_ctx_t *ctx; struct nv_peer *p; };

static int credit_free(void *arg)
{
    struct credit_wait *w = arg;
    return atomic_load_explicit(&w->p->outstanding, memory_order_acquire) < w->ctx->credits ||
           atomic_load(&w->p->dead);
}

netvm_status_t nv_reserve_req(netvm_ctx_t *ctx, struct nv_peer *p, uint64_t *result, struct netvm_req **out)
{
    for (;;) {
        if (atomic_load(&p->dead))
            return NETVM_ERR_PEER;
        if (atomic_load_explicit(&p->outstanding, memory_order_acquire) < ctx->credits) {
            struct netvm_req *r = nv_req_alloc(ctx, p, result);
            if (r) {
                *out = r;
                return NETVM_OK;
            }
        }
        /* a handler must not wait: it defers and tries again */
        if (nv_in_handler)
            return NETVM_ERR_AGAIN;
        /* a request to this peer completes and frees a credit (or the pool
         * has room again) */
        struct credit_wait w = { ctx, p };
        if (nv_progress_wait(ctx, credit_free, &w, ctx->timeout_ms, 1) != NETVM_OK &&
            atomic_load(&p->outstanding) >= ctx->credits) {
            nv_warn("peer %d: %u requests in flight did not complete within NETVM_TIMEOUT", nv_peer_id(p),
                    atomic_load(&p->outstanding));
            return NETVM_ERR_TIMEOUT;
        }
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

/* --- this process's own events of an operation ------------------------------- */

/* What an operation owes this process once complete with status st. */
struct own_ev {
    unsigned kinds;    /* NV_REQEV_* */
    uint64_t tag;
    unsigned flags;    /* the operation's NETVM_F_* */
};

static void post_own(netvm_ctx_t *ctx, struct nv_peer *p, netvm_rseg_t *r, uint64_t off, uint64_t len,
                     unsigned kinds, uint64_t tag, netvm_status_t st)
{
    int rank = nv_peer_id(p);
    if ((kinds & NV_REQEV_RTRIP) && st == NETVM_OK && r)
        nv_rtrip_fire(ctx, r, off, len);
    if (kinds & NV_REQEV_COMPLETER && st == NETVM_OK) {
        struct nv_ep_rec e = { .type = NETVM_EV_COMPLETER, .access = NETVM_TRIP_READ, .rank = rank,
                               .value = tag, .addr = off, .len = len };
        nv_evq_post_local(ctx, &e);
    }
    if (kinds & NV_REQEV_REQUESTER) {
        struct nv_ep_rec e = { .type = NETVM_EV_REQUESTER, .rank = rank, .status = (uint32_t)st,
                               .value = tag, .addr = off, .len = len };
        nv_evq_post_local(ctx, &e);
    }
    if ((kinds & NV_REQEV_ERROR) && st != NETVM_OK)
        nv_peer_async_error(p, st);
}

void nv_req_post_events(struct netvm_req *q)
{
    post_own(q->ctx, q->peer, q->ev_rseg, q->ev_addr, q->ev_len, q->ev_kinds, q->ev_tag, q->status);
}

/* Give q away with what it owes. */
static void detach(struct netvm_req *q, netvm_rseg_t *r, uint64_t off, uint64_t len, const struct own_ev *ev)
{
    q->ev_kinds = ev->kinds;
    q->ev_tag = ev->tag;
    q->ev_rseg = r;
    q->ev_addr = off;
    q->ev_len = len;
    nv_req_detach(q);
}

/* A request's operation on a link, once the request is launched
 * (nv_req_launch): the link's status, or NETVM_ERR_PEER unsent. */
#define ON_LINK(q, call) (nv_req_launch(q) == NETVM_OK ? (call) : NETVM_ERR_PEER)

/* A detached request's operation (use id) was started: it completes by
 * itself. Ended at once, it posts its events (an error is returned
 * instead) and the pool takes it back. */
static netvm_status_t launched(struct netvm_req *q, uint32_t id, netvm_status_t st)
{
    if (st == NV_LINK_PENDING)
        return NETVM_OK;
    nv_req_end_started(q, id, st);
    return st;
}

/* --- put ----------------------------------------------------------------------- */

static netvm_status_t put_piece(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, const uint8_t *src,
                                size_t len, int remote, const struct nv_note *note, const struct own_ev *ev)
{
    struct nv_link *l = r->link;
    if (!is_async(r)) {
        /* complete at the target on return */
        netvm_status_t st = nv_rma_keep_order(ctx, r->peer, ev->flags);
        if (st != NETVM_OK)
            return st;
        st = l->ops->put(l, &r->d, off, src, len, remote, NULL, 0, note);
        if (ev->kinds && st == NETVM_OK)   /* an error is returned, not also posted */
            post_own(ctx, r->peer, r, off, len, ev->kinds, ev->tag, st);
        return st;
    }
    if (!remote && !ev->kinds)
        return l->ops->put(l, &r->d, off, src, len, 0, NULL, 0, note);
    struct netvm_req *q;
    netvm_status_t st = nv_reserve_req(ctx, r->peer, NULL, &q);
    if (st != NETVM_OK)
        return st;
    if (!remote) {
        /* its events come at remote completion, whoever sees it */
        detach(q, r, off, len, ev);
        uint32_t id = nv_req_id(q);
        return launched(q, id, ON_LINK(q, l->ops->put(l, &r->d, off, src, len, 1, q, id, note)));
    }
    st = nv_finish_req(ctx, q, ON_LINK(q, l->ops->put(l, &r->d, off, src, len, 1, q, nv_req_id(q), note)));
    if (ev->kinds && st == NETVM_OK)
        post_own(ctx, r->peer, r, off, len, ev->kinds, ev->tag, st);
    return st;
}

/* --- operations that hold pins at their target (NETVM_REG, src/reg) ------------------ */

/* The piece of [off, off + len) that one hold covers: it ends at a
 * multiple of the strategy's span in the target's addresses. */
static size_t pinned_piece(netvm_ctx_t *ctx, const netvm_rseg_t *r, size_t off, size_t len)
{
    uint64_t span = nv_regc_span(ctx), a = r->reg_base + off;
    uint64_t room = span - (a & (span - 1));
    return len < room ? len : (size_t)room;
}

/* A request that carries the hold on [off, off + len): given back when the
 * request is freed, once the operation completed. d (NULL for operations
 * the link does not address itself): the descriptor the access names. */
static netvm_status_t reserve_held(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, size_t len, uint64_t *result,
                                   struct netvm_req **q, struct nv_rdesc *d)
{
    struct nv_reg_key k;
    netvm_status_t st = nv_regc_acquire(ctx, r, off, len, d && r->link == ctx->reg_link ? &k : NULL);
    if (st != NETVM_OK)
        return st;
    if ((st = nv_reserve_req(ctx, r->peer, result, q)) != NETVM_OK) {
        nv_regc_release(ctx, r, off, len);
        return st;
    }
    (*q)->reg_peer = nv_peer_id(r->peer);
    (*q)->reg_sid = r->d.slot;
    (*q)->reg_addr = r->reg_base + off;
    (*q)->reg_len = len;
    if (d) {
        /* a link whose registrations are the pins names the bucket's
         * (the piece lies in one bucket there: nv_reg_max_span) */
        *d = r->d;
        if (r->link == ctx->reg_link) {
            d->mr_key = k.key;
            d->mr_off = k.base - r->reg_base;
        }
    }
    return NETVM_OK;
}

/* put_piece's async path with a hold: always through a request, so the
 * hold lasts until remote completion */
static netvm_status_t put_piece_held(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, const uint8_t *src,
                                     size_t len, int remote, const struct nv_note *note, const struct own_ev *ev)
{
    struct nv_link *l = r->link;
    struct netvm_req *q;
    struct nv_rdesc d;
    netvm_status_t st = reserve_held(ctx, r, off, len, NULL, &q, &d);
    if (st != NETVM_OK)
        return st;
    if (!remote) {
        detach(q, r, off, len, ev);
        uint32_t id = nv_req_id(q);
        return launched(q, id, ON_LINK(q, l->ops->put(l, &d, off, src, len, 1, q, id, note)));
    }
    st = nv_finish_req(ctx, q, ON_LINK(q, l->ops->put(l, &d, off, src, len, 1, q, nv_req_id(q), note)));
    if (ev->kinds && st == NETVM_OK)
        post_own(ctx, r->peer, r, off, len, ev->kinds, ev->tag, st);
    return st;
}

static netvm_status_t put_held(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, const uint8_t *p, size_t len,
                               unsigned flags, int remote, const struct nv_note *np, struct own_ev *ev)
{
    netvm_status_t st = NETVM_OK;
    size_t n;
    /* each piece but a remote last one completes through a request nobody
     * waits for: its failure goes to the next flush, as an unheld put's
     * does at its target (a quiet put's nowhere, a gated put's through
     * the signal behind it) */
    if (!(np && ((np->flags & NV_NOTE_QUIET) || np->gate)))
        ev->kinds |= NV_REQEV_ERROR;
    while ((n = pinned_piece(ctx, r, off, len)) < len && st == NETVM_OK) {
        st = put_piece_held(ctx, r, off, p, n, 0, np, ev);
        off += n;
        p += n;
        len -= n;
    }
    if (flags & NETVM_F_NOTIFY_REQUESTER)
        ev->kinds |= NV_REQEV_REQUESTER;
    return st == NETVM_OK ? put_piece_held(ctx, r, off, p, len, remote, np, ev) : st;
}

static netvm_status_t get_held(netvm_ctx_t *ctx, void *dst, netvm_rseg_t *src, size_t off, size_t len,
                               const struct nv_note *np, const struct own_ev *ev, netvm_req_t **req)
{
    struct nv_link *l = src->link;
    uint8_t *p = dst;
    netvm_status_t st;
    size_t n;
    struct netvm_req *q;
    struct nv_rdesc d;
    while ((n = pinned_piece(ctx, src, off, len)) < len) {
        /* all but the last piece are waited for here */
        st = reserve_held(ctx, src, off, n, NULL, &q, &d);
        if (st == NETVM_OK)
            st = nv_finish_req(ctx, q, ON_LINK(q, l->ops->get(l, &d, off, p, n, q, nv_req_id(q), NULL)));
        if (st != NETVM_OK)
            return st;
        off += n;
        p += n;
        len -= n;
    }
    if ((st = reserve_held(ctx, src, off, len, NULL, &q, &d)) != NETVM_OK)
        return st;
    if (ev->kinds) {
        detach(q, src, off, len, ev);
        uint32_t id = nv_req_id(q);
        return launched(q, id, ON_LINK(q, l->ops->get(l, &d, off, p, len, q, id, np)));
    }
    return started(q, ON_LINK(q, l->ops->get(l, &d, off, p, len, q, nv_req_id(q), np)), req);
}

netvm_status_t nv_put(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, const void *src, size_t len,
                      unsigned flags, int remote, uint64_t tag, uint32_t gate)
{
    unsigned quiet = flags & NV_F_QUIET;
    if (quiet && (remote || gate || (flags & ~(unsigned)(NV_F_QUIET | NETVM_F_UNORDERED))))
        return NETVM_ERR_INVAL;   /* nothing else would report it */
    flags &= ~(unsigned)NV_F_QUIET;
    netvm_status_t st = check(ctx, r, off, len, NETVM_WRITE, flags);
    if (st != NETVM_OK || len == 0)
        return st;
    if (!src || (flags & NETVM_F_NOTIFY_RESPONDER))
        return NETVM_ERR_INVAL;
    struct nv_note note = { .flags = (flags & NV_NOTE_COMPLETER) | quiet, .tag = tag, .gate = gate };
    const struct nv_note *np = note.flags || gate ? &note : NULL;
    struct own_ev ev = { .tag = tag, .flags = flags };
    if (nv_rtrip_any(r))
        ev.kinds |= NV_REQEV_RTRIP;
    const uint8_t *p = src;
    /* shm (synchronous) never takes holds: it does not even look */
    if (is_async(r) && nv_regc_needed(ctx, r))
        return put_held(ctx, r, off, p, len, flags, remote, np, &ev);
    while (len > MAX_PIECE && st == NETVM_OK) {
        /* every piece but the last completes locally; the last one's remote
         * completion covers them all (one ordered stream per peer). Events
         * are per piece (a transfer over 1 GiB is several operations). */
        st = put_piece(ctx, r, off, p, MAX_PIECE, 0, np, &ev);
        off += MAX_PIECE;
        p += MAX_PIECE;
        len -= MAX_PIECE;
    }
    if (flags & NETVM_F_NOTIFY_REQUESTER)
        ev.kinds |= NV_REQEV_REQUESTER;
    return st == NETVM_OK ? put_piece(ctx, r, off, p, len, remote, np, &ev) : st;
}

netvm_status_t netvm_put(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off,
                         const void *src, size_t len, unsigned flags)
{
    if (flags & ~(unsigned)NETVM_F_UNORDERED)
        return NETVM_ERR_INVAL;
    if (nv_in_handler && dst && is_async(dst))
        return NETVM_ERR_STATE;   /* it would wait for the target: use netvm_put_nb */
    return nv_put(ctx, dst, off, src, len, flags, 1, 0, 0);
}

/* Local completion is the point where src may be reused: the link has the
 * bytes (in the socket, or at the target). Remote completion: netvm_flush. */
netvm_status_t netvm_put_nb(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off,
                            const void *src, size_t len, unsigned flags, netvm_req_t **req)
{
    if (!req)
        return NETVM_ERR_INVAL;
    *req = NULL;
    if (flags & ~(unsigned)NETVM_F_UNORDERED)
        return NETVM_ERR_INVAL;
    return nv_put(ctx, dst, off, src, len, flags, 0, 0, 0);
}

netvm_status_t nv_svc_put_quiet(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off, const void *src, size_t len)
{
    return nv_put(ctx, dst, off, src, len, NV_F_QUIET, 0, 0, 0);
}

netvm_status_t netvm_put_imm(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off,
                             uint64_t value, unsigned flags)
{
    if (off & 7)
        return NETVM_ERR_INVAL;
    return netvm_put(ctx, dst, off, &value, sizeof value, flags);
}

/* --- get ----------------------------------------------------------------------- */

netvm_status_t nv_get(netvm_ctx_t *ctx, void *dst, netvm_rseg_t *src, size_t off, size_t len,
                      unsigned flags, uint64_t tag, netvm_req_t **req)
{
    *req = NULL;
    netvm_status_t st = check(ctx, src, off, len, NETVM_READ, flags);
    if (st != NETVM_OK || len == 0)
        return st;
    if (!dst)
        return NETVM_ERR_INVAL;
    struct nv_note note = { .flags = flags & NV_NOTE_RESPONDER, .tag = tag };
    const struct nv_note *np = note.flags ? &note : NULL;
    struct own_ev ev = { .tag = tag };
    if (flags & NETVM_F_NOTIFY_REQUESTER)
        ev.kinds |= NV_REQEV_REQUESTER;
    if (flags & NETVM_F_NOTIFY_COMPLETER)
        ev.kinds |= NV_REQEV_COMPLETER;
    struct nv_link *l = src->link;
    if (!is_async(src)) {
        st = l->ops->get(l, &src->d, off, dst, len, NULL, 0, np);
        if (ev.kinds && st == NETVM_OK)
            post_own(ctx, src->peer, src, off, len, ev.kinds, tag, st);
        return st;
    }
    if (nv_regc_needed(ctx, src))
        return get_held(ctx, dst, src, off, len, np, &ev, req);
    uint8_t *p = dst;
    while (len > MAX_PIECE) {
        /* all but the last piece are waited for here */
        struct netvm_req *q;
        st = nv_reserve_req(ctx, src->peer, NULL, &q);
        if (st == NETVM_OK)
            st = nv_finish_req(ctx, q, ON_LINK(q, l->ops->get(l, &src->d, off, p, MAX_PIECE, q, nv_req_id(q), NULL)));
        if (st != NETVM_OK)
            return st;
        off += MAX_PIECE;
        p += MAX_PIECE;
        len -= MAX_PIECE;
    }
    struct netvm_req *q;
    st = nv_reserve_req(ctx, src->peer, NULL, &q);
    if (st != NETVM_OK)
        return st;
    if (ev.kinds) {
        detach(q, src, off, len, &ev);
        uint32_t id = nv_req_id(q);
        return launched(q, id, ON_LINK(q, l->ops->get(l, &src->d, off, p, len, q, id, np)));
    }
    return started(q, ON_LINK(q, l->ops->get(l, &src->d, off, p, len, q, nv_req_id(q), np)), req);
}

netvm_status_t netvm_get_nb(netvm_ctx_t *ctx, void *dst, netvm_rseg_t *src, size_t off,
                            size_t len, unsigned flags, netvm_req_t **req)
{
    if (!req)
        return NETVM_ERR_INVAL;
    *req = NULL;
    if (flags & ~(unsigned)NETVM_F_UNORDERED)
        return NETVM_ERR_INVAL;
    return nv_get(ctx, dst, src, off, len, flags, 0, req);
}

netvm_status_t netvm_get(netvm_ctx_t *ctx, void *dst, netvm_rseg_t *src, size_t off,
                         size_t len, unsigned flags)
{
    if (nv_in_handler && src && is_async(src))
        return NETVM_ERR_STATE;   /* it would wait for the target: use netvm_get_nb */
    if (src && !is_async(src)) {
        /* the direct path, without a request */
        if (flags & ~(unsigned)NETVM_F_UNORDERED)
            return NETVM_ERR_INVAL;
        netvm_status_t st = check(ctx, src, off, len, NETVM_READ, flags);
        if (st != NETVM_OK || len == 0)
            return st;
        return dst ? src->link->ops->get(src->link, &src->d, off, dst, len, NULL, 0, NULL) : NETVM_ERR_INVAL;
    }
    netvm_req_t *q;
    netvm_status_t st = netvm_get_nb(ctx, dst, src, off, len, flags, &q);
    if (st != NETVM_OK || !q)
        return st;
    return netvm_wait(&q);
}

/* --- atomics ----------------------------------------------------------------------- */

/* Does the link run this one itself? Not where a registration strategy
 * must hold the target's bucket for it: the link's key is then the whole
 * segment's only under none and pin-all. */
static int native_atomic(netvm_ctx_t *ctx, netvm_rseg_t *r, netvm_atomic_op_t op)
{
    if (r->d.flags & NV_RDESC_ATOMIC)
        return 1;
    return (r->d.flags & NV_RDESC_ATOMIC_BASIC) && op != NETVM_AOP_FCAA && !nv_regc_needed(ctx, r);
}

netvm_status_t nv_atomic(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, netvm_atomic_op_t op,
                         uint64_t operand, uint64_t compare, uint64_t *result, unsigned flags,
                         uint64_t tag, netvm_req_t **reqp)
{
    if (reqp)
        *reqp = NULL;
    unsigned lazy = flags & NV_RMA_LAZY ? NV_AMS_LAZY : 0;
    flags &= ~(unsigned)NV_RMA_LAZY;
    netvm_status_t st = check(ctx, r, off, 8, NETVM_ATOMIC, flags);
    if (st != NETVM_OK)
        return st;
    if ((unsigned)op >= NETVM_AOP_COUNT || ((r->d.addr + off) & 7) || (flags & NETVM_F_NOTIFY_RESPONDER))
        return NETVM_ERR_INVAL;
    struct nv_note note = { .flags = flags & NV_NOTE_COMPLETER, .tag = tag };
    struct own_ev ev = { .tag = tag, .kinds = (flags & NETVM_F_NOTIFY_REQUESTER) ? NV_REQEV_REQUESTER : 0 };
    if (!reqp && !ev.kinds)
        ev.kinds = NV_REQEV_ERROR;   /* nobody waits: a failure goes to the next flush */
    if (native_atomic(ctx, r, op)) {
        uint64_t old;
        if ((st = nv_rma_keep_order(ctx, r->peer, flags)) != NETVM_OK)
            return st;
        st = r->link->ops->atomic(r->link, &r->d, off, op, operand, compare, &old, note.flags ? &note : NULL);
        if (st == NETVM_OK && result)
            *result = old;
        if (ev.kinds && st == NETVM_OK)
            post_own(ctx, r->peer, r, off, 8, ev.kinds, tag, st);
        return st;
    }
    /* the emulation: an active message the target's progress engine runs */
    struct netvm_req *q;
    st = nv_regc_needed(ctx, r) ? reserve_held(ctx, r, off, 8, result, &q, NULL) : nv_reserve_req(ctx, r->peer, result, &q);
    if (st != NETVM_OK)
        return st;
    uint64_t a[6] = { (uint64_t)r->d.slot | (uint64_t)op << 32 | (uint64_t)(note.flags ? 1 : 0) << 40,
                      r->d.key, off, operand, compare, tag };
    if (ev.kinds)
        detach(q, r, off, 8, &ev);
    if (!is_async(r))
        nv_req_ordered(q);
    uint32_t id = nv_req_id(q);
    st = nv_am_call(ctx, r->peer, q, NV_AMH_ATOMIC, a, 6, NULL, 0, lazy);
    if (ev.kinds)
        return launched(q, id, st);
    if (st != NV_LINK_PENDING) {
        nv_req_complete(q, st, 0);
        nv_req_free(q);
        return st;
    }
    *reqp = q;
    return NETVM_OK;
}

netvm_status_t netvm_atomic_nb(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off,
                               netvm_atomic_op_t op, uint64_t operand, uint64_t compare,
                               uint64_t *result, netvm_req_t **reqp)
{
    if (!reqp)
        return NETVM_ERR_INVAL;
    *reqp = NULL;
    return nv_atomic(ctx, r, off, op, operand, compare, result, 0, 0, reqp);
}

netvm_status_t nv_svc_atomic_lazy(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, netvm_atomic_op_t op,
                                  uint64_t operand, uint64_t compare, uint64_t *result, netvm_req_t **reqp)
{
    *reqp = NULL;
    return nv_atomic(ctx, r, off, op, operand, compare, result, NV_RMA_LAZY, 0, reqp);
}

netvm_status_t netvm_atomic(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, netvm_atomic_op_t op,
                            uint64_t operand, uint64_t compare, uint64_t *result)
{
    if (nv_in_handler && r && !native_atomic(ctx, r, op))
        return NETVM_ERR_STATE;   /* the target runs it: use netvm_atomic_nb */
    netvm_req_t *q;
    netvm_status_t st = netvm_atomic_nb(ctx, r, off, op, operand, compare, result, &q);
    if (st != NETVM_OK || !q)
        return st;
    return netvm_wait(&q);
}

/* --- completion ------------------------------------------------------------------ */

/* One peer's part of a fence or flush. */
static netvm_status_t drain_peer(netvm_ctx_t *ctx, struct nv_peer *p, int remote, int all)
{
    struct nv_link *l = p->lp.link;
    netvm_status_t s = NETVM_OK;
    /* a link that does not keep issue order gets its fences as flushes
     * (the one place core makes up for missing ordering) */
    if (l && !(l->ops->caps.flags & NV_LCAP_ORDERED))
        remote = 1;
    if (atomic_load(&p->dead) || !l) {
        s = all ? NETVM_OK : NETVM_ERR_PEER;   /* a dead peer does not fail a flush of everyone */
    } else if (l->ops->caps.flags & NV_LCAP_SYNC) {
        s = l->ops->flush(l, &p->lp, NULL, 0);
    } else if (remote) {
        struct netvm_req *q;
        s = nv_reserve_req(ctx, p, NULL, &q);
        if (s == NETVM_OK)
            s = nv_finish_req(ctx, q, ON_LINK(q, l->ops->flush(l, &p->lp, q, nv_req_id(q))));
        if (s == NETVM_ERR_PEER && all)
            s = NETVM_OK;
    }
    /* a nonblocking operation's failure that only its target saw */
    int async = atomic_exchange(&p->async_err, NETVM_OK);
    if (s == NETVM_OK && remote && async != NETVM_OK)
        s = (netvm_status_t)async;
    return s;
}

/* remote: also wait for the links' own remote completion (flush); else only
 * for the requests targets execute (fence: each link keeps issue order) */
static netvm_status_t drain(netvm_ctx_t *ctx, int peer, int remote)
{
    if (!ctx)
        return NETVM_ERR_INVAL;
    netvm_status_t st = nv_may_block();
    if (st != NETVM_OK)
        return st;
    if (peer >= 0) {
        struct nv_peer *p;
        if ((st = nv_peer_get(ctx, peer, &p)) != NETVM_OK)
            return st;
        nv_progress_wait_idle(ctx, p);
        st = drain_peer(ctx, p, remote, 0);
        nv_peer_put(p);
        return st;
    }
    nv_progress_wait_idle(ctx, NULL);
    uint32_t high = __atomic_load_n(&ctx->peer_high, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < high; i++) {
        struct nv_peer *slot = nv_peer_slot(ctx, i), *p;
        if (!slot || nv_peer_get(ctx, __atomic_load_n(&slot->lp.id, __ATOMIC_ACQUIRE), &p) != NETVM_OK)
            continue;
        netvm_status_t s = drain_peer(ctx, p, remote, 1);
        nv_peer_put(p);
        if (s != NETVM_OK && st == NETVM_OK)
            st = s;
    }
    return st;
}

netvm_status_t netvm_fence(netvm_ctx_t *ctx, int peer) { return drain(ctx, peer, 0); }
netvm_status_t netvm_flush(netvm_ctx_t *ctx, int peer) { return drain(ctx, peer, 1); }
