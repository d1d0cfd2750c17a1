/* The calling side of RPC: blocking calls (one active-message request, no
 * allocation, no lock) and nonblocking calls whose records carry a stack
 * of continuations. A nonblocking call's record is tied to its request by
 * netvm_req_then: every request completes (answer, failure, or the
 * progress engine's timeout sweep), so a record nobody holds any more is
 * freed when its call ends, never leaked, and the number of live records
 * is bounded by the request slots (NETVM_MAX_INFLIGHT per peer). */
#include "core/internal.h"
#include "core/svc.h"
#include "svc/rpc/rpc_int.h"
#include "svc/rpc/rpc_svc.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int call_args_bad(unsigned op, unsigned max_op, const uint64_t *args, unsigned nargs, const void *payload, size_t len,
                         const void *reply_buf, size_t reply_cap, int timeout_ms)
{
    return op >= max_op || nargs > NETVM_RPC_MAX_ARGS || (nargs && !args) || (len && !payload) ||
           len > NETVM_AM_MAX_LEN || (reply_cap && !reply_buf) || timeout_ms < 0;
}

/* A call's own timeout: the request's issue stamp moved so that the
 * context's NETVM_TIMEOUT, which every waiter and the sweep apply to it,
 * ends it timeout_ms after issue. */
static void set_timeout(netvm_ctx_t *ctx, netvm_req_t *q, int timeout_ms)
{
    uint64_t want = (uint64_t)timeout_ms * 1000000u, at = __atomic_load_n(&q->issued_ns, __ATOMIC_RELAXED);
    if (!timeout_ms || want == ctx->timeout_ns)
        return;
    uint64_t moved = want > ctx->timeout_ns ? at + (want - ctx->timeout_ns)
                     : at > ctx->timeout_ns - want ? at - (ctx->timeout_ns - want) : 0;
    __atomic_store_n(&q->issued_ns, moved, __ATOMIC_RELAXED);
}

static void pack(uint64_t *a, unsigned op, const uint64_t *args, unsigned nargs)
{
    a[0] = op;
    for (unsigned i = 0; i < nargs; i++)
        a[1 + i] = args[i];
}

static netvm_status_t rpc_call(netvm_ctx_t *ctx, int peer, unsigned op, unsigned max_op, const uint64_t *args,
                               unsigned nargs, const void *payload, size_t len, void *reply_buf, size_t reply_cap,
                               int timeout_ms, netvm_rpc_result_t *res)
{
    if (!ctx || call_args_bad(op, max_op, args, nargs, payload, len, reply_buf, reply_cap, timeout_ms))
        return NETVM_ERR_INVAL;
    netvm_rpc_result_t own;
    if (!res)
        res = &own;
    uint64_t a[NETVM_AM_MAX_ARGS];
    pack(a, op, args, nargs);
    netvm_status_t st;
    if (!timeout_ms) {
        st = nv_svc_request(ctx, peer, NV_RPC_K_CALL, a, nargs + 1, payload, len, reply_buf, reply_cap, res,
                            NULL);
    } else {
        if ((st = nv_may_block()) != NETVM_OK)
            return st;
        netvm_req_t *q = NULL;
        st = nv_svc_request(ctx, peer, NV_RPC_K_CALL, a, nargs + 1, payload, len, reply_buf, reply_cap, res,
                            &q);
        if (st == NETVM_OK && q) {
            set_timeout(ctx, q, timeout_ms);
            st = netvm_wait(&q);
        }
    }
    return st != NETVM_OK ? st : res->status;
}

netvm_status_t netvm_rpc_call(netvm_ctx_t *ctx, int peer, unsigned op, const uint64_t *args, unsigned nargs,
                              const void *payload, size_t len, void *reply_buf, size_t reply_cap,
                              int timeout_ms, netvm_rpc_result_t *res)
{
    return rpc_call(ctx, peer, op, NETVM_RPC_MAX_OPS, args, nargs, payload, len, reply_buf, reply_cap, timeout_ms,
                    res);
}

netvm_status_t nv_rpc_svc_call(netvm_ctx_t *ctx, int peer, unsigned k, const uint64_t *args, unsigned nargs,
                               const void *payload, size_t len, void *reply_buf, size_t reply_cap, int timeout_ms,
                               netvm_rpc_result_t *res)
{
    return rpc_call(ctx, peer, nv_rpc_svc_op(k), NV_RPC_ALL_OPS, args, nargs, payload, len, reply_buf, reply_cap,
                    timeout_ms, res);
}

/* --- nonblocking calls ------------------------------------------------- */

static void unref(struct netvm_rpc_handle *h)
{
    if (atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1) {
        atomic_fetch_sub_explicit(&h->s->records_live, 1, memory_order_relaxed);
        free(h);
    }
}

void nv_rpc_run_conts(struct netvm_rpc_handle *h, int deferred)
{
    h->out.deferred = deferred;
    for (unsigned i = h->next; i-- > 0;) {
        if (deferred)
            atomic_fetch_add_explicit(&h->s->deferred_conts, 1, memory_order_relaxed);
        while (h->cont[i].fn(h->ctx, &h->out, h->cont[i].arg) == NETVM_RPC_DEFER) {
            if (!deferred) {
                h->next = i + 1;
                nv_rpc_defer(h->s, h);
                return;
            }
            struct timespec ms = { 0, 1000000 };
            nanosleep(&ms, NULL);
        }
    }
    h->next = 0;
    atomic_store_explicit(&h->done, 1, memory_order_release);
    unref(h);
}

static void on_complete(netvm_ctx_t *ctx, netvm_status_t st, void *arg)
{
    (void)ctx;
    struct netvm_rpc_handle *h = arg;
    h->out.status = st != NETVM_OK ? st : h->out.res.status;
    nv_rpc_run_conts(h, 0);
}

