/* The ofi link's messages: active messages (eager: copied into a send, and
 * landing in a pre-posted receive buffer; rendezvous: the receiver reads
 * the payload from the sender's registered buffer straight into the place
 * core names, then tells the sender), and the link's own small messages
 * that follow RMA (what the target must do after an access, answers,
 * flushes, goodbyes). */
#define _GNU_SOURCE
#include "link/ofi/ofi_priv.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

netvm_status_t ofi_send_locked(struct ofi_link *o, struct ofi_peer *pe, uint16_t kind, uint16_t hlen,
                               const void *body, size_t blen, const void *pay, size_t plen)
{
    struct ofi_mh mh = { .kind = kind, .hlen = hlen, .from = pe->lp->remote_id };
    size_t total = sizeof mh + blen + plen;
    uint8_t small[256];
    uint8_t *buf = total <= sizeof small && total <= o->inject ? small : malloc(total);
    if (!buf)
        return NETVM_ERR_NOMEM;
    memcpy(buf, &mh, sizeof mh);
    if (blen)
        memcpy(buf + sizeof mh, body, blen);
    if (plen)
        memcpy(buf + sizeof mh + blen, pay, plen);
    struct ofi_op *op = NULL;
    if (buf != small && !(op = ofi_op_new(o, OP_SEND, pe))) {
        free(buf);
        return NETVM_ERR_NOMEM;
    }
    void *desc = NULL;
    if (op && ofi_local_desc(o, op, buf, total, &desc) != NETVM_OK) {
        free(buf);
        ofi_op_free(op);
        return NETVM_ERR_NOMEM;
    }
    ssize_t rc;
    uint64_t since = 0;
    for (;;) {
        /* a peer found gone while the lock was let go has no address any more */
        rc = pe->av_gone ? -FI_EAGAIN
             : op ? fi_send(o->ep, buf, total, desc, pe->fa, &op->fctx) : fi_inject(o->ep, buf, total, pe->fa);
        if (rc != -FI_EAGAIN || atomic_load(&pe->dead) || ofi_refused_too_long(o, pe, &since))
            break;
        /* the send queue is full: let completions drain it */
        pthread_mutex_unlock(&o->lock);
        ofi_progress(o);
        pthread_mutex_lock(&o->lock);
    }
    if (op) {
        if (rc == 0)
            op->buf = buf;   /* freed with op at its completion */
        else {
            free(buf);
            ofi_op_free(op);
        }
    }
    return rc == -FI_EAGAIN ? NETVM_ERR_PEER : ofi_status(rc);
}

netvm_status_t ofi_am_send(struct nv_link *l, struct nv_lpeer *lp, const uint8_t *hdr, size_t hlen,
                           const void *payload, size_t plen, unsigned flags, void *token, uint32_t id)
{
    struct ofi_link *o = ofi_of(l);
    struct ofi_peer *pe = opeer_of(lp);
    if (!pe || atomic_load(&pe->dead))
        return NETVM_ERR_PEER;
    if (plen <= l->ops->caps.am_eager) {
        pthread_mutex_lock(&o->lock);
        netvm_status_t st = ofi_send_locked(o, pe, OK_AM, (uint16_t)hlen, hdr, hlen, payload, plen);
        pthread_mutex_unlock(&o->lock);
        return st;
    }
    /* rendezvous: the receiver reads the payload from here */
    int copy = (flags & NV_AMS_COPY) != 0;
    if (!copy && !token)
        return NETVM_ERR_INVAL;
    struct ofi_op *op = ofi_op_new(o, OP_RDV_SEND, pe);
    if (!op)
        return NETVM_ERR_NOMEM;
    const void *src = payload;
    if (copy) {
        if (!(op->owned = malloc(plen))) {
            ofi_op_free(op);
            return NETVM_ERR_NOMEM;
        }
        memcpy(op->owned, payload, plen);
        src = op->owned;
    } else {
        op->token = token;
        op->id = id;
    }
    /* the payload's registration comes from the cache: a buffer sent
     * again costs a lookup, and never a registration whose memory went */
    netvm_status_t st = o->base.up.lreg_get(o->rc, src, plen, OFI_LREG_LOCAL | OFI_LREG_PEER_READ, &op->rce);
    if (st != NETVM_OK) {
        free(op->owned);
        ofi_op_free(op);
        return st;
    }
    struct fid_mr *mr = op->rce->handle;
    /* without FI_MR_VIRT_ADDR the peer addresses the registration by offset */
    uint64_t where = o->virt_addr ? (uintptr_t)src : (uintptr_t)src - op->rce->addr;
    struct ofi_rdv rdv = { .addr = where, .key = fi_mr_key(mr), .len = plen, .cookie = (uintptr_t)op };
    uint8_t body[sizeof rdv + NV_AM_HDR_MAX];
    memcpy(body, &rdv, sizeof rdv);
    memcpy(body + sizeof rdv, hdr, hlen);
    pthread_mutex_lock(&o->lock);
    op->next = o->waiting;
    o->waiting = op;
    st = ofi_send_locked(o, pe, OK_AM_RDV, (uint16_t)hlen, body, sizeof rdv + hlen, NULL, 0);
    if (st != NETVM_OK) {
        o->waiting = op->next;
        free(op->owned);
        ofi_op_free(op);
    }
    pthread_mutex_unlock(&o->lock);
    if (st != NETVM_OK)
        return st;
    return copy ? NETVM_OK : NV_LINK_PENDING;
}

