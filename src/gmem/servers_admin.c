/* Servers joining and leaving a running client: netvm_gmem_server_add
 * (connect, then rebalance: every extent whose placement now includes the
 * new server has its displaced copies MOVEd there by their holder, which
 * forwards requests for them meanwhile) and netvm_gmem_server_remove
 * (every copy on the server goes to the next server of its placement,
 * then the server is let go). */
#include "gmem/own_ctx.h"
#include "gmem/store_remote.h"
#include "util/log.h"

#include <string.h>
#include <time.h>

/* Mark the pages of one extent that must move from a displaced holder to
 * server to; returns each page's displaced holder in from[] (NO_SERVER:
 * none, or skipped). A page a store is writing is left for later. */
static void claim_extent(struct nv_gstore_remote *r, uint64_t lo, uint64_t hi, const uint8_t *top, int ntop, int to,
                         uint8_t *from)
{
    for (uint64_t p = lo; p < hi; p++) {
        from[p - lo] = NV_GM_NO_SERVER;
        uint64_t e = atomic_load(&r->dir[p]);
        if (nv_gm_e_state(e) != NV_GM_PG_STORED || (e & (NV_GM_E_W | NV_GM_E_M)) || nv_gm_e_holds(e, (unsigned)to))
            continue;
        for (int i = 0; i < NV_GM_RMAX; i++) {
            unsigned x = nv_gm_e_holder(e, i);
            if (x == NV_GM_NO_SERVER)
                continue;
            int in_top = 0;
            for (int j = 0; j < ntop; j++)
                in_top |= top[j] == x;
            if (!in_top && nv_gm_srv_readable(r->g, (int)x)) {
                if (nv_gm_dir_cas(r, p, e, e | NV_GM_E_M))
                    from[p - lo] = (uint8_t)x;
                break;
            }
        }
    }
}

static void settle_run(struct nv_gstore_remote *r, uint64_t first, uint64_t n, int from, int to, int moved)
{
    for (uint64_t p = first; p < first + n; p++) {
        uint64_t e = atomic_load(&r->dir[p]), nw;
        do {
            nw = e & ~NV_GM_E_M;
            if (moved && nv_gm_e_state(e) == NV_GM_PG_STORED) {
                uint8_t h[NV_GM_RMAX];
                for (int i = 0; i < NV_GM_RMAX; i++)
                    h[i] = (uint8_t)(nv_gm_e_holder(e, i) == (unsigned)from ? (unsigned)to : nv_gm_e_holder(e, i));
                nw = nv_gm_e_with_holders(nw, h);
            }
        } while (!nv_gm_dir_cas(r, p, e, nw) && ((e = atomic_load(&r->dir[p])), 1));
        if (moved && nv_gm_e_state(e) != NV_GM_PG_STORED)
            nv_gm_free_at(r, to, p, 1);   /* discarded meanwhile: the moved copy is not wanted */
    }
}

static uint64_t rebalance_region(struct nv_gstore_remote *r, int to)
{
    struct nv_gm_servers *g = r->g;
    uint64_t moved = 0;
    uint8_t from[NV_GM_EXTENT];
    for (uint64_t ext = 0; ext * NV_GM_EXTENT < atomic_load(&r->hi); ext++) {
        uint8_t top[NV_GM_RMAX];
        int ntop = nv_gm_place(g, r->region, ext, top, r->replicas), in = 0;
        for (int j = 0; j < ntop; j++)
            in |= top[j] == to;
        if (!in)
            continue;
        uint64_t lo = ext * NV_GM_EXTENT, hi = lo + NV_GM_EXTENT < r->npages ? lo + NV_GM_EXTENT : r->npages;
        claim_extent(r, lo, hi, top, ntop, to, from);
        for (uint64_t p = lo; p < hi;) {
            if (from[p - lo] == NV_GM_NO_SERVER) {
                p++;
                continue;
            }
            uint64_t q = p;
            while (q < hi && from[q - lo] == from[p - lo])
                q++;
            int src = from[p - lo];
            uint64_t args[4] = { g->client_id, r->region, p, q - p };
            netvm_rpc_result_t res;
            netvm_status_t st = nv_rpc_svc_call(g->ctx, g->srv[src].peer, nv_gm_k(NV_GM_MOVE), args, 4,
                                                g->srv[to].addr, strlen(g->srv[to].addr), NULL, 0,
                                                r->timeout_ms * 4, &res);
            if (st != NETVM_OK)
                nv_warn("gmem: moving pages %llu-%llu from %s to %s failed: %s; they stay where they are",
                        (unsigned long long)p, (unsigned long long)(q - 1), g->srv[src].addr, g->srv[to].addr,
                        netvm_strerror(st));
            settle_run(r, p, q - p, src, to, st == NETVM_OK);
            if (st == NETVM_OK)
                moved += q - p;
            p = q;
        }
    }
    return moved;
}

