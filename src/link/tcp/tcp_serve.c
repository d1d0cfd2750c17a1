/* What a connection does with each frame: the target's side (checks against
 * the ATU, then straight into or out of memory) and the initiator's side
 * (answers completing pending operations). A frame kind not allowed in the
 * connection's state closes it. */
#define _GNU_SOURCE
#include "link/tcp/tcp_priv.h"
#include "util/hmac.h"
#include "util/log.h"
#include "util/mapped.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void serve_begin(struct tcp_conn *c) { atomic_fetch_add(&c->serve_seq, 1); }
static void serve_end(struct tcp_conn *c)   { atomic_fetch_add_explicit(&c->serve_seq, 1, memory_order_release); }

static void reply(struct tcp_conn *c, uint8_t kind, uint32_t req_id, netvm_status_t st)
{
    struct nv_tcp_hdr h = { .kind = kind, .req_id = req_id, .status = (uint16_t)st };
    tcp_queue_reply(c, &h, NULL, 0, 0, -1, NULL);
}

/* Enter the serve section, then check the frame's access against the ATU
 * and the page tables. Inside the section before the check: a revocation
 * then either waits for this frame or this frame sees it (as shm's
 * op_seq). The caller ends the section. */
static netvm_status_t check_access(struct tcp_conn *c, unsigned need, uint64_t *addr)
{
    struct tcp_link *t = c->link;
    serve_begin(c);
    netvm_status_t st = t->base.up.translate(t->base.up.arg, c->h.slot, c->h.key, c->h.off, c->h.len,
                                             need, addr);
    if (st == NETVM_OK && !nv_range_mapped(*addr, c->h.len))
        st = NETVM_ERR_FAULT;
    return st;
}

/* After an access by the peer is complete here: fire our tripwires, post
 * the notification it asked for. */
static void access_done(struct tcp_conn *c, uint64_t addr, uint64_t len, unsigned access,
                        const struct nv_note *note, unsigned kind)
{
    struct nv_ep *ep = c->link->p.ep;
    if (!ep)
        return;
    nv_ep_access(ep, c->rank, addr, len, access);
    if (note->flags & kind) {
        struct nv_ep_rec r = { .type = kind == NV_NOTE_RESPONDER ? NETVM_EV_RESPONDER : NETVM_EV_COMPLETER,
                               .access = (uint16_t)access, .rank = c->rank, .value = note->tag,
                               .addr = addr, .len = len };
        nv_ep_post(ep, &r);
    }
}

void tcp_write_done(struct tcp_conn *c, uint64_t addr, uint64_t len, const struct nv_note *note)
{
    access_done(c, addr, len, NETVM_TRIP_WRITE, note, NV_NOTE_COMPLETER);
}

void tcp_read_done(struct tcp_conn *c, uint64_t addr, uint64_t len, const struct nv_note *note)
{
    access_done(c, addr, len, NETVM_TRIP_READ, note, NV_NOTE_RESPONDER);
}

static void begin_put(struct tcp_conn *c)
{
    uint64_t addr = 0;
    netvm_status_t st = check_access(c, NETVM_WRITE, &addr);
    c->frame_status = st;
    if (st == NETVM_OK) {
        c->dst = (uint8_t *)(uintptr_t)addr;
        c->frame_addr = addr;
        c->in_serve = 1;    /* the section ends in tcp_frame_end */
    } else {
        serve_end(c);
    }
}

static void begin_get(struct tcp_conn *c)
{
    struct tcp_link *t = c->link;
    uint64_t addr = 0;
    netvm_status_t st = check_access(c, NETVM_READ, &addr);
    struct nv_tcp_hdr h = { .kind = NV_TCP_GET_RESP, .req_id = c->h.req_id, .status = (uint16_t)st };
    if (st == NETVM_OK && c->h.len) {
        /* answered straight from the source memory; the reference keeps the
         * segment from being revoked until the bytes are sent */
        h.len = c->h.len;
        atomic_fetch_add(&t->slot_refs[c->h.slot], 1);
        serve_end(c);
        struct nv_note note = { .flags = (c->h.flags & NV_TCP_F_NOTIFY) ? NV_NOTE_RESPONDER : 0,
                                .tag = c->h.operand };
        tcp_queue_reply(c, &h, (const void *)(uintptr_t)addr, c->h.len, 0, (int)c->h.slot, &note);
        return;
    }
    serve_end(c);
    tcp_queue_reply(c, &h, NULL, 0, 0, -1, NULL);
}