/* The sender's side of a rendezvous ends: the receiver has the payload. */
static void rdv_done(struct ofi_link *o, uint64_t cookie, netvm_status_t st)
{
    pthread_mutex_lock(&o->lock);
    struct ofi_op **pp = &o->waiting;
    while (*pp && (uintptr_t)*pp != cookie)
        pp = &(*pp)->next;
    struct ofi_op *op = *pp;
    if (op && op->kind == OP_RDV_SEND) {
        *pp = op->next;
    } else {
        op = NULL;   /* not ours (any more): ignored */
    }
    pthread_mutex_unlock(&o->lock);
    if (!op)
        return;
    if (op->token)
        o->base.up.complete(o->base.up.arg, op->token, st);
    void *owned = op->owned;
    ofi_op_free(op);   /* its registration first, then the memory under it */
    free(owned);
}

static void rdv_answer(struct ofi_link *o, struct ofi_peer *pe, uint64_t cookie, netvm_status_t st)
{
    struct ofi_access a = { .tag = cookie, .status = (int32_t)st };
    pthread_mutex_lock(&o->lock);
    if (!atomic_load(&pe->dead))
        ofi_send_locked(o, pe, OK_RDV_DONE, 0, &a, sizeof a, NULL, 0);
    pthread_mutex_unlock(&o->lock);
}

void ofi_rdv_read_done(struct ofi_link *o, struct ofi_op *op, netvm_status_t st)
{
    if (op->rx.cookie)
        o->base.up.am_end(o->base.up.arg, &op->rx, st);
    if (op->peer)
        rdv_answer(o, op->peer, op->cookie, st);
    o->base.up.peer_unref(o->base.up.arg, op->rx.from);
    ofi_op_free(op);
}

