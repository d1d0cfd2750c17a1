/* The server set's monitor thread: it notices servers that died (their
 * peer is gone) or stopped answering (a ping, NV_GM_STAT, that times out
 * within NETVM_GMEM_TIMEOUT), takes suspects back when they answer,
 * restores R for pages that lost a copy, moves pages off servers that are
 * draining and answers their DRAIN notice when none is left there. It
 * works only while regions are open, so a context that is finalizing
 * (its peers leaving) sees no repairs. */
#include "gmem/store_remote.h"
#include "util/log.h"
#include "util/time.h"

#include <errno.h>
#include <time.h>

void nv_gm_region_add(struct nv_gm_servers *g, struct nv_gstore_remote *r)
{
    pthread_mutex_lock(&g->lock);
    r->next = g->regions;
    g->regions = r;
    pthread_mutex_unlock(&g->lock);
}

void nv_gm_region_remove(struct nv_gm_servers *g, struct nv_gstore_remote *r)
{
    pthread_mutex_lock(&g->lock);
    for (struct nv_gstore_remote **pp = &g->regions; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    pthread_mutex_unlock(&g->lock);
    /* the monitor (or a server_remove) may still be inside it */
    while (atomic_load(&r->users)) {
        struct timespec t = { 0, 1000000 };
        nanosleep(&t, NULL);
    }
}

void nv_gm_monitor_kick(struct nv_gm_servers *g)
{
    pthread_mutex_lock(&g->lock);
    g->kick = 1;
    pthread_cond_signal(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

/* Repair every open region; returns the pages still to do. */
static uint64_t repair_all(struct nv_gm_servers *g)
{
    uint64_t left = 0;
    pthread_mutex_lock(&g->lock);
    struct nv_gstore_remote *r = g->regions;
    if (r)
        atomic_fetch_add(&r->users, 1);
    while (r) {
        pthread_mutex_unlock(&g->lock);
        left += nv_gm_repair(r);
        pthread_mutex_lock(&g->lock);
        struct nv_gstore_remote *next = r->next;
        /* r may have left the list meanwhile; its close waits for users,
         * so r->next is still readable, and a region removed right after
         * r simply ends this pass early */
        if (next)
            atomic_fetch_add(&next->users, 1);
        atomic_fetch_sub(&r->users, 1);
        r = next;
    }
    pthread_mutex_unlock(&g->lock);
    return left;
}

static int ping_cont(netvm_ctx_t *ctx, const netvm_rpc_outcome_t *o, void *arg)
{
    (void)ctx;
    struct nv_gm_srv *s = arg;
    struct nv_gm_servers *g = s->owner;
    if (o->status == NETVM_OK)
        atomic_store(&s->last_ok_ns, nv_now_ns());
    /* a late timeout was judged by watch_servers already */
    if (o->status != NETVM_ERR_TIMEOUT)
        nv_gm_srv_report(g, (int)(s - g->srv), o->status);
    atomic_store(&s->ping_busy, 0);
    return NETVM_RPC_DONE;
}

static void ping(struct nv_gm_servers *g, int i)
{
    struct nv_gm_srv *s = &g->srv[i];
    int zero = 0;
    if (!atomic_compare_exchange_strong(&s->ping_busy, &zero, 1))
        return;
    netvm_rpc_handle_t *h;
    if (netvm_rpc_begin(g->ctx, &h) != NETVM_OK) {
        atomic_store(&s->ping_busy, 0);
        return;
    }
    netvm_rpc_push(h, ping_cont, s);
    atomic_store(&s->ping_ns, nv_now_ns());
    /* half the timeout: with a ping sent every quarter of it, a server
     * that stops is suspected within NETVM_GMEM_TIMEOUT */
    int t = g->timeout_ms / 2 > 0 ? g->timeout_ms / 2 : 1;
    if (nv_rpc_svc_issue(h, s->peer, nv_gm_k(NV_GM_STAT), NULL, 0, NULL, 0, &s->ping_buf, sizeof s->ping_buf, t) !=
        NETVM_OK)
        atomic_store(&s->ping_busy, 0);
    netvm_rpc_drop(h);
}

static void watch_servers(struct nv_gm_servers *g)
{
    int n = atomic_load_explicit(&g->nservers, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        struct nv_gm_srv *s = &g->srv[i];
        int st = atomic_load(&s->state);
        if (st == NV_GM_SRV_DEAD || st == NV_GM_SRV_REMOVED)
            continue;
        netvm_peer_info_t info;
        if (netvm_peer_info(g->ctx, s->peer, &info) != NETVM_OK || !info.alive) {
            nv_gm_srv_report(g, i, NETVM_ERR_PEER);
            continue;
        }
        /* a ping's own timeout ends only at the progress engine's sweep
         * (as coarse as a second), so its age is judged here */
        uint64_t now = nv_now_ns(), half = (uint64_t)g->timeout_ms * 500000u;
        if (atomic_load(&s->ping_busy) && now - atomic_load(&s->ping_ns) > half)
            nv_gm_srv_report(g, i, NETVM_ERR_TIMEOUT);
        if (atomic_load(&s->state) == NV_GM_SRV_SUSPECT &&
            now - atomic_load(&s->last_ok_ns) > 2 * half * NV_GM_TIMEOUTS_TO_DEAD) {
            nv_warn("gmem: memory server %s has not answered for %d ms: taken as dead", s->addr,
                    NV_GM_TIMEOUTS_TO_DEAD * g->timeout_ms);
            nv_gm_srv_report(g, i, NETVM_ERR_PEER);
            continue;
        }
        ping(g, i);
    }
}

/* Draining servers that hold nothing of ours any more get their answer. */
static void answer_drains(struct nv_gm_servers *g)
{
    int n = atomic_load_explicit(&g->nservers, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        struct nv_gm_srv *s = &g->srv[i];
        if (atomic_load(&s->state) != NV_GM_SRV_DRAINING || !atomic_load(&s->drain_token_set) ||
            atomic_load(&s->pages_held))
            continue;
        atomic_store(&s->drain_token_set, 0);
        atomic_store(&s->state, NV_GM_SRV_REMOVED);
        netvm_rpc_reply(g->ctx, &s->drain_token, NETVM_OK, NULL, 0, NULL, 0);
        nv_info("gmem: memory server %s drained: this client's pages are off it", s->addr);
    }
}

/* Views of servers dead or removed are dropped: our mapping would keep
 * their pools' memory alive. */
static void drop_gone_views(struct nv_gm_servers *g)
{
    int n = atomic_load_explicit(&g->nservers, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        int st = atomic_load(&g->srv[i].state);
        if ((st == NV_GM_SRV_DEAD || st == NV_GM_SRV_REMOVED) && atomic_load(&g->srv[i].view))
            nv_gm_srv_view_drop(g, i);
    }
}

static void *monitor_main(void *arg)
{
    struct nv_gm_servers *g = arg;
    long tick_ms = g->timeout_ms / 4;
    if (tick_ms < 5)
        tick_ms = 5;
    if (tick_ms > 250)
        tick_ms = 250;
    int waits = 0;
    pthread_mutex_lock(&g->lock);
    while (!g->stopping) {
        if (!g->kick) {
            /* a kept INVALIDATE is looked at again soon: a writer's sync
             * waits for it */
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            t.tv_nsec += waits ? 100000L : tick_ms * 1000000L;
            t.tv_sec += t.tv_nsec / 1000000000L;
            t.tv_nsec %= 1000000000L;
            pthread_cond_timedwait(&g->cond, &g->lock, &t);
        }
        g->kick = 0;
        if (g->stopping)
            continue;
        if (g->inval_waits) {
            pthread_mutex_unlock(&g->lock);
            waits = nv_gm_shared_answer_waits(g, 0);
            pthread_mutex_lock(&g->lock);
        } else {
            waits = 0;
        }
        pthread_mutex_unlock(&g->lock);
        drop_gone_views(g);
        pthread_mutex_lock(&g->lock);
        if (!g->regions)
            continue;
        pthread_mutex_unlock(&g->lock);
        watch_servers(g);
        int n = atomic_load_explicit(&g->nservers, memory_order_acquire);
        for (int i = 0; i < n; i++)
            if (atomic_load(&g->srv[i].state) == NV_GM_SRV_DRAINING && atomic_load(&g->srv[i].drain_token_set) &&
                atomic_load(&g->srv[i].pages_held))
                nv_gm_move_off(g, i);
        repair_all(g);   /* what it could not do now is retried at the next tick */
        answer_drains(g);
        pthread_mutex_lock(&g->lock);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

netvm_status_t nv_gm_monitor_start(struct nv_gm_servers *g)
{
    if (pthread_create(&g->monitor, NULL, monitor_main, g) != 0)
        return NETVM_ERR_SYS;
    g->monitor_started = 1;
    return NETVM_OK;
}

void nv_gm_monitor_stop(struct nv_gm_servers *g)
{
    if (!g->monitor_started) {
        nv_gm_shared_answer_waits(g, 1);
        return;
    }
    pthread_mutex_lock(&g->lock);
    g->stopping = 1;
    pthread_cond_signal(&g->cond);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->monitor, NULL);
    g->monitor_started = 0;
    nv_gm_shared_answer_waits(g, 1);
}
