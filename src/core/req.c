/* Requests for operations a target executes: a fixed pool, so issuing one
 * allocates nothing. Only the application thread allocates and frees
 * (MPI_THREAD_SERIALIZED); completion may come from the progress thread. */
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
    ctx->reqs = calloc(n, sizeof *ctx->reqs);
    if (!ctx->reqs)
        return NETVM_ERR_NOMEM;
    ctx->nreqs = n;
    for (uint32_t i = 0; i < n; i++) {
        ctx->reqs[i].index = (uint16_t)i;
        ctx->reqs[i].ctx = ctx;
        ctx->reqs[i].next_free = i + 1;
    }
    ctx->free_req = 0;
    return NETVM_OK;
}

void nv_req_pool_fini(netvm_ctx_t *ctx)
{
    free(ctx->reqs);
    ctx->reqs = NULL;
}

void nv_req_sweep(netvm_ctx_t *ctx)
{
    if (!atomic_load_explicit(&ctx->detached_done, memory_order_acquire))
        return;
    for (uint32_t i = 0; i < ctx->nreqs; i++) {
        struct netvm_req *r = &ctx->reqs[i];
        if (r->detached && atomic_load_explicit(&r->state, memory_order_acquire) == NV_REQ_DONE) {
            atomic_fetch_sub_explicit(&ctx->detached_done, 1, memory_order_relaxed);
            nv_req_free(r);
        }
    }
}

void nv_req_detach(struct netvm_req *r)
{
    atomic_store_explicit(&r->detached, 1, memory_order_release);
}

struct netvm_req *nv_req_alloc(netvm_ctx_t *ctx, int rank, uint64_t *result)
{
    if (ctx->free_req >= ctx->nreqs)
        nv_req_sweep(ctx);
    if (ctx->free_req >= ctx->nreqs)
        return NULL;
    struct netvm_req *r = &ctx->reqs[ctx->free_req];
    ctx->free_req = r->next_free;
    atomic_fetch_add_explicit(&r->gen, 1, memory_order_relaxed);
    atomic_store_explicit(&r->rank, rank, memory_order_relaxed);
    r->status = NETVM_OK;
    r->result = result;
    r->issued_ns = nv_now_ns();
    atomic_store_explicit(&r->waiting, 0, memory_order_relaxed);
    atomic_store_explicit(&r->detached, 0, memory_order_relaxed);
    r->ev_kinds = 0;
    r->ev_rseg = NULL;
    atomic_fetch_add_explicit(&ctx->peers[rank].outstanding, 1, memory_order_relaxed);
    atomic_store_explicit(&r->state, NV_REQ_PENDING, memory_order_release);
    return r;
}

void nv_req_free(struct netvm_req *r)
{
    netvm_ctx_t *ctx = r->ctx;
    atomic_store_explicit(&r->state, NV_REQ_FREE, memory_order_relaxed);
    r->next_free = ctx->free_req;
    ctx->free_req = r->index;
}

int nv_req_claim(struct netvm_req *r)
{
    uint32_t pending = NV_REQ_PENDING;
    return atomic_compare_exchange_strong(&r->state, &pending, NV_REQ_PENDING | NV_REQ_ANSWERING);
}

static int finish(struct netvm_req *r, netvm_status_t st, uint64_t result, int give_up);

int nv_req_give_up(struct netvm_req *r, netvm_status_t st)
{
    return finish(r, st, 0, 1);
}

int nv_req_complete(struct netvm_req *r, netvm_status_t st, uint64_t result)
{
    return finish(r, st, result, 0);
}

static int finish(struct netvm_req *r, netvm_status_t st, uint64_t result, int give_up)
{
    /* take it first: a reply and a peer-down (or timeout) may race; an
     * answer being written can only be ended by its own completion */
    uint32_t s = NV_REQ_PENDING;
    if (!atomic_compare_exchange_strong(&r->state, &s, NV_REQ_PENDING | 0x100)) {
        s = NV_REQ_PENDING | NV_REQ_ANSWERING;
        if (give_up || !atomic_compare_exchange_strong(&r->state, &s, NV_REQ_PENDING | 0x100))
            return 0;
    }
    r->status = st;
    if (r->result && st == NETVM_OK)
        *r->result = result;
    if (atomic_load_explicit(&r->detached, memory_order_acquire)) {
        /* its events leave before the request counts as done, so a flush
         * that waited for it finds them queued */
        nv_req_post_events(r);
        atomic_fetch_add_explicit(&r->ctx->detached_done, 1, memory_order_relaxed);
    }
    atomic_fetch_sub_explicit(&r->ctx->peers[r->rank].outstanding, 1, memory_order_release);
    atomic_store_explicit(&r->state, NV_REQ_DONE, memory_order_release);
    if (atomic_load_explicit(&r->waiting, memory_order_seq_cst))
        syscall(SYS_futex, &r->state, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    return 1;
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
    netvm_ctx_t *ctx = r->ctx;
    if (atomic_load_explicit(&r->state, memory_order_acquire) != NV_REQ_DONE) {
        ctx->peers[r->rank].link->ops->poll(ctx->peers[r->rank].link, r->rank);
        if (atomic_load_explicit(&r->state, memory_order_acquire) != NV_REQ_DONE) {
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
