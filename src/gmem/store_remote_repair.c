/* Restoring a region's replication, page by page: a page whose holder
 * died gets a new copy (GET from a live holder, PUT to the next server of
 * its placement), a page on a server being drained or removed is copied
 * to the next server and freed there, and a page with no copy left is
 * marked lost (its fetch fails, the pager poisons it). The M bit of the
 * page's entry keeps a store of the same page out meanwhile; a discard
 * meanwhile bumps the generation and the copy is dropped. */
#include "gmem/store_remote.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

enum { H_GOOD, H_LEAVING, H_GONE };

static int holder_kind(struct nv_gm_servers *g, unsigned x)
{
    int st = atomic_load(&g->srv[x].state);
    if (st == NV_GM_SRV_DEAD || st == NV_GM_SRV_REMOVED)
        return H_GONE;
    return st == NV_GM_SRV_DRAINING ? H_LEAVING : H_GOOD;
}

static void clear_m(struct nv_gstore_remote *r, uint64_t p)
{
    uint64_t e = atomic_load(&r->dir[p]);
    while (!atomic_compare_exchange_weak(&r->dir[p], &e, e & ~NV_GM_E_M)) {
    }
}

/* One page; 1 if it still needs work (retry later). */
static int repair_page(struct nv_gstore_remote *r, uint64_t p, void *buf, uint64_t *lost)
{
    struct nv_gm_servers *g = r->g;
    uint64_t e = atomic_load(&r->dir[p]);
    if (nv_gm_e_state(e) != NV_GM_PG_STORED)
        return 0;
    int good = 0, leaving = 0, gone = 0;
    for (int i = 0; i < NV_GM_RMAX; i++) {
        unsigned x = nv_gm_e_holder(e, i);
        if (x == NV_GM_NO_SERVER)
            continue;
        int k = holder_kind(g, x);
        good += k == H_GOOD;
        leaving += k == H_LEAVING;
        gone += k == H_GONE;
    }
    if (!gone && !leaving)
        return 0;
    if (e & (NV_GM_E_W | NV_GM_E_M))
        return 1;   /* a store or another mover has it now */
    if (!good && !leaving) {
        uint64_t nw = nv_gm_e_empty_holders(e & ~3ull) | NV_GM_PG_LOST;
        if (nv_gm_dir_cas(r, p, e, nw)) {
            atomic_fetch_add(&r->lost, 1);
            if (!(*lost)++)
                nv_error("gmem: page %llu of region %llu is lost: every server holding it is gone",
                         (unsigned long long)p, (unsigned long long)r->region);
            return 0;
        }
        return 1;
    }
    if (!nv_gm_dir_cas(r, p, e, e | NV_GM_E_M))
        return 1;
    e |= NV_GM_E_M;
    /* the holders that stay, and a new server for each copy that goes */
    uint8_t keep[NV_GM_RMAX], add[NV_GM_RMAX], src[NV_GM_RMAX];
    int nkeep = 0, nadd = 0, nsrc = 0;
    for (int i = 0; i < NV_GM_RMAX; i++) {
        unsigned x = nv_gm_e_holder(e, i);
        if (x == NV_GM_NO_SERVER)
            continue;
        int k = holder_kind(g, x);
        if (k == H_GOOD)
            keep[nkeep++] = (uint8_t)x;
        if (k != H_GONE)
            src[nsrc++] = (uint8_t)x;
    }
    uint8_t order[NV_GM_MAX_SERVERS];
    int norder = nv_gm_place(g, r->region, p / NV_GM_EXTENT, order, NV_GM_MAX_SERVERS);
    int fetched = 0, ok = 1;
    for (int j = 0; j < norder && nkeep + nadd < r->replicas; j++) {
        if (nv_gm_e_holds(e, order[j]))
            continue;
        for (int s = 0; !fetched && s < nsrc; s++) {
            uint64_t a[3] = { r->owner, r->region, p };
            netvm_rpc_result_t res = { .peer = -1 };
            netvm_status_t st = nv_rpc_svc_call(g->ctx, g->srv[src[s]].peer, nv_gm_k(NV_GM_GET), a, 3, NULL, 0, buf,
                                                NV_GM_PAGE, r->timeout_ms, &res);
            nv_gm_srv_report(g, src[s], nv_gm_get_status(st, res.peer));
            fetched = st == NETVM_OK && res.len == NV_GM_PAGE;
        }
        if (!fetched) {
            ok = 0;
            break;
        }
        uint64_t a[4] = { r->owner, r->region, p, 1 };
        netvm_status_t st = nv_rpc_svc_call(g->ctx, g->srv[order[j]].peer, nv_gm_k(NV_GM_PUT), a, 4, buf, NV_GM_PAGE,
                                            NULL, 0, r->timeout_ms, NULL);
        nv_gm_srv_report(g, order[j], st);
        if (st == NETVM_OK)
            add[nadd++] = order[j];
    }
    if (!ok || nkeep + nadd == 0) {
        /* no source answered, or nowhere to go (a leaving server keeps
         * the only copy for now): try again later */
        clear_m(r, p);
        return 1;
    }
    uint8_t h[NV_GM_RMAX];
    memset(h, NV_GM_NO_SERVER, sizeof h);
    memcpy(h, keep, (size_t)nkeep);
    memcpy(h + nkeep, add, (size_t)nadd);
    uint64_t nw = nv_gm_e_with_holders(e & ~NV_GM_E_M, h);
    if (!nv_gm_dir_cas(r, p, e, nw)) {
        /* discarded meanwhile (only a discard changes an entry with M
         * set): the new copies are not wanted */
        clear_m(r, p);
        for (int i = 0; i < nadd; i++)
            nv_gm_free_at(r, add[i], p, 1);
        return 0;
    }
    if (nadd)
        atomic_fetch_add(&r->restored, (uint64_t)nadd);
    for (int i = 0; i < NV_GM_RMAX; i++) {
        unsigned x = nv_gm_e_holder(e, i);
        if (x != NV_GM_NO_SERVER && holder_kind(g, x) == H_LEAVING)
            nv_gm_free_at(r, (int)x, p, 1);
    }
    return 0;
}

uint64_t nv_gm_repair(struct nv_gstore_remote *r)
{
    void *buf = aligned_alloc(NV_GM_PAGE, NV_GM_PAGE);
    if (!buf)
        return 1;
    uint64_t left = 0, lost = 0;
    uint64_t hi = atomic_load(&r->hi);
    for (uint64_t p = 0; p < hi; p++)
        left += (uint64_t)repair_page(r, p, buf, &lost);
    free(buf);
    if (lost > 1)
        nv_error("gmem: %llu pages of region %llu are lost in all; their accesses fail", (unsigned long long)lost,
                 (unsigned long long)r->region);
    return left;
}
