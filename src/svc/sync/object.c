/* svc/sync: creating an object at its home, opening it elsewhere, closing
 * it. The object's words are memory the home allocates with
 * netvm_alloc_shared under "nvsync:<name>"; a header (magic, kind, the
 * home's table index and a key) lets an opener check what it found and
 * lets the home refuse stale or forged ids. */
#include "svc/sync/sync_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static netvm_status_t seg_name(const char *name, char *out, size_t cap)
{
    if (!name || !*name || strlen(name) > NETVM_SYNC_NAME_MAX)
        return NETVM_ERR_INVAL;
    snprintf(out, cap, "nvsync:%s", name);
    return NETVM_OK;
}

static netvm_status_t add_home(struct nv_sync_state *st, struct nv_sync_home *o)
{
    pthread_mutex_lock(&st->lock);
    uint32_t i = 0;
    while (i < st->nhomes && st->homes[i])
        i++;
    if (i == st->nhomes) {
        uint32_t n = st->nhomes ? st->nhomes * 2 : 8;
        struct nv_sync_home **h = realloc(st->homes, n * sizeof *h);
        if (!h) {
            pthread_mutex_unlock(&st->lock);
            return NETVM_ERR_NOMEM;
        }
        memset(h + st->nhomes, 0, (n - st->nhomes) * sizeof *h);
        st->homes = h;
        st->nhomes = n;
    }
    o->id = i;
    st->homes[i] = o;
    pthread_mutex_unlock(&st->lock);
    return NETVM_OK;
}

netvm_status_t nv_sync_create(netvm_ctx_t *ctx, const char *name, int kind, unsigned nq, const int *members,
                              unsigned nmembers, struct nv_sync_handle *h)
{
    char sn[80];
    netvm_status_t s = seg_name(name, sn, sizeof sn);
    if (s != NETVM_OK)
        return s;
    struct nv_sync_state *st = nv_sync_state(ctx);
    if (!st)
        return NETVM_ERR_NOMEM;
    struct nv_sync_home *o = calloc(1, sizeof *o);
    struct nv_sync_fifo *q = nq ? calloc(nq, sizeof *q) : NULL;
    int *mem = nmembers ? malloc(nmembers * sizeof *mem) : NULL;
    if (!o || (nq && !q) || (nmembers && !mem)) {
        free(o);
        free(q);
        free(mem);
        return NETVM_ERR_NOMEM;
    }
    if (nmembers)
        memcpy(mem, members, nmembers * sizeof *mem);
    void *addr;
    size_t len = NV_SYNC_SEG_LEN + ((nmembers * 4 + 7) & ~7u);
    s = netvm_alloc_shared(ctx, len, NETVM_RWA, sn, &addr, &h->seg);
    if (s != NETVM_OK) {
        free(o);
        free(q);
        free(mem);
        return s;
    }
    netvm_seg_handle_t sh;
    netvm_seg_handle(h->seg, &sh);
    o->kind = kind;
    o->key = sh.key ? sh.key : 1;
    o->words = addr;
    o->nq = nq;
    o->q = q;
    o->members = mem;
    o->nmembers = nmembers;
    if ((s = add_home(st, o)) != NETVM_OK) {
        netvm_unexport(h->seg);
        free(o);
        free(q);
        free(mem);
        return s;
    }
    uint8_t *w = addr;
    *(uint64_t *)(w + NV_SYNC_W_KIND) = (uint64_t)kind;
    *(uint64_t *)(w + NV_SYNC_W_ID) = o->id;
    *(uint64_t *)(w + NV_SYNC_W_KEY) = o->key;
    *(uint64_t *)(w + NV_SYNC_W_NMEMB) = nmembers;
    *(uint64_t *)(w + NV_SYNC_W_SEM) = NV_SYNC_SEM_K;
    for (unsigned i = 0; i < nmembers; i++)
        ((int32_t *)(w + NV_SYNC_SEG_LEN))[i] = members[i];
    __atomic_store_n((uint64_t *)(w + NV_SYNC_W_MAGIC), NV_SYNC_MAGIC, __ATOMIC_RELEASE);
    h->owned = o;
    h->ncond = nq;
    s = nv_sync_open(ctx, netvm_rank(ctx), name, kind, h);
    if (s != NETVM_OK) {
        pthread_mutex_lock(&st->lock);
        st->homes[o->id] = NULL;
        nv_sync_home_drop(st, o);
        pthread_mutex_unlock(&st->lock);
        netvm_unexport(h->seg);
        h->owned = NULL;
    }
    return s;
}

