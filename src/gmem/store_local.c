/* The local store (NETVM_GMEM_STORE=local): a region's pages kept in this
 * process's own memory, an mmap'd array of npages pages plus a byte per
 * page saying whether it was ever stored. It is the benchmarks' "bare
 * userfaultfd fault resolved locally by the same kind of handler": the
 * pager runs exactly as with memory servers, only the fetch is a memcpy.
 * Nothing here ever loses a page, so health reports no failures. */
#include "gmem/store.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct nv_gstore_local {
    struct nv_gstore base;
    uint64_t         npages;
    unsigned char   *pages;      /* npages * NETVM_GMEM_PAGE */
    unsigned char   *has;        /* __atomic, one byte per page */
};

#define LOCAL(s) ((struct nv_gstore_local *)(s))

static int local_has(struct nv_gstore *s, uint64_t page)
{
    struct nv_gstore_local *l = LOCAL(s);
    return page < l->npages && __atomic_load_n(&l->has[page], __ATOMIC_ACQUIRE);
}

static netvm_status_t local_fetch(struct nv_gstore *s, uint64_t page, void *buf)
{
    struct nv_gstore_local *l = LOCAL(s);
    if (page >= l->npages)
        return NETVM_ERR_BOUNDS;
    if (!__atomic_load_n(&l->has[page], __ATOMIC_ACQUIRE))
        return NETVM_ERR_NOTFOUND;
    memcpy(buf, l->pages + page * NETVM_GMEM_PAGE, NETVM_GMEM_PAGE);
    __atomic_fetch_add(&s->bytes_in, NETVM_GMEM_PAGE, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->remote_fetches, 1, __ATOMIC_RELAXED);
    return NETVM_OK;
}

static netvm_status_t local_fetch_nb(struct nv_gstore *s, uint64_t page, void *buf, nv_gstore_done_fn done,
                                     void *arg)
{
    netvm_status_t st = local_fetch(s, page, buf);
    if (st == NETVM_ERR_BOUNDS)
        return st;
    done(arg, st);
    return NETVM_OK;
}

static netvm_status_t local_fetchn_nb(struct nv_gstore *s, uint64_t first, uint64_t n, void *buf,
                                      nv_gstore_ndone_fn done, void *arg)
{
    struct nv_gstore_local *l = LOCAL(s);
    if (!n || n > NV_GSTORE_FETCHN_MAX || first >= l->npages || n > l->npages - first)
        return NETVM_ERR_BOUNDS;
    uint64_t got = 0;
    for (uint64_t i = 0; i < n; i++)
        if (local_fetch(s, first + i, (unsigned char *)buf + i * NETVM_GMEM_PAGE) == NETVM_OK)
            got |= (uint64_t)1 << i;
    done(arg, got);
    return NETVM_OK;
}

static netvm_status_t local_store_nb(struct nv_gstore *s, uint64_t page, uint64_t n, const void *buf,
                                     nv_gstore_done_fn done, void *arg)
{
    struct nv_gstore_local *l = LOCAL(s);
    if (page >= l->npages || n > l->npages - page)
        return NETVM_ERR_BOUNDS;
    memcpy(l->pages + page * NETVM_GMEM_PAGE, buf, n * NETVM_GMEM_PAGE);
    for (uint64_t i = 0; i < n; i++)
        __atomic_store_n(&l->has[page + i], 1, __ATOMIC_RELEASE);
    __atomic_fetch_add(&s->bytes_out, n * NETVM_GMEM_PAGE, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->writebacks, n, __ATOMIC_RELAXED);
    done(arg, NETVM_OK);
    return NETVM_OK;
}

static void local_discard(struct nv_gstore *s, uint64_t first, uint64_t n)
{
    struct nv_gstore_local *l = LOCAL(s);
    if (first >= l->npages)
        return;
    if (n > l->npages - first)
        n = l->npages - first;
    for (uint64_t i = 0; i < n; i++)
        __atomic_store_n(&l->has[first + i], 0, __ATOMIC_RELEASE);
    /* the memory goes back to the system, as a server frees its pool pages */
    madvise(l->pages + first * NETVM_GMEM_PAGE, n * NETVM_GMEM_PAGE, MADV_DONTNEED);
}

static void local_health(struct nv_gstore *s, netvm_gmem_health_t *h)
{
    struct nv_gstore_local *l = LOCAL(s);
    uint64_t stored = 0;
    for (uint64_t i = 0; i < l->npages; i++)
        stored += __atomic_load_n(&l->has[i], __ATOMIC_RELAXED);
    *h = (netvm_gmem_health_t){ .servers = 0, .servers_alive = 0, .replicas = 1, .pages_stored = stored };
}

static void local_close(struct nv_gstore *s)
{
    struct nv_gstore_local *l = LOCAL(s);
    munmap(l->pages, l->npages * NETVM_GMEM_PAGE);
    munmap(l->has, l->npages);
    free(l);
}

static const struct nv_gstore_ops local_ops = {
    .has = local_has, .fetch = local_fetch, .fetch_nb = local_fetch_nb,
    .fetchn_nb = local_fetchn_nb, .store_nb = local_store_nb,
    .discard = local_discard, .health = local_health, .close = local_close,
};

netvm_status_t nv_gstore_local_open(uint64_t npages, struct nv_gstore **out)
{
    struct nv_gstore_local *l = calloc(1, sizeof *l);
    if (!l)
        return NETVM_ERR_NOMEM;
    l->npages = npages;
    l->pages = mmap(NULL, npages * NETVM_GMEM_PAGE, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    l->has = mmap(NULL, npages, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (l->pages == MAP_FAILED || l->has == MAP_FAILED) {
        if (l->pages != MAP_FAILED)
            munmap(l->pages, npages * NETVM_GMEM_PAGE);
        if (l->has != MAP_FAILED)
            munmap(l->has, npages);
        free(l);
        return NETVM_ERR_NOMEM;
    }
    l->base.ops = &local_ops;
    *out = &l->base;
    return NETVM_OK;
}
