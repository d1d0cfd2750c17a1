/* The context: a process's attachment to the job. init finds the peers
 * through the bootstrap, opens the links and starts progress; finalize
 * undoes it all, revoking every segment. */
#define _GNU_SOURCE
#include "core/internal.h"
#include "link/shm/shm.h"
#include "util/config.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

static void load_settings(netvm_ctx_t *ctx, const netvm_config_t *cfg, struct nv_shm_params *sp,
                          int *timeout_ms)
{
    *timeout_ms = cfg && cfg->timeout_ms > 0 ? cfg->timeout_ms
                                            : (int)nv_config_long("NETVM_TIMEOUT", 1, 86400000);
    ctx->timeout_ns = (uint64_t)*timeout_ms * 1000000ull;
    ctx->spin_ns = (uint64_t)nv_config_long("NETVM_SPIN_US", 0, 10000000) * 1000ull;
    ctx->linger_ns = (uint64_t)nv_config_long("NETVM_PROGRESS_LINGER_US", 0, 10000000) * 1000ull;
    ctx->have_thread = cfg && cfg->no_progress_thread ? 0 : (int)nv_config_long("NETVM_PROGRESS_THREAD", 0, 1);
    sp->max_segments = (uint32_t)nv_config_long("NETVM_MAX_SEGMENTS", 1, 1 << 20);
    sp->use_mapping = (int)nv_config_long("NETVM_SHM_MAPPED", 0, 1);
    sp->timeout_ms = *timeout_ms;
}

/* Everything init built, in reverse; safe on a half-built context. */
static void release_all(netvm_ctx_t *ctx)
{
    nv_progress_stop(ctx);
    nv_links_destroy(ctx);
    nv_evq_fini(ctx);
    nv_req_pool_fini(ctx);
    nv_atu_fini(&ctx->atu);
    nv_boot_close(ctx->boot);
    pthread_mutex_destroy(&ctx->seg_lock);
    free(ctx->peers);
    free(ctx);
}

static void serve_while_waiting(void *arg)
{
    netvm_progress(arg);
}

netvm_status_t netvm_init(netvm_ctx_t **out, const netvm_config_t *cfg)
{
    if (!out)
        return NETVM_ERR_INVAL;
    *out = NULL;
    nv_log_init_from_env();
    netvm_ctx_t *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NETVM_ERR_NOMEM;
    ctx->epfd = ctx->stopfd = -1;
    ctx->ep.memfd = ctx->ep.wake_fd = -1;
    pthread_mutex_init(&ctx->seg_lock, NULL);
    struct nv_shm_params sp;
    int timeout_ms;
    load_settings(ctx, cfg, &sp, &timeout_ms);

    /* no time limit on the launcher: a barrier legitimately waits for ranks
     * that compute for long, and the launcher itself fails collectives when
     * a rank dies (NETVM_ERR_PEER) and closes the socket when it goes away */
    netvm_status_t st = nv_boot_open(&ctx->boot, cfg ? cfg->boot : NULL, -1);
    if (st != NETVM_OK) {
        free(ctx);
        return st;
    }
    ctx->rank = nv_boot_rank(ctx->boot);
    ctx->size = nv_boot_size(ctx->boot);
    nv_log_set_rank(ctx->rank);
    ctx->peers = calloc((size_t)ctx->size, sizeof *ctx->peers);
    if (!ctx->peers)
        st = NETVM_ERR_NOMEM;
    if (st == NETVM_OK)
        st = nv_atu_init(&ctx->atu, sp.max_segments);
    if (st == NETVM_OK)
        st = nv_req_pool_init(ctx, 4096);
    if (st == NETVM_OK)
        st = nv_evq_init(ctx);
    sp.ep = &ctx->ep;
    if (st == NETVM_OK)
        st = nv_links_connect(ctx, &sp, timeout_ms);
    if (st == NETVM_OK)
        st = nv_progress_start(ctx);
    /* without a progress thread, a rank waiting in a barrier must still
     * serve its peers (tcp puts and gets need the target's engine) */
    if (st == NETVM_OK && !ctx->have_thread)
        nv_boot_set_idle(ctx->boot, serve_while_waiting, ctx);
    /* nobody may touch a peer before every peer can be touched */
    if (st == NETVM_OK)
        st = nv_boot_barrier(ctx->boot);
    if (st != NETVM_OK) {
        nv_error("netvm_init failed: %s", netvm_strerror(st));
        release_all(ctx);
        return st;
    }
    *out = ctx;
    return NETVM_OK;
}

netvm_status_t netvm_finalize(netvm_ctx_t *ctx)
{
    if (!ctx)
        return NETVM_ERR_INVAL;
    /* what this process issued is complete at its targets before anyone
     * leaves (a dead peer's share is simply gone) */
    netvm_status_t fst = netvm_flush(ctx, -1);
    if (fst != NETVM_OK)
        nv_warn("finalize: operations of this process may not have completed at their targets: %s",
                netvm_strerror(fst));
    /* a dead rank must not keep the survivors from finishing */
    netvm_status_t st = nv_boot_barrier(ctx->boot);
    if (st != NETVM_OK && st != NETVM_ERR_PEER)
        nv_warn("finalize: barrier failed: %s", netvm_strerror(st));
    while (ctx->rsegs)
        netvm_release(ctx->rsegs);
    while (ctx->segs)
        netvm_unexport(ctx->segs);
    release_all(ctx);
    return NETVM_OK;
}

int netvm_rank(const netvm_ctx_t *ctx) { return ctx ? ctx->rank : -1; }
int netvm_size(const netvm_ctx_t *ctx) { return ctx ? ctx->size : -1; }

netvm_status_t netvm_barrier(netvm_ctx_t *ctx)
{
    if (!ctx)
        return NETVM_ERR_INVAL;
    /* operations gathered for sending leave before we block */
    netvm_progress(ctx);
    return nv_boot_barrier(ctx->boot);
}

int netvm_progress(netvm_ctx_t *ctx)
{
    if (!ctx)
        return 0;
    int n = 0;
    for (int i = 0; i < ctx->nlinks; i++)
        n += ctx->links[i]->ops->poll(ctx->links[i], -1);
    return n;
}
