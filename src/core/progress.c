/* The progress engine: executes what peers ask of this process (atomics on
 * memory they cannot map), completes this process's own requests, and makes
 * both happen without the application calling netvm. A thread sleeps in
 * epoll_wait (an idle process costs no CPU); a thread waiting for its own
 * operation polls inline first, so latency does not pay a thread hand-off,
 * then sleeps on a futex. */
#define _GNU_SOURCE
#include "core/internal.h"
#include "util/atomic_op.h"
#include "util/mapped.h"
#include "util/log.h"
#include "util/thread.h"
#include "util/time.h"
#include "wire/am.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* An answer to the initiator of m, queued behind what its link is sending. */
static void send_back(netvm_ctx_t *ctx, const struct nv_am *m, const struct nv_am *answer)
{
    uint8_t buf[NV_AM_SIZE];
    nv_am_encode(answer, buf);
    struct nv_link *l = ctx->peers[m->src_rank].link;
    if (l->ops->am_send(l, m->src_rank, buf, NV_AM_SEND_REPLY) != NETVM_OK)
        nv_debug("answer to rank %d dropped: it is gone", m->src_rank);
}

static void send_reply(netvm_ctx_t *ctx, const struct nv_am *m, netvm_status_t st, uint64_t result)
{
    struct nv_am reply = { .kind = NV_AM_REPLY, .src_rank = ctx->rank, .req_id = m->req_id,
                           .status = (uint16_t)st, .operand = result };
    send_back(ctx, m, &reply);
}

/* A failure of an operation nobody waits for: the initiator keeps it for
 * its next flush. */
static void send_error(netvm_ctx_t *ctx, const struct nv_am *m, netvm_status_t st)
{
    struct nv_am e = { .kind = NV_AM_ERROR, .src_rank = ctx->rank, .status = (uint16_t)st };
    send_back(ctx, m, &e);
}

static void take_error(netvm_ctx_t *ctx, const struct nv_am *m)
{
    int known = m->status < NETVM_STATUS_COUNT && m->status != NETVM_OK;
    nv_peer_async_error(ctx, m->src_rank, known ? (netvm_status_t)m->status : NETVM_ERR_SYS);
}

/* The NIC's work after a peer's word access here is complete. */
static void word_done(netvm_ctx_t *ctx, const struct nv_am *m, uint64_t addr, unsigned access)
{
    nv_ep_access(&ctx->ep, m->src_rank, addr, 8, access);
    if (m->flags & NV_AM_F_NOTIFY) {
        struct nv_ep_rec r = { .type = NETVM_EV_COMPLETER, .access = (uint16_t)access, .rank = m->src_rank,
                               .value = m->tag, .addr = addr, .len = 8 };
        nv_ep_post(&ctx->ep, &r);
    }
}

/* An atomic (op < NETVM_AOP_COUNT) or a signal (set or add) on a word of
 * ours; returns the status, *old the word's previous value. */
static netvm_status_t apply_word(netvm_ctx_t *ctx, const struct nv_am *m, unsigned need, uint64_t *addr,
                                 uint64_t *old)
{
    nv_atu_serve_begin(&ctx->atu);
    netvm_status_t st = nv_atu_translate(&ctx->atu, m->slot, m->key, m->off, 8, need, addr);
    if (st == NETVM_OK && (*addr & 7))
        st = NETVM_ERR_INVAL;
    if (st == NETVM_OK && !nv_range_mapped(*addr, 8))
        st = NETVM_ERR_FAULT;
    if (st == NETVM_OK) {
        uint64_t *w = (uint64_t *)(uintptr_t)*addr;
        if (m->kind == NV_AM_ATOMIC)
            *old = nv_atomic_apply(w, (netvm_atomic_op_t)m->op, m->operand, m->compare);
        else if (m->op == NETVM_SIGNAL_SET)
            *old = __atomic_exchange_n(w, m->operand, __ATOMIC_RELEASE);
        else
            *old = __atomic_fetch_add(w, m->operand, __ATOMIC_RELEASE);
    }
    nv_atu_serve_end(&ctx->atu);
    return st;
}

