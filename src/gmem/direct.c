/* Direct reads of a memory server's pool (direct.h): the view's layout,
 * and the client's lock-free lookup and copy under the shards' sequence
 * words. */
#define _GNU_SOURCE
#include "gmem/direct.h"
#include "gmem/proto.h"
#include "util/log.h"
#include "util/pidfd.h"
#include "util/time.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Tries of one read before the server is asked instead: a shard changes
 * only while a PUT or FREE of one of its pages runs, so one retry almost
 * always does. */
#define VIEW_TRIES 8
/* Longest chain walked: chains are about one entry long (nbuckets >=
 * npages); a longer walk is a chain changing under the reader. */
#define VIEW_WALK_MAX 64

static uint64_t page_align(uint64_t x) { return (x + NV_GM_PAGE - 1) & ~(uint64_t)(NV_GM_PAGE - 1); }

void nv_gm_view_layout(uint64_t npages, uint64_t nbuckets, uint64_t nshards, uint64_t meta_stride,
                       struct nv_gm_view_hdr *h)
{
    memset(h, 0, sizeof *h);
    h->layout = NV_GM_VIEW_LAYOUT;
    h->npages = npages;
    h->nbuckets = nbuckets;
    h->nshards = nshards;
    h->meta_stride = meta_stride;
    h->off_seq = NV_GM_PAGE;
    h->off_buckets = page_align(h->off_seq + nshards * NV_GM_VIEW_SEQ_STRIDE);
    h->off_meta = page_align(h->off_buckets + nbuckets * sizeof(uint32_t));
    h->off_pool = page_align(h->off_meta + npages * meta_stride);
    h->total = h->off_pool + npages * NV_GM_PAGE;
}

struct nv_gm_view {
    netvm_rseg_t    *rseg;
    int              pidfd;
    const uint8_t   *base;
    struct nv_gm_view_hdr h;   /* a private copy: the mapping's could change under us */
};

struct nv_gm_view *nv_gm_view_attach(netvm_ctx_t *ctx, int peer, const netvm_seg_handle_t *handle)
{
    netvm_rseg_t *rs;
    if (netvm_import_handle_peer(ctx, peer, handle, &rs) != NETVM_OK)
        return NULL;
    const uint8_t *base = netvm_rseg_is_mapped(rs) ? netvm_ptr(rs, 0) : NULL;
    size_t len = netvm_rseg_len(rs);
    struct nv_gm_view *v = base && len >= sizeof(struct nv_gm_view_hdr) ? calloc(1, sizeof *v) : NULL;
    if (!v) {
        netvm_release(rs);
        return NULL;
    }
    memcpy(&v->h, base, sizeof v->h);
    struct nv_gm_view_hdr want;
    nv_gm_view_layout(v->h.npages, v->h.nbuckets, v->h.nshards, v->h.meta_stride, &want);
    want.pid = v->h.pid;
    /* the layout must be this build's (want's layout word) and every part
     * inside the mapping */
    int ok = memcmp(&want, &v->h, sizeof want) == 0 && v->h.total <= len && v->h.nbuckets &&
             !(v->h.nbuckets & (v->h.nbuckets - 1)) && v->h.nshards && !(v->h.nshards & (v->h.nshards - 1)) &&
             v->h.meta_stride >= sizeof(struct nv_gm_view_entry) && v->h.npages < UINT32_MAX &&
             v->h.pid > 0 && v->h.pid < INT32_MAX;
    /* the server answered our HELLO just now: this is its pid, not a reused one */
    v->pidfd = ok ? nv_pidfd_open((pid_t)v->h.pid) : -1;
    if (v->pidfd < 0) {
        nv_warn("gmem: memory server (peer %d) offers direct reads of another layout (or is gone); reading "
                "through GET", peer);
        netvm_release(rs);
        free(v);
        return NULL;
    }
    v->rseg = rs;
    v->base = base;
    return v;
}

void nv_gm_view_detach(struct nv_gm_view *v)
{
    if (!v)
        return;
    netvm_release(v->rseg);
    close(v->pidfd);
    free(v);
}

int nv_gm_view_alive(struct nv_gm_view *v) { return !nv_pidfd_exited(v->pidfd); }

static uint64_t load64(const uint8_t *p) { return __atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED); }
static uint32_t load32(const uint8_t *p) { return __atomic_load_n((const uint32_t *)p, __ATOMIC_RELAXED); }

/* The slot of page (client, region, page) if its chain shows it now: the
 * shard's word read before the walk in *s1 (odd: busy, NV_GM_NIL_SLOT).
 * The caller checks the word again after it copied the page. */
