/* Put with signal, and waiting on a local word (OpenSHMEM's
 * put_signal / wait_until): the data, then a 64-bit word set or added at
 * the target, which changes only after the data is visible. On a mapped
 * shm segment both are stores by the initiator in order; elsewhere the
 * signal is an active message behind the data on the same ordered path,
 * applied by the target's progress engine. A waiter that stops spinning
 * sleeps on a wake-only tripwire over its word, so the write itself wakes
 * it. */
#include "core/internal.h"
#include "util/time.h"
#include <string.h>

static netvm_status_t check_signal(netvm_ctx_t *ctx, netvm_rseg_t *dst, netvm_rseg_t *sig, size_t sig_off,
                                   netvm_signal_op_t op)
{
    if (!ctx || !dst || !sig || sig->ctx != ctx || (unsigned)op > NETVM_SIGNAL_ADD)
        return NETVM_ERR_INVAL;
    if (sig->peer != dst->peer)
        return NETVM_ERR_INVAL;   /* ordering holds per target only */
    if (!nv_range_ok(sig_off, 8, sig->d.len))
        return NETVM_ERR_BOUNDS;
    if ((sig->d.addr + sig_off) & 7)
        return NETVM_ERR_INVAL;
    unsigned need = op == NETVM_SIGNAL_SET ? NETVM_WRITE : NETVM_ATOMIC;
    return (sig->d.rights & need) == need ? NETVM_OK : NETVM_ERR_RIGHTS;
}

/* The word's operation for the target (am_core.c): args[0] = slot | op << 32 |
 * mode << 40 (mode 2: answer only a failure), key, offset, value, tag, the
 * gate of the put before it (0: none). */
static void signal_args(const netvm_rseg_t *sig, size_t off, uint64_t value, netvm_signal_op_t op, unsigned mode,
                        uint32_t gate, struct nv_am_hdr *h)
{
    h->handler = NV_AMH_SIGNAL;
    h->nargs = 6;
    h->args[0] = (uint64_t)sig->d.slot | (uint64_t)op << 32 | (uint64_t)mode << 40;
    h->args[1] = sig->d.key;
    h->args[2] = off;
    h->args[3] = value;
    h->args[4] = 0;
    h->args[5] = gate;
}

static netvm_status_t signal(netvm_ctx_t *ctx, netvm_rseg_t *sig, size_t off, uint64_t value,
                             netvm_signal_op_t op, int remote, uint32_t gate)
{
    struct nv_link *l = sig->link;
    int sync = (l->ops->caps.flags & NV_LCAP_SYNC) != 0;
    if ((sig->d.flags & NV_RDESC_MAPPED) && sync) {
        /* the initiator's own store or CPU atomic, after the data's */
        netvm_status_t st = nv_rma_keep_order(ctx, sig->peer, 0);
        if (st != NETVM_OK)
            return st;
        if (op == NETVM_SIGNAL_SET) {
            st = l->ops->put(l, &sig->d, off, &value, 8, 1, NULL, 0, NULL);
        } else {
            uint64_t old;
            st = l->ops->atomic(l, &sig->d, off, NETVM_AOP_ADD, value, 0, &old, NULL);
        }
        if (st == NETVM_OK && nv_rtrip_any(sig))
            nv_rtrip_fire(ctx, sig, off, 8);
        return st;
    }
    struct nv_am_hdr h;
    memset(&h, 0, sizeof h);
    if (!remote && !sync && !nv_rtrip_any(sig)) {
        /* nobody waits and no event follows: the target answers only a
         * failure, which reaches us before the answer to our next flush
         * (the same ordered stream), so success costs the target no send */
        signal_args(sig, off, value, op, 2, gate, &h);
        return nv_am_send(ctx, sig->peer, &h, NULL, NULL, NV_AMS_NOW);
    }
    struct netvm_req *q;
    netvm_status_t st = nv_reserve_req(ctx, sig->peer, NULL, &q);
    if (st != NETVM_OK)
        return st;
    signal_args(sig, off, value, op, 0, gate, &h);
    if (sync)
        nv_req_ordered(q);   /* a direct access after it waits for it */
    if (!remote) {
        /* nobody waits: a failure at the target goes to the next flush */
        q->ev_kinds = NV_REQEV_ERROR | (nv_rtrip_any(sig) ? NV_REQEV_RTRIP : 0);
        q->ev_rseg = sig;
        q->ev_addr = off;
        q->ev_len = 8;
        nv_req_detach(q);
        uint32_t id = nv_req_id(q);
        st = nv_am_call(ctx, sig->peer, q, NV_AMH_SIGNAL, h.args, h.nargs, NULL, 0, 0);
        if (st != NV_LINK_PENDING) {
            nv_req_end_started(q, id, st);   /* (no event: the error is returned) */
            return st;
        }
        return NETVM_OK;
    }
    st = nv_finish_req(ctx, q, nv_am_call(ctx, sig->peer, q, NV_AMH_SIGNAL, h.args, h.nargs, NULL, 0, 0));
    if (st == NETVM_OK && nv_rtrip_any(sig))
        nv_rtrip_fire(ctx, sig, off, 8);
    return st;
}

