/* Requests for operations that complete later: a fixed pool, so issuing one
 * allocates nothing. The free list is a lock-free stack (an index and an
 * ABA tag in one word), because requests are taken and returned by every
 * thread: the application's, the progress thread's handlers and
 * continuations, and whoever completes a request nobody holds. */
#define _GNU_SOURCE
#include "core/internal.h"
#include "util/time.h"

#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

netvm_status_t nv_req_pool_init(netvm_ctx_t *ctx, uint32_t n)
{
    if (n > 65536)
        n = 65536;   /* the index is 16 bits of a request id */
    ctx->reqs = calloc(n, sizeof *ctx->reqs);
    ctx->req_next = calloc(n, sizeof *ctx->req_next);
    if (!ctx->reqs || !ctx->req_next)
        return NETVM_ERR_NOMEM;
    ctx->nreqs = n;
    for (uint32_t i = 0; i < n; i++) {
        ctx->reqs[i].index = (uint16_t)i;
        ctx->reqs[i].ctx = ctx;
        __atomic_store_n(&ctx->req_next[i], i + 1 < n ? i + 2 : 0, __ATOMIC_RELAXED);
    }
    atomic_store(&ctx->free_top, n ? 1 : 0);
    return NETVM_OK;
}

void nv_req_pool_fini(netvm_ctx_t *ctx)
{
    free(ctx->reqs);
    free(ctx->req_next);
    ctx->reqs = NULL;
    ctx->req_next = NULL;
}

static struct netvm_req *pop_free(netvm_ctx_t *ctx)
{
    uint64_t top = atomic_load_explicit(&ctx->free_top, memory_order_acquire);
    for (;;) {
        uint32_t head = (uint32_t)top;
        if (!head)
            return NULL;
        uint32_t next = __atomic_load_n(&ctx->req_next[head - 1], __ATOMIC_RELAXED);
        uint64_t want = ((top >> 32) + 1) << 32 | next;
        if (atomic_compare_exchange_weak_explicit(&ctx->free_top, &top, want, memory_order_acquire,
                                                  memory_order_acquire))
            return &ctx->reqs[head - 1];
    }
}

static void push_free(netvm_ctx_t *ctx, struct netvm_req *r)
{
    uint64_t top = atomic_load_explicit(&ctx->free_top, memory_order_relaxed);
    for (;;) {
        __atomic_store_n(&ctx->req_next[r->index], (uint32_t)top, __ATOMIC_RELAXED);
        uint64_t want = ((top >> 32) + 1) << 32 | (uint32_t)(r->index + 1);
        if (atomic_compare_exchange_weak_explicit(&ctx->free_top, &top, want, memory_order_release,
                                                  memory_order_relaxed))
            return;
    }
}

struct netvm_req *nv_req_alloc(netvm_ctx_t *ctx, struct nv_peer *p, uint64_t *result)
{
    struct netvm_req *r = pop_free(ctx);
    if (!r)
        return NULL;
    /* the slot is ours alone once popped: no locked increment (stale
     * replies and waiters only read gen) */
    uint16_t gen = (uint16_t)(atomic_load_explicit(&r->gen, memory_order_relaxed) + 1);
    atomic_store_explicit(&r->gen, gen, memory_order_relaxed);
    r->peer = p;
    atomic_store_explicit(&r->peer_id, nv_peer_id(p), memory_order_relaxed);
    r->status = NETVM_OK;
    r->result = result;
    /* the sweep reads it; timeouts are milliseconds at least: the coarse clock */
    __atomic_store_n(&r->issued_ns, nv_now_ns_upper(), __ATOMIC_RELAXED);
    atomic_store_explicit(&r->waiting, 0, memory_order_relaxed);
    atomic_store_explicit(&r->fin, 0, memory_order_relaxed);
    r->then = NULL;
    r->then_arg = NULL;
    r->ev_kinds = 0;
    r->ev_rseg = NULL;
    atomic_store_explicit(&r->key, 0, memory_order_relaxed);
    r->amres = NULL;
    r->rbuf = NULL;
    r->rcap = 0;
    r->import = NULL;
    r->ordered = 0;
    if (!p->is_rank)
        nv_peer_ref(p);
    atomic_fetch_add_explicit(&p->outstanding, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ctx->npending, 1, memory_order_relaxed);
    atomic_store_explicit(&r->state, NV_REQ_STATE(NV_REQ_PENDING | NV_REQ_SETUP, gen), memory_order_release);
    return r;
}

netvm_status_t nv_req_launch(struct netvm_req *q)
{
    uint32_t s = atomic_load_explicit(&q->state, memory_order_relaxed);
    if (NV_REQ_WHAT(s) != (NV_REQ_PENDING | NV_REQ_SETUP))
        return NETVM_OK;   /* launched before (a request sent in pieces) */
    /* published, then the peer's death checked; nv_peer_down marks it dead,
     * then scans: one of the two sees the other (both sequentially
     * consistent), so a death never misses a request that was sent */
    struct nv_peer *p = q->peer;   /* (q is not to be read once published) */
    atomic_store_explicit(&q->state, NV_REQ_STATE(NV_REQ_PENDING, NV_REQ_GEN(s)), memory_order_seq_cst);
    return atomic_load_explicit(&p->dead, memory_order_seq_cst) ? NETVM_ERR_PEER : NETVM_OK;
}

