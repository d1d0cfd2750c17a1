/* The remote store of a region: opening it on the context's servers, the
 * directory's one update path, and the operations that need no round trip
 * or do not wait for one (has, discard, health, close). Fetching is in
 * store_remote_fetch.c, storing in store_remote_put.c, the monitor's
 * repairs in store_remote_repair.c. */
#include "gmem/store_remote.h"
#include "util/config.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int nv_gm_dir_cas(struct nv_gstore_remote *r, uint64_t page, uint64_t old, uint64_t nw)
{
    if (!atomic_compare_exchange_strong(&r->dir[page], &old, nw))
        return 0;
    struct nv_gm_servers *g = r->g;
    int so = nv_gm_e_state(old) == NV_GM_PG_STORED, sn = nv_gm_e_state(nw) == NV_GM_PG_STORED;
    if ((so ? old >> 32 : 0) != (sn ? nw >> 32 : 0)) {
        for (int i = 0; i < NV_GM_RMAX; i++) {
            unsigned a = so ? nv_gm_e_holder(old, i) : NV_GM_NO_SERVER;
            unsigned b = sn ? nv_gm_e_holder(nw, i) : NV_GM_NO_SERVER;
            if (a != NV_GM_NO_SERVER)
                atomic_fetch_sub(&g->srv[a].pages_held, 1);
            if (b != NV_GM_NO_SERVER)
                atomic_fetch_add(&g->srv[b].pages_held, 1);
        }
    }
    return 1;
}

void nv_gm_free_at(struct nv_gstore_remote *r, int idx, uint64_t first, uint64_t n)
{
    struct nv_gm_servers *g = r->g;
    if (!nv_gm_srv_readable(g, idx))
        return;
    netvm_rpc_handle_t *h;
    if (netvm_rpc_begin(g->ctx, &h) != NETVM_OK)
        return;   /* the server frees the pages when this client leaves */
    uint64_t args[4] = { r->owner, r->region, first, n };
    nv_rpc_svc_issue(h, g->srv[idx].peer, nv_gm_k(NV_GM_FREE), args, 4, NULL, 0, NULL, 0, r->timeout_ms);
    netvm_rpc_drop(h);
}

int nv_gm_has(struct nv_gstore *s, uint64_t page)
{
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    return page < r->npages && nv_gm_e_state(atomic_load_explicit(&r->dir[page], memory_order_acquire)) != NV_GM_PG_NONE;
}

void nv_gm_discard(struct nv_gstore *s, uint64_t first, uint64_t n)
{
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    if (first >= r->npages)
        return;
    if (n > r->npages - first)
        n = r->npages - first;
    uint8_t held[NV_GM_MAX_SERVERS] = { 0 };
    for (uint64_t p = first; p < first + n; p++) {
        uint64_t e = atomic_load(&r->dir[p]), nw;
        do {
            if (nv_gm_e_state(e) == NV_GM_PG_NONE)
                break;
            /* a bumped generation tells a store or mover under way that
             * what it copies is no longer wanted */
            nw = nv_gm_e_empty_holders(nv_gm_e_bump(e)) & ~3ull;
        } while (!nv_gm_dir_cas(r, p, e, nw) && ((e = atomic_load(&r->dir[p])), 1));
        if (nv_gm_e_state(e) == NV_GM_PG_STORED)
            for (int i = 0; i < NV_GM_RMAX; i++)
                if (nv_gm_e_holder(e, i) != NV_GM_NO_SERVER)
                    held[nv_gm_e_holder(e, i)] = 1;
        if (nv_gm_e_state(e) == NV_GM_PG_LOST)
            atomic_fetch_sub(&r->lost, 1);
    }
    for (int i = 0; i < NV_GM_MAX_SERVERS; i++)
        if (held[i])
            nv_gm_free_at(r, i, first, n);
}

void nv_gm_health(struct nv_gstore *s, netvm_gmem_health_t *h)
{
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    struct nv_gm_servers *g = r->g;
    memset(h, 0, sizeof *h);
    int n = atomic_load_explicit(&g->nservers, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        int st = atomic_load(&g->srv[i].state);
        if (st == NV_GM_SRV_REMOVED)
            continue;
        h->servers++;
        h->servers_alive += st == NV_GM_SRV_ALIVE || st == NV_GM_SRV_DRAINING;
    }
    h->replicas = r->replicas;
    uint64_t hi = atomic_load(&r->hi);
    for (uint64_t p = 0; p < hi; p++) {
        uint64_t e = atomic_load_explicit(&r->dir[p], memory_order_relaxed);
        if (nv_gm_e_state(e) == NV_GM_PG_LOST) {
            h->pages_lost++;
            continue;
        }
        if (nv_gm_e_state(e) != NV_GM_PG_STORED)
            continue;
        h->pages_stored++;
        int live = 0;
        for (int i = 0; i < NV_GM_RMAX; i++) {
            unsigned x = nv_gm_e_holder(e, i);
            if (x != NV_GM_NO_SERVER && atomic_load(&g->srv[x].state) == NV_GM_SRV_ALIVE)
                live++;
        }
        h->pages_degraded += live < r->replicas;
    }
}

