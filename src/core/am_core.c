/* Core's own handlers: the target's side of what a link cannot do itself —
 * atomics on memory it does not map, put-with-signal's word, notifications
 * and counters where the initiator cannot post into this process's
 * endpoint block, imports, failures of nonblocking operations, credits and
 * goodbyes. Every access to application memory is checked against the ATU
 * first and made with a guarded instruction, so memory unmapped behind
 * netvm's back fails the operation (NETVM_ERR_FAULT) instead of this
 * process. */
#define _GNU_SOURCE
#include "core/internal.h"
#include "util/atomic_op.h"
#include "util/guard.h"
#include "util/log.h"

#include <string.h>

/* Argument packing of the word operations: args[0] = slot | op << 32 |
 * mode << 40. */
enum { NV_WORD_NOTIFY = 1u << 0, NV_WORD_REPLY_ERR = 1u << 1 };

static inline uint32_t w_slot(uint64_t a) { return (uint32_t)a; }
static inline unsigned w_op(uint64_t a)   { return (unsigned)(a >> 32) & 0xff; }
static inline unsigned w_mode(uint64_t a) { return (unsigned)(a >> 40) & 0xff; }

/* The NIC's work after a peer's word access here is complete. */
static void word_done(netvm_ctx_t *ctx, struct nv_peer *p, uint64_t addr, unsigned access, int notify,
                      uint64_t tag)
{
    nv_ep_access(&ctx->ep, nv_peer_id(p), addr, 8, access);
    if (notify) {
        struct nv_ep_rec r = { .type = NETVM_EV_COMPLETER, .access = (uint16_t)access, .rank = nv_peer_id(p),
                               .value = tag, .addr = addr, .len = 8 };
        nv_ep_post(&ctx->ep, &r);
    }
}

/* An atomic or a signal on a word of ours; *old is the word's previous
 * value. */
static netvm_status_t apply_word(netvm_ctx_t *ctx, struct nv_peer *p, const struct nv_am_hdr *h, int signal, unsigned need,
                                 uint64_t *addr, uint64_t *old)
{
    if (h->nargs < 4)
        return NETVM_ERR_INVAL;
    nv_atu_serve_begin(&ctx->atu);
    netvm_status_t st = nv_atu_translate(&ctx->atu, w_slot(h->args[0]), h->args[1], h->args[2], 8, need, addr);
    if (st == NETVM_OK && (*addr & 7))
        st = NETVM_ERR_INVAL;
    /* an atomic from the tcp link is the target's access as a put is (a
     * signal's word is netvm's own: not checked) */
    if (st == NETVM_OK && !signal && ctx->tcp_pinned && p->lp.link != ctx->shm)
        st = nv_regc_check(ctx, *addr, 8);
    if (st == NETVM_OK) {
        uint64_t *w = (uint64_t *)(uintptr_t)*addr;
        int fault;
        if (!signal)
            fault = nv_guarded_atomic(w, (int)w_op(h->args[0]), h->args[3], h->nargs > 4 ? h->args[4] : 0, old);
        else if (w_op(h->args[0]) == NETVM_SIGNAL_SET)
            fault = nv_guarded_xchg_release(w, h->args[3], old);
        else
            fault = nv_guarded_fadd_release(w, h->args[3], old);
        if (fault)
            st = NETVM_ERR_FAULT;
    }
    nv_atu_serve_end(&ctx->atu);
    return st;
}

static void serve_atomic(netvm_ctx_t *ctx, struct nv_peer *p, const struct nv_am_hdr *h)
{
    uint64_t addr = 0, old = 0;
    netvm_status_t st = h->nargs >= 6 && w_op(h->args[0]) < NETVM_AOP_COUNT
                            ? apply_word(ctx, p, h, 0, NETVM_ATOMIC, &addr, &old) : NETVM_ERR_INVAL;
    if (st == NETVM_OK)
        word_done(ctx, p, addr, NETVM_TRIP_RW, w_mode(h->args[0]) & NV_WORD_NOTIFY, h->args[5]);
    nv_am_answer(ctx, p, h, st, &old, 1, NULL, 0);
}

static void serve_signal(netvm_ctx_t *ctx, struct nv_peer *p, const struct nv_am_hdr *h)
{
    uint64_t addr = 0, old = 0;
    netvm_status_t st = NETVM_ERR_INVAL;
    unsigned op = h->nargs >= 5 ? w_op(h->args[0]) : 99;
    struct nv_link *l = p->lp.link;
    uint32_t gate = h->nargs >= 6 ? (uint32_t)h->args[5] : 0;
    if (gate && l && l->ops->gate_failed && l->ops->gate_failed(l, &p->lp, gate, &st))
        op = 99;   /* the put before it failed here: no signal (st says why) */
    else if (op <= NETVM_SIGNAL_ADD)
        st = apply_word(ctx, p, h, 1, op == NETVM_SIGNAL_SET ? NETVM_WRITE : NETVM_ATOMIC, &addr, &old);
    if (st == NETVM_OK)
        word_done(ctx, p, addr, NETVM_TRIP_WRITE, w_mode(h->args[0]) & NV_WORD_NOTIFY, h->args[4]);
    else
        nv_debug("signal from peer %d failed: %s", nv_peer_id(p), netvm_strerror(st));
    if (h->flags & NV_AMW_F_TOKEN) {
        nv_am_answer(ctx, p, h, st, NULL, 0, NULL, 0);
    } else if ((w_mode(h->args[0]) & NV_WORD_REPLY_ERR) && st != NETVM_OK) {
        /* nobody waits: the initiator's next flush reports it, and this
         * answer reaches it before the flush's on the same ordered path */
        uint64_t a = (uint64_t)st;
        struct nv_am_hdr e = { .handler = NV_AMH_ERROR, .nargs = 1, .args = { a } };
        nv_am_send(ctx, p, &e, NULL, NULL, NV_AMS_REPLY);
    }
}