static void begin_answer(struct tcp_conn *c)
{
    struct tcp_link *t = c->link;
    struct tcp_pending *p = tcp_pending_take(t, c->h.req_id, c->h.kind, c->rank);
    c->answer_token = NULL;
    if (!p || !t->base.up.claim(t->base.up.arg, p->token)) {
        /* a late answer to a request that timed out: its payload (if any)
         * is drained, the connection stays */
        nv_debug("tcp link: late answer from rank %d dropped", c->rank);
        return;
    }
    if (c->h.kind == NV_TCP_GET_RESP && c->h.status == NETVM_OK) {
        if (c->h.len != p->len) {
            tcp_conn_fail(c, "GET answer of the wrong length");
            return;
        }
        c->dst = p->dst;
    }
    if (c->h.kind == NV_TCP_IMPORT_RESP && c->h.status == NETVM_OK) {
        p->rd->slot = c->h.slot;
        p->rd->key = c->h.key;
        p->rd->len = c->h.len;
        p->rd->rights = (unsigned)c->h.operand;
        p->rd->addr = 0;
    }
    /* completed at the frame's end, once the payload has landed */
    c->frame_status = (netvm_status_t)c->h.status;
    c->answer_token = p->token;
    p->id = 0;   /* the slot is free again */
}

void tcp_frame_begin(struct tcp_conn *c)
{
    int state = atomic_load(&c->state);
    if (state != CONN_READY) {
        tcp_conn_fail(c, "frame before authentication");
        return;
    }
    switch (c->h.kind) {
    case NV_TCP_PUT:        begin_put(c); break;
    case NV_TCP_GET:        begin_get(c); break;
    case NV_TCP_PUT_ACK:
    case NV_TCP_GET_RESP:
    case NV_TCP_FLUSH_ACK:
    case NV_TCP_IMPORT_RESP: begin_answer(c); break;
    case NV_TCP_FLUSH: {
        struct nv_tcp_hdr h = { .kind = NV_TCP_FLUSH_ACK, .req_id = c->h.req_id, .status = (uint16_t)c->first_err };
        c->first_err = NETVM_OK;
        tcp_queue_reply(c, &h, NULL, 0, 0, -1, NULL);
        break;
    }
    case NV_TCP_BYE:        c->bye = 1; break;
    case NV_TCP_AM:
    case NV_TCP_IMPORT:     break;   /* acted on once the payload is in */
    default:
        tcp_conn_fail(c, "frame not allowed after authentication");
        break;
    }
}

static void end_import(struct tcp_conn *c)
{
    struct tcp_link *t = c->link;
    char name[NV_TCP_NAME_MAX + 1];
    memcpy(name, c->small, c->small_got);
    name[c->small_got] = 0;
    struct nv_seg_desc d;
    netvm_status_t st = t->base.up.lookup(t->base.up.arg, c->small_got ? name : NULL, c->h.slot, c->h.key, &d);
    struct nv_tcp_hdr h = { .kind = NV_TCP_IMPORT_RESP, .req_id = c->h.req_id, .status = (uint16_t)st };
    if (st == NETVM_OK) {
        h.slot = d.slot;
        h.key = d.key;
        h.len = d.len;
        h.operand = d.rights;
    }
    tcp_queue_reply(c, &h, NULL, 0, 0, -1, NULL);
}

void tcp_frame_end(struct tcp_conn *c)
{
    struct tcp_link *t = c->link;
    switch (c->h.kind) {
    case NV_TCP_PUT:
        if (c->in_serve) {
            c->in_serve = 0;
            serve_end(c);
        }
        if (c->frame_status == NETVM_OK) {
            /* the payload is in place: the target's NIC work */
            struct nv_note note = { .flags = (c->h.flags & NV_TCP_F_NOTIFY) ? NV_NOTE_COMPLETER : 0,
                                    .tag = c->h.operand };
            tcp_write_done(c, c->frame_addr, c->h.len, &note);
        }
        if (c->h.flags & NV_TCP_F_ACK)
            reply(c, NV_TCP_PUT_ACK, c->h.req_id, c->frame_status);
        else if (c->frame_status != NETVM_OK && c->first_err == NETVM_OK)
            c->first_err = c->frame_status;   /* reported by the next FLUSH */
        break;
    case NV_TCP_PUT_ACK:
    case NV_TCP_GET_RESP:
    case NV_TCP_FLUSH_ACK:
    case NV_TCP_IMPORT_RESP: {
        if (c->answer_token)
            t->base.up.complete(t->base.up.arg, c->answer_token, c->frame_status);
        break;
    }
    case NV_TCP_AM:
        t->base.up.am(t->base.up.arg, c->rank, c->small, NV_AM_SIZE);
        break;
    case NV_TCP_IMPORT:
        end_import(c);
        break;
    default:
        break;
    }
}