netvm_status_t netvm_rpc_begin(netvm_ctx_t *ctx, netvm_rpc_handle_t **hp)
{
    if (hp)
        *hp = NULL;
    if (!ctx || !hp)
        return NETVM_ERR_INVAL;
    struct nv_rpc *s = nv_rpc_state(ctx);
    struct netvm_rpc_handle *h = s ? malloc(sizeof *h) : NULL;
    if (!h)
        return NETVM_ERR_NOMEM;
    h->ctx = ctx;
    h->s = s;
    atomic_init(&h->refs, 1);
    atomic_init(&h->done, 0);
    h->issued = 0;
    memset(&h->out, 0, sizeof h->out);
    h->out.res.peer = -1;
    h->ncont = h->next = 0;
    h->qnext = NULL;
    atomic_fetch_add_explicit(&s->records_live, 1, memory_order_relaxed);
    *hp = h;
    return NETVM_OK;
}

netvm_status_t netvm_rpc_push(netvm_rpc_handle_t *h, netvm_rpc_cont_fn fn, void *arg)
{
    if (!h || !fn)
        return NETVM_ERR_INVAL;
    if (h->issued)
        return NETVM_ERR_STATE;
    if (h->ncont == NETVM_RPC_MAX_CONT)
        return NETVM_ERR_NOMEM;
    h->cont[h->ncont].fn = fn;
    h->cont[h->ncont].arg = arg;
    h->ncont++;
    return NETVM_OK;
}

static netvm_status_t rpc_issue(netvm_rpc_handle_t *h, int peer, unsigned op, unsigned max_op,
                                const uint64_t *args, unsigned nargs, const void *payload, size_t len,
                                void *reply_buf, size_t reply_cap, int timeout_ms)
{
    if (!h || call_args_bad(op, max_op, args, nargs, payload, len, reply_buf, reply_cap, timeout_ms))
        return NETVM_ERR_INVAL;
    if (h->issued)
        return NETVM_ERR_STATE;
    netvm_ctx_t *ctx = h->ctx;
    uint64_t a[NETVM_AM_MAX_ARGS];
    pack(a, op, args, nargs);
    netvm_req_t *q = NULL;
    netvm_status_t st = nv_svc_request(ctx, peer, NV_RPC_K_CALL, a, nargs + 1, payload, len, reply_buf,
                                       reply_cap, &h->out.res, &q);
    if (st == NETVM_ERR_INVAL)
        return st;
    h->issued = 1;
    h->next = h->ncont;
    atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);   /* the completion's */
    atomic_fetch_add_explicit(&h->s->nb_calls, 1, memory_order_relaxed);
    if (st == NETVM_OK && q) {
        set_timeout(ctx, q, timeout_ms);
        netvm_req_then(ctx, &q, on_complete, h);
    } else {
        on_complete(ctx, st, h);   /* answered or failed already */
    }
    return NETVM_OK;
}

netvm_status_t netvm_rpc_issue(netvm_rpc_handle_t *h, int peer, unsigned op, const uint64_t *args,
                               unsigned nargs, const void *payload, size_t len, void *reply_buf,
                               size_t reply_cap, int timeout_ms)
{
    return rpc_issue(h, peer, op, NETVM_RPC_MAX_OPS, args, nargs, payload, len, reply_buf, reply_cap, timeout_ms);
}

netvm_status_t nv_rpc_svc_issue(netvm_rpc_handle_t *h, int peer, unsigned k, const uint64_t *args,
                                unsigned nargs, const void *payload, size_t len, void *reply_buf,
                                size_t reply_cap, int timeout_ms)
{
    return rpc_issue(h, peer, nv_rpc_svc_op(k), NV_RPC_ALL_OPS, args, nargs, payload, len, reply_buf, reply_cap,
                     timeout_ms);
}

static netvm_status_t finish(struct netvm_rpc_handle *h, netvm_rpc_result_t *res)
{
    netvm_status_t st = h->out.status;
    if (res)
        *res = h->out.res;
    unref(h);
    return st;
}

netvm_status_t netvm_rpc_test(netvm_rpc_handle_t *h, int *done, netvm_rpc_result_t *res)
{
    if (done)
        *done = 0;
    if (!h || !done)
        return NETVM_ERR_INVAL;
    if (!h->issued)
        return NETVM_ERR_STATE;
    if (!atomic_load_explicit(&h->done, memory_order_acquire)) {
        netvm_progress(h->ctx);
        if (!atomic_load_explicit(&h->done, memory_order_acquire))
            return NETVM_OK;
    }
    *done = 1;
    return finish(h, res);
}

netvm_status_t netvm_rpc_wait(netvm_rpc_handle_t *h, netvm_rpc_result_t *res)
{
    if (!h)
        return NETVM_ERR_INVAL;
    if (!h->issued)
        return NETVM_ERR_STATE;
    netvm_status_t st = nv_may_block();
    if (st != NETVM_OK)
        return st;
    /* the answer arrives in the progress engine, deferred continuations
     * finish on the worker: poll, then give the processor away */
    for (unsigned spins = 0; !atomic_load_explicit(&h->done, memory_order_acquire); spins++) {
        if (netvm_progress(h->ctx) > 0)
            spins = 0;
        else if (spins > 1000) {
            struct timespec t = { 0, 50000 };
            nanosleep(&t, NULL);
        } else if (spins > 100) {
            sched_yield();
        }
    }
    return finish(h, res);
}

netvm_status_t netvm_rpc_drop(netvm_rpc_handle_t *h)
{
    if (!h)
        return NETVM_ERR_INVAL;
    unref(h);
    return NETVM_OK;
}
