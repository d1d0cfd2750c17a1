/* netvm_gmem_sync writes every dirty page back (and only those), the
 * synced pages are then evicted clean (no second write-back), a page
 * written after a sync is dirty again; the early write policy cleans
 * dirty pages in the background; unmap gives every page back (resident
 * memory of the process and the store). Usage: sync BUDGET */
#include "gmem_test.h"
#include "gmem/pager.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static size_t rss_pages(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, res = 0;
    CHECK(f && fscanf(f, "%lu %lu", &size, &res) == 2);
    fclose(f);
    return res;
}

int main(int argc, char **argv)
{
    size_t budget = argc > 1 ? strtoul(argv[1], NULL, 0) : 1024;
    size_t npages = 4 * budget, k = budget / 2;
    netvm_gmem_opts_t o = { .budget = budget * GPAGE, .readahead = -1 };
    netvm_gmem_t *g;
    unsigned char *m;
    netvm_ctx_t *ctx = gt_ctx();
    size_t rss0 = rss_pages();
    CHECK_OK(netvm_gmem_map(ctx, npages * GPAGE, &o, &g, (void **)&m));
    netvm_gmem_health_t h;
    CHECK_OK(netvm_gmem_health(g, &h));
    /* a page written back counts once per copy */
    uint64_t R = (uint64_t)h.replicas;
    netvm_gmem_stats_t s0, s1, s2;
    for (size_t p = 0; p < k; p++)
        gt_fill(m + p * GPAGE, p, 1);
    CHECK_OK(netvm_gmem_stats(g, &s0));
    CHECK(s0.writebacks == 0);
    CHECK_OK(netvm_gmem_sync(g));
    CHECK_OK(netvm_gmem_stats(g, &s1));
    CHECK(s1.writebacks == k * R);
    CHECK_OK(netvm_gmem_sync(g));                 /* nothing dirty: nothing sent */
    CHECK_OK(netvm_gmem_stats(g, &s1));
    CHECK(s1.writebacks == k * R);
    /* reading the rest pushes the synced pages out: clean, not sent again */
    for (size_t p = k; p < npages; p++)
        CHECK(gt_check(m + p * GPAGE, p, 0));
    CHECK(gt_resident(m, k * GPAGE) == 0);
    CHECK_OK(netvm_gmem_stats(g, &s2));
    CHECK(s2.writebacks == k * R && s2.evictions_dirty == 0 && s2.evictions >= k);
    for (size_t p = 0; p < k; p++)
        CHECK(gt_check(m + p * GPAGE, p, 1));
    /* written after a sync: dirty again */
    gt_fill(m, 0, 2);
    CHECK_OK(netvm_gmem_sync(g));
    CHECK_OK(netvm_gmem_stats(g, &s2));
    CHECK(s2.writebacks == (k + 1) * R);
    /* scattered dirty pages (every third of the last k, most of them
     * resident): each written back once (by the sync, or by an eviction
     * before it), then read back from the servers after they were pushed
     * out. The remote store takes them in a call a server, not a call a
     * page (store_vec_nb); its calls are counted in tests/gstore vec */
    size_t nsc = 0;
    for (size_t p = npages - k; p < npages; p += 3, nsc++)
        gt_fill(m + p * GPAGE, p, 3);
    CHECK_OK(netvm_gmem_sync(g));
    netvm_gmem_stats_t s3;
    CHECK_OK(netvm_gmem_stats(g, &s3));
    CHECK(s3.writebacks == s2.writebacks + nsc * R);
    for (size_t p = k; p < npages - k; p++)
        CHECK(gt_check(m + p * GPAGE, p, 0));
    CHECK(gt_resident(m + (npages - k) * GPAGE, k * GPAGE) == 0);
    for (size_t p = npages - k; p < npages; p++)
        CHECK(gt_check(m + p * GPAGE, p, (p - (npages - k)) % 3 == 0 ? 3 : 0));
    printf("sync: %zu dirty pages written back once (%llu copies each), evicted clean, a later write sent again; "
           "%zu scattered ones the same\n", k, (unsigned long long)R, nsc);
    size_t rss1 = rss_pages();
    CHECK_OK(netvm_gmem_unmap(g));
    size_t rss2 = rss_pages();
    printf("sync: resident pages of the process: %zu before the map, %zu with the region, %zu after unmap\n", rss0,
           rss1, rss2);
    CHECK(rss1 > rss0 + budget);
    /* a second region the same way: what the first held was given back
     * (the first map also made what lasts: the remote store's context) */
    CHECK_OK(netvm_gmem_map(ctx, npages * GPAGE, &o, &g, (void **)&m));
    for (size_t p = 0; p < npages; p++)
        gt_fill(m + p * GPAGE, p, 1);
    CHECK_OK(netvm_gmem_unmap(g));
    size_t rss3 = rss_pages();
    printf("sync: after a second region of %zu pages filled and unmapped: %zu\n", npages, rss3);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    /* (AddressSanitizer keeps freed heap memory in quarantine, and
     * ThreadSanitizer's shadow of the region stays: resident memory says
     * nothing there) */
    CHECK(rss3 < rss2 + budget / 4);
#endif

    /* the early cleaner: dirty pages go out with no eviction asking */
    o.write_policy = NETVM_GMEM_WRITE_EARLY;
    CHECK_OK(netvm_gmem_map(gt_ctx(), npages * GPAGE, &o, &g, (void **)&m));
    for (size_t p = 0; p < k; p++)
        gt_fill(m + p * GPAGE, p, 1);
    /* every page written back and clean: the cleaner may have taken a
     * page while the fill was still writing it, which dirties it again and
     * sends it twice, so the count of write-backs alone does not say that
     * every page is clean */
    struct nv_gm_region *r = nv_gm_region_of(g);
    for (size_t dirty = k;;) {
        CHECK_OK(netvm_gmem_stats(g, &s1));
        if (!dirty && s1.writebacks >= k * R)
            break;
        sched_yield();
        dirty = 0;
        for (size_t p = 0; p < k; p++)
            dirty += (__atomic_load_n(&r->state[p], __ATOMIC_ACQUIRE) & NV_GM_DIRTY) != 0;
    }
    CHECK(s1.evictions == 0);
    for (size_t p = k; p < npages; p++)
        CHECK(gt_check(m + p * GPAGE, p, 0));
    CHECK_OK(netvm_gmem_stats(g, &s2));
    CHECK(s2.evictions >= k && s2.evictions_dirty == 0);   /* the cleaned pages left without a write-back */
    for (size_t p = 0; p < k; p++)
        CHECK(gt_check(m + p * GPAGE, p, 1));
    printf("sync: the early cleaner wrote %zu pages back before any eviction; they were evicted clean\n", k);
    CHECK_OK(netvm_gmem_unmap(g));
    printf("sync: ok\n");
    return 0;
}
