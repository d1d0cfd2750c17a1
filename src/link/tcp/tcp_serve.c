/* What a connection does with each frame: the target's side (checks
 * against the ATU, then straight into or out of memory, with copies that
 * survive memory unmapped behind netvm's back) and the initiator's side
 * (answers completing pending operations, active messages for core). A
 * frame kind not allowed after the handshake closes the connection. */
#define _GNU_SOURCE
#include "link/tcp/tcp_priv.h"
#include "util/guard.h"
#include "util/log.h"
#include "util/thread.h"

#include <stdlib.h>
#include <string.h>

static void serve_begin(struct tcp_conn *c) { atomic_fetch_add(&c->serve_seq, 1); }
static void serve_end(struct tcp_conn *c)   { atomic_fetch_add_explicit(&c->serve_seq, 1, memory_order_release); }

/* An answer to the peer: acknowledgements of puts are not urgent (they ride
 * on the next frame), everything else is. */
static void answer(struct tcp_conn *c, uint8_t kind, uint32_t req_id, netvm_status_t st, int urgent)
{
    struct nv_tcp_hdr h = { .kind = kind, .req_id = req_id, .status = (uint16_t)st };
    if (tcp_tx_frame(c, &h, NULL, 0, NULL, 0, urgent) != 0)
        tcp_conn_fail(c, "no memory for an answer");
}

/* After an access by the peer is complete here: fire our tripwires, post
 * the notification it asked for. */
static void access_done(struct tcp_conn *c, uint64_t addr, uint64_t len, unsigned access, unsigned note,
                        uint64_t tag, unsigned kind)
{
    struct nv_ep *ep = c->t->p.ep;
    if (!ep)
        return;
    nv_ep_access(ep, c->lp->id, addr, len, access);
    if (note & kind) {
        struct nv_ep_rec r = { .type = kind == NV_NOTE_RESPONDER ? NETVM_EV_RESPONDER : NETVM_EV_COMPLETER,
                               .access = (uint16_t)access, .rank = c->lp->id, .value = tag,
                               .addr = addr, .len = len };
        nv_ep_post(ep, &r);
    }
}

void tcp_read_done(struct tcp_conn *c, uint64_t addr, uint64_t len, unsigned note, uint64_t tag)
{
    access_done(c, addr, len, NETVM_TRIP_READ, note, tag, NV_NOTE_RESPONDER);
}

static unsigned note_of(const struct nv_tcp_hdr *h, unsigned kind)
{
    return (h->flags & NV_TCP_F_NOTIFY) ? kind : 0;
}

/* Enter the serve section, then check the access against the ATU. Inside
 * the section before the check: a revocation then either waits for this
 * frame or this frame sees it. The caller ends the section. */
static netvm_status_t check_access(struct tcp_conn *c, const struct nv_tcp_hdr *h, unsigned need, uint64_t *addr)
{
    struct tcp_link *t = c->t;
    serve_begin(c);
    return t->base.up.translate(t->base.up.arg, h->slot, h->key, h->off, h->len, need, addr);
}

/* A gated put failed: what names its gate (the signal behind it) is
 * refused (tcp_gate_failed). The signal follows its put on this stream,
 * so the list holds only the failures of puts whose signals are still on
 * their way (one per thread of the peer at most); should it overflow, the
 * connection fails rather than let a signal through. */
