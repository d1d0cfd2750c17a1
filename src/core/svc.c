/* Core's interface to the services: their handler ids and their state
 * (core/svc.h). */
#include "core/internal.h"
#include "core/svc.h"

unsigned nv_svc_am_id(unsigned k) { return NV_AMH_SVC + k; }

_Static_assert(NV_AMH_SVC + NV_SVC_NIDS == NV_AMH_END, "core's service ids and svc.h's ranges differ");

netvm_status_t nv_svc_register(netvm_ctx_t *ctx, unsigned k, netvm_am_handler_fn fn, void *arg)
{
    if (!ctx || k >= NV_SVC_NIDS)
        return NETVM_ERR_INVAL;
    /* two services on one id would take each other's messages: the
     * second is refused, not swapped in */
    netvm_am_handler_fn cur = __atomic_load_n(&ctx->am[nv_svc_am_id(k)].fn, __ATOMIC_ACQUIRE);
    if (fn && cur && cur != fn)
        return NETVM_ERR_EXISTS;
    return nv_am_register_id(ctx, nv_svc_am_id(k), fn, arg);
}

netvm_status_t nv_svc_send(netvm_ctx_t *ctx, int peer, unsigned k, const uint64_t *args, unsigned nargs,
                           const void *payload, size_t len, netvm_req_t **req)
{
    if (req)
        *req = NULL;
    if (!ctx || k >= NV_SVC_NIDS)
        return NETVM_ERR_INVAL;
    return nv_am_send_id(ctx, peer, nv_svc_am_id(k), args, nargs, payload, len, req, 0);
}

netvm_status_t nv_svc_request(netvm_ctx_t *ctx, int peer, unsigned k, const uint64_t *args, unsigned nargs,
                              const void *payload, size_t len, void *reply_buf, size_t reply_cap,
                              netvm_am_result_t *result, netvm_req_t **req)
{
    if (req)
        *req = NULL;
    if (!ctx || k >= NV_SVC_NIDS)
        return NETVM_ERR_INVAL;
    return nv_am_request_id(ctx, peer, nv_svc_am_id(k), args, nargs, payload, len, reply_buf, reply_cap,
                            result, req);
}

netvm_status_t nv_svc_forward(netvm_ctx_t *ctx, int peer, unsigned k, const netvm_am_token_t *token,
                              const uint64_t *args, unsigned nargs, const void *payload, size_t len)
{
    if (!ctx || k >= NV_SVC_NIDS)
        return NETVM_ERR_INVAL;
    return nv_am_forward_id(ctx, peer, nv_svc_am_id(k), token, args, nargs, payload, len);
}

void *nv_svc_state_if(netvm_ctx_t *ctx, unsigned slot)
{
    if (!ctx || slot >= NV_SVC_NSTATE)
        return NULL;
    return __atomic_load_n(&ctx->svc[slot].state, __ATOMIC_ACQUIRE);
}

void *nv_svc_state(netvm_ctx_t *ctx, unsigned slot, void *(*create)(netvm_ctx_t *ctx),
                   void (*destroy)(netvm_ctx_t *ctx, void *state))
{
    void *s = nv_svc_state_if(ctx, slot);
    if (s || !ctx || slot >= NV_SVC_NSTATE)
        return s;
    pthread_mutex_lock(&ctx->svc_lock);
    s = ctx->svc[slot].state;
    if (!s && (s = create(ctx)) != NULL) {
        ctx->svc[slot].destroy = destroy;
        __atomic_store_n(&ctx->svc[slot].state, s, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&ctx->svc_lock);
    return s;
}

void nv_svc_on_finalize(netvm_ctx_t *ctx, unsigned slot, void (*fn)(netvm_ctx_t *ctx, void *state))
{
    if (!ctx || slot >= NV_SVC_NSTATE)
        return;
    pthread_mutex_lock(&ctx->svc_lock);
    ctx->svc[slot].quiesce = fn;
    pthread_mutex_unlock(&ctx->svc_lock);
}

void nv_svc_quiesce(netvm_ctx_t *ctx)
{
    for (unsigned i = 0; i < NV_SVC_NSTATE; i++) {
        pthread_mutex_lock(&ctx->svc_lock);
        void *s = ctx->svc[i].state;
        void (*fn)(netvm_ctx_t *, void *) = ctx->svc[i].quiesce;
        pthread_mutex_unlock(&ctx->svc_lock);
        if (s && fn)
            fn(ctx, s);
    }
}

void nv_svc_fini(netvm_ctx_t *ctx)
{
    for (unsigned i = 0; i < NV_SVC_NSTATE; i++) {
        void *s = ctx->svc[i].state;
        ctx->svc[i].state = NULL;
        if (s && ctx->svc[i].destroy)
            ctx->svc[i].destroy(ctx, s);
    }
}