/* Move every copy on server from (draining or being removed) to the first
 * server of its page's placement that does not hold the page yet, by
 * runs: the leaving server puts them there itself (NV_GM_MOVE), one call
 * per run instead of a GET and a PUT per page. What a MOVE did not take
 * is left to the page-by-page repair. */
static uint64_t move_off_region(struct nv_gstore_remote *r, int from)
{
    struct nv_gm_servers *g = r->g;
    uint64_t moved = 0;
    uint8_t to[NV_GM_EXTENT];
    for (uint64_t ext = 0; ext * NV_GM_EXTENT < atomic_load(&r->hi); ext++) {
        uint8_t order[NV_GM_MAX_SERVERS];
        int norder = nv_gm_place(g, r->region, ext, order, NV_GM_MAX_SERVERS);
        uint64_t lo = ext * NV_GM_EXTENT, hi = lo + NV_GM_EXTENT < r->npages ? lo + NV_GM_EXTENT : r->npages;
        for (uint64_t p = lo; p < hi; p++) {
            to[p - lo] = NV_GM_NO_SERVER;
            uint64_t e = atomic_load(&r->dir[p]);
            if (nv_gm_e_state(e) != NV_GM_PG_STORED || (e & (NV_GM_E_W | NV_GM_E_M)) ||
                !nv_gm_e_holds(e, (unsigned)from))
                continue;
            for (int j = 0; j < norder; j++)
                if (!nv_gm_e_holds(e, order[j])) {
                    if (nv_gm_dir_cas(r, p, e, e | NV_GM_E_M))
                        to[p - lo] = order[j];
                    break;
                }
        }
        for (uint64_t p = lo; p < hi;) {
            if (to[p - lo] == NV_GM_NO_SERVER) {
                p++;
                continue;
            }
            uint64_t q = p;
            while (q < hi && to[q - lo] == to[p - lo])
                q++;
            int dst = to[p - lo];
            uint64_t args[4] = { g->client_id, r->region, p, q - p };
            netvm_status_t st = nv_rpc_svc_call(g->ctx, g->srv[from].peer, nv_gm_k(NV_GM_MOVE), args, 4,
                                                g->srv[dst].addr, strlen(g->srv[dst].addr), NULL, 0,
                                                r->timeout_ms * 4, NULL);
            settle_run(r, p, q - p, from, dst, st == NETVM_OK);
            if (st == NETVM_OK)
                moved += q - p;
            p = q;
        }
    }
    return moved;
}

/* Run fn on every open region, each kept open meanwhile. */
static uint64_t each_region(struct nv_gm_servers *g, uint64_t (*fn)(struct nv_gstore_remote *, int), int arg)
{
    uint64_t sum = 0;
    pthread_mutex_lock(&g->lock);
    struct nv_gstore_remote *r = g->regions;
    if (r)
        atomic_fetch_add(&r->users, 1);
    while (r) {
        pthread_mutex_unlock(&g->lock);
        sum += fn(r, arg);
        pthread_mutex_lock(&g->lock);
        struct nv_gstore_remote *next = r->next;
        if (next)
            atomic_fetch_add(&next->users, 1);
        atomic_fetch_sub(&r->users, 1);
        r = next;
    }
    pthread_mutex_unlock(&g->lock);
    return sum;
}

static uint64_t repair_one(struct nv_gstore_remote *r, int unused)
{
    (void)unused;
    return nv_gm_repair(r);
}

static uint64_t free_region_at(struct nv_gstore_remote *r, int idx)
{
    struct nv_gm_servers *g = r->g;
    uint64_t args[4] = { g->client_id, r->region, 0, UINT64_MAX };
    nv_rpc_svc_call(g->ctx, g->srv[idx].peer, nv_gm_k(NV_GM_FREE), args, 4, NULL, 0, NULL, 0, r->timeout_ms, NULL);
    return 0;
}

