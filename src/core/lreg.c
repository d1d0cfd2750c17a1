/* The local registration caches core runs for its links (link.h's lreg
 * upcalls over src/reg/rcache.h): a link that must register its own
 * buffers (the ofi link's descriptors and rendezvous payloads) keeps a
 * cache without reaching up into src/reg, and core can report what the
 * caches did. One cache per link that asks; core remembers the first for
 * its statistics. */
#include "core/internal.h"
#include "reg/rcache.h"

static void *lreg_open(void *arg, const struct nv_lreg_registrar *r, netvm_status_t *st)
{
    netvm_ctx_t *ctx = arg;
    struct nv_rcache *c = NULL;
    *st = nv_rcache_create(&c, r, NULL);
    if (*st != NETVM_OK)
        return NULL;
    struct nv_rcache *none = NULL;
    __atomic_compare_exchange_n(&ctx->lreg_cache, &none, c, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    return c;
}

static netvm_status_t lreg_get(void *cache, const void *addr, size_t len, unsigned access, struct nv_lreg **out)
{
    return nv_rcache_get(cache, addr, len, access, out);
}

static void lreg_put(void *cache, struct nv_lreg *r)
{
    nv_rcache_put(cache, r);
}

static void lreg_close(void *arg, void *cache)
{
    netvm_ctx_t *ctx = arg;
    struct nv_rcache *c = cache;
    /* the statistics are kept; the cache they came from goes */
    if (__atomic_load_n(&ctx->lreg_cache, __ATOMIC_ACQUIRE) == c) {
        pthread_mutex_lock(&ctx->lreg_lock);
        nv_rcache_get_stats(c, &ctx->lreg_closed);
        __atomic_store_n(&ctx->lreg_cache, NULL, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&ctx->lreg_lock);
    }
    nv_rcache_destroy(c);
}

void nv_lreg_upcalls(struct nv_link_upcalls *up)
{
    up->lreg_open = lreg_open;
    up->lreg_get = lreg_get;
    up->lreg_put = lreg_put;
    up->lreg_close = lreg_close;
}

void nv_lreg_stats(netvm_ctx_t *ctx, struct nv_rcache_stats *s)
{
    pthread_mutex_lock(&ctx->lreg_lock);
    struct nv_rcache *c = __atomic_load_n(&ctx->lreg_cache, __ATOMIC_ACQUIRE);
    if (c)
        nv_rcache_get_stats(c, s);
    else
        *s = ctx->lreg_closed;
    pthread_mutex_unlock(&ctx->lreg_lock);
}