static void serve_atomic(netvm_ctx_t *ctx, const struct nv_am *m)
{
    uint64_t addr = 0, old = 0;
    netvm_status_t st = m->op < NETVM_AOP_COUNT ? apply_word(ctx, m, NETVM_ATOMIC, &addr, &old)
                                                : NETVM_ERR_INVAL;
    if (st == NETVM_OK)
        word_done(ctx, m, addr, NETVM_TRIP_RW);
    send_reply(ctx, m, st, old);
}

static void serve_signal(netvm_ctx_t *ctx, const struct nv_am *m)
{
    uint64_t addr = 0, old = 0;
    netvm_status_t st = NETVM_ERR_INVAL;
    if (m->op <= NETVM_SIGNAL_ADD)
        st = apply_word(ctx, m, m->op == NETVM_SIGNAL_SET ? NETVM_WRITE : NETVM_ATOMIC, &addr, &old);
    if (st == NETVM_OK)
        word_done(ctx, m, addr, NETVM_TRIP_WRITE);
    else
        nv_debug("signal from rank %d failed: %s", m->src_rank, netvm_strerror(st));
    if (m->flags & NV_AM_F_REPLY)
        send_reply(ctx, m, st, 0);
    else if ((m->flags & NV_AM_F_REPLY_ERR) && st != NETVM_OK)
        send_error(ctx, m, st);
}

/* A notification put or a counter increment from a peer that cannot post
 * into our block itself. */
static void serve_notify(netvm_ctx_t *ctx, const struct nv_am *m)
{
    netvm_status_t st = NETVM_OK;
    if (m->kind == NV_AM_COUNT) {
        st = nv_ep_count(&ctx->ep, m->src_rank, m->slot, m->operand);
        if (st != NETVM_OK)
            nv_warn("rank %d counted on counter %u, beyond NETVM_COUNTERS", m->src_rank, m->slot);
    } else {
        struct nv_ep_rec r = { .type = NETVM_EV_NOTIFY, .rank = m->src_rank, .value = m->operand };
        nv_ep_post(&ctx->ep, &r);
    }
    if (m->flags & NV_AM_F_REPLY)
        send_reply(ctx, m, st, 0);
}

static void take_reply(netvm_ctx_t *ctx, const struct nv_am *m)
{
    struct netvm_req *r = nv_req_lookup(ctx, m->req_id);
    if (!r || r->rank != m->src_rank) {
        nv_debug("stale or foreign reply from rank %d ignored", m->src_rank);
        return;
    }
    netvm_status_t st = m->status < NETVM_STATUS_COUNT ? (netvm_status_t)m->status : NETVM_ERR_SYS;
    nv_req_complete(r, st, m->operand);
}

void nv_am_upcall(void *arg, int src_rank, const uint8_t *msg, size_t len)
{
    netvm_ctx_t *ctx = arg;
    struct nv_am m;
    if (nv_am_decode(msg, len, &m) != 0 || m.src_rank >= ctx->size ||
        (src_rank >= 0 && src_rank != m.src_rank)) {
        nv_warn("malformed active message dropped");
        return;
    }
    switch (m.kind) {
    case NV_AM_ATOMIC: serve_atomic(ctx, &m); break;
    case NV_AM_SIGNAL: serve_signal(ctx, &m); break;
    case NV_AM_NOTIFY:
    case NV_AM_COUNT:  serve_notify(ctx, &m); break;
    case NV_AM_REPLY:  take_reply(ctx, &m);   break;
    case NV_AM_ERROR:  take_error(ctx, &m);   break;
    default: break;
    }
}

void nv_complete_upcall(void *arg, void *token, netvm_status_t st)
{
    (void)arg;
    nv_req_complete(token, st, 0);
}

int nv_claim_upcall(void *arg, void *token)
{
    (void)arg;
    return nv_req_claim(token);
}

netvm_status_t nv_translate_upcall(void *arg, uint32_t slot, uint64_t key, uint64_t off, uint64_t len,
                                   unsigned need, uint64_t *addr)
{
    netvm_ctx_t *ctx = arg;
    return nv_atu_translate(&ctx->atu, slot, key, off, len, need, addr);
}