netvm_status_t nv_sync_open(netvm_ctx_t *ctx, int home, const char *name, int kind, struct nv_sync_handle *h)
{
    char sn[80];
    netvm_status_t s = seg_name(name, sn, sizeof sn);
    if (s != NETVM_OK)
        return s;
    if (!ctx || home < 0)
        return NETVM_ERR_INVAL;
    struct nv_sync_state *st = nv_sync_state(ctx);
    if (!st)
        return NETVM_ERR_NOMEM;
    h->ctx = ctx;
    h->st = st;
    h->home = home;
    h->kind = kind;
    if ((s = netvm_import(ctx, home, sn, &h->rseg)) != NETVM_OK)
        return s;
    uint64_t hdr[5];
    if (netvm_rseg_len(h->rseg) < NV_SYNC_SEG_LEN) {
        s = NETVM_ERR_NOTFOUND;
        goto fail;
    }
    if ((s = netvm_get(ctx, hdr, h->rseg, 0, sizeof hdr, 0)) != NETVM_OK)
        goto fail;
    if (hdr[0] != NV_SYNC_MAGIC || hdr[1] != (uint64_t)kind) {
        s = hdr[0] == NV_SYNC_MAGIC ? NETVM_ERR_INVAL : NETVM_ERR_NOTFOUND;
        goto fail;
    }
    h->id = (uint32_t)hdr[2];
    h->key = hdr[3];
    nv_sync_map_words(h);
    if (kind == NV_SYNC_BARRIER) {
        unsigned n = (unsigned)hdr[4];
        if (n == 0 || NV_SYNC_SEG_LEN + n * 4 > netvm_rseg_len(h->rseg)) {
            s = NETVM_ERR_NOTFOUND;
            goto fail;
        }
        int32_t *m = malloc(n * sizeof *m);
        if (!m) {
            s = NETVM_ERR_NOMEM;
            goto fail;
        }
        if ((s = netvm_get(ctx, m, h->rseg, NV_SYNC_SEG_LEN, n * sizeof *m, 0)) != NETVM_OK) {
            free(m);
            goto fail;
        }
        h->members = (int *)m;
        h->nmembers = n;
    }
    return NETVM_OK;
fail:
    netvm_release(h->rseg);
    h->rseg = NULL;
    return s;
}

netvm_status_t nv_sync_close(struct nv_sync_handle *h)
{
    if (!h || !h->ctx)
        return NETVM_ERR_INVAL;
    struct nv_sync_state *st = h->st;
    if (h->owned) {
        pthread_mutex_lock(&st->lock);
        st->homes[h->owned->id] = NULL;
        nv_sync_home_drop(st, h->owned);
        pthread_mutex_unlock(&st->lock);
        nv_sync_flush_pending(st);
    }
    if (h->rseg) {
        /* a release's compare-swap may still be on its way (lock.c,
         * release_async): let it land before the import goes */
        if (!netvm_rseg_is_mapped(h->rseg))
            (void)netvm_flush(h->ctx, h->home);
        netvm_release(h->rseg);
    }
    if (h->seg) {
        /* peers that reach the words directly see the object gone */
        void *w = netvm_seg_addr(h->seg);
        if (w)
            __atomic_store_n((uint64_t *)w + NV_SYNC_W_MAGIC / 8, 0, __ATOMIC_RELEASE);
        netvm_unexport(h->seg);
    }
    free(h->members);
    free(h);
    return NETVM_OK;
}