netvm_status_t netvm_gmem_server_add(netvm_ctx_t *user, const char *addr)
{
    if (!user || !addr)
        return NETVM_ERR_INVAL;
    netvm_status_t st;
    netvm_ctx_t *ctx = nv_gmem_own_ctx(user, &st);
    if (!ctx)
        return st;
    struct nv_gm_servers *g = nv_gm_servers_if(ctx);
    if (!g || !g->monitor_started) {
        /* no region yet: this server starts the set */
        netvm_gmem_opts_t o = { .servers = addr };
        return nv_gm_servers_get(ctx, &o, &st) ? NETVM_OK : st;
    }
    pthread_mutex_lock(&g->admin);
    int idx;
    if (nv_gm_srv_by_addr(g, addr) >= 0)
        st = NETVM_ERR_EXISTS;
    else
        st = nv_gm_srv_connect(g, addr, &idx);
    pthread_mutex_unlock(&g->admin);
    if (st != NETVM_OK)
        return st;
    uint64_t moved = each_region(g, rebalance_region, idx);
    nv_info("gmem: memory server %s added; %llu pages moved onto it", addr, (unsigned long long)moved);
    return NETVM_OK;
}

uint64_t nv_gm_move_off(struct nv_gm_servers *g, int idx)
{
    return each_region(g, move_off_region, idx);
}

netvm_status_t nv_gm_evacuate(struct nv_gm_servers *g, int idx)
{
    struct nv_gm_srv *s = &g->srv[idx];
    nv_gm_move_off(g, idx);
    uint64_t before = atomic_load(&s->pages_held);
    for (int stuck = 0; atomic_load(&s->pages_held) && stuck < 6;) {
        each_region(g, repair_one, 0);
        uint64_t now = atomic_load(&s->pages_held);
        stuck = now < before ? 0 : stuck + 1;
        before = now;
        /* a page that could not move this round may be busy for a moment
         * (a fetch or a move of it in flight): the next round waits a
         * little, longer each time (10 ms .. 160 ms, 310 ms in all), where
         * three rounds back to back once gave up on one page under
         * ThreadSanitizer on a loaded machine */
        if (stuck && stuck < 6 && now) {
            struct timespec ts = { 0, 10000000L << (stuck - 1) };
            nanosleep(&ts, NULL);
        }
    }
    return atomic_load(&s->pages_held) ? NETVM_ERR_NOMEM : NETVM_OK;
}

netvm_status_t netvm_gmem_server_remove(netvm_ctx_t *user, const char *addr)
{
    if (!user || !addr)
        return NETVM_ERR_INVAL;
    netvm_ctx_t *ctx = nv_gmem_own_ctx_if(user);
    struct nv_gm_servers *g = ctx ? nv_gm_servers_if(ctx) : NULL;
    if (!g)
        return NETVM_ERR_NOTFOUND;
    pthread_mutex_lock(&g->admin);
    int idx = nv_gm_srv_by_addr(g, addr);
    netvm_status_t st = idx < 0 ? NETVM_ERR_NOTFOUND : NETVM_OK;
    int was = idx >= 0 ? atomic_load(&g->srv[idx].state) : 0;
    if (st == NETVM_OK && (was == NV_GM_SRV_ALIVE || was == NV_GM_SRV_SUSPECT)) {
        atomic_store(&g->srv[idx].state, NV_GM_SRV_DRAINING);
        st = nv_gm_evacuate(g, idx);
        if (st != NETVM_OK) {
            nv_error("gmem: %s keeps %llu pages the other servers cannot take: not removed", addr,
                     (unsigned long long)atomic_load(&g->srv[idx].pages_held));
            atomic_store(&g->srv[idx].state, was);
        }
    }
    if (st == NETVM_OK) {
        each_region(g, free_region_at, idx);
        atomic_store(&g->srv[idx].state, NV_GM_SRV_REMOVED);
        netvm_disconnect(ctx, g->srv[idx].peer);
        nv_info("gmem: memory server %s removed", addr);
    }
    pthread_mutex_unlock(&g->admin);
    return st;
}