void nv_peer_down_upcall(void *arg, int rank)
{
    netvm_ctx_t *ctx = arg;
    if (atomic_exchange(&ctx->peers[rank].dead, 1))
        return;
    /* nothing more will come from it: fail what waits on it */
    for (uint32_t i = 0; i < ctx->nreqs; i++) {
        struct netvm_req *r = &ctx->reqs[i];
        if ((atomic_load(&r->state) & 0xff) == NV_REQ_PENDING && r->rank == rank)
            nv_req_complete(r, NETVM_ERR_PEER, 0);
    }
}

static int poll_all(netvm_ctx_t *ctx)
{
    int n = 0;
    for (int i = 0; i < ctx->nlinks; i++)
        n += ctx->links[i]->ops->poll(ctx->links[i], -1);
    return n;
}

/* Ask every link whether the thread may sleep; undo for those that agreed
 * if one says work arrived. */
static int sleep_prepare_all(netvm_ctx_t *ctx)
{
    for (int i = 0; i < ctx->nlinks; i++)
        if (ctx->links[i]->ops->sleep_prepare(ctx->links[i])) {
            for (int k = 0; k < i; k++)
                ctx->links[k]->ops->sleep_done(ctx->links[k]);
            return 1;
        }
    return 0;
}

static int sleep_limit(netvm_ctx_t *ctx)
{
    int limit = -1;
    for (int i = 0; i < ctx->nlinks; i++) {
        int ms = ctx->links[i]->ops->sleep_limit_ms(ctx->links[i]);
        if (ms >= 0 && (limit < 0 || ms < limit))
            limit = ms;
    }
    return limit;
}

static void *progress_main(void *arg)
{
    netvm_ctx_t *ctx = arg;
    struct epoll_event ev[16];
    nv_is_progress_thread = 1;
    for (;;) {
        /* after a wake-up, linger: a burst of requests then costs one
         * wake-up, not one each */
        uint64_t until = nv_now_ns() + ctx->linger_ns;
        do {
            if (poll_all(ctx))
                until = nv_now_ns() + ctx->linger_ns;
            else
                nv_cpu_relax();
        } while (ctx->linger_ns && nv_now_ns() < until);
        if (sleep_prepare_all(ctx))
            continue;
        int n = epoll_wait(ctx->epfd, ev, 16, sleep_limit(ctx));
        for (int i = 0; i < ctx->nlinks; i++) {
            ctx->links[i]->ops->sleep_done(ctx->links[i]);
            ctx->links[i]->ops->tick(ctx->links[i]);
        }
        for (int i = 0; i < n; i++) {
            if (ev[i].data.ptr == &ctx->stop_token)
                return NULL;
            struct nv_link *l = ((struct nv_link_ev *)ev[i].data.ptr)->link;
            l->ops->epoll_event(l, ev[i].data.ptr);
        }
    }
}

netvm_status_t nv_progress_start(netvm_ctx_t *ctx)
{
    ctx->epfd = epoll_create1(EPOLL_CLOEXEC);
    ctx->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ctx->epfd < 0 || ctx->stopfd < 0)
        return NETVM_ERR_SYS;
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &ctx->stop_token };
    if (epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, ctx->stopfd, &ev) != 0)
        return NETVM_ERR_SYS;
    for (int i = 0; i < ctx->nlinks; i++) {
        netvm_status_t st = ctx->links[i]->ops->epoll_add(ctx->links[i], ctx->epfd);
        if (st != NETVM_OK)
            return st;
    }
    if (!ctx->have_thread)
        return NETVM_OK;
    int err = pthread_create(&ctx->thread, NULL, progress_main, ctx);
    if (err) {
        nv_error("cannot start the progress thread: %s", strerror(err));
        ctx->have_thread = 0;
        return NETVM_ERR_SYS;
    }
    return NETVM_OK;
}

void nv_progress_stop(netvm_ctx_t *ctx)
{
    if (ctx->have_thread) {
        uint64_t one = 1;
        ssize_t n = write(ctx->stopfd, &one, sizeof one);
        (void)n;
        pthread_join(ctx->thread, NULL);
        ctx->have_thread = 0;
    }
    if (ctx->epfd >= 0)
        close(ctx->epfd);
    if (ctx->stopfd >= 0)
        close(ctx->stopfd);
    ctx->epfd = ctx->stopfd = -1;
}