static void gate_fail(struct tcp_conn *c, uint32_t gate, netvm_status_t st)
{
    pthread_mutex_lock(&c->mail_lock);
    unsigned n = atomic_load(&c->gate_n);
    int known = 0;
    for (unsigned i = 0; i < n; i++)
        known |= c->gate_id[i] == gate;   /* a split put fails piece by piece */
    if (!known && n < TCP_GATES) {
        c->gate_id[n] = gate;
        c->gate_st[n] = st;
        atomic_store_explicit(&c->gate_n, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&c->mail_lock);
    if (!known && n >= TCP_GATES)
        tcp_conn_fail(c, "too many failed puts with signal whose signals have not come");
}

static void put_done(struct tcp_conn *c, const struct nv_tcp_hdr *h, netvm_status_t st, uint64_t addr)
{
    if (st == NETVM_OK)
        access_done(c, addr, h->len, NETVM_TRIP_WRITE, note_of(h, NV_NOTE_COMPLETER), h->operand, NV_NOTE_COMPLETER);
    if (st != NETVM_OK && (h->flags & NV_TCP_F_GATE))
        gate_fail(c, (uint32_t)h->operand, st);   /* the signal behind it is refused */
    if (h->flags & NV_TCP_F_ACK)
        answer(c, NV_TCP_PUT_ACK, h->req_id, st, 0);
    else if (st != NETVM_OK && !(h->flags & (NV_TCP_F_GATE | NV_TCP_F_QUIET)) && c->first_err == NETVM_OK)
        c->first_err = st;   /* reported by the next FLUSH (a gated put's by its signal's answer) */
}

int tcp_gate_failed(struct tcp_conn *c, uint32_t gate, netvm_status_t *st)
{
    if (!atomic_load_explicit(&c->gate_n, memory_order_acquire))
        return 0;   /* the common case: no put with a gate failed */
    int failed = 0;
    pthread_mutex_lock(&c->mail_lock);
    unsigned n = atomic_load(&c->gate_n);
    for (unsigned i = 0; i < n; i++)
        if (c->gate_id[i] == gate) {
            failed = 1;
            *st = c->gate_st[i];
            c->gate_id[i] = c->gate_id[n - 1];
            c->gate_st[i] = c->gate_st[n - 1];
            atomic_store(&c->gate_n, n - 1);
            break;
        }
    pthread_mutex_unlock(&c->mail_lock);
    return failed;
}

static void serve_put(struct tcp_conn *c, const struct nv_tcp_hdr *h, const uint8_t *pay)
{
    uint64_t addr = 0;
    netvm_status_t st = check_access(c, h, NETVM_WRITE, &addr);
    if (st == NETVM_OK && h->len && nv_guarded_copy((void *)(uintptr_t)addr, pay, (size_t)h->len) != 0)
        st = NETVM_ERR_FAULT;
    serve_end(c);
    put_done(c, h, st, addr);
}

static void serve_get(struct tcp_conn *c, const struct nv_tcp_hdr *h)
{
    struct tcp_link *t = c->t;
    uint64_t addr = 0;
    netvm_status_t st = check_access(c, h, NETVM_READ, &addr);
    struct nv_tcp_hdr r = { .kind = NV_TCP_GET_RESP, .req_id = h->req_id, .status = (uint16_t)st };
    if (st == NETVM_OK && h->len && h->len <= TCP_GET_INLINE) {
        /* small: copied now, so the read is over */
        r.len = h->len;
        int rc = tcp_tx_frame(c, &r, NULL, 0, (const void *)(uintptr_t)addr, (size_t)h->len, 1);
        serve_end(c);
        if (rc == -2) {
            struct nv_tcp_hdr f = { .kind = NV_TCP_GET_RESP, .req_id = h->req_id, .status = NETVM_ERR_FAULT };
            rc = tcp_tx_frame(c, &f, NULL, 0, NULL, 0, 1);
        } else if (rc == 0) {
            tcp_read_done(c, addr, h->len, note_of(h, NV_NOTE_RESPONDER), h->operand);
        }
        if (rc != 0)
            tcp_conn_fail(c, "no memory for an answer");
        return;
    }
    if (st == NETVM_OK && h->len) {
        /* large: sent straight from the source memory; the reference keeps
         * the segment from being revoked until the bytes are out, and the
         * trailer says whether they were all there */
        r.len = h->len;
        r.flags = NV_TCP_F_TRAILER;
        atomic_fetch_add(&t->slot_refs[h->slot], 1);
        serve_end(c);
        struct tcp_seg how = { .slot_ref = (int)h->slot, .read_ev = 1, .addr = addr, .tag = h->operand,
                               .note = note_of(h, NV_NOTE_RESPONDER), .has_trailer = 1 };
        nv_tcp_trailer_encode(NETVM_OK, how.trailer);
        if (tcp_tx_frame_ext(c, &r, NULL, 0, (const void *)(uintptr_t)addr, (size_t)h->len, &how) != 0) {
            atomic_fetch_sub(&t->slot_refs[h->slot], 1);
            tcp_conn_fail(c, "no room for an answer");
        }
        return;
    }
    serve_end(c);
    if (st == NETVM_OK)
        r.len = 0;
    if (tcp_tx_frame(c, &r, NULL, 0, NULL, 0, 1) != 0)
        tcp_conn_fail(c, "no memory for an answer");
}

/* --- answers to this process's operations ----------------------------------------- */

struct tcp_pending *tcp_pending_take(struct tcp_link *t, uint32_t id, uint8_t kind, struct tcp_conn *c)
{
    uint32_t i = id & 0xffff;
    if (i >= t->p.max_requests)
        return NULL;
    struct tcp_pending *p = &t->pending[i];
    if (atomic_load_explicit(&p->id, memory_order_acquire) != (id | 0x80000000u) || p->kind != kind || p->c != c)
        return NULL;
    atomic_store_explicit(&p->id, 0, memory_order_relaxed);
    return p;
}

/* The pending operation an answer completes, if it still waits. */
static void *claim_answer(struct tcp_conn *c, const struct nv_tcp_hdr *h, struct tcp_pending **pp)
{
    struct tcp_link *t = c->t;
    struct tcp_pending *p = tcp_pending_take(t, h->req_id, h->kind, c);
    if (!p || !t->base.up.claim(t->base.up.arg, p->token)) {
        /* a late answer to a request that timed out: its payload (if any)
         * is drained, the connection stays */
        nv_debug("tcp link: late answer from peer %d dropped", c->lp->id);
        return NULL;
    }
    *pp = p;
    return p->token;
}

static void complete(struct tcp_conn *c, void *token, netvm_status_t st)
{
    c->t->base.up.complete(c->t->base.up.arg, token, st);
}

static void take_answer(struct tcp_conn *c, const struct nv_tcp_hdr *h, const uint8_t *pay)
{
    struct tcp_pending *p;
    void *token = claim_answer(c, h, &p);
    if (!token)
        return;
    netvm_status_t st = (netvm_status_t)h->status;
    if (h->kind == NV_TCP_GET_RESP && st == NETVM_OK) {
        if (h->len != p->len) {
            complete(c, token, NETVM_ERR_SYS);
            tcp_conn_fail(c, "GET answer of the wrong length");
            return;
        }
        if (h->len && nv_guarded_copy(p->dst, pay, (size_t)h->len) != 0)
            st = NETVM_ERR_FAULT;   /* the caller's buffer is gone */
    }
    complete(c, token, st);
}

/* --- active messages ------------------------------------------------------------------ */

static int am_header(struct tcp_conn *c, const uint8_t *pay, size_t have, uint64_t plen, struct nv_am_rx *rx)
{
    size_t hl = nv_am_hdr_decode(pay, have, &rx->h);
    if (!hl || hl + rx->h.len != plen) {
        tcp_conn_fail(c, "malformed active message");
        return -1;
    }
    rx->from = c->lp;
    return (int)hl;
}

/* --- frames ------------------------------------------------------------------------------ */

void tcp_frame(struct tcp_conn *c, const struct nv_tcp_hdr *h, const uint8_t *pay, size_t plen)
{
    switch (h->kind) {
    case NV_TCP_PUT:       serve_put(c, h, pay); break;
    case NV_TCP_GET:       serve_get(c, h); break;
    case NV_TCP_PUT_ACK:
    case NV_TCP_GET_RESP:
    case NV_TCP_FLUSH_ACK: take_answer(c, h, pay); break;
    case NV_TCP_FLUSH:
        answer(c, NV_TCP_FLUSH_ACK, h->req_id, c->first_err, 1);
        c->first_err = NETVM_OK;
        break;
    case NV_TCP_AM: {
        struct nv_am_rx rx;
        nv_am_rx_start(&rx, c->lp);
        int hl = am_header(c, pay, plen, plen, &rx);
        if (hl < 0)
            return;
        rx.payload = pay + hl;
        c->t->base.up.am(c->t->base.up.arg, &rx);
        break;
    }
    case NV_TCP_BYE: c->bye = 1; break;
    default:
        tcp_conn_fail(c, "frame not allowed after the handshake");
        break;
    }
}

void tcp_frame_begin(struct tcp_conn *c, const uint8_t *have, size_t nhave)
{
    struct nv_tcp_hdr *h = &c->h;
    c->dst = NULL;
    c->in_serve = 0;
    c->answer_token = NULL;
    switch (h->kind) {
    case NV_TCP_PUT: {
        uint64_t addr = 0;
        netvm_status_t st = check_access(c, h, NETVM_WRITE, &addr);
        if (st == NETVM_OK && c->frame_status == NETVM_OK) {
            c->dst = (uint8_t *)(uintptr_t)addr;
            c->frame_addr = addr;
            c->in_serve = 1;    /* the section ends at the frame's end */
        } else {
            serve_end(c);
        }
        if (c->frame_status == NETVM_OK)
            c->frame_status = st;
        break;
    }
    case NV_TCP_GET_RESP: {
        struct tcp_pending *p;
        c->answer_token = claim_answer(c, h, &p);
        if (c->answer_token && h->status == NETVM_OK) {
            if (h->len != p->len) {
                complete(c, c->answer_token, NETVM_ERR_SYS);
                c->answer_token = NULL;
                tcp_conn_fail(c, "GET answer of the wrong length");
                return;
            }
            if (c->frame_status == NETVM_OK)
                c->dst = p->dst;
        }
        if (c->frame_status == NETVM_OK)
            c->frame_status = (netvm_status_t)h->status;
        break;
    }
    case NV_TCP_AM: {
        memset(&c->amrx, 0, sizeof c->amrx);
        int hl = am_header(c, have, nhave, h->len, &c->amrx);
        if (hl < 0)
            return;
        /* the header is consumed here; the payload follows */
        have += hl;
        nhave -= (size_t)hl;
        if (c->frame_status != NETVM_OK)
            break;   /* the sender's memory failed it: nobody sees it */
        c->t->base.up.am(c->t->base.up.arg, &c->amrx);
        c->dst = c->amrx.dst;
        break;
    }
    default:
        tcp_conn_fail(c, "a frame of this kind cannot be this long");
        return;
    }
    /* what came with the header */
    if (c->dst && nhave) {
        if (nv_guarded_copy(c->dst, have, nhave) != 0) {
            c->frame_status = NETVM_ERR_FAULT;
            c->dst = NULL;
        } else {
            c->dst += nhave;
        }
    }
}

void tcp_frame_end(struct tcp_conn *c, netvm_status_t landed)
{
    struct nv_tcp_hdr *h = &c->h;
    netvm_status_t st = c->frame_status != NETVM_OK ? c->frame_status : landed;
    switch (h->kind) {
    case NV_TCP_PUT:
        if (c->in_serve) {
            c->in_serve = 0;
            serve_end(c);
        }
        put_done(c, h, st, c->frame_addr);
        break;
    case NV_TCP_GET_RESP:
        if (c->answer_token)
            complete(c, c->answer_token, st);
        break;
    case NV_TCP_AM:
        if (c->amrx.cookie)
            c->t->base.up.am_end(c->t->base.up.arg, &c->amrx, st);
        break;
    default:
        break;
    }
    c->answer_token = NULL;
    c->dst = NULL;
    c->frame_status = NETVM_OK;
}
