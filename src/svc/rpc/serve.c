/* The serving side of RPC: procedures by operation code, the dispatch of
 * incoming calls, replies and delegation. */
#include "core/svc.h"
#include "svc/rpc/rpc_int.h"
#include "svc/rpc/rpc_svc.h"

#include <stdlib.h>
#include <string.h>

static int on_call(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    struct nv_rpc *s = arg;
    if (!m->has_token || m->nargs < 1)
        return NETVM_AM_DONE;   /* not a call of ours: nobody to answer */
    /* a large request payload: deferring without naming a buffer makes
     * netvm land it in memory it holds for the message, so the procedure
     * sees every payload in call->payload */
    if (m->len && !m->payload)
        return NETVM_AM_DEFER;
    uint64_t op = m->args[0];
    netvm_rpc_proc_fn fn = NULL;
    void *parg = NULL;
    if (op < NV_RPC_ALL_OPS) {
        fn = __atomic_load_n(&s->procs[op].fn, __ATOMIC_ACQUIRE);
        parg = __atomic_load_n(&s->procs[op].arg, __ATOMIC_RELAXED);
    }
    if (!fn) {
        netvm_am_reply(ctx, &m->token, NETVM_ERR_NOTFOUND, NULL, 0, NULL, 0);
        return NETVM_AM_DONE;
    }
    netvm_rpc_call_t c;
    c.peer = m->peer;
    c.op = (unsigned)op;
    c.nargs = m->nargs - 1;
    memcpy(c.args, m->args + 1, c.nargs * sizeof c.args[0]);
    c.payload = m->payload;
    c.len = m->len;
    c.token = m->token;
    c.deferred = m->deferred;
    return fn(ctx, &c, parg) == NETVM_RPC_DEFER ? NETVM_AM_DEFER : NETVM_AM_DONE;
}

static void *rpc_create(netvm_ctx_t *ctx)
{
    struct nv_rpc *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->ctx = ctx;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    if (nv_svc_register(ctx, NV_RPC_K_CALL, on_call, s) != NETVM_OK) {
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return NULL;
    }
    return s;
}

static void rpc_destroy(netvm_ctx_t *ctx, void *state)
{
    (void)ctx;
    struct nv_rpc *s = state;
    nv_rpc_worker_stop(s);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

struct nv_rpc *nv_rpc_state(netvm_ctx_t *ctx)
{
    return nv_svc_state(ctx, NV_SVC_STATE_RPC, rpc_create, rpc_destroy);
}

static netvm_status_t rpc_register(netvm_ctx_t *ctx, unsigned op, netvm_rpc_proc_fn fn, void *arg)
{
    struct nv_rpc *s = nv_rpc_state(ctx);
    if (!s)
        return NETVM_ERR_NOMEM;
    pthread_mutex_lock(&s->lock);
    /* arg first: a dispatch that sees the new fn sees its arg */
    __atomic_store_n(&s->procs[op].arg, arg, __ATOMIC_RELAXED);
    __atomic_store_n(&s->procs[op].fn, fn, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&s->lock);
    return NETVM_OK;
}

netvm_status_t netvm_rpc_register(netvm_ctx_t *ctx, unsigned op, netvm_rpc_proc_fn fn, void *arg)
{
    if (!ctx || op >= NETVM_RPC_MAX_OPS)
        return NETVM_ERR_INVAL;
    return rpc_register(ctx, op, fn, arg);
}

netvm_status_t nv_rpc_svc_register(netvm_ctx_t *ctx, unsigned k, netvm_rpc_proc_fn fn, void *arg)
{
    if (!ctx || k >= NV_RPC_SVC_OPS)
        return NETVM_ERR_INVAL;
    return rpc_register(ctx, nv_rpc_svc_op(k), fn, arg);
}

static int args_bad(const uint64_t *args, unsigned nargs, unsigned max, const void *payload, size_t len)
{
    return nargs > max || (nargs && !args) || (len && !payload) || len > NETVM_AM_MAX_LEN;
}

netvm_status_t netvm_rpc_reply(netvm_ctx_t *ctx, const netvm_am_token_t *token, netvm_status_t status,
                               const uint64_t *args, unsigned nargs, const void *payload, size_t len)
{
    if (!ctx || !token || (unsigned)status >= NETVM_STATUS_COUNT ||
        args_bad(args, nargs, NETVM_AM_MAX_ARGS, payload, len))
        return NETVM_ERR_INVAL;
    return netvm_am_reply(ctx, token, status, args, nargs, payload, len);
}

static netvm_status_t rpc_delegate(netvm_ctx_t *ctx, const netvm_rpc_call_t *call, int peer, unsigned op,
                                   unsigned max_op, const uint64_t *args, unsigned nargs, const void *payload,
                                   size_t len)
{
    if (!ctx || !call || op >= max_op || args_bad(args, nargs, NETVM_RPC_MAX_ARGS, payload, len))
        return NETVM_ERR_INVAL;
    struct nv_rpc *s = nv_rpc_state(ctx);
    if (!s)
        return NETVM_ERR_NOMEM;
    uint64_t a[NETVM_AM_MAX_ARGS];
    a[0] = op;
    if (nargs)
        memcpy(a + 1, args, nargs * sizeof a[0]);
    netvm_status_t st = nv_svc_forward(ctx, peer, NV_RPC_K_CALL, &call->token, a, nargs + 1, payload, len);
    if (st != NETVM_OK)
        return st;
    atomic_fetch_add_explicit(&s->delegated, 1, memory_order_relaxed);
    nv_rpc_watch(s, &call->token, peer);
    return NETVM_OK;
}

netvm_status_t netvm_rpc_delegate(netvm_ctx_t *ctx, const netvm_rpc_call_t *call, int peer, unsigned op,
                                  const uint64_t *args, unsigned nargs, const void *payload, size_t len)
{
    return rpc_delegate(ctx, call, peer, op, NETVM_RPC_MAX_OPS, args, nargs, payload, len);
}

netvm_status_t nv_rpc_svc_delegate(netvm_ctx_t *ctx, const netvm_rpc_call_t *call, int peer, unsigned k,
                                   const uint64_t *args, unsigned nargs, const void *payload, size_t len)
{
    return rpc_delegate(ctx, call, peer, nv_rpc_svc_op(k), NV_RPC_ALL_OPS, args, nargs, payload, len);
}

netvm_status_t netvm_rpc_stats(netvm_ctx_t *ctx, netvm_rpc_stats_t *st)
{
    if (!ctx || !st)
        return NETVM_ERR_INVAL;
    memset(st, 0, sizeof *st);
    struct nv_rpc *s = nv_svc_state_if(ctx, NV_SVC_STATE_RPC);
    if (!s)
        return NETVM_OK;
    st->records_live = atomic_load(&s->records_live);
    st->nb_calls = atomic_load(&s->nb_calls);
    st->deferred_conts = atomic_load(&s->deferred_conts);
    st->delegated = atomic_load(&s->delegated);
    st->delegate_failures = atomic_load(&s->delegate_failures);
    return NETVM_OK;
}