void nv_req_ordered(struct netvm_req *q)
{
    q->ordered = 1;
    atomic_fetch_add_explicit(&q->peer->ord_inflight, 1, memory_order_relaxed);
}

void nv_req_free(struct netvm_req *r)
{
    /* A finisher that won the race with the owner's own completion (a
     * peer-down scan or the timeout sweep, finishing a request whose send
     * has just failed) may still be writing it: its DONE comes first.
     * Never long: finish_state goes from FINISHING to DONE without
     * waiting on anything. ThreadSanitizer caught the free beside it
     * (mp_peer_killed_3). */
    for (unsigned n = 0; NV_REQ_WHAT(atomic_load_explicit(&r->state, memory_order_acquire)) & NV_REQ_FINISHING; n++)
        nv_spin_pause(64, n);
    netvm_ctx_t *ctx = r->ctx;
    struct nv_peer *p = r->peer;
    if (r->reg_len)
        nv_req_hold_release(r);
    r->peer = NULL;
    atomic_store_explicit(&r->state, NV_REQ_STATE(NV_REQ_FREE, atomic_load(&r->gen)), memory_order_relaxed);
    push_free(ctx, r);
    if (p && !p->is_rank)
        nv_peer_put(p);
}

/* Claim the use of r whose state word is s (pending, unclaimed). */
static int claim_state(struct netvm_req *r, uint32_t s)
{
    return atomic_compare_exchange_strong(&r->state, &s, s | NV_REQ_ANSWERING);
}

int nv_req_claim(struct netvm_req *r)
{
    uint32_t s = atomic_load_explicit(&r->state, memory_order_acquire);
    return NV_REQ_WHAT(s) == NV_REQ_PENDING && claim_state(r, s);
}

int nv_req_claim_id(struct netvm_req *r, uint32_t id)
{
    return claim_state(r, NV_REQ_STATE(NV_REQ_PENDING, id >> 16));
}

/* The completer's part once the request is done: a request nobody holds
 * posts its events or runs its continuation, and goes back to the pool. */
static void run_then(struct netvm_req *r)
{
    int was = nv_in_handler;
    nv_in_handler = 1;
    if (r->ev_kinds)
        nv_req_post_events(r);
    if (r->then)
        r->then(r->ctx, r->status, r->then_arg);
    nv_in_handler = was;
    nv_req_free(r);
}

enum { FIN_GIVE_UP = 1, FIN_QUIET = 2 };

/* Finish the use of r whose state word is s: pending, or pending and
 * claimed or in setup (then only by its claimant's or issuer's completion,
 * not by a give-up). FIN_QUIET: it posts no events. */
