/* The context: a process's attachment. init finds the job's ranks through
 * the bootstrap, opens the links and starts progress; finalize undoes it
 * all, revoking every segment and saying goodbye to every peer. */
#define _GNU_SOURCE
#include "core/internal.h"
#include "link/shm/shm.h"
#include "util/config.h"
#include "util/guard.h"
#include "util/hmac.h"
#include "util/log.h"
#include "util/random.h"

#include <stdlib.h>
#include <string.h>

static void load_settings(netvm_ctx_t *ctx, const netvm_config_t *cfg, struct nv_shm_params *sp)
{
    ctx->timeout_ms = cfg && cfg->timeout_ms > 0 ? cfg->timeout_ms
                                                 : (int)nv_config_long("NETVM_TIMEOUT", 1, 86400000);
    ctx->timeout_ns = (uint64_t)ctx->timeout_ms * 1000000ull;
    ctx->spin_ns = (uint64_t)nv_config_long("NETVM_SPIN_US", 0, 10000000) * 1000ull;
    ctx->spin_yield = (unsigned)nv_config_long("NETVM_SPIN_YIELD", 0, 1 << 30);
    ctx->word_spin_max = (uint64_t)nv_config_long("NETVM_SPIN_MAX_US", 0, 10000000) * 1000ull;
    if (ctx->word_spin_max < ctx->spin_ns)
        ctx->word_spin_max = ctx->spin_ns;
    atomic_store_explicit(&ctx->word_spin_ns, ctx->spin_ns, memory_order_relaxed);
    ctx->linger_ns = (uint64_t)nv_config_long("NETVM_PROGRESS_LINGER_US", 0, 10000000) * 1000ull;
    ctx->have_thread = cfg && cfg->no_progress_thread ? 0 : (int)nv_config_long("NETVM_PROGRESS_THREAD", 0, 1);
    ctx->thread_level = cfg && cfg->thread_level ? cfg->thread_level
                                                 : (int)nv_config_long("NETVM_THREADS", 0, 1);
    ctx->credits = (unsigned)nv_config_long("NETVM_MAX_INFLIGHT", 1, 200);
    ctx->am_credits_init = (unsigned)nv_config_long("NETVM_AM_CREDITS", 2, 65535);
    /* credits owed go back alone at three quarters, else on the next
     * message the other way: a stream answered every window (a reply per
     * 64 messages, say) then returns them all on its replies, while the
     * sender still has a quarter of its credits to go on with before the
     * lone return reaches it (am.md, "Flow control") */
    ctx->am_credits_return = ctx->am_credits_init * 3 / 4;
    ctx->listen_max_peers = (int)nv_config_long("NETVM_LISTEN_MAX_PEERS", 1, 1 << 20);
    sp->max_segments = (uint32_t)nv_config_long("NETVM_MAX_SEGMENTS", 1, 1 << 20);
    sp->use_mapping = (int)nv_config_long("NETVM_SHM_MAPPED", 0, 1);
    sp->eager = (size_t)nv_config_long("NETVM_SHM_EAGER", 0, 64 * 1024);
    sp->timeout_ms = ctx->timeout_ms;
}