static void serve_notify(netvm_ctx_t *ctx, struct nv_peer *p, const struct nv_am_hdr *h)
{
    netvm_status_t st = NETVM_OK;
    if (h->handler == NV_AMH_COUNT) {
        st = h->nargs >= 2 ? nv_ep_count(&ctx->ep, nv_peer_id(p), (uint32_t)h->args[0], h->args[1])
                           : NETVM_ERR_INVAL;
        if (st != NETVM_OK)
            nv_warn("peer %d counted on counter %llu, beyond NETVM_COUNTERS", nv_peer_id(p),
                    (unsigned long long)h->args[0]);
    } else {
        struct nv_ep_rec r = { .type = NETVM_EV_NOTIFY, .rank = nv_peer_id(p), .value = h->nargs ? h->args[0] : 0 };
        nv_ep_post(&ctx->ep, &r);
    }
    nv_am_answer(ctx, p, h, st, NULL, 0, NULL, 0);
}

netvm_status_t nv_lookup_segment(netvm_ctx_t *ctx, const char *name, uint32_t slot, uint64_t key,
                                 struct nv_seg_desc *out);
void          *nv_segment_mr(netvm_ctx_t *ctx, uint32_t slot, const struct nv_link *l);

static void serve_import(netvm_ctx_t *ctx, struct nv_peer *p, struct nv_am_rx *rx)
{
    const struct nv_am_hdr *h = &rx->h;
    char name[64];
    const char *np = NULL;
    netvm_status_t st = NETVM_OK;
    if (h->len) {
        if (h->len >= sizeof name || !rx->payload)
            st = NETVM_ERR_INVAL;
        else {
            memcpy(name, rx->payload, (size_t)h->len);
            name[h->len] = 0;
            if (strlen(name) != h->len)
                st = NETVM_ERR_INVAL;
            np = name;
        }
    } else if (h->nargs < 2) {
        st = NETVM_ERR_INVAL;
    }
    struct nv_seg_desc d;
    if (st == NETVM_OK)
        st = nv_lookup_segment(ctx, np, h->nargs ? (uint32_t)h->args[0] : 0, h->nargs > 1 ? h->args[1] : 0, &d);
    uint64_t a[6] = { 0 };
    unsigned n = 5;
    if (st == NETVM_OK) {
        a[0] = d.slot;
        a[1] = d.key;
        a[2] = d.len;
        a[3] = d.rights;
        a[4] = d.addr;   /* where: registration strategies pin the target's addresses (reg_core.c) */
        /* a link that addresses registered memory: its key too */
        struct nv_link *l = p->lp.link;
        if (l && l->ops->mr_key) {
            a[5] = l->ops->mr_key(l, nv_segment_mr(ctx, d.slot, l));
            n = 6;
        }
    }
    nv_am_answer(ctx, p, h, st, a, n, NULL, 0);
}

void nv_am_core_dispatch(netvm_ctx_t *ctx, struct nv_peer *p, struct nv_am_rx *rx)
{
    const struct nv_am_hdr *h = &rx->h;
    switch (h->handler) {
    case NV_AMH_ATOMIC: serve_atomic(ctx, p, h); break;
    case NV_AMH_SIGNAL: serve_signal(ctx, p, h); break;
    case NV_AMH_NOTIFY:
    case NV_AMH_COUNT:  serve_notify(ctx, p, h); break;
    case NV_AMH_IMPORT: serve_import(ctx, p, rx); break;
    case NV_AMH_ERROR: {
        netvm_status_t st = h->nargs && h->args[0] < NETVM_STATUS_COUNT && h->args[0] != NETVM_OK
                                ? (netvm_status_t)h->args[0] : NETVM_ERR_SYS;
        nv_peer_async_error(p, st);
        break;
    }
    case NV_AMH_REG:    nv_regc_serve(ctx, p, rx); break;
    case NV_AMH_CREDIT: break;   /* the credits rode in the header */
    case NV_AMH_BYE:
        nv_peer_down(ctx, p, 1);
        if (p->lp.link)
            p->lp.link->ops->peer_close(p->lp.link, &p->lp, 0);
        break;
    default: break;
    }
}