static int finish_state(struct netvm_req *r, uint32_t s, netvm_status_t st, uint64_t result, unsigned how)
{
    /* take it first: a reply and a peer-down (or timeout) may race; an
     * answer being written can only be ended by its own completion */
    uint32_t what = NV_REQ_WHAT(s);
    if (what != NV_REQ_PENDING &&
        ((how & FIN_GIVE_UP) || (what != (NV_REQ_PENDING | NV_REQ_ANSWERING) && what != (NV_REQ_PENDING | NV_REQ_SETUP))))
        return 0;
    if (!atomic_compare_exchange_strong(&r->state, &s, NV_REQ_STATE(NV_REQ_PENDING | NV_REQ_FINISHING, NV_REQ_GEN(s))))
        return 0;
    if (how & FIN_QUIET)
        r->ev_kinds = 0;
    r->status = st;
    if (r->result && st == NETVM_OK)
        *r->result = result;
    /* a detached operation's failure belongs to the next flush: record it
     * before the flush can see this request over (outstanding, DONE), not
     * in run_then after (a flush in another thread missed it) */
    if ((r->ev_kinds & NV_REQEV_ERROR) && st != NETVM_OK) {
        nv_peer_async_error(r->peer, st);
        r->ev_kinds &= ~NV_REQEV_ERROR;
    }
    if (r->ordered) {
        r->ordered = 0;
        atomic_fetch_sub_explicit(&r->peer->ord_inflight, 1, memory_order_release);
    }
    atomic_fetch_sub_explicit(&r->peer->outstanding, 1, memory_order_release);
    atomic_fetch_sub_explicit(&r->ctx->npending, 1, memory_order_relaxed);
    /* who finishes it is decided before it is seen done: a continuation set
     * after this sees DONE and runs itself (nv_req_set_then) */
    unsigned fin = atomic_fetch_or_explicit(&r->fin, NV_REQF_DONE, memory_order_acq_rel);
    atomic_store_explicit(&r->state, NV_REQ_STATE(NV_REQ_DONE, NV_REQ_GEN(s)), memory_order_release);
    if (fin & NV_REQF_THEN) {
        run_then(r);
        return 1;
    }
    if (atomic_load_explicit(&r->waiting, memory_order_seq_cst))
        syscall(SYS_futex, &r->state, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    return 1;
}

static int finish(struct netvm_req *r, netvm_status_t st, uint64_t result, int give_up)
{
    uint32_t s = atomic_load_explicit(&r->state, memory_order_acquire);
    /* a claimed request may be finished by its claimant while a give-up looks */
    return finish_state(r, s, st, result, give_up ? FIN_GIVE_UP : 0) ||
           (!give_up && NV_REQ_WHAT(s) == NV_REQ_PENDING &&
            finish_state(r, atomic_load_explicit(&r->state, memory_order_acquire), st, result, 0));
}

int nv_req_finish_state(struct netvm_req *r, uint32_t s, netvm_status_t st, int give_up)
{
    return finish_state(r, s, st, 0, give_up ? FIN_GIVE_UP : 0);
}

void nv_req_end_started(struct netvm_req *r, uint32_t id, netvm_status_t st)
{
    uint32_t s = atomic_load_explicit(&r->state, memory_order_acquire);
    uint32_t what = NV_REQ_WHAT(s);
    /* (the CAS on the whole word keeps it to this use) */
    if (NV_REQ_GEN(s) == (uint16_t)(id >> 16) && (what == NV_REQ_PENDING || what == (NV_REQ_PENDING | NV_REQ_SETUP)))
        finish_state(r, s, st, 0, st == NETVM_OK ? 0 : FIN_QUIET);
}

int nv_req_give_up(struct netvm_req *r, netvm_status_t st) { return finish(r, st, 0, 1); }
int nv_req_complete(struct netvm_req *r, netvm_status_t st, uint64_t result) { return finish(r, st, result, 0); }

void nv_req_set_then(struct netvm_req *r, netvm_req_fn fn, void *arg)
{
    nv_progress_sweep_due(r->ctx);   /* nobody waits for it: its timeout is the sweep's */
    r->then = fn;
    r->then_arg = arg;
    unsigned fin = atomic_fetch_or_explicit(&r->fin, NV_REQF_THEN, memory_order_acq_rel);
    if (fin & NV_REQF_DONE) {
        /* completed already: its completer may still be publishing DONE */
        while (!nv_req_done(r))
            ;
        run_then(r);
    }
}

void nv_req_detach(struct netvm_req *r)
{
    nv_req_set_then(r, NULL, NULL);
}

struct netvm_req *nv_req_lookup(netvm_ctx_t *ctx, uint32_t id)
{
    uint32_t index = id & 0xffff;
    if (index >= ctx->nreqs)
        return NULL;
    struct netvm_req *r = &ctx->reqs[index];
    return atomic_load_explicit(&r->gen, memory_order_relaxed) == (uint16_t)(id >> 16) ? r : NULL;
}

netvm_status_t netvm_test(netvm_req_t **reqp, int *done)
{
    if (!reqp || !done)
        return NETVM_ERR_INVAL;
    struct netvm_req *r = *reqp;
    if (!r) {
        *done = 1;
        return NETVM_OK;
    }
    if (!nv_req_done(r)) {
        nv_progress_pass(r->ctx);
        if (!nv_req_done(r)) {
            *done = 0;
            return NETVM_OK;
        }
    }
    netvm_status_t st = r->status;
    nv_req_free(r);
    *reqp = NULL;
    *done = 1;
    return st;
}

netvm_status_t netvm_wait(netvm_req_t **reqp)
{
    if (!reqp)
        return NETVM_ERR_INVAL;
    struct netvm_req *r = *reqp;
    if (!r)
        return NETVM_OK;
    if (!nv_req_done(r) && nv_may_block() != NETVM_OK)
        return NETVM_ERR_STATE;
    netvm_status_t st = nv_progress_wait_req(r->ctx, r);
    nv_req_free(r);
    *reqp = NULL;
    return st;
}

netvm_status_t netvm_wait_all(netvm_req_t **reqs, size_t n)
{
    if (!reqs && n)
        return NETVM_ERR_INVAL;
    netvm_status_t first = NETVM_OK;
    for (size_t i = 0; i < n; i++) {
        netvm_status_t st = netvm_wait(&reqs[i]);
        if (st != NETVM_OK && first == NETVM_OK)
            first = st;
    }
    return first;
}

netvm_status_t netvm_req_then(netvm_ctx_t *ctx, netvm_req_t **reqp, netvm_req_fn fn, void *arg)
{
    if (!ctx || !reqp || !fn)
        return NETVM_ERR_INVAL;
    struct netvm_req *r = *reqp;
    *reqp = NULL;
    if (!r) {
        /* completed when issued (the issuing call returned its status) */
        int was = nv_in_handler;
        nv_in_handler = 1;
        fn(ctx, NETVM_OK, arg);
        nv_in_handler = was;
        return NETVM_OK;
    }
    nv_req_set_then(r, fn, arg);
    return NETVM_OK;
}