/* Everything init built, in reverse; safe on a half-built context. */
static void release_all(netvm_ctx_t *ctx)
{
    nv_stats_close(ctx, 0);
    nv_progress_stop(ctx);
    nv_svc_fini(ctx);
    nv_peers_fini(ctx);   /* each peer's link state, through its link */
    nv_regc_links_down(ctx);   /* bucket registrations close before their link */
    nv_links_destroy(ctx);
    nv_am_fini(ctx);
    nv_evq_fini(ctx);
    nv_req_pool_fini(ctx);
    nv_atu_fini(&ctx->atu);
    nv_regc_fini(ctx);
    nv_boot_close(ctx->boot);
    pthread_mutex_destroy(&ctx->seg_lock);
    pthread_mutex_destroy(&ctx->rseg_lock);
    pthread_mutex_destroy(&ctx->lreg_lock);
    pthread_mutex_destroy(&ctx->stats_lock);
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
    if (cfg && (cfg->thread_level < 0 || cfg->thread_level > NETVM_THREAD_MULTIPLE))
        return NETVM_ERR_INVAL;
    netvm_ctx_t *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NETVM_ERR_NOMEM;
    ctx->pfd = ctx->qfd = ctx->efd = ctx->stopfd = ctx->kickfd = -1;
    atomic_store(&ctx->next_timer, UINT64_MAX);
    atomic_store(&ctx->req_sweep_at, UINT64_MAX);
    ctx->ep.memfd = ctx->ep.wake_fd = -1;
    pthread_mutex_init(&ctx->seg_lock, NULL);
    pthread_mutex_init(&ctx->rseg_lock, NULL);
    pthread_mutex_init(&ctx->lreg_lock, NULL);
    pthread_mutex_init(&ctx->stats_lock, NULL);
    struct nv_shm_params sp;
    load_settings(ctx, cfg, &sp);

    /* no time limit on the launcher: a barrier legitimately waits for ranks
     * that compute for long, and the launcher itself fails collectives when
     * a rank dies (NETVM_ERR_PEER) and closes the socket when it goes away */
    netvm_status_t st = nv_boot_open(&ctx->boot, cfg ? cfg->boot : NULL, -1);
    if (st != NETVM_OK) {
        pthread_mutex_destroy(&ctx->seg_lock);
        pthread_mutex_destroy(&ctx->rseg_lock);
        pthread_mutex_destroy(&ctx->lreg_lock);
        pthread_mutex_destroy(&ctx->stats_lock);
        free(ctx);
        return st;
    }
    ctx->rank = nv_boot_rank(ctx->boot);
    ctx->size = nv_boot_size(ctx->boot);
    nv_log_set_rank(ctx->rank);
    ctx->uuid = nv_random_key();
    if (!ctx->uuid || nv_guard_init() != 0)
        st = NETVM_ERR_SYS;
    nv_hmac_warm();   /* libcrypto starts here, not in the first handshake of a connect */
    if (st == NETVM_OK)
        st = nv_atu_init(&ctx->atu, sp.max_segments);
    if (st == NETVM_OK)
        st = nv_req_pool_init(ctx, (uint32_t)nv_config_long("NETVM_MAX_REQUESTS", 64, 65536));
    if (st == NETVM_OK)
        st = nv_peers_init(ctx);
    if (st == NETVM_OK)
        st = nv_evq_init(ctx);
    if (st == NETVM_OK)
        st = nv_regc_init(ctx);
    if (st == NETVM_OK)
        st = nv_am_init(ctx);
    if (st == NETVM_OK)
        st = nv_msg_init(ctx);
    if (st == NETVM_OK)
        st = nv_progress_init(ctx);
    sp.ep = &ctx->ep;
    if (st == NETVM_OK)
        st = nv_links_open(ctx, &sp, ctx->timeout_ms);
    if (st == NETVM_OK)
        st = nv_links_connect_job(ctx);
    if (st == NETVM_OK)
        nv_regc_links(ctx);   /* the job's links are open (ofi opens here), nothing exported yet */
    if (st == NETVM_OK)
        nv_stats_open(ctx);
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
    if (nv_in_handler)
        return NETVM_ERR_STATE;
    nv_svc_quiesce(ctx);
    /* what this process issued is complete at its targets before anyone
     * leaves (a dead peer's share is simply gone) */
    netvm_status_t fst = netvm_flush(ctx, -1);
    if (fst != NETVM_OK)
        nv_warn("finalize: operations of this process may not have completed at their targets: %s",
                netvm_strerror(fst));
    nv_listeners_close_all(ctx);
    nv_connected_leave_all(ctx);
    /* a dead rank must not keep the survivors from finishing */
    netvm_status_t st = nv_boot_barrier(ctx->boot);
    if (st != NETVM_OK && st != NETVM_ERR_PEER)
        nv_warn("finalize: barrier failed: %s", netvm_strerror(st));
    while (ctx->rsegs)
        netvm_release(ctx->rsegs);
    while (ctx->segs)
        netvm_unexport(ctx->segs);
    nv_stats_close(ctx, 1);   /* the counters as they end, links and caches still here */
    nv_peers_bye(ctx);
    release_all(ctx);
    return NETVM_OK;
}

int netvm_rank(const netvm_ctx_t *ctx) { return ctx ? ctx->rank : -1; }
int netvm_size(const netvm_ctx_t *ctx) { return ctx ? ctx->size : -1; }
int netvm_thread_level(const netvm_ctx_t *ctx) { return ctx ? ctx->thread_level : -1; }

netvm_status_t netvm_barrier(netvm_ctx_t *ctx)
{
    if (!ctx)
        return NETVM_ERR_INVAL;
    if (nv_in_handler)
        return NETVM_ERR_STATE;
    /* operations gathered for sending, and answers held back, leave
     * before we block */
    nv_progress_pass(ctx);
    nv_progress_flush_tx(ctx);
    return nv_boot_barrier(ctx->boot);
}