static netvm_status_t put_signal(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off, const void *src,
                                 size_t len, netvm_rseg_t *sig, size_t sig_off, uint64_t value,
                                 netvm_signal_op_t op, unsigned flags, int remote)
{
    netvm_status_t st = check_signal(ctx, dst, sig, sig_off, op);
    if (st != NETVM_OK)
        return st;
    if (flags & ~(unsigned)NETVM_F_UNORDERED)
        return NETVM_ERR_INVAL;
    /* the data completes locally; the signal behind it on the same
     * ordered path cannot overtake it (NETVM_F_UNORDERED is about the data
     * alone). Where the data may still fail at the target (a link without
     * NV_LCAP_SYNC), the put and the signal name one gate, and the target
     * refuses the signal of a put that failed there. */
    uint32_t gate = 0;
    if (!(dst->link->ops->caps.flags & NV_LCAP_SYNC))
        while (!(gate = atomic_fetch_add_explicit(&ctx->next_gate, 1, memory_order_relaxed) + 1))
            ;
    st = nv_put(ctx, dst, off, src, len, 0, 0, 0, gate);
    return st == NETVM_OK ? signal(ctx, sig, sig_off, value, op, remote, gate) : st;
}

netvm_status_t netvm_put_signal(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off, const void *src,
                                size_t len, netvm_rseg_t *sig, size_t sig_off, uint64_t value,
                                netvm_signal_op_t op, unsigned flags)
{
    return put_signal(ctx, dst, off, src, len, sig, sig_off, value, op, flags, 1);
}

netvm_status_t netvm_put_signal_nb(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off, const void *src,
                                   size_t len, netvm_rseg_t *sig, size_t sig_off, uint64_t value,
                                   netvm_signal_op_t op, unsigned flags)
{
    return put_signal(ctx, dst, off, src, len, sig, sig_off, value, op, flags, 0);
}

/* --- waiting on a word -------------------------------------------------------- */

static int holds(uint64_t v, netvm_cmp_t cmp, uint64_t value)
{
    switch (cmp) {
    case NETVM_CMP_EQ: return v == value;
    case NETVM_CMP_NE: return v != value;
    case NETVM_CMP_GT: return v > value;
    case NETVM_CMP_GE: return v >= value;
    case NETVM_CMP_LT: return v < value;
    case NETVM_CMP_LE: return v <= value;
    }
    return 0;
}

static uint64_t load_word(const uint64_t *addr)
{
    return __atomic_load_n(addr, __ATOMIC_ACQUIRE);
}

/* A word that arrives soon after its waiter gave up spinning costs the
 * waiter a sleep and a wake-up (two over tcp: the progress thread takes
 * the write in, then wakes it), and in a ping-pong the late answer makes
 * the other side sleep too. So the spin doubles (up to NETVM_SPIN_MAX_US)
 * after a sleep no longer than that longest spin (wake-ups included: a
 * longer spin would likely have seen the word), and halves back (not
 * below NETVM_SPIN_US) after a sleep of more than four times it, or one
 * that timed out (slept UINT64_MAX). NETVM_SPIN_US=0 never spins. */