static void rs_close(struct nv_gstore *s)
{
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    struct nv_gm_servers *g = r->g;
    nv_gm_region_remove(g, r);
    /* free the region everywhere and wait for it, so that an unmap leaves
     * the servers clean when it returns */
    int n = atomic_load_explicit(&g->nservers, memory_order_acquire);
    uint64_t args[4] = { r->owner, r->region, 0, UINT64_MAX };
    for (int i = 0; i < n; i++) {
        int st = atomic_load(&g->srv[i].state);
        if (st == NV_GM_SRV_REMOVED || st == NV_GM_SRV_DEAD)
            continue;
        netvm_status_t fs = nv_rpc_svc_call(g->ctx, g->srv[i].peer, nv_gm_k(NV_GM_FREE), args, 4, NULL, 0, NULL, 0,
                                            r->timeout_ms, NULL);
        if (fs != NETVM_OK)
            nv_gm_srv_report(g, i, fs);
    }
    uint64_t hi = atomic_load(&r->hi);
    for (uint64_t p = 0; p < hi; p++)
        nv_gm_dir_cas(r, p, atomic_load(&r->dir[p]), 0);
    munmap((void *)r->dir, r->npages * sizeof *r->dir);
    nv_gm_put_cache_free(r);
    free(r);
}

static const struct nv_gstore_ops remote_ops = {
    .has = nv_gm_has,
    .fetch = nv_gm_fetch,
    .fetch_nb = nv_gm_fetch_nb,
    .fetchn_nb = nv_gm_fetchn_nb,
    .store_nb = nv_gm_store_nb,
    .store_vec_nb = nv_gm_store_vec_nb,
    .discard = nv_gm_discard,
    .health = nv_gm_health,
    .close = rs_close,
};

netvm_status_t nv_gm_pick_replicas(struct nv_gm_servers *g, const netvm_gmem_opts_t *opts, uint64_t npages, int *rp)
{
    int avail = nv_gm_servers_placeable_count(g);
    int r = opts && opts->replicas > 0 ? opts->replicas : (int)nv_config_long("NETVM_GMEM_REPLICAS", 0, NV_GM_RMAX);
    if (r == 0)
        r = avail >= 2 ? 2 : 1;
    if (r > NV_GM_RMAX || r > avail) {
        nv_error("gmem: %d replicas asked for, but %d servers answer (and at most %d replicas exist)", r, avail,
                 NV_GM_RMAX);
        return NETVM_ERR_INVAL;
    }
    uint64_t room = 0;
    int n = atomic_load_explicit(&g->nservers, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (nv_gm_srv_placeable(g, i)) {
            uint64_t c = g->srv[i].client_max_pages < g->srv[i].pool_pages ? g->srv[i].client_max_pages
                                                                          : g->srv[i].pool_pages;
            room += c;
        }
    if (room / (uint64_t)r < npages) {
        nv_error("gmem: the servers take at most %llu pages of this client, a region of %llu pages with %d "
                 "replicas needs %llu",
                 (unsigned long long)room, (unsigned long long)npages, r, (unsigned long long)npages * r);
        return NETVM_ERR_NOMEM;
    }
    *rp = r;
    return NETVM_OK;
}

netvm_status_t nv_gstore_remote_open(netvm_ctx_t *ctx, uint64_t npages, const netvm_gmem_opts_t *opts,
                                     struct nv_gstore **sp)
{
    return nv_gstore_remote_open_flags(ctx, npages, opts, 0, sp);
}

netvm_status_t nv_gstore_remote_open_flags(netvm_ctx_t *ctx, uint64_t npages, const netvm_gmem_opts_t *opts,
                                           unsigned flags, struct nv_gstore **sp)
{
    *sp = NULL;
    if (!ctx || !npages)
        return NETVM_ERR_INVAL;
    netvm_status_t st;
    struct nv_gm_servers *g = nv_gm_servers_get(ctx, opts, &st);
    if (!g)
        return st;
    int replicas;
    /* a reservation's servers are not asked for room for all of it */
    if ((st = nv_gm_pick_replicas(g, opts, (flags & NV_GSTORE_RESERVE) ? 0 : npages, &replicas)) != NETVM_OK)
        return st;
    struct nv_gstore_remote *r = calloc(1, sizeof *r);
    /* zero-filled on first touch: a page never used costs nothing */
    void *dir = r ? mmap(NULL, npages * sizeof *r->dir, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                  : MAP_FAILED;
    if (dir == MAP_FAILED) {
        free(r);
        return NETVM_ERR_NOMEM;
    }
    r->dir = dir;
    r->base.ops = &remote_ops;
    r->g = g;
    r->owner = g->client_id;
    r->region = __atomic_fetch_add(&g->next_region, 1, __ATOMIC_RELAXED);
    r->npages = npages;
    r->replicas = replicas;
    r->timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : g->timeout_ms;
    nv_gm_region_add(g, r);
    *sp = &r->base;
    return NETVM_OK;
}