#define NV_GM_NIL_SLOT UINT32_MAX
static uint32_t view_find(const struct nv_gm_view *v, uint64_t hash, uint64_t client, uint64_t region,
                          uint64_t page, const _Atomic uint64_t *seq, uint64_t *s1)
{
    const struct nv_gm_view_hdr *h = &v->h;
    *s1 = atomic_load_explicit(seq, memory_order_acquire);
    if (*s1 & 1)
        return NV_GM_NIL_SLOT;
    uint32_t slot = load32(v->base + h->off_buckets + (hash & (h->nbuckets - 1)) * sizeof(uint32_t));
    for (int walked = 0; slot < h->npages && walked < VIEW_WALK_MAX; walked++) {
        const uint8_t *e = v->base + h->off_meta + (uint64_t)slot * h->meta_stride;
        if (load64(e + offsetof(struct nv_gm_view_entry, client)) == client &&
            load64(e + offsetof(struct nv_gm_view_entry, region)) == region &&
            load64(e + offsetof(struct nv_gm_view_entry, page)) == page)
            return slot;
        slot = load32(e + offsetof(struct nv_gm_view_entry, next));
    }
    return NV_GM_NIL_SLOT;
}

static const _Atomic uint64_t *view_seq(const struct nv_gm_view *v, uint64_t hash)
{
    return (const _Atomic uint64_t *)(v->base + v->h.off_seq + (hash & (v->h.nshards - 1)) * NV_GM_VIEW_SEQ_STRIDE);
}

/* A page's lines asked of the caches before they are copied. */
static void prefetch_page(const uint8_t *p)
{
    for (unsigned o = 0; o < NV_GM_PAGE; o += 64)
        __builtin_prefetch(p + o, 0, 2);
}

uint64_t nv_gm_view_read_run(struct nv_gm_view *v, uint64_t client, uint64_t region, uint64_t first, uint64_t n,
                             void *buf, uint64_t want)
{
    /* Why a run is read in two passes: read one page after another, each
     * page's walk (its bucket, then its entry: misses in a large pool)
     * waited for the one before it, and each copy began from memory. Now
     * the run's buckets are asked for together, then the walks find the
     * slots (their misses overlap), and a page's bytes are asked for
     * while the page before it is copied. Each page is still checked
     * against its shard's word: read before its walk, again after its
     * copy. */
    const struct nv_gm_view_hdr *h = &v->h;
    uint64_t hash[64], s1[64], got = 0;
    uint32_t slot[64];
    if (n > 64)
        n = 64;
    for (uint64_t i = 0; i < n; i++) {
        if (!(want >> i & 1))
            continue;
        hash[i] = nv_gm_hash3(client, region, first + i);
        __builtin_prefetch(v->base + h->off_buckets + (hash[i] & (h->nbuckets - 1)) * sizeof(uint32_t));
        __builtin_prefetch(view_seq(v, hash[i]));
    }
    for (uint64_t i = 0; i < n; i++)
        if (want >> i & 1)
            slot[i] = view_find(v, hash[i], client, region, first + i, view_seq(v, hash[i]), &s1[i]);
    uint64_t retry = 0;
    int first_copy = 1;
    for (uint64_t i = 0; i < n; i++) {
        if (!(want >> i & 1))
            continue;
        const _Atomic uint64_t *seq = view_seq(v, hash[i]);
        if (slot[i] == NV_GM_NIL_SLOT) {
            /* busy, or not shown: sure only if the shard stayed still */
            atomic_thread_fence(memory_order_acquire);
            if ((s1[i] & 1) || atomic_load_explicit(seq, memory_order_relaxed) != s1[i])
                retry |= (uint64_t)1 << i;
            continue;
        }
        if (first_copy)
            prefetch_page(v->base + h->off_pool + (uint64_t)slot[i] * NV_GM_PAGE);
        first_copy = 0;
        uint64_t next = i + 1;
        while (next < n && (!(want >> next & 1) || slot[next] == NV_GM_NIL_SLOT))
            next++;
        if (next < n)
            prefetch_page(v->base + h->off_pool + (uint64_t)slot[next] * NV_GM_PAGE);
        memcpy((uint8_t *)buf + i * NV_GM_PAGE, v->base + h->off_pool + (uint64_t)slot[i] * NV_GM_PAGE, NV_GM_PAGE);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(seq, memory_order_relaxed) == s1[i])
            got |= (uint64_t)1 << i;
        else
            retry |= (uint64_t)1 << i;
    }
    /* a page whose shard was busy or changed under the first pass: alone,
     * with nv_gm_view_read's tries */
    for (uint64_t i = 0; i < n; i++)
        if ((retry >> i & 1) && nv_gm_view_read(v, client, region, first + i, (uint8_t *)buf + i * NV_GM_PAGE))
            got |= (uint64_t)1 << i;
    return got;
}

int nv_gm_view_read(struct nv_gm_view *v, uint64_t client, uint64_t region, uint64_t page, void *buf)
{
    uint64_t hash = nv_gm_hash3(client, region, page), s1;
    const _Atomic uint64_t *seq = view_seq(v, hash);
    for (int t = 0; t < VIEW_TRIES; t++) {
        uint32_t slot = view_find(v, hash, client, region, page, seq, &s1);
        if (s1 & 1) {
            nv_cpu_relax();
            continue;
        }
        if (slot != NV_GM_NIL_SLOT)
            memcpy(buf, v->base + v->h.off_pool + (uint64_t)slot * NV_GM_PAGE, NV_GM_PAGE);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(seq, memory_order_relaxed) != s1)
            continue;   /* the shard changed under the walk or the copy */
        return slot != NV_GM_NIL_SLOT;
    }
    return 0;
}