static void adapt_spin(netvm_ctx_t *ctx, uint64_t spin, uint64_t slept)
{
    if (!ctx->spin_ns)
        return;
    uint64_t next = spin;
    if (slept <= ctx->word_spin_max)
        next = spin * 2 < ctx->word_spin_max ? spin * 2 : ctx->word_spin_max;
    else if (slept / 4 > ctx->word_spin_max)
        next = spin / 2 > ctx->spin_ns ? spin / 2 : ctx->spin_ns;
    if (next != spin)
        atomic_store_explicit(&ctx->word_spin_ns, next, memory_order_relaxed);
}

netvm_status_t netvm_wait_until(netvm_ctx_t *ctx, const uint64_t *addr, netvm_cmp_t cmp, uint64_t value,
                                 unsigned flags, int timeout_ms, uint64_t *seen)
{
    if (!ctx || !addr || ((uintptr_t)addr & 7) || (unsigned)cmp > NETVM_CMP_LE ||
        (flags & ~(unsigned)(NETVM_WAIT_SPIN | NETVM_WAIT_SLEEP)) ||
        (flags & NETVM_WAIT_SPIN && flags & NETVM_WAIT_SLEEP))
        return NETVM_ERR_INVAL;
    uint64_t start = nv_now_ns();
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : start + (uint64_t)timeout_ms * 1000000ull;
    uint64_t spin = atomic_load_explicit(&ctx->word_spin_ns, memory_order_relaxed);
    uint64_t spin_until = (flags & NETVM_WAIT_SPIN) ? UINT64_MAX
                        : (flags & NETVM_WAIT_SLEEP) ? start : start + spin;
    uint64_t v;
    netvm_status_t st = NETVM_ERR_TIMEOUT;
    for (unsigned iter = 0;; iter++) {
        if (holds(v = load_word(addr), cmp, value))
            goto out_ok;
        /* a pass that yields (nv_spin_pause) is a system call already:
         * drive progress on each, or a write that needs the engine (tcp)
         * would wait behind dozens of yields */
        if ((iter & 15) == 15 || (ctx->spin_yield && iter >= ctx->spin_yield)) {
            uint64_t now = nv_now_ns();
            if (now >= deadline)
                goto out;
            if (now >= spin_until)
                break;
            netvm_progress(ctx);   /* a link that needs polling (tcp, active messages) */
        }
        nv_spin_pause(ctx->spin_yield, iter);
        if (spin_until == start)
            break;
    }
    /* sleep: a wake-only tripwire over the word; arming it ends with the
     * heavy fence, so a write that missed the table is visible below */
    netvm_tripwire_t *tw = NULL;
    st = nv_trip_arm_wake(ctx, addr, 8, &tw);
    if (st != NETVM_OK)
        return st;
    uint64_t slept_from = nv_now_ns();
    st = NETVM_ERR_TIMEOUT;
    for (;;) {
        uint32_t seq = nv_ep_wake_seq(&ctx->ep);
        if (holds(v = load_word(addr), cmp, value)) {
            nv_ep_wake_cancel(&ctx->ep);
            st = NETVM_OK;
            break;
        }
        uint64_t now = nv_now_ns();
        if (now >= deadline) {
            nv_ep_wake_cancel(&ctx->ep);
            break;
        }
        uint64_t slice = ctx->have_thread ? 100000000ull : 1000000ull;
        if (deadline - now < slice)
            slice = deadline - now;
        /* the write that wakes us may need the progress engine (tcp): it
         * must not be left with this thread, which sleeps on the word */
        nv_progress_release(ctx);
        nv_ep_wake_wait(&ctx->ep, seq, slice);
        if (!ctx->have_thread)
            netvm_progress(ctx);
    }
    netvm_tripwire_disarm(tw);
    if (!flags)
        adapt_spin(ctx, spin, st == NETVM_OK ? nv_now_ns() - slept_from : UINT64_MAX);
    if (seen)
        *seen = v;
    return st;
out_ok:
    st = NETVM_OK;
out:
    if (seen)
        *seen = v;
    return st;
}