static void rx_am_rdv(struct ofi_link *o, struct ofi_peer *pe, struct nv_lpeer *lp, const uint8_t *b, size_t n,
                      unsigned hlen)
{
    struct ofi_rdv rdv;
    struct nv_am_rx rx;
    nv_am_rx_start(&rx, lp);
    if (n < sizeof rdv + hlen) {
        nv_warn("ofi link: a malformed rendezvous from peer %d: dropped", lp->id);
        return;
    }
    memcpy(&rdv, b, sizeof rdv);
    size_t hl = nv_am_hdr_decode(b + sizeof rdv, hlen, &rx.h);
    if (!hl || hl != hlen || rx.h.len != rdv.len) {
        nv_warn("ofi link: a malformed rendezvous from peer %d: dropped", lp->id);
        return;
    }
    o->base.up.am(o->base.up.arg, &rx);
    if (!rx.dst) {
        if (rx.cookie)
            o->base.up.am_end(o->base.up.arg, &rx, NETVM_OK);
        rdv_answer(o, pe, rdv.cookie, NETVM_OK);
        return;
    }
    struct ofi_op *op = ofi_op_new(o, OP_RDV_READ, pe);
    if (!op) {
        if (rx.cookie)
            o->base.up.am_end(o->base.up.arg, &rx, NETVM_ERR_NOMEM);
        rdv_answer(o, pe, rdv.cookie, NETVM_ERR_NOMEM);
        return;
    }
    op->rx = rx;
    op->cookie = rdv.cookie;
    o->base.up.peer_ref(o->base.up.arg, (uint32_t)lp->id);   /* held until the read ends */
    void *desc;
    if (ofi_local_desc(o, op, rx.dst, rdv.len, &desc) != NETVM_OK) {
        ofi_rdv_read_done(o, op, NETVM_ERR_NOMEM);
        return;
    }
    pthread_mutex_lock(&o->lock);
    ssize_t rc;
    uint64_t since = 0;
    while ((rc = pe->av_gone ? -FI_EAGAIN
                 : fi_read(o->ep, rx.dst, rdv.len, desc, pe->fa, rdv.addr, rdv.key, &op->fctx)) == -FI_EAGAIN &&
           !atomic_load(&pe->dead) && !ofi_refused_too_long(o, pe, &since)) {
        pthread_mutex_unlock(&o->lock);
        ofi_progress(o);
        pthread_mutex_lock(&o->lock);
    }
    pthread_mutex_unlock(&o->lock);
    if (rc)
        ofi_rdv_read_done(o, op, rc == -FI_EAGAIN ? NETVM_ERR_PEER : ofi_status(rc));
}

void ofi_rx(struct ofi_link *o, struct ofi_op *rop, size_t len)
{
    const uint8_t *b = rop->buf;
    struct ofi_mh mh;
    if (len < sizeof mh)
        return;
    memcpy(&mh, b, sizeof mh);
    b += sizeof mh;
    len -= sizeof mh;
    struct nv_lpeer *lp = o->base.up.peer_ref(o->base.up.arg, mh.from);
    if (!lp)
        return;
    struct ofi_peer *pe = lp->link == &o->base ? opeer_of(lp) : NULL;
    if (!pe) {
        o->base.up.peer_unref(o->base.up.arg, lp);
        return;
    }
    struct ofi_access a;
    switch (mh.kind) {
    case OK_AM: {
        struct nv_am_rx rx;
        nv_am_rx_start(&rx, lp);
        size_t hl = nv_am_hdr_decode(b, len < mh.hlen ? len : mh.hlen, &rx.h);
        if (!hl || hl != mh.hlen || hl + rx.h.len != len) {
            nv_warn("ofi link: a malformed active message from peer %d: dropped", lp->id);
            break;
        }
        rx.payload = b + hl;
        o->base.up.am(o->base.up.arg, &rx);
        break;
    }
    case OK_AM_RDV:
        rx_am_rdv(o, pe, lp, b, len, mh.hlen);
        break;
    case OK_RDV_DONE:
    case OK_ACCESS:
    case OK_ACK:
    case OK_FLUSH:
    case OK_REVOKE:
    case OK_REVOKE_ACK:
        if (len < sizeof a) {
            nv_warn("ofi link: a malformed message from peer %d: dropped", lp->id);
            break;
        }
        memcpy(&a, b, sizeof a);
        if (mh.kind == OK_RDV_DONE)
            rdv_done(o, a.tag, (netvm_status_t)a.status);
        else if (mh.kind == OK_ACCESS)
            ofi_serve_access(o, pe, &a);
        else if (mh.kind == OK_ACK)
            ofi_take_ack(o, &a);
        else if (mh.kind == OK_REVOKE || mh.kind == OK_REVOKE_ACK)
            ofi_revoke_rx(o, pe, mh.kind == OK_REVOKE_ACK, &a);
        else {
            /* sends after writes arrive after them (FI_ORDER_SAW): all
             * of this peer's earlier writes are in place */
            struct ofi_access ack = { .id = a.id, .status = NETVM_OK };
            pthread_mutex_lock(&o->lock);
            ofi_send_locked(o, pe, OK_ACK, 0, &ack, sizeof ack, NULL, 0);
            pthread_mutex_unlock(&o->lock);
        }
        break;
    case OK_BYE:
        ofi_peer_left(o, pe);
        break;
    default:
        nv_warn("ofi link: a message of unknown kind %u from peer %d: dropped", mh.kind, lp->id);
        break;
    }
    o->base.up.peer_unref(o->base.up.arg, lp);
}