/* Without a progress thread nobody watches the pidfds: look ourselves. The
 * peer-down sweep may also have run between this request's credit check and
 * its becoming pending (it then missed it), so a dead peer fails the request
 * we wait for here whoever marked it dead. */
static void check_peer(netvm_ctx_t *ctx, struct netvm_req *r)
{
    struct nv_link *l = ctx->peers[r->rank].link;
    if (atomic_load(&ctx->peers[r->rank].dead) || l->ops->peer_dead(l, r->rank)) {
        nv_peer_down_upcall(ctx, r->rank);
        nv_req_give_up(r, NETVM_ERR_PEER);
    }
}

static int req_done(struct netvm_req *r)
{
    return atomic_load_explicit(&r->state, memory_order_acquire) == NV_REQ_DONE;
}

netvm_status_t nv_progress_wait_req(netvm_ctx_t *ctx, struct netvm_req *r)
{
    struct nv_link *l = ctx->peers[r->rank].link;
    uint64_t start = nv_now_ns();
    uint64_t spin_until = start + ctx->spin_ns;
    if (!req_done(r)) {
        l->ops->poll_enter(l);
        unsigned iter = 0;
        while (!req_done(r)) {
            /* with nobody else to serve our peers, a waiter serves them all:
             * the one we wait on may itself be waiting on one of them */
            if (ctx->have_thread)
                l->ops->poll(l, r->rank);
            else
                poll_all(ctx);
            if ((++iter & 63) == 0 && nv_now_ns() > spin_until && ctx->have_thread)
                break;
            if ((iter & 4095) == 0) {
                check_peer(ctx, r);
                if (nv_now_ns() - r->issued_ns > ctx->timeout_ns && nv_req_give_up(r, NETVM_ERR_TIMEOUT))
                    nv_warn("rank %d did not answer within NETVM_TIMEOUT", r->rank);
                if (!ctx->have_thread)
                    sched_yield();
            }
            nv_cpu_relax();
        }
        l->ops->poll_leave(l);
    }
    /* sleep: the progress thread completes the request and wakes us */
    while (!req_done(r)) {
        if (l->ops->reply_wait_enter(l))
            l->ops->poll(l, r->rank);
        atomic_store_explicit(&r->waiting, 1, memory_order_seq_cst);
        uint32_t s = atomic_load_explicit(&r->state, memory_order_acquire);
        if (s != NV_REQ_DONE) {
            struct timespec slice = { 0, 10 * 1000 * 1000 };
            syscall(SYS_futex, &r->state, FUTEX_WAIT_PRIVATE, s, &slice, NULL, 0);
        }
        l->ops->reply_wait_leave(l);
        if (!req_done(r)) {
            check_peer(ctx, r);
            if (nv_now_ns() - r->issued_ns > ctx->timeout_ns) {
                if (nv_req_give_up(r, NETVM_ERR_TIMEOUT))
                    nv_warn("rank %d did not answer within NETVM_TIMEOUT", r->rank);
            }
        }
    }
    return r->status;
}

netvm_status_t nv_progress_wait_idle(netvm_ctx_t *ctx, int rank)
{
    int lo = rank < 0 ? 0 : rank, hi = rank < 0 ? ctx->size : rank + 1;
    unsigned outstanding = 0;
    for (int p = lo; p < hi; p++)
        outstanding += atomic_load_explicit(&ctx->peers[p].outstanding, memory_order_acquire);
    if (!outstanding)
        return NETVM_OK;   /* the common case: nothing to scan the pool for */
    for (uint32_t i = 0; i < ctx->nreqs; i++) {
        struct netvm_req *r = &ctx->reqs[i];
        uint32_t s = atomic_load_explicit(&r->state, memory_order_acquire);
        if (s != NV_REQ_FREE && s != NV_REQ_DONE && r->rank >= lo && r->rank < hi)
            nv_progress_wait_req(ctx, r);
    }
    return NETVM_OK;
}
